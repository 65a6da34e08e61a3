"""The train step's compiled peak memory for a run's results row, read from the executables
training already compiled (bench/ has the careful measurements)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from jaxenc.training.steps import CompiledPerShape

MIB = 2.0**20


def roles(batch: dict) -> list[str]:
    """The sentence roles of a batch that an encoder reads ("sentence", or "first" and "second";
    a seq2seq target is decoded, not encoded)."""
    return sorted({key.split("/", 1)[0] for key in batch
                   if key.endswith("/tokens") and not key.startswith("target/")})


def shape_name(key: tuple) -> str:
    """A `CompiledPerShape` cache key as text: "name:dtype[dims], ..." of each batch array."""
    return ", ".join(f"{name}:{dtype}{list(shape)}" for name, shape, dtype in key)


def footprints_mib(train_step: CompiledPerShape, known: Iterable[str] = ()
                   ) -> dict[str, float | None]:
    """{shape_name: compiled footprint in MiB} of the shapes `train_step` compiled that are not
    in `known`: arguments + outputs + temporaries - aliased buffers, XLA's memory analysis, per
    device (None: a backend without memory analysis); read from the kept executables, nothing
    is compiled again."""
    known, found = set(known), {}
    for key, executable in train_step.executables.items():
        name = shape_name(key)
        if name not in known:
            stats = executable.memory_analysis()
            found[name] = None if stats is None else (
                stats.argument_size_in_bytes + stats.output_size_in_bytes
                + stats.temp_size_in_bytes - stats.alias_size_in_bytes) / MIB
    return found


def peak_mib(footprints: Mapping[str, float | None]) -> float:
    """The largest of `footprints_mib`'s values (nan: none, or one unknown)."""
    values = list(footprints.values())
    if not values or None in values:
        return math.nan
    return max(values)

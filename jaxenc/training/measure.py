"""Cost figures of a trained run for its results row: the train step's compiled peak memory and
the encoder's throughput. Both reuse what training already compiled or cost one forward compile,
so every run reports them without a separate benchmark (bench/ has the careful measurements).
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Iterable, Mapping

import flax.linen as nn
import jax
from jax.sharding import Mesh

from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.training.sharding import data_sharded, replicated, shard_batch
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


def encode_sentences_per_second(model: nn.Module, params: dict, batcher: Batcher,
                                mesh: Mesh) -> float:
    """Sentences per second through the task model's encoder (inference, `sentence` output) over
    the batches of `batcher` that have its most common shape: one compilation (not one per
    bucket, which would cost a short run more than its training), one untimed pass, one timed."""

    def encode(params: dict, batch: dict) -> list[jax.Array]:
        return [model.apply({"params": params}, sentence_fields(batch, role),
                            method=lambda module, fields: module.encoder(fields, train=False)
                            )["sentence"] for role in roles(batch)]

    by_shape = collections.defaultdict(list)
    for batch in batcher.epoch(0):
        by_shape[tuple(sorted((key, value.shape) for key, value in batch.items()))].append(batch)
    if not by_shape:
        return float("nan")
    batches = max(by_shape.values(), key=len)
    sentences = sum(float((batch["weight"] > 0).sum()) * len(roles(batch)) for batch in batches)
    encode = jax.jit(encode, in_shardings=(replicated(mesh), data_sharded(mesh)))
    batches = [shard_batch(batch, mesh) for batch in batches]
    jax.block_until_ready([encode(params, batch) for batch in batches])
    start = time.perf_counter()
    jax.block_until_ready([encode(params, batch) for batch in batches])
    return sentences / (time.perf_counter() - start)

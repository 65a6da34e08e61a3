"""Reading the rows of a bench.run results dict: the labels of a model's variants, a row by
(variant, length), and a row's step time, peak and temp memory where it has them."""

from __future__ import annotations

from collections.abc import Mapping

STEPS = ("train", "encode")


def axis_label(model: str, field: str, value: str) -> str:
    """The label of a model's variant with `field=value`."""
    return f"{model} {field}={value}"


# DiSAN's blocked step with flax's dropout (32 random bits per decision): the reference of its
# speed goal (bench.goals)
DISAN_BLOCKED_32BIT = f"{axis_label('disan', 'attention_impl', 'blocked')} dropout_bits=32"


def keyed(results: Mapping) -> dict[tuple[str, int], dict]:
    """The rows by (variant, length)."""
    return {(row["variant"], row["length"]): row for row in results["rows"]}


def ran(row: Mapping | None, kind: str = "train") -> bool:
    return bool(row) and bool(row.get(kind)) and "wall_s" in row[kind]


def compiled(row: Mapping | None, kind: str = "train") -> bool:
    return bool(row) and bool(row.get(kind))


def quotient(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def line_label(results: Mapping, model: str, length: int) -> str | None:
    """The label of the variant that a model's preset computes at `length`."""
    return results["lines"].get(model, {}).get(str(length))


def wall(row: Mapping | None, kind: str = "train") -> float | None:
    return row[kind]["wall_s"] if ran(row, kind) else None


def peak(row: Mapping | None) -> float | None:
    return row["train"]["peak_mib"] if compiled(row) else None


def temp(row: Mapping | None) -> float | None:
    return row["train"]["temp_mib"] if compiled(row) else None

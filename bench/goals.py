"""The benchmark's goals, judged on a bench.run results dict (its rows and ratios): each with
what was measured and a verdict, met / not met / not measured."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bench.rows import (
    DISAN_BLOCKED_32BIT,
    STEPS,
    axis_label,
    keyed,
    peak,
    quotient,
    ran,
    temp,
    wall,
)

MET, NOT_MET, NOT_MEASURED = "met", "not met", "not measured"
HOST_GOAL = 2000.0  # sentences/s per core
DT_GOAL = 1.2  # Dependency-Transformer step / plain Transformer step at DT_GOAL_LENGTH
DT_GOAL_LENGTH = 64
DISAN_GOALS = ((64, 4.0), (256, 10.0))  # (length, dense / blocked peak memory at least)
# directional train step (the model's default dropout) at least this many times faster than
# the blocked step with 32-bit dropout masks (flax's dropout, 32 random bits per decision:
# variant DISAN_BLOCKED_32BIT) at these lengths; a results.json without that variant (a run that
# did not time it) compares with blocked at the default dropout
DISAN_SPEED_GOAL, DISAN_SPEED_LENGTHS = 1.7, (64, 128)
LINEAR_SLOPE = 1.25  # memory ~ L^slope counts as ~linear up to this slope


def _slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) over log(x)."""
    points = [(math.log(x), math.log(y)) for x, y in points if x and y and y > 0]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def _goal(goal: str, measured: str, verdict: str) -> dict[str, str]:
    return dict(goal=goal, measured=measured, verdict=verdict)


def goals(results: Mapping) -> list[dict[str, str]]:
    """The benchmark's goals, each with what was measured and met / not met / not measured."""
    rows, lengths = keyed(results), results["settings"]["lengths"]
    out = []
    axis = results["axes"].get("disan")
    for choice in (c for c in (axis["choices"] if axis else ()) if c != "dense"):
        label = axis_label("disan", "attention_impl", choice)
        temps = [(length, temp(rows.get((label, length)))) for length in lengths]
        peaks = [(length, peak(rows.get((label, length)))) for length in lengths]
        slope, peak_slope = _slope(temps), _slope(peaks)
        out.append(_goal(
            f"DiSAN {choice}: memory ~linear in L", "not enough lengths" if slope is None else
            f"temp MiB ~ L^{slope:.2f}, peak MiB ~ L^{peak_slope:.2f} over L = "
            f"{', '.join(str(length) for length, temp in temps if temp)}",
            NOT_MEASURED if slope is None else MET if slope <= LINEAR_SLOPE else NOT_MET))
        for length, least in DISAN_GOALS:
            dense = rows.get((axis_label("disan", "attention_impl", "dense"), length))
            ratio = quotient(peak(dense), peak(rows.get((label, length))))
            out.append(_goal(
                f"DiSAN {choice}: peak memory >= {least:g}x below dense at L={length}",
                "length not measured" if ratio is None else
                f"{ratio:.1f}x ({peak(dense):,.0f} vs {peak(rows[label, length]):,.0f} MiB; "
                f"temp {quotient(temp(dense), temp(rows[label, length])):.1f}x)",
                NOT_MEASURED if ratio is None else MET if ratio >= least else NOT_MET))
    if axis and "directional" in axis["choices"] and "blocked" in axis["choices"]:
        with_32bit = any(variant == DISAN_BLOCKED_32BIT for variant, _ in rows)
        reference = DISAN_BLOCKED_32BIT if with_32bit else axis_label("disan", "attention_impl",
                                                                      "blocked")
        speedups = {length: quotient(
            wall(rows.get((reference, length))),
            wall(rows.get((axis_label("disan", "attention_impl", "directional"), length))))
            for length in DISAN_SPEED_LENGTHS}
        measured = {length: ratio for length, ratio in speedups.items() if ratio is not None}
        out.append(_goal(
            f"DiSAN directional: train step >= {DISAN_SPEED_GOAL:g}x blocked's"
            f"{' with 32-bit dropout masks' if with_32bit else ''} at L="
            f"{', '.join(map(str, DISAN_SPEED_LENGTHS))}",
            "; ".join(f"L={length}: {ratio:.2f}x" for length, ratio in measured.items())
            or "not measured",
            NOT_MEASURED if len(measured) < len(speedups) else
            MET if min(measured.values()) >= DISAN_SPEED_GOAL else NOT_MET))
    psan = [row for row in results["ratios"]["psan_vs_disan"] if row["peak_ratio"] is not None]
    out.append(_goal(
        "PSAN packed: peak memory below DiSAN dense", "; ".join(
            f"L={row['length']}: {row['peak_ratio']:.2f}x (temp {row['temp_ratio']:.2f}x, data "
            f"bound {row['data_bound']:.2f})"
            if row["data_bound"] is not None else
            f"L={row['length']}: {row['peak_ratio']:.2f}x" for row in psan) or "not measured",
        NOT_MEASURED if not psan else MET if all(row["peak_ratio"] < 1 for row in psan)
        else NOT_MET))
    full = wall(rows.get((axis_label("dependency_transformer", "variant", "full"),
                           DT_GOAL_LENGTH)))
    plain = wall(rows.get((axis_label("dependency_transformer", "variant", "transformer"),
                            DT_GOAL_LENGTH)))
    ratio = quotient(full, plain)
    out.append(_goal(
        f"Dependency-Transformer train step <= {DT_GOAL:g}x the plain Transformer's (same "
        f"sizes) at L={DT_GOAL_LENGTH}", "not measured" if ratio is None else
        f"{ratio:.2f}x ({1e3 * full:,.0f} vs {1e3 * plain:,.0f} ms)",
        NOT_MEASURED if ratio is None else MET if ratio <= DT_GOAL else NOT_MET))
    rate, detail = host_rate(results.get("host", {}))
    out.append(_goal(f"host preprocessing >= {HOST_GOAL:,.0f} sentences/s per core",
                     detail, NOT_MEASURED if rate is None else
                     MET if rate >= HOST_GOAL else NOT_MET))
    timed = [row[kind]["recompiles"] for row in results["rows"] for kind in STEPS
             if ran(row, kind)]
    out.append(_goal("no recompilation after warm-up (every model)",
                     f"{sum(timed)} recompilations over {len(timed)} timed steps"
                     if timed else "nothing timed",
                     NOT_MEASURED if not timed else MET if sum(timed) == 0 else NOT_MET))
    return out


def host_rate(host: Mapping) -> tuple[float | None, str]:
    """(sentences/s per core of the per-sentence host work with gold trees: tree -> arrays for
    every model + packing plan + batching, 1 / the sum of the per-sentence times; a line)."""
    if "structures" not in host:
        return None, host.get("skipped", "not measured")
    parts = {"tree -> arrays (all models)": host["structures"]["rates"][
        host["structures"]["all_models"]],
        "packing plan": host["packing"]["sentences_per_s"],
        "input pipeline": host["input"]["examples_per_s"]}
    rate = 1 / sum(1 / value for value in parts.values())
    detail = f"{rate:,.0f}/s together (" + ", ".join(
        f"{name} {value:,.0f}/s" for name, value in parts.items()) + ")"
    parse = host.get("parse", {})
    if "sentences_per_s" in parse:
        with_parse = 1 / (1 / rate + 1 / parse["sentences_per_s"])
        detail += (f"; with spaCy parsing ({parse['sentences_per_s']:,.0f}/s, once per dataset, "
                   f"cached) {with_parse:,.0f}/s")
    return rate, detail

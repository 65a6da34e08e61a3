"""What bench.run's measurements add up to: FLOPs borrowed from a loop-free twin, achieved
FLOP/s, the H100 bounds and the side-by-side ratios of a results dict, then its goals
(bench.goals)."""

from __future__ import annotations

from collections.abc import Mapping

from bench.goals import goals
from bench.kernels import h100_bound
from bench.rows import STEPS, axis_label, compiled, keyed, line_label, peak, quotient, temp, wall


def finish(results: dict) -> None:
    """Adds achieved FLOP/s (FLOPs of loops borrowed from a loop-free twin of the same math),
    the H100 bounds (`add_bounds`), the matmul peak used, `ratios` and `goals` to a bench.run
    results dict."""
    best = max(value for key, value in results["matmul_peak_flops"].items() if key != "peak")
    results["matmul_peak_flops"]["peak"] = best
    add_bounds(results)
    for row in results["rows"]:
        for step in (row.get(kind) for kind in STEPS):
            if step and "wall_s" in step:
                step["flops_per_s"] = step["flops"] / step["wall_s"]
                step["of_peak"] = step["flops_per_s"] / best
    results["ratios"] = ratios(results)
    results["goals"] = goals(results)


def add_bounds(results: dict) -> None:
    """Borrows a loop variant's FLOPs from its loop-free twin of the same math (XLA counts a
    loop body once) and adds each step's lower bound of an H100 step time, `h100_bound_s` and
    what bounds it, `h100_bound_by` (bench.kernels.h100_bound; steps with a kernel count)."""
    rows = keyed(results)
    variants = {variant["label"]: variant for variant in results["variants"]}
    for row in results["rows"]:
        axis = results["axes"].get(row["model"])
        value = axis and variants[row["variant"]]["overrides"].get(axis["field"])
        twin = value and axis["same_work"].get(value)
        for kind in STEPS:
            step = row.get(kind)
            if not step:
                continue
            twin_row = rows.get((axis_label(row["model"], axis["field"], twin), row["length"])) \
                if twin and twin != value else None
            if not step["flops_exact"] and compiled(twin_row, kind) and \
                    twin_row[kind]["flops_exact"]:
                step.update(flops=twin_row[kind]["flops"], flops_from=twin_row["variant"],
                            flops_exact=True)
            if step.get("kernels") is not None and step.get("bytes_accessed") is not None:
                step["h100_bound_s"], step["h100_bound_by"] = h100_bound(
                    step["flops"], step["bytes_accessed"], step["kernels"], row["dtype"])


def ratios(results: Mapping) -> dict[str, list[dict]]:
    """The side-by-side comparisons, each a list of table rows."""
    rows, lengths = keyed(results), results["settings"]["lengths"]
    out: dict[str, list[dict]] = {key: [] for key in (
        "implementations", "psan_vs_disan", "dt_transformer_treelstm", "vs_reference", "bf16")}
    for model, axis in results["axes"].items():
        for length in lengths:
            base = rows.get((axis_label(model, axis["field"], axis["base"]), length))
            for choice in axis["choices"]:
                row = rows.get((axis_label(model, axis["field"], choice), length))
                if row is None:
                    continue
                out["implementations"].append(dict(
                    model=model, field=axis["field"], choice=choice, base=axis["base"],
                    length=length, status=row["status"], peak_mib=peak(row), temp_mib=temp(row),
                    train_s=wall(row), encode_s=wall(row, "encode"),
                    memory_vs_base=quotient(peak(base), peak(row)),
                    temp_vs_base=quotient(temp(base), temp(row)),
                    train_speedup=quotient(wall(base), wall(row))))
    packed = axis_label("psan", "psa_impl", "packed")
    dense = axis_label("disan", "attention_impl", "dense")
    for length in lengths:
        psan_row, disan_row = rows.get((packed, length)), rows.get((dense, length))
        bound_row = rows.get((axis_label("psan", "psa_impl", "dense"), length))
        if psan_row is None or disan_row is None:
            continue
        out["psan_vs_disan"].append(dict(
            length=length, psan_status=psan_row["status"], disan_status=disan_row["status"],
            psan_peak_mib=peak(psan_row), disan_peak_mib=peak(disan_row),
            psan_temp_mib=temp(psan_row), disan_temp_mib=temp(disan_row),
            peak_ratio=quotient(peak(psan_row), peak(disan_row)),
            temp_ratio=quotient(temp(psan_row), temp(disan_row)),
            data_bound=bound_row.get("data_bound") if bound_row else None,
            train_ratio=quotient(wall(psan_row), wall(disan_row))))
    dt = {"DT full": axis_label("dependency_transformer", "variant", "full"),
          "DT plain (same sizes)": axis_label("dependency_transformer", "variant", "transformer"),
          "Transformer": "transformer" if "transformer" in results["lines"]
          else results["references"].get("dependency_transformer"),
          "Tree-LSTM": "tree_lstm"}
    for length in lengths:
        found = {name: rows.get((label, length)) for name, label in dt.items() if label}
        reference = wall(found.get("DT plain (same sizes)"))
        for name, row in found.items():
            if row is not None:
                out["dt_transformer_treelstm"].append(dict(
                    name=name, variant=row["variant"], length=length, train_s=wall(row),
                    encode_s=wall(row, "encode"), peak_mib=peak(row),
                    train_vs_dt_plain=quotient(wall(row), reference)))
    for model in results["lines"]:
        for length in lengths:
            row = rows.get((line_label(results, model, length), length))
            reference = rows.get((results["references"][model], length))
            if row is not None and reference is not None and row is not reference:
                out["vs_reference"].append(dict(
                    model=model, variant=row["variant"], reference=reference["variant"],
                    length=length, train_ratio=quotient(wall(row), wall(reference)),
                    peak_ratio=quotient(peak(row), peak(reference))))
            bf16 = rows.get((f"{model} bf16", length))
            if bf16 is not None:
                out["bf16"].append(dict(
                    model=model, length=length, status=bf16["status"], reason=bf16["reason"],
                    f32_train_s=wall(row), bf16_train_s=wall(bf16),
                    train_speedup=quotient(wall(row), wall(bf16)),
                    memory_ratio=quotient(peak(bf16), peak(row))))
    return out

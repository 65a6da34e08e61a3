"""The report.md of a bench.run results dict; `python -m bench.report RESULTS.json` remakes it.

report.md: the goals, each model's throughput and memory, every variant, the ratios, the
kernels per train step and the host rates; for a --kernels-only run, its kernel table alone.
A report can be remade from a saved run: `python -m bench.report results/bench/cpu/results.json`
rewrites report.md, the plots and the derived fields of results.json (bench.derived: ratios,
goals, achieved FLOP/s) beside it; the measurements are left as they are.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.derived import finish
from bench.goals import host_rate
from bench.kernels import H100_BANDWIDTH, H100_PEAK_FLOPS, LAUNCH_S
from bench.plots import plot
from bench.rows import keyed, line_label
from jaxenc import cli

NOTES = [
    "## Notes on the method",
    "",
    "- Inputs: random word ids; random projective dependency trees over full-length rows (a "
    "span's head is a random word of it, each side splits into 1-3 dependents), through the real "
    "featurizer (gold trees: relations, levels, heads, phrase trees derived from the dependency "
    "trees, PSAN segments / blocks) and batcher (PSAN's packing plan, exact classes, capacities "
    "planned over the run's batches). Every row is full, so tokens/s = batch x L / time. Long "
    "random sentences have more distinct phrase lengths than natural ones, so PSAN's packed plan "
    "has more length classes (more arrays, longer compiles) than on real data of the same bucket.",
    "- Train step = the encoder's forward (dropout on) and backward with a loss on the sentence "
    "vectors, no optimiser; encode = `train=False` sentence vectors, timed for each model's "
    "preset only. Compile time = lowering + XLA compilation of one step.",
    "- Memory = XLA's compiled memory analysis of the train step (temp = activations and "
    "workspace; peak adds arguments and outputs: parameters, batch, gradients), known without "
    "running, so it is reported for variants too big to run.",
    "- FLOPs = XLA's cost analysis. XLA counts a loop body once (DiSAN's blocked attention, PSAN's "
    "streaming attention, the Tree-LSTM's level loop): DiSAN's and PSAN's loop variants borrow the "
    "count of their dense variant (same math, recomputation not counted, marked *); the "
    "Tree-LSTM's is a lower bound (marked ≥). Dropout's random-bit loops are integer work and "
    "ignored. % peak compares with the f32 matmul rate measured in the same run.",
    "- bfloat16: `model.dtype=bfloat16` keeps parameters in f32 and computes in bf16 where the "
    "model supports it. XLA:CPU has no bf16 arithmetic of its own and converts around each op, so "
    "on this machine bf16 measures conversion overhead, not an accelerator's bf16 speed or memory.",
    "- Guards (bench.run --help): a variant is compiled only if its compile time predicted from "
    "the shorter lengths is under --max_compile_s, run only if its compiled peak fits "
    "--memory_fraction of the available memory and its step time predicted from the shorter "
    "lengths is under --max_step_s; --budget_s caps the timed calls of a slow step (>= 1).",
    "",
]

def _number(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:,.{digits}f}{suffix}"


def _table(header: Sequence[str], body: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in body]
    return lines + [""]


def _cell(row: Mapping | None, value: float | None, digits: int = 0) -> str:
    """A measured value, or why there is none (its status; "not timed" for a variant that ran
    but was not timed this way, e.g. encode for a variant other than the preset)."""
    if value is not None:
        return _number(value, digits)
    if row is None:
        return "—"
    return "(not timed)" if row["status"] == "ok" else f"({row['status']})"


def write(results: Mapping, out: Path) -> None:
    """report.md, throughput.png and memory.png in `out`."""
    (out / "report.md").write_text("\n".join(markdown(results)), encoding="utf-8")
    plot(results, out)


def markdown(results: Mapping) -> list[str]:
    rows, settings, host = keyed(results), results["settings"], results.get("host", {})
    lengths, machine = settings["lengths"], results["machine"]
    peak = results["matmul_peak_flops"]
    text = [
        "# jaxenc encoders side by side",
        "",
        f"Made by `{results['command']}`{_on_date(results)}, in "
        f"{results['wall_s'] / 60:.1f} min. Batch {settings['batch']}, lengths "
        f"{', '.join(map(str, lengths))}, {settings['repeats']} timed repeats after a warm-up "
        f"(fewer where a step would exceed --budget_s {settings['budget_s']:g} s), "
        f"{settings['batches']} distinct batches per length used in turn, dtype "
        f"{settings['dtype']}{', TINY widths' if settings['tiny'] else ', paper widths'}; "
        f"synthetic vocabulary of {settings['vocab']:,} words.",
        "",
        "## Machine",
        "",
        f"- {machine['nproc']} cores usable (`nproc`; {machine['cpu_count']} in the machine), "
        f"{machine['cpu_model']}; {machine['memory_available_mib'] / 1024:.1f} GiB available "
        f"at the start.",
        f"- Load average (1, 5, 15 min) at the start {_load(machine['load_start'])}, at the end "
        f"{_load(machine.get('load_end'))}; after each length: " + "; ".join(
            f"L={length} {_load(load)}" for length, load in results["load_by_length"].items())
        + ". Other jobs share these cores: only ratios within this run compare.",
        f"- jax {machine['jax']}, jaxlib {machine['jaxlib']}, backend {machine['backend']} "
        f"({machine['device']}), Python {machine['python']}, {machine['platform']}.",
        f"- f32 matmul peak (2048² `jnp.dot`, best of 10) measured at the start "
        f"{peak['start'] / 1e9:.1f} GFLOP/s and at the end {peak['end'] / 1e9:.1f} GFLOP/s; "
        f"\"% peak\" uses the higher, {peak['peak'] / 1e9:.1f}.",
        "",
        "## Goals",
        "",
        *_table(["goal", "measured", "verdict"],
                ([goal["goal"], goal["measured"], f"**{goal['verdict']}**"]
                 for goal in results["goals"])),
        "## Throughput and memory per model",
        "",
        "Each model's preset (f32; DiSAN: the attention_impl its preset's `auto` picks at that "
        "length). Train = forward + backward of the encoder; encode = sentence vectors, "
        "train=False. A cell in parentheses says why there is no number (see \"Skipped\").",
        "",
    ]
    models = list(results["lines"])
    for title, kind, field, digits in (
            ("Train sentences/s", "train", "sentences_per_s", 1),
            ("Encode sentences/s", "encode", "sentences_per_s", 1),
            ("Train-step peak memory, MiB (compiled)", "train", "peak_mib", 0),
            ("Train-step compile time, s (cold: an empty compilation cache)", "train",
             "compile_s", 1),
            ("Train-step compile time with the persistent compilation cache, s", "train",
             "cached_compile_s", 1)):
        text += [f"**{title}**", ""]
        body = []
        for model in models:
            cells = [model]
            for length in lengths:
                row = rows.get((line_label(results, model, length), length))
                value = row[kind].get(field) if row and row.get(kind) else None
                cells.append(_cell(row, value, digits))
            body.append(cells)
        text += _table(["model", *(f"L={length}" for length in lengths)], body)
    text += ["## Every variant", "",
             "ms = median wall time of one call; tok/s counts real tokens (every row is full); "
             "GFLOP = XLA's cost analysis of the compiled step (* = borrowed from the loop-free "
             "variant of the same math, ≥ = a lower bound: a loop body counts once); % peak = "
             "achieved FLOP/s over the matmul peak; kernels = kernels per train step, H100 "
             "bound = the least time of the train step on an H100 (\"Kernels per train step\" "
             "below); calls = timed calls; rc = recompilations after warm-up.", ""]
    body = []
    for row in results["rows"]:
        train, encode = row.get("train") or {}, row.get("encode") or {}
        flops = train.get("flops")
        mark = _flops_mark(row, train) if train else ""
        compile_s = f"{_number(train.get('compile_s'), 1)} / {_number(encode.get('compile_s'), 1)}"
        body.append([row["variant"], row["length"], row["status"], compile_s,
                     _short(_ms(train)), _number(train.get("sentences_per_s"), 1),
                     _number(train.get("tokens_per_s")), _short(_ms(encode)),
                     _number(encode.get("sentences_per_s"), 1),
                     _number(encode.get("tokens_per_s")), _short(train.get("temp_mib")),
                     _short(train.get("peak_mib")),
                     mark + _number(flops and flops / 1e9, 1) if flops else "—",
                     _number(train.get("flops_per_s") and train["flops_per_s"] / 1e9, 1),
                     _number(train.get("of_peak") and 100 * train["of_peak"], 1),
                     _kernels(train), _bound_ms(train),
                     f"{train.get('calls', '—')} / {encode.get('calls', '—')}",
                     f"{train.get('recompiles', '—')} / {encode.get('recompiles', '—')}"])
    text += _table(["variant", "L", "status", "compile s (train / enc.)", "train ms",
                    "train sent/s", "train tok/s", "enc. ms", "enc. sent/s", "enc. tok/s",
                    "temp MiB", "peak MiB", "train GFLOP", "GFLOP/s", "% peak", "kernels",
                    "H100 bound ms", "calls", "rc"], body)
    text += _ratio_sections(results)
    text += ["## Kernels per train step", "", KERNEL_NOTE, ""] + kernel_table(results)
    text += _host_section(host)
    skipped = [row for row in results["rows"] if row["status"] != "ok"]
    text += ["## Skipped, unsupported, failed", ""]
    text += _table(["variant", "L", "status", "why"],
                   ([row["variant"], row["length"], row["status"], row["reason"]]
                    for row in skipped)) if skipped else ["Nothing.", ""]
    return text + NOTES


KERNEL_NOTE = (
    "kernels = the kernels one train step launches (bench.kernels.count_hlo: the unfused "
    "kernels of the compiled program, a while loop's body counted once per trip, nested loops "
    "multiplied, a conditional by its largest branch, jax's random-bit loops as one kernel; ≥: a "
    "loop of unknown trip count counted once). It is counted on the program XLA compiles for "
    "this run's backend: a CPU-compiled program is a proxy of a GPU's launches (XLA:CPU fuses "
    "less or differently). H100 bound = the least time of the step on one H100 SXM, the largest "
    f"of FLOPs / {H100_PEAK_FLOPS['bfloat16']:.3g} FLOP/s (bf16 tensor cores) or / "
    f"{H100_PEAK_FLOPS['float32']:.3g} (f32), bytes accessed / {H100_BANDWIDTH:.3g} B/s (HBM3) "
    f"and kernels x {LAUNCH_S * 1e6:g} us (a launch and its gap); bound by = the largest term. "
    "FLOPs and bytes are XLA's cost analysis (a loop body counts once: ≥ marks a lower bound, * "
    "FLOPs borrowed from the loop-free variant of the same math), so the bound is a lower bound.")


def _kernels(step: Mapping | None) -> str:
    if not step or step.get("kernels") is None:
        return "—"
    return ("" if step["kernels_exact"] else "≥") + _number(step["kernels"])


def _on_date(results: Mapping) -> str:
    """" on YYYY-MM-DD", the day the run measured (results.json's date; "" where it has none)."""
    return f" on {results['date']}" if results.get("date") else ""


def _bound_ms(step: Mapping | None) -> str:
    bound = (step or {}).get("h100_bound_s")
    return _number(bound and 1e3 * bound, 3)


def _flops_mark(row: Mapping, step: Mapping) -> str:
    """"*" for FLOPs borrowed from a loop-free twin, "≥" for a lower bound, else ""."""
    return "*" if step["flops_from"] != row["variant"] else "" if step["flops_exact"] else "≥"


def kernel_table(results: Mapping) -> list[str]:
    """Markdown table of each variant's train step per length: kernels, FLOPs, bytes accessed,
    the H100 bound and what bounds it."""
    body = []
    for row in results["rows"]:
        step = row.get("train")
        if not step:
            body.append([row["variant"], row["length"], _cell(row, None), "—", "—", "—", "—"])
            continue
        moved = step.get("bytes_accessed")
        body.append([row["variant"], row["length"], _kernels(step),
                     _flops_mark(row, step) + _number(step["flops"] / 1e9, 1),
                     "—" if moved is None else
                     ("" if step["bytes_exact"] else "≥") + _number(moved / 1e9, 3),
                     _bound_ms(step), step.get("h100_bound_by", "—")])
    return _table(["variant", "L", "kernels", "GFLOP", "GB accessed", "H100 bound ms",
                   "bound by"], body)


def kernel_markdown(results: Mapping) -> list[str]:
    """report.md of a `bench.run --kernels-only` run: the kernel table and how it is counted."""
    settings, machine = results["settings"], results["machine"]
    failed = [row for row in results["rows"] if not row.get("train")]
    return [
        "# jaxenc train-step kernels", "",
        f"Made by `{results['command']}`{_on_date(results)}, in "
        f"{results['wall_s'] / 60:.1f} min: batch {settings['batch']}, lengths "
        f"{', '.join(map(str, settings['lengths']))}, dtype {settings['dtype']}"
        f"{', TINY widths' if settings['tiny'] else ', paper widths'}, the GPU loop settings "
        "(bench.plan.loop_settings('gpu')); compiled, not run, by jax "
        f"{machine['jax']} on {machine['backend']} ({machine['cpu_model']}).", "",
        KERNEL_NOTE, "", *kernel_table(results),
        *(["Not compiled:", ""] + [f"- {row['variant']} L={row['length']}: {row['status']}, "
                                   f"{row['reason']}" for row in failed] + [""]
          if failed else [])]


def _short(value: float | None) -> str:
    """A number with a decimal below 100 (ms, MiB), none above."""
    return _number(value, 1 if value is not None and value < 100 else 0)


def _ms(step: Mapping) -> float | None:
    return 1e3 * step["wall_s"] if step and "wall_s" in step else None


def _load(load: Sequence[float] | None) -> str:
    return "—" if load is None else " / ".join(f"{value:.2f}" for value in load)


def _ratio_sections(results: Mapping) -> list[str]:
    ratios, text = results["ratios"], []
    text += ["## Implementations side by side", "",
             "Every choice of a model's implementation axis (data: bench.plan.AXES, read from the "
             "model's own choices) against its base choice, same batches: memory = base peak / "
             "this peak (temp in brackets), speed-up = base time / this time.", ""]
    text += _table(["model", "choice (vs base)", "L", "peak MiB", "memory vs base",
                    "train ms", "train speed-up"],
                   ([row["model"], f"{row['field']}={row['choice']}" + (
                       " (base)" if row["choice"] == row["base"] else f" (vs {row['base']})"),
                     row["length"], _cell(row, row["peak_mib"]),
                     f"{_number(row['memory_vs_base'], 2)}x ({_number(row['temp_vs_base'], 2)}x)",
                     _cell(row, row["train_s"] and 1e3 * row["train_s"]),
                     _number(row["train_speedup"], 2)]
                    for row in ratios["implementations"]))
    text += ["## PSAN packed vs DiSAN dense", "",
             "Peak (and temp) memory of the train step, PSAN (d 300, packed phrase attention) "
             "over DiSAN's dense token2token attention (d_h 300 per direction), beside the data "
             "bound of these batches: sum over levels and phrases of l² / 2 L² (PSAN's attention "
             "elements over DiSAN's two directions; same feature width).", ""]
    text += _table(["L", "PSAN packed peak MiB", "DiSAN dense peak MiB", "peak ratio",
                    "temp ratio", "data bound", "train time ratio"],
                   ([row["length"], _cell({"status": row["psan_status"]}, row["psan_peak_mib"]),
                     _cell({"status": row["disan_status"]}, row["disan_peak_mib"]),
                     _number(row["peak_ratio"], 3),
                     _number(row["temp_ratio"], 3), _number(row["data_bound"], 3),
                     _number(row["train_ratio"], 2)] for row in ratios["psan_vs_disan"]))
    text += ["## Dependency-Transformer vs Transformer vs Tree-LSTM", "",
             "Train step time relative to the Dependency-Transformer without relations and "
             "levels (its plain-Transformer ablation: same 3 layers, sizes and [root] token).", ""]
    text += _table(["model", "variant", "L", "train ms", "encode ms", "peak MiB",
                    "train vs DT plain"],
                   ([row["name"], row["variant"], row["length"],
                     _number(row["train_s"] and 1e3 * row["train_s"]),
                     _number(row["encode_s"] and 1e3 * row["encode_s"]),
                     _number(row["peak_mib"]), _number(row["train_vs_dt_plain"], 2)]
                    for row in ratios["dt_transformer_treelstm"]))
    text += ["## Each model vs the plain Transformer of its width", "",
             "The Transformer preset (2 layers, FFN 2x) at the model's width (model_dim, DiSAN's "
             "d_h, Tree-LSTM's memory, else embed_dim) and embedding size; ratio = model / "
             "reference (> 1: the model is slower / bigger).", ""]
    text += _table(["model", "reference", "L", "train time", "peak memory"],
                   ([row["model"], row["reference"], row["length"],
                     _number(row["train_ratio"], 2), _number(row["peak_ratio"], 2)]
                    for row in ratios["vs_reference"]))
    text += ["## bfloat16 vs float32", "",
             "model.dtype=bfloat16 (parameters f32, compute bf16) against the same preset in f32; "
             "speed-up = f32 time / bf16 time, memory = bf16 peak / f32 peak.", ""]
    bf16 = ratios["bf16"]
    text += _table(["model", "L", "status", "train speed-up", "memory", "note"],
                   ([row["model"], row["length"], row["status"],
                     _number(row["train_speedup"], 2), _number(row["memory_ratio"], 2),
                     row["reason"] or ""]
                    for row in bf16)) if bf16 else ["Not measured (--dtype float32).", ""]
    return text


def _host_section(host: Mapping) -> list[str]:
    text = ["## Host side (one pinned core)", ""]
    if "structures" not in host:
        return text + [f"Not measured: {host.get('skipped', 'no host results')}.", ""]
    structures = host["structures"]
    text += [f"Tree -> arrays (`bench.bench_structures`; {structures['trees']}):", ""]
    text += _table(["step", "sentences/s"],
                   ([name, _number(rate)] for name, rate in structures["rates"].items()))
    parse = host["parse"]
    text += ["Parsing (`bench.bench_parse`, SST-5 training sentences, given tokens): " + (
        f"{parse['parser']}: {parse['sentences']} sentences (mean {parse['mean_tokens']:.1f} "
        f"tokens) at {parse['sentences_per_s']:,.0f} sentences/s, {parse['tokens_per_s']:,.0f} "
        "tokens/s; gold trees: the bracket-string parse above."
        if "sentences_per_s" in parse else f"spaCy not measured: {parse['skipped']}."), ""]
    packing = host["packing"]
    text += [f"PSAN packing plan (`bench.bench_packing`, SST training trees, batch "
             f"{packing['batch_size']}, buckets of 8 up to {packing['max_length']}, exact "
             f"classes, planned capacities): {packing['sentences_per_s']:,.0f} sentences/s; "
             f"packed attention elements {packing['packed']:.3f} of DiSAN dense (data bound "
             f"{packing['bound']:.3f}).", ""]
    data = host["input"]
    text += [f"Input pipeline (`bench.bench_input`, {data['source']}, batch "
             f"{data['batch_size']}, buckets every 8, one thread): "
             f"{data['examples_per_s']:,.0f} examples/s. Padding waste (padded / real tokens "
             "- 1):", ""]
    text += _table(["buckets", "count", "waste", "with filler rows", "batches/epoch"],
                   ([name, row["buckets"], _number(row["waste"], 3),
                     _number(row["waste_with_filler"], 3), row["batches"]]
                    for name, row in data["waste"].items()))
    rate, detail = host_rate(host)
    return text + [f"Per-sentence host work with gold trees: {detail}.", ""]


@cli.reports_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a results.json written by bench.run")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    finish(results)
    args.results.write_text(json.dumps(results, indent=1))
    write(results, args.results.parent)


if __name__ == "__main__":
    main()

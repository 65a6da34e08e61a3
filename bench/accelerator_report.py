"""The GPU run's report (bench.accelerator): report.md and results.json of its stages, the
encoders' rates per batch, the implementation ratios, the Transformer against plain flax and
PyTorch, and the main job."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return "" if value is None else str(value)


def table(rows: Sequence[Mapping]) -> list[str]:
    """A markdown table of `rows`, their keys as its columns."""
    if not rows:
        return ["(none)"]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return [f"| {' | '.join(columns)} |", f"|{'---|' * len(columns)}",
            *(f"| {' | '.join(_cell(row.get(column)) for column in columns)} |" for row in rows)]


def encoder_rows(bench: Mapping, peaks: Mapping[str, float] | None) -> list[dict]:
    """Each encoder's preset (f32, and its bf16 variant) per length: rates, compile, memory,
    FLOP/s and the fraction of the matmul peak of its dtype measured in this run."""
    by_key = {(row["variant"], row["length"]): row for row in bench["rows"]}
    out = []
    for model, lines in bench["lines"].items():
        for length_text, label in lines.items():
            length = int(length_text)
            for variant in (label, f"{model} bf16"):
                row = by_key.get((variant, length))
                if row is None:
                    continue
                train, encode = row.get("train") or {}, row.get("encode") or {}
                flops_per_s = train.get("flops_per_s")
                peak = (peaks or {}).get(row["dtype"])
                out.append(dict(
                    model=model, variant=variant, dtype=row["dtype"], L=length,
                    batch=row["batch"], status=row["status"],
                    train_sent_s=train.get("sentences_per_s"),
                    encode_sent_s=encode.get("sentences_per_s"),
                    compile_s=train.get("compile_s"), peak_mib=train.get("peak_mib"),
                    tflop_s=flops_per_s / 1e12 if flops_per_s else None,
                    of_peak=flops_per_s / peak if flops_per_s and peak else None,
                    reason=row.get("reason")))
    return out


def stage_table(stages: Mapping[str, Mapping]) -> list[str]:
    """One row per stage: status, seconds, limit, device peak, note, imports beyond the image."""
    return table([dict(stage=name, status=result["status"], seconds=result["seconds"],
                       limit_s=result["limit_s"],
                       device_peak_mib=(result.get("device_memory") or {}).get("peak_mib"),
                       note="; ".join(filter(None, [
                           result.get("error"), result.get("cut"), result.get("skipped"),
                           result.get("lengths_done"), *(
                               f"L {length}: {error}" for length, error in
                               (result.get("length_errors") or {}).items())])),
                       imported_beyond_image=", ".join(result.get("imported_beyond_image", [])))
                  for name, result in stages.items()])


def markdown(state: Mapping) -> str:
    stages = state["stages"]
    devices = stages.get("devices", {})
    peaks = devices.get("matmul_peak_flops")
    text = [
        "# jaxenc on an accelerator",
        "",
        f"`{state['command']}` on {state['date']}: {devices.get('device_kind', '?')} "
        f"({devices.get('backend', '?')}; jax {devices.get('jax', '?')}), "
        f"{state['machine']}; {state['wall_s']:.0f} s of the time limit "
        f"{state['time_limit_s']:.0f} s{'; --smoke: tiny sizes' if state['smoke'] else ''}. "
        f"Carried packages: {state['wheels']}.",
        "",
        "## Stages",
        "",
        *stage_table(stages),
        "",
        "device_peak_mib: memory_stats()['peak_bytes_in_use'] of the stage's process (empty: "
        "the backend reports none). imported_beyond_image: the packages the stage imported "
        "that the GPU machine's image lacks (each must be among the carried wheels).",
    ]
    if peaks:
        text += ["", f"Matmul peak ({devices['matmul_size']}^3, JAX's default precision): " +
                 ", ".join(f"{dtype} {flops / 1e12:.1f} TFLOP/s" for dtype, flops in
                           peaks.items())]
    for stage in ("bench_b64", "bench_b512"):
        bench = stages.get(stage, {}).get("bench")
        if not bench:
            continue
        batch = bench["settings"]["batch"]
        text += ["", f"## Encoders, batch {batch} ({stages[stage]['lengths_done']})", "",
                 "Each encoder's preset (its implementation at that length) and its bf16 "
                 "variant: sentences/s of the train step and of encode, the train step's cold "
                 "compile s and XLA peak MiB, achieved TFLOP/s and its fraction of the matmul "
                 "peak of the same dtype above.", "",
                 *table(encoder_rows(bench, peaks)),
                 "", f"### Implementation ratios, batch {batch}", ""]
        for name, rows in bench.get("ratios", {}).items():
            text += [f"{name}:", "", *table(rows), ""]
    flax_rows = stages.get("flax", {}).get("rows") or []
    torch_rows = {row["length"]: row for row in stages.get("torch", {}).get("rows") or []}
    if flax_rows:
        text += ["", "## Transformer train step: jaxenc, plain flax, PyTorch", "",
                 "Median ms of one Adam step at bench_flax_transformer's sizes; torch: "
                 "nn.TransformerEncoder, eager, TF32 matmuls"
                 + (f" (skipped: {stages['torch']['skipped']})"
                    if stages.get("torch", {}).get("skipped") else "") + ".", "",
                 *table([dict(L=row["length"], jaxenc_ms=row["jaxenc_ms"],
                              plain_flax_ms=row["plain_ms"],
                              torch_ms=torch_rows.get(row["length"], {}).get("torch_ms"),
                              plain_over_jaxenc=row["ratio"],
                              torch_over_jaxenc=(torch_rows[row["length"]]["torch_ms"]
                                                 / row["jaxenc_ms"])
                              if row["length"] in torch_rows else None)
                         for row in flax_rows])]
    job = stages.get("main_job")
    if job:
        first = job.get("first_result_s")
        text += ["", "## The main job", "",
                 f"`{job.get('command', '')}`: {job['seconds']:.0f} s, exit code "
                 f"{job.get('exit_code')}; first result (the first dev evaluation) "
                 + (f"{first:.1f} s after the command started." if first else "not reached.")]
        if job.get("results_md"):
            text += ["", *[line for line in job["results_md"].splitlines()
                           if line.startswith("|")]]
        elif job.get("tail"):
            text += ["", "Its last lines:", "", "```", *job["tail"], "```"]
    text += ["", "bench/bench_first_result.py is not run here: it trains on the real datasets "
             "($JAXENC_DATA_DIR), which do not travel to the GPU machine; the main job's "
             "first dev evaluation above is this run's time to first result."]
    return "\n".join(text) + "\n"


def write(state: dict, out: Path, start: float) -> None:
    state["wall_s"] = time.perf_counter() - start
    (out / "results.json").write_text(json.dumps(state, indent=1, default=str) + "\n")
    (out / "report.md").write_text(markdown(state), encoding="utf-8")

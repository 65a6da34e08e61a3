"""One prepared run on a GPU machine, within a time limit, into one folder: every encoder's
train and encode rates, the implementation ratios, jaxenc's Transformer against plain flax and
PyTorch, and the main job with its time to first result.

    bash bench/accelerator.sh                      # on the GPU machine: 7 minutes
    python -m bench.accelerator --smoke            # on a CPU: tiny sizes, < 2 minutes

bench/accelerator.sh first installs the carried wheels (.device_wheels/, made here by
`python -m bench.device_wheels`) offline into a folder of their own on PYTHONPATH, then runs
this module with its arguments. The stages, in order, each in a fresh process (the main job:
its own command) under a time limit that is its share of the time left (a stage that ends early
leaves its time to the later ones):
  devices    jax.devices() (no GPU: a one-line refusal, unless --smoke), the f32 and bf16 matmul
             peaks (8192^3 products, JAX's default precision), the imports of every stage
  bench_b64  python -m bench.run at batch 64: every encoder and implementation, f32 and bf16,
             one call per length (16, 64, 256, 512: the lengths done before a cut are kept), the
             GPU loop settings; compile s, XLA's peak memory, FLOP/s, the ratios
  flax       bench/bench_flax_transformer.py: jaxenc's Transformer vs plain flax (L 16, 64, 256)
  torch      bench/bench_torch_transformer.py: torch.nn.TransformerEncoder of the same sizes
  main_job   the README's main job on the synthetic data (python -m train.main
             --config=train/configs/default.py): its results table, wall time and time to first
             result (its first dev evaluation, from the command's start)
  bench_b512 bench.run at batch 512
--smoke: bench.run's --tiny widths, lengths 8 and 16, batch 4 (bench_b512: 8), two models, one
repeat; the flax bench at L 8; the main job's training command on the bag alone for 6 steps.
bench/bench_first_result.py is not run: it reads the real datasets, which stay here.
Writes OUT/report.md, results.json, throughput_b64.png and throughput_b512.png, rewritten after
every stage, so that a run cut short still leaves its report; a failed stage's error is in both.
Per variant, peak memory is XLA's compiled memory analysis; each stage's device peak is
memory_stats()['peak_bytes_in_use'] where the backend has it. The stages that run in a process
of their own are in bench.accelerator_stages, the report in bench.accelerator_report.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import multiprocessing
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import device_wheels
from bench.accelerator_report import stage_table, write
from bench.accelerator_stages import child, one_line
from jaxenc import cli
from jaxenc.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_OUT = ROOT / "results/bench/gpu"
TIME_LIMIT_S = 420.0
SMOKE_TIME_LIMIT_S = 115.0
# kept at the end of the time limit: a cut stage's stop, the merging, the last report
RESERVE_S = 15.0
STAGES = ("devices", "bench_b64", "flax", "torch", "main_job", "bench_b512")
FULL = dict(
    need_gpu=True,
    # stage -> its share of the time left when it starts; least_s: the least it gets (while
    # that much is left)
    shares=dict(devices=4, bench_b64=30, flax=6, torch=5, main_job=28, bench_b512=27),
    least_s=dict(devices=40.0),
    peak_size=8192, peak_repeats=10,
    bench=["--models", "all", "--dtype", "both", "--repeats", "5", "--budget_s", "10",
           "--host", "off"],
    lengths=dict(bench_b64=(16, 64, 256, 512), bench_b512=(16, 64, 256, 512)),
    batch=dict(bench_b64=64, bench_b512=512),
    flax=["--lengths", "16,64,256", "--batch", "64", "--repeats", "10"],
    torch=["--lengths", "16,64,256", "--batch", "64", "--repeats", "10"],
    main_job=["--config=train/configs/default.py"],
)
SMOKE = dict(
    need_gpu=False,
    shares=dict(devices=8, bench_b64=32, flax=26, torch=1, main_job=12, bench_b512=16),
    least_s=dict(devices=20.0),
    peak_size=256, peak_repeats=3,
    bench=["--tiny", "--models", "bag,transformer", "--dtype", "both", "--repeats", "1",
           "--batches", "1", "--host", "off"],
    lengths=dict(bench_b64=(8, 16), bench_b512=(8,)),
    batch=dict(bench_b64=4, bench_b512=8),
    flax=["--lengths", "8", "--batch", "4", "--repeats", "1"],
    torch=["--lengths", "8", "--batch", "4", "--repeats", "1"],
    main_job=["--config=train/configs/compare.py:synthetic,bag", "--config.data.embeddings=",
              "--config.train.num_steps=6", "--config.train.eval_every=3"],
)
FIRST_RESULT = re.compile(r"step \d+: dev accuracy")


def log(message: str) -> None:
    print(f"[accelerator] {message}", flush=True)


# ------------------------------------------------------------------- the run (no JAX in here)

def carried_versions(folder: Path) -> str:
    """The version and folder of each package that `folder`'s wheels carry, as imported here."""
    found = []
    for wheel in sorted(folder.glob("*.whl")):
        name = device_wheels.distribution_of_wheel(wheel)
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} MISSING")
            continue
        found.append(f"{name} {distribution.version} ({distribution.locate_file('')})")
    return ", ".join(found) or f"no wheels in {folder}: this environment's packages"


def run_child(stage: str, settings: Mapping, scratch: Path, limit: float) -> dict:
    """`child(stage)` in a spawned process, ended at `limit` seconds."""
    result_file = scratch / f"{stage}.json"
    process = multiprocessing.get_context("spawn").Process(
        target=child, args=(stage, settings, str(scratch), str(result_file)))
    process.start()
    process.join(limit)
    cut = process.is_alive()
    if cut:
        process.terminate()
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()
    if result_file.exists():
        return json.loads(result_file.read_text())
    if cut:
        return dict(cut=f"stopped at its limit of {limit:.0f} s")
    return dict(error=f"the stage's process exited with code {process.exitcode}")


def stage_main_job(settings: Mapping, scratch: Path, limit: float) -> dict:
    """The main job's command in a new process: results table, wall time, time to first result;
    SIGTERM at `limit` (it saves a checkpoint and exits), SIGKILL 15 s later."""
    workdir = scratch / "main_job"
    command = [sys.executable, "-m", "train.main", *settings["main_job"], f"--workdir={workdir}"]
    log("main_job: " + " ".join(command[1:]))
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    lines: list[str] = []
    first: list[float] = []

    def read() -> None:
        for line in process.stdout:
            lines.append(line.rstrip())
            print(f"  main_job| {line.rstrip()}", flush=True)
            if not first and FIRST_RESULT.search(line):
                first.append(time.perf_counter() - start)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    cut = None
    try:
        process.wait(limit)
    except subprocess.TimeoutExpired:
        cut = f"stopped at its limit of {limit:.0f} s"
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    reader.join(5)
    wall = time.perf_counter() - start
    results_md = workdir / "results.md"
    result = dict(command="python -m " + " ".join(command[2:]), wall_s=wall,
                  exit_code=process.returncode, first_result_s=first[0] if first else None,
                  results_md=results_md.read_text() if results_md.exists() else None,
                  tail=lines[-12:])
    if cut:
        result["cut"] = cut
    elif process.returncode != 0:
        result["error"] = f"exit code {process.returncode}: {lines[-1] if lines else ''}"
    return result


def merged_bench(scratch: Path, stage: str, lengths: Sequence[int]) -> tuple[dict | None, str]:
    """The per-length bench.run results of a stage as one results dict (bench.derived's ratios
    recomputed over the lengths done), and the lengths done in words."""
    from bench.derived import finish

    parts = [json.loads(path.read_text()) for length in lengths
             if (path := scratch / stage / f"L{length}" / "results.json").exists()]
    if not parts:
        return None, "no length done"
    merged = json.loads(json.dumps(parts[0]))
    for part in parts[1:]:
        merged["rows"] += part["rows"]
        merged["load_by_length"].update(part["load_by_length"])
        for model, line in part["lines"].items():
            merged["lines"].setdefault(model, {}).update(line)
        merged["wall_s"] += part["wall_s"]
        for key, value in part["matmul_peak_flops"].items():
            merged["matmul_peak_flops"][key] = max(merged["matmul_peak_flops"].get(key, 0), value)
    done = [part["settings"]["lengths"][0] for part in parts]
    merged["settings"]["lengths"] = done
    merged["matmul_peak_flops"].pop("peak", None)
    finish(merged)
    return merged, f"L {', '.join(map(str, done))} of {', '.join(map(str, lengths))}"


def plot_bench(merged: Mapping, scratch: Path, out: Path, name: str) -> None:
    from bench.plots import plot

    folder = scratch / f"{name}-plots"
    folder.mkdir(exist_ok=True)
    plot(merged, folder)
    shutil.copyfile(folder / "throughput.png", out / name)


def run_stage(stage: str, settings: Mapping, scratch: Path, out: Path, limit: float,
              state: dict) -> dict:
    """One stage, its outcome recorded in `state['stages']` (status ok / cut / failed)."""
    log(f"stage {stage}: time limit {limit:.0f} s")
    start = time.perf_counter()
    try:
        if stage == "main_job":
            result = stage_main_job(settings, scratch, limit)
        else:
            result = run_child(stage, settings, scratch, limit)
    except Exception as error:  # noqa: BLE001 - the run goes on with the next stage
        traceback.print_exc()
        result = dict(error=one_line(error))
    if stage.startswith("bench_"):
        try:
            merged, done = merged_bench(scratch, stage, settings["lengths"][stage])
            result.update(lengths_done=done, bench=merged)
            if merged:
                plot_bench(merged, scratch, out, f"throughput_{stage.split('_')[1]}.png")
        except Exception as error:  # noqa: BLE001 - the stage's own result is kept
            traceback.print_exc()
            result["error"] = f"merging bench.run's reports: {one_line(error)}"
    result.update(seconds=time.perf_counter() - start, limit_s=limit,
                  status="failed" if "error" in result else "cut" if "cut" in result else
                  "skipped" if result.get("skipped") else "ok")
    log(f"stage {stage}: {result['status']} in {result['seconds']:.0f} s"
        + (f" ({result.get('error') or result.get('cut') or result.get('skipped')})"
           if result["status"] != "ok" else ""))
    state["stages"][stage] = result
    return result


# ---------------------------------------------------------------------------- command line

class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise ConfigError(f"{message} (fix: see python -m bench.accelerator --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bench.accelerator", description=__doc__.split("\n\n")[0],
                     epilog=__doc__.split("\n\n", 1)[1],
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder (default {DEFAULT_OUT.relative_to(ROOT)} in the "
                             "repository; --smoke: a new temporary folder)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes (above), allowed without a GPU: checks the run on a CPU")
    parser.add_argument("--time_limit_s", type=float, default=None,
                        help=f"the whole run's time (default {TIME_LIMIT_S:g}; --smoke: "
                             f"{SMOKE_TIME_LIMIT_S:g}); the stages share it")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help=f"comma-separated stages to run, of {', '.join(STAGES)} (default: "
                             "all; devices always runs)")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    stages = [name.strip() for name in args.stages.split(",") if name.strip()]
    unknown = [name for name in stages if name not in STAGES]
    if unknown or not stages:
        raise ConfigError(f"--stages {args.stages!r}: unknown stage(s) {unknown} (fix: "
                          f"comma-separated, of {','.join(STAGES)})")
    args.stages = ["devices", *(name for name in STAGES if name in stages and name != "devices")]
    if args.time_limit_s is None:
        args.time_limit_s = SMOKE_TIME_LIMIT_S if args.smoke else TIME_LIMIT_S
    if args.time_limit_s <= 0:
        raise ConfigError(f"--time_limit_s {args.time_limit_s:g} is not positive (fix: "
                          f"--time_limit_s {TIME_LIMIT_S:g})")
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="jaxenc-smoke-")) if args.smoke else DEFAULT_OUT
    return args


@cli.reports_errors
def main(argv: Sequence[str] | None = None) -> dict:
    """Runs the stages; returns the results (also in OUT/results.json)."""
    args = parse_args(argv)
    start = time.perf_counter()
    deadline = start + args.time_limit_s - min(RESERVE_S, 0.1 * args.time_limit_s)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = SMOKE if args.smoke else FULL
    state: dict[str, Any] = dict(
        command="python -m bench.accelerator " + " ".join(sys.argv[1:] if argv is None
                                                            else argv),
        date=datetime.date.today().isoformat(), smoke=args.smoke,
        time_limit_s=args.time_limit_s, stages_asked=args.stages,
        machine=f"{os.cpu_count()} CPU cores, Python {platform.python_version()}",
        wheels=carried_versions(ROOT / device_wheels.FOLDER), stages={})
    log(f"carried packages: {state['wheels']}")
    log(f"stages {', '.join(args.stages)} within {args.time_limit_s:.0f} s, into {args.out}")
    with tempfile.TemporaryDirectory(prefix="jaxenc-accelerator-") as scratch:
        for index, stage in enumerate(args.stages):
            left = deadline - time.perf_counter()
            shares = [settings["shares"][name] for name in args.stages[index:]]
            limit = min(max(left * shares[0] / sum(shares), settings["least_s"].get(stage, 0.0)),
                        left)
            if limit < 1:
                state["stages"][stage] = dict(status="skipped", seconds=0.0, limit_s=limit,
                                              skipped="no time left")
            else:
                result = run_stage(stage, settings, Path(scratch), args.out, limit, state)
                if stage == "devices" and not args.smoke and not result.get("gpu"):
                    write(state, args.out, start)
                    if result["status"] != "ok":
                        why = result.get("error") or result.get("cut")
                        raise ConfigError(
                            f"the devices stage {result['status']}: {why} (fix: python -m "
                            "bench.device_wheels here, then carry .device_wheels)")
                    raise ConfigError(
                        f"jax sees no GPU (devices: {', '.join(result['devices'])}) (fix: "
                        "run it on the GPU machine, or add --smoke for the CPU check)")
            write(state, args.out, start)
    print("\n".join(stage_table(state["stages"])), flush=True)
    log(f"wrote {args.out}/report.md, results.json and the plots in "
        f"{time.perf_counter() - start:.0f} s")
    return state


if __name__ == "__main__":
    main()

"""The measured tables of results/disan/speed.md and docs/performance.md, rebuilt from the
benchmark reports committed in results/ (reports.pages places them):

  disan_kernels  the DiSAN train step per attention kernel and length: results/disan/bench/
                 kernels.md, written by `bench.bench_disan --out`
  disan_goal     directional vs blocked (32-bit dropout masks) at L 64 and 128 in every committed
                 DiSAN-alone run (results/disan/bench/*.md), and the median over the runs
  perf_goals     the speed and memory goals: those `bench.run` judged in the full side-by-side
                 run (results/bench/cpu/results.json), then the DiSAN-alone median of
                 `disan_goal` and PSAN's memory at equal size on real TREC batches
                 (results/psan/table5_memory_<bucket>.md, written by `bench.bench_psan`)
  perf_train_rates  train sentences/s per model and length of the same full run (its report.md)
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from reports.markdown import DASH, bold, copied, markdown
from reports.run_files import RESULTS, read_rows, value

DISAN_BENCH = RESULTS / "disan" / "bench"
KERNELS = DISAN_BENCH / "kernels.md"
FULL_RUN = RESULTS / "bench" / "cpu"
PSAN_MEMORY = {bucket: RESULTS / "psan" / f"table5_memory_{bucket}.md" for bucket in (16, 24)}
GOAL_LENGTHS = ("64", "128")
GOAL_SPEED_UP = 1.7
GOAL_BLOCK = "16"


def command(path: Path) -> str:
    """The command a `bench.bench_disan --out` report names in its first line."""
    return path.read_text(encoding="utf-8").split("`")[1]


def disan_kernels_table() -> str:
    """The rows of the kernel report KERNELS."""
    return copied(read_rows(KERNELS))


def _directional_speed_ups(path: Path) -> dict[str, float]:
    """length -> `vs blk` of the directional step (block 16, default dropout bits) in a report."""
    return {r["L"]: value(r["vs blk"]) for r in read_rows(path)
            if r["impl"] == "directional" and r["block"] == GOAL_BLOCK and r["vs blk"] != "-"
            and r["L"] in GOAL_LENGTHS}


def disan_runs() -> dict[str, dict[str, float]]:
    """report name -> length -> directional speed-up, for every committed DiSAN-alone report."""
    return {path.stem: _directional_speed_ups(path)
            for path in sorted(DISAN_BENCH.glob("*.md"))}


def disan_medians() -> dict[str, tuple[float, int, int]]:
    """length -> (median speed-up, runs at or above the goal, runs) over `disan_runs`."""
    runs, medians = disan_runs(), {}
    for length in GOAL_LENGTHS:
        found = [run[length] for run in runs.values() if length in run]
        medians[length] = (statistics.median(found), sum(x >= GOAL_SPEED_UP for x in found),
                           len(found))
    return medians


def disan_goal_table() -> str:
    """The directional step's speed-up over the blocked one in each DiSAN-alone report, and
    the median."""
    rows = [[f"`{name}`", f"`{command(DISAN_BENCH / f'{name}.md')}`",
             *(f"{run[length]:.2f}x" if length in run else DASH for length in GOAL_LENGTHS)]
            for name, run in disan_runs().items()]
    medians = disan_medians()
    rows.append(["median", DASH, *(bold(f"{medians[length][0]:.2f}x") for length in GOAL_LENGTHS)])
    return markdown(["report (results/disan/bench/)", "command",
                     *(f"directional / blocked step, L {length}" for length in GOAL_LENGTHS)],
                    rows)


def _psan_memory(bucket: int) -> dict[str, dict[str, str]]:
    return {r["model"]: r for r in read_rows(PSAN_MEMORY[bucket])}


def perf_goals_table() -> str:
    """Every goal of the full run, then the DiSAN speed goal and PSAN's memory goals, each
    with its verdict and report."""
    results = json.loads((FULL_RUN / "results.json").read_text(encoding="utf-8"))
    rows = [[goal["goal"], goal["measured"], goal["verdict"], "results/bench/cpu"]
            for goal in results["goals"]]
    medians = disan_medians()
    met = all(median >= GOAL_SPEED_UP for median, _, _ in medians.values())
    rows.append(["DiSAN directional: train step >= 1.7x blocked's with 32-bit dropout masks at "
                 "L=64, 128, DiSAN alone (median over the `bench.bench_disan` runs)",
                 "; ".join(f"L={length}: {median:.2f}x ({above} of {runs} runs >= "
                           f"{GOAL_SPEED_UP}x)" for length, (median, above, runs)
                           in medians.items()),
                 "met" if met else "not met", "results/disan/bench"])
    memory = {bucket: _psan_memory(bucket) for bucket in PSAN_MEMORY}
    default = {bucket: value(models["PSAN packed"]["/ DiSAN dense"].rstrip("x"))
               for bucket, models in memory.items()}
    rows.append(["PSAN packed (`packed_chunk=0`, the accelerator setting) peak memory below "
                 "DiSAN dense, a real TREC batch of 64, 300-d sentence vectors",
                 ", ".join(f"{ratio:.2f}x at L={bucket}" for bucket, ratio in default.items()),
                 "met" if all(r < 1 for r in default.values()) else "not met",
                 "results/psan/table5_memory_*.md"])
    psan = {bucket: {model: value(r["/ Transformer"].rstrip("x"))
                     for model, r in models.items() if model.startswith("PSAN")}
            for bucket, models in memory.items()}
    lowest = {bucket: min(ratios.items(), key=lambda item: item[1])
              for bucket, ratios in psan.items()}
    rows.append(["PSAN peak memory below the Transformer's at equal size (the paper's 1192 < "
                 "1508 MB)",
                 "; ".join(f"L={bucket}: default {psan[bucket]['PSAN packed']:.2f}x, lowest "
                           f"{lowest[bucket][1]:.2f}x ({lowest[bucket][0]})"
                           for bucket in psan),
                 "met" if all(low < 1 for _, low in lowest.values()) else "not met",
                 "results/psan/table5_memory_*.md"])
    return markdown(["goal (CPU)", "measured", "verdict", "report"], rows)


def _table_after(path: Path, heading: str) -> list[dict[str, str]]:
    """The rows of the first table after the line `heading` of a markdown report."""
    text = path.read_text(encoding="utf-8")
    before = text[:text.index(f"\n{heading}\n")]
    return read_rows(path, index=sum(1 for line in before.splitlines()
                                     if line.startswith("|---")))


def perf_train_rates_table() -> str:
    """The train rates table of the full run's report.md."""
    return copied(_table_after(FULL_RUN / "report.md", "**Train sentences/s**"))

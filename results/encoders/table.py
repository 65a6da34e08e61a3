"""The README's table of every encoder from the finished runs of results/encoders/run.sh: per
model, TREC accuracy, SICK-R Pearson / MSE, SICK-E and SST-5 accuracy on test at the best-dev
checkpoint, mean ± std over the seeds present (`jaxenc.training.compare`), and the seeds;
with --seeds, every seed's value before the mean ("a / b / c = m ± s").

Usage: python results/encoders/table.py [--tasks trec,sick_r,sick_e,sst5] [--models KEY,...]
                                        [--seeds] [RUNS]   (default /work/runs)
       python results/encoders/table.py --runs [RUNS]   (every run's results.md row, per task)
e.g. the Dependency-Transformer's table: --tasks sick_e,sst2,mrpc
--models dt,dt_plain,transformer,tree_lstm --seeds
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from jaxenc.training import compare

MODELS = {"tree_lstm": "Tree-LSTM (spaCy dependency trees)",
          "dt": "Dependency-Transformer (spaCy trees)",
          "dt_plain": "Dependency-Transformer `variant=transformer` (no relations)",
          "transformer": "Transformer",
          "psan": "PSAN (spaCy-derived phrases; SST: gold trees)",
          "psan_norm": "PSAN `memory_norm=layer` (spaCy-derived phrases)",
          "psan_level1": "PSAN (1) PSA on the first level only",
          "psan_level2": "PSAN (2) PSA on the second level only",
          "psan_level3": "PSAN (3) PSA on the third level only",
          "psan_no_psa": "PSAN (4) w/o PSA (sentence-level attention + gated memory)",
          "psan_equal": "PSAN (5) w/o syntactic division (equal blocks)",
          "psan_concat": "PSAN (6) w/o gated memory (concat + feed-forward)",
          "psan_no_both": "PSAN (7) w/o both",
          "phrase_transformer": "PhraseTransformer (2-grams)"}
README_MODELS = ("tree_lstm", "dt", "dt_plain", "transformer", "psan", "psan_norm",
                 "phrase_transformer")
TASKS = ("trec", "sick_r", "sick_e", "sst5")  # the README's table
TASK_NAMES = {"trec": "TREC", "sick_r": "SICK-R", "sick_e": "SICK-E", "sst2": "SST-2",
              "mrpc": "MRPC", "sst5": "SST-5"}
CELLS = {  # task -> (metric, its column name, scale, format) of each column
    "trec": (("accuracy", "acc", 100, "{:.2f}"),),
    "sick_r": (("pearson", "Pearson", 1, "{:.3f}"), ("mse", "MSE", 1, "{:.3f}")),
    "sick_e": (("accuracy", "acc", 100, "{:.2f}"),),
    "sst2": (("accuracy", "acc", 100, "{:.2f}"),),
    "mrpc": (("accuracy", "acc", 100, "{:.2f}"), ("f1", "F1", 100, "{:.2f}")),
    "sst5": (("accuracy", "acc", 100, "{:.2f}"),),
}


def cell(runs: list[dict], split: str, metric: str, scale: float, form: str,
         per_seed: bool = False) -> str:
    """'m ± s' over the runs (sample std), the value alone for one run, '—' for none; with
    `per_seed`, 'a / b / c = m ± s'."""
    values = [run[split][metric] * scale for run in runs]
    if not values:
        return "—"
    if len(values) == 1:
        return form.format(values[0])
    summary = f"{form.format(statistics.mean(values))} ± {form.format(statistics.stdev(values))}"
    return " / ".join(form.format(v) for v in values) + " = " + summary if per_seed else summary


def main(root: str = "/work/runs", tasks: tuple[str, ...] = TASKS,
         models: tuple[str, ...] = README_MODELS, per_seed: bool = False) -> str:
    columns = [(task, *column) for task in tasks for column in CELLS[task]]
    names = " / ".join(TASK_NAMES[task] for task in tasks)
    lines = ["| model | " + " | ".join(f"{TASK_NAMES[task]} {title}" for task, _, title, _, _
                                       in columns) + f" | seeds ({names}) |",
             "|---" * (len(columns) + 2) + "|"]
    for key in models:
        runs = {task: [compare.read_run(path.parent) for path in
                       sorted(Path(root).glob(f"{key}_{task}_s*/results.md"))]
                for task in tasks}
        if not any(runs.values()):
            continue
        cells = [cell(runs[task], "test", metric, scale, form, per_seed)
                 for task, metric, _, scale, form in columns]
        seeds = " / ".join(",".join(str(run["seed"]) for run in runs[task]) or "—"
                           for task in tasks)
        lines.append(f"| {MODELS[key]} | {' | '.join(cells)} | {seeds} |")
    table = "\n".join(lines)
    print(table)
    return table


def run_rows(root: str = "/work/runs") -> str:
    """Per task, the results.md table row of every finished run, its folder name first."""
    out = []
    for task in CELLS:
        paths = sorted(Path(root).glob(f"*_{task}_s*/results.md"))
        rows = [[line for line in path.read_text().splitlines() if line.startswith("|")]
                for path in paths]
        if not rows:
            continue
        out += [f"### {task}", "", "| run " + rows[0][0], "|---" + rows[0][1]]
        out += [f"| {path.parent.name} " + table[2] for path, table in zip(paths, rows,
                                                                             strict=True)]
        out.append("")
    text = "\n".join(out)
    print(text)
    return text


if __name__ == "__main__":
    if sys.argv[1:2] == ["--runs"]:
        run_rows(*sys.argv[2:])
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("root", nargs="?", default="/work/runs", help="the runs folder")
        parser.add_argument("--tasks", default=",".join(TASKS), help=", ".join(CELLS))
        parser.add_argument("--models", default=",".join(README_MODELS), help=", ".join(MODELS))
        parser.add_argument("--seeds", action="store_true", help="every seed's value too")
        args = parser.parse_args()
        main(args.root, tuple(args.tasks.split(",")), tuple(args.models.split(",")), args.seeds)

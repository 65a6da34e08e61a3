"""The README's table of every encoder from the finished runs of results/encoders/run.sh: per
model, TREC accuracy, SICK-R Pearson / MSE and SICK-E accuracy on test at the best-dev
checkpoint, mean ± std over the seeds present (`jaxenc.training.compare`), and the seeds.

Usage: python results/encoders/table.py [RUNS]   (default /work/runs)
       python results/encoders/table.py --runs [RUNS]   (every run's results.md row, per task)
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from jaxenc.training import compare

MODELS = {"tree_lstm": "Tree-LSTM (spaCy dependency trees)",
          "dt": "Dependency-Transformer (spaCy trees)",
          "dt_plain": "Dependency-Transformer `variant=transformer` (no relations)",
          "transformer": "Transformer",
          "psan": "PSAN (spaCy-derived phrases)",
          "phrase_transformer": "PhraseTransformer (2-grams)"}
TASKS = ("trec", "sick_r", "sick_e")
CELLS = (("trec", "accuracy", 100, "{:.2f}"), ("sick_r", "pearson", 1, "{:.3f}"),
         ("sick_r", "mse", 1, "{:.3f}"), ("sick_e", "accuracy", 100, "{:.2f}"))


def cell(runs: list[dict], split: str, metric: str, scale: float, form: str) -> str:
    """'m ± s' over the runs (sample std), the value alone for one run, '—' for none."""
    values = [run[split][metric] * scale for run in runs]
    if not values:
        return "—"
    if len(values) == 1:
        return form.format(values[0])
    return f"{form.format(statistics.mean(values))} ± {form.format(statistics.stdev(values))}"


def main(root: str = "/work/runs") -> str:
    lines = ["| model | TREC acc | SICK-R Pearson | SICK-R MSE | SICK-E acc "
             "| seeds (TREC / SICK-R / SICK-E) |", "|---|---|---|---|---|---|"]
    for key, name in MODELS.items():
        runs = {task: [compare.read_run(path.parent) for path in
                       sorted(Path(root).glob(f"{key}_{task}_s*/results.md"))]
                for task in TASKS}
        if not any(runs.values()):
            continue
        cells = [cell(runs[task], "test", metric, scale, form)
                 for task, metric, scale, form in CELLS]
        seeds = " / ".join(",".join(str(run["seed"]) for run in runs[task]) or "—"
                           for task in TASKS)
        lines.append(f"| {name} | {' | '.join(cells)} | {seeds} |")
    table = "\n".join(lines)
    print(table)
    return table


def run_rows(root: str = "/work/runs") -> str:
    """Per task, the results.md table row of every finished run, its folder name first."""
    out = []
    for task in TASKS:
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
    arguments = sys.argv[1:]
    if arguments[:1] == ["--runs"]:
        run_rows(*arguments[1:])
    else:
        main(*arguments)

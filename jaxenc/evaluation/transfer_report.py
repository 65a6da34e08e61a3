"""A transfer run's results as one table (markdown + JSON) beside the papers', and bar charts.

`results` is what `eval.transfer.run_transfer` returns:
    {"encoder": name, "seed": int,
     "tasks": {TASK: {"status": "ok", "seconds": float, "metrics": {...}}
                   | {"status": "skipped" | "failed", "reason": str}}}
Headline cells: accuracy (%) for classification, accuracy/F1 for MRPC, Pearson for SICK-R and
STS-B, Pearson/Spearman (size-weighted over subsets) for STS12-16, "partial (k of n subsets)"
added for a year evaluated without some subsets (named in the details table).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from jaxenc.evaluation.paper_results import AVERAGE_SETS, PAPER_RESULTS, SENTEVAL_TEST_SIZES
from jaxenc.evaluation.sts import partial_note
from jaxenc.files import write_text_atomic

RELATEDNESS_TASKS = ("SICKR", "STSB")
MISSING = "—"
OURS = "ours"


def headline(task: str, metrics: Mapping[str, float]) -> str:
    """The table cell of one task's metrics (format as in the papers' tables)."""
    if "accuracy" in metrics:
        cell = f"{metrics['accuracy']:.1f}"
        return cell + (f"/{metrics['f1']:.1f}" if "f1" in metrics else "")
    if task in RELATEDNESS_TASKS:
        return f"{metrics['pearson']:.3f}"
    return " ".join(filter(None, [f"{metrics['pearson']:.2f}/{metrics['spearman']:.2f}",
                                  partial_note(metrics)]))


def primary_metric(metrics: Mapping[str, float]) -> tuple[str, float]:
    """(name, value) of the number a task is ranked by: accuracy, else Pearson."""
    name = "accuracy" if "accuracy" in metrics else "pearson"
    return name, float(metrics[name])


def averages(accuracies: Mapping[str, tuple[float, int]]) -> dict[str, tuple[float, float] | None]:
    """(macro, micro) average accuracy of every AVERAGE_SETS set whose tasks are all present.

    accuracies: task -> (accuracy %, test size). Macro is the plain mean, micro the mean weighted
    by test size (as Zhang et al. 2018, Table 2). A set with a missing task maps to None.
    """
    out: dict[str, tuple[float, float] | None] = {}
    for name, tasks in AVERAGE_SETS.items():
        if not all(task in accuracies for task in tasks):
            out[name] = None
            continue
        values = np.array([accuracies[task][0] for task in tasks])
        sizes = np.array([accuracies[task][1] for task in tasks], np.float64)
        out[name] = (float(values.mean()), float(values @ sizes / sizes.sum()))
    return out


def _our_accuracies(results: Mapping) -> dict[str, tuple[float, int]]:
    return {task: (entry["metrics"]["accuracy"], entry["metrics"]["num_test"])
            for task, entry in results["tasks"].items()
            if entry["status"] == "ok" and "accuracy" in entry["metrics"]}


def _paper_accuracies(model: str) -> dict[str, tuple[float, int]]:
    return {task: (metrics["accuracy"], SENTEVAL_TEST_SIZES[task])
            for task, metrics in PAPER_RESULTS[model].items() if "accuracy" in metrics}


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _details(task: str, entry: Mapping) -> list[str]:
    """One row of the details table: what was chosen on dev and how large the test was."""
    if entry["status"] != "ok":
        return [task, entry["status"], entry["reason"], MISSING, MISSING]
    metrics = entry["metrics"]
    if "dev_accuracy" in metrics:
        l2s = sorted(set(metrics["l2"]))
        dev = f"dev acc {metrics['dev_accuracy']:.1f}, L2 {', '.join(f'{x:g}' for x in l2s)}"
    elif "dev_pearson" in metrics:
        schedule = f", {metrics['schedule']} schedule" if "schedule" in metrics else ""
        schedule += f", {metrics['head']} head" if "head" in metrics else ""
        dev = (f"dev Pearson {metrics['dev_pearson']:.3f} (epoch {metrics['best_epoch']}"
               f"{schedule}); "
               f"test Spearman {metrics['spearman']:.3f}, MSE {metrics['mse']:.3f}")
    else:
        dev = (f"mean over subsets {metrics['pearson_mean']:.3f}/{metrics['spearman_mean']:.3f}, "
               f"{len(metrics['subsets'])} subsets")
        if metrics.get("missing"):
            dev += f"; missing: {', '.join(metrics['missing'])}"
    return [task, headline(task, metrics), dev, str(metrics["num_test"]),
            f"{entry['seconds']:.1f}"]


def render_markdown(results: Mapping, papers: Mapping[str, Mapping] = PAPER_RESULTS) -> str:
    """The results table (ours beside each paper), the averages and a details table."""
    models = list(papers)
    rows = []
    for task, entry in results["tasks"].items():
        ours = headline(task, entry["metrics"]) if entry["status"] == "ok" else entry["status"]
        rows.append([task, ours] + [headline(task, papers[m][task]) if task in papers[m]
                                    else MISSING for m in models])
    columns = {OURS: averages(_our_accuracies(results))}
    columns.update({m: averages(_paper_accuracies(m)) for m in models})
    for name in AVERAGE_SETS:
        cells = [MISSING if columns[c][name] is None else "{:.1f}/{:.1f}".format(*columns[c][name])
                 for c in columns]
        rows.append([f"macro/micro acc, {name}"] + cells)
    details = [_details(task, entry) for task, entry in results["tasks"].items()]
    return "\n\n".join([
        f"## Transfer results: `{results['encoder']}` (seed {results['seed']})",
        _table(["task", OURS] + [f"{model} (paper)" for model in models], rows),
        "Accuracy in %; MRPC accuracy/F1; SICK-R and STS-B test Pearson; STS12-16 Pearson/Spearman "
        "of the cosine, size-weighted over subsets. (paper): a task's number as printed in "
        "that model's paper (DiSAN's: PSAN's Table 3), not measured here; "
        "jaxenc/evaluation/paper_results.py. The macro/micro rows of every column, the papers' "
        "included, are averaged here over that column's task rows (micro weighted by the test "
        "sizes here), so they can differ from the averages a paper prints.",
        _table(["task", OURS, "selection / details", "test size", "seconds"], details),
    ]) + "\n"


def plot_task(task: str, values: Mapping[str, float], metric: str, path: str | os.PathLike) -> None:
    """Bar chart of one task's `metric` per model (ours first) to a PNG file (Agg canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1.2 + 0.9 * len(values), 3.2))
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    names = list(values)
    bars = axes.bar(names, [values[n] for n in names],
                    color=["tab:orange"] + ["tab:blue"] * (len(names) - 1))
    axes.bar_label(bars, fmt="%.3g", fontsize=8)
    axes.margins(y=0.12)  # room for the labels
    axes.set_title(task)
    axes.set_ylabel(metric)
    axes.tick_params(axis="x", labelrotation=30, labelsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def write_report(results: Mapping, out_dir: str | os.PathLike,
                 papers: Mapping[str, Mapping] = PAPER_RESULTS,
                 plots: Sequence[str] | None = None) -> dict[str, Path]:
    """Writes results.json and results.md (each whole or not at all) and plots/<TASK>.png of the
    finished tasks among `plots` (default: all); returns their paths by name."""
    out_dir = Path(out_dir)
    (out_dir / "plots").mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "results.json", "markdown": out_dir / "results.md"}
    write_text_atomic(paths["json"], json.dumps(results, indent=2) + "\n")
    write_text_atomic(paths["markdown"], render_markdown(results, papers))
    for task, entry in results["tasks"].items():
        if entry["status"] != "ok" or (plots is not None and task not in plots):
            continue
        metric, ours = primary_metric(entry["metrics"])
        values = {OURS: ours}
        values.update({m: rows[task][metric] for m, rows in papers.items() if task in rows})
        paths[task] = out_dir / "plots" / f"{task}.png"
        plot_task(task, values, metric, paths[task])
    return paths

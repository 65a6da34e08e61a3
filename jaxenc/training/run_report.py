"""What a run leaves behind for people: metrics.jsonl, a markdown results table, a curves PNG.
A write the operating system refuses (read-only, full disk) is a one-line WriteError."""

from __future__ import annotations

import collections
import json
import logging
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from jaxenc.errors import DataError
from jaxenc.files import write_text_atomic, writing

METRICS_FILE = "metrics.jsonl"
RESULTS_FILE = "results.md"
CURVES_FILE = "curves.png"
# The "cost" records of metrics.jsonl, written after training with the test record: seconds of
# training steps (evaluation, checkpoints and compiles apart) and sentences per second of
# `encode(list_of_str)` end to end (the train command measures it after training).
COST, TRAIN_SECONDS, ENCODE_RATE = "cost", "train_seconds", "encode_sentences_per_second"
AFTER_TRAINING = ("test", COST)  # the splits of records written once training has ended
log = logging.getLogger(__name__)

LEGEND_ROWS = 14  # runs per column of the curves' legend: a 4-inch figure holds about 14


class MetricsLog:
    """Appends one JSON object per line (`{"step", "split", <metrics>...}`) to a file.

    A resumed run first drops what came after its checkpoint (`drop_after`), so every step has
    exactly one record of each split. `enabled=False` writes nothing (the processes of a
    multi-host run other than process 0: every process computes the same records).
    """

    def __init__(self, path: str | os.PathLike, enabled: bool = True):
        self.path, self.enabled = Path(path), enabled
        if enabled:
            with writing(self.path.parent):
                self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, step: int, split: str, metrics: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        record = {"step": int(step), "split": split, **{k: _plain(v) for k, v in metrics.items()}}
        with writing(self.path), self.path.open("a") as file:
            file.write(json.dumps(record) + "\n")

    def drop_after(self, step: int) -> None:
        """Keeps the train and dev records up to `step` only: a run resumed from its checkpoint
        at `step` writes the later ones, and its test and cost records, again."""
        if not self.enabled or not self.path.is_file():
            return
        self._drop_cut_line()
        kept = [record for record in read_metrics(self.path, latest=False)
                if record["split"] not in AFTER_TRAINING and record["step"] <= step]
        write_text_atomic(self.path, "".join(json.dumps(record) + "\n" for record in kept))

    def _drop_cut_line(self) -> None:
        """Drops a last line without its newline that is not a record: an append the disk cut
        short (each record is written with its newline in one write), with a note."""
        text = self.path.read_text()
        if not text or text.endswith("\n"):
            return
        kept, _, last = text.rpartition("\n")
        try:
            _record(self.path, text.count("\n") + 1, last)
        except DataError:
            log.warning("%s: dropped its last line, %d characters cut short by a write that did "
                        "not finish", self.path, len(last))
            write_text_atomic(self.path, kept + "\n" if kept else "")


def _plain(value: Any) -> Any:
    """numpy / jax scalars -> Python numbers, for JSON."""
    return value.item() if hasattr(value, "item") else value


def read_metrics(path: str | os.PathLike, split: str | None = None,
                 latest: bool = True) -> list[dict]:
    """Records of `split` (all splits when None) in step order; with `latest`, one per step.
    A line that is not a JSON record is a DataError naming it."""
    records = [_record(path, number, line)
               for number, line in enumerate(Path(path).read_text().splitlines(), start=1)
               if line.strip()]
    if split is not None:
        records = [r for r in records if r["split"] == split]
    if latest:
        records = list({(r["split"], r["step"]): r for r in records}.values())
    return sorted(records, key=lambda r: r["step"]) if latest else records


def _record(path: str | os.PathLike, number: int, line: str) -> dict:
    """One metrics.jsonl line as a dict with "step" and "split"."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict) or not {"step", "split"} <= record.keys():
        raise DataError("not a JSON record with step and split", path=path, line=number,
                        fix="delete the line (a run killed while writing it leaves it cut short)")
    return record


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub markdown table; columns default to every key in first-seen order ("" if absent)."""
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def mean_std(values: Sequence[float]) -> str:
    """"m ± s" (sample standard deviation) of several values, the value alone for one."""
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def seed_summary(rows: Sequence[Mapping[str, Any]], seeds: int) -> list[dict[str, Any]]:
    """One row per model from the results rows of `seeds` seeds (seed after seed, the models in
    the same order in each): its seeds, dev and test metrics as mean ± std, steps and times as
    means, the peak memory as the largest, what stopped the runs as counts."""
    per_seed = len(rows) // seeds
    summary = []
    for slot in range(per_seed):
        runs = rows[slot::per_seed]
        row: dict[str, Any] = {"model": runs[0]["model"], "dataset": runs[0]["dataset"],
                               "seeds": ",".join(str(run["seed"]) for run in runs),
                               "params": runs[0]["params"]}
        stopped = collections.Counter(run["stopped by"] for run in runs)
        for key in runs[0]:
            values = [run[key] for run in runs]
            if key.startswith(("dev ", "test ")):
                row[key] = mean_std(values)
            elif key in ("steps", "train s", "encode sent/s"):
                row[key] = round(statistics.mean(values))
            elif key == "stopped by":
                row[key] = ", ".join(f"{why} {n}/{seeds}" for why, n in stopped.items())
            elif key == "train peak MiB":
                row[key] = max(values)
        summary.append(row)
    return summary


def write_results(workdir: str | os.PathLike, title: str, rows: Sequence[Mapping[str, Any]],
                  notes: Sequence[str] = ()) -> str:
    """Writes workdir/results.md (title, table, notes) and returns its text."""
    text = "\n\n".join([f"# {title}", markdown_table(rows), *notes]) + "\n"
    write_text_atomic(Path(workdir) / RESULTS_FILE, text)
    return text


def curves_figure(runs: Mapping[str, Sequence[Mapping[str, Any]]], metric: str) -> Figure:
    """Training loss and dev `metric` against the step, one line per run (label -> records of
    `read_metrics`). Two axes: loss, then the dev metric; each run has the same colour in both,
    so one legend, right of the axes (the constrained layout makes room for it), names the runs
    of both and covers no curve, however many runs there are. A plain Figure: no pyplot state,
    so it works headless and leaves a notebook's backend alone."""
    figure = Figure(figsize=(10, 4), layout="constrained")
    loss_axis, metric_axis = figure.subplots(1, 2)
    for index, (label, records) in enumerate(runs.items()):
        train = [r for r in records if r["split"] == "train" and "loss" in r]  # not all skipped
        dev = [r for r in records if r["split"] == "dev"]
        colour = f"C{index % 10}"  # the default cycle's colours, the same in both axes
        loss_axis.plot([r["step"] for r in train], [r["loss"] for r in train], label=label,
                       color=colour)
        metric_axis.plot([r["step"] for r in dev], [r[metric] for r in dev], marker="o",
                         label=label, color=colour)
    loss_axis.set(xlabel="step", ylabel="training loss", title="training loss")
    metric_axis.set(xlabel="step", ylabel=f"dev {metric}", title=f"dev {metric}")
    for axis in (loss_axis, metric_axis):
        axis.grid(alpha=0.3)
    handles, labels = metric_axis.get_legend_handles_labels()  # line and marker: both axes'
    figure.legend(handles, labels, loc="outside right upper",
                  ncols=math.ceil(len(labels) / LEGEND_ROWS) or 1)
    return figure


def plot_curves(runs: Mapping[str, Sequence[Mapping[str, Any]]], metric: str,
                path: str | os.PathLike) -> None:
    """Writes `curves_figure(runs, metric)` as a PNG to `path`."""
    figure = curves_figure(runs, metric)
    with writing(path):
        figure.savefig(path, dpi=100)

"""The plots of a bench.run results dict: throughput.png and memory.png."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.rows import STEPS, axis_label, keyed, line_label


def plot(results: Mapping, out: Path) -> None:
    """throughput.png (train and encode sentences/s) and memory.png (train-step peak MiB) vs
    length, one line per model; dashed: the other implementations of a model."""
    import matplotlib  # only the plots need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, lengths = keyed(results), results["settings"]["lengths"]
    colors = {model: f"C{index % 10}" for index, model in enumerate(results["lines"])}

    def series(label_of, kind: str, field: str):
        points = [(length, rows.get((label_of(length), length))) for length in lengths]
        return ([length for length, row in points if row and row.get(kind)
                 and field in row[kind]],
                [row[kind][field] for _, row in points if row and row.get(kind)
                 and field in row[kind]])

    figure, axes = plt.subplots(1, 2, figsize=(13, 5))
    for axis, kind in zip(axes, STEPS, strict=True):
        for model in results["lines"]:
            x, y = series(lambda length, m=model: line_label(results, m, length), kind,
                          "sentences_per_s")
            if x:
                axis.plot(x, y, "o-", color=colors[model], label=model)
        _decorate(axis, f"{kind} throughput, batch {results['settings']['batch']}",
                  "sentences / s", lengths)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "throughput.png", dpi=110)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(8, 5.5))
    for model in results["lines"]:
        x, y = series(lambda length, m=model: line_label(results, m, length), "train", "peak_mib")
        if x:
            axis.plot(x, y, "o-", color=colors[model], label=model)
        spec = results["axes"].get(model)
        for choice in spec["choices"] if spec else ():
            label = axis_label(model, spec["field"], choice)
            if label in {line_label(results, model, length) for length in lengths}:
                continue
            x, y = series(lambda length, lab=label: lab, "train", "peak_mib")
            if x:
                axis.plot(x, y, "o--", color=colors[model], alpha=0.6,
                          label=f"{model} {spec['field']}={choice}")
    _decorate(axis, "train-step peak memory (compiled)", "MiB", lengths)
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out / "memory.png", dpi=110)
    plt.close(figure)


def _decorate(axis, title: str, ylabel: str, lengths: Sequence[int]) -> None:
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xticks(lengths, [str(length) for length in lengths])
    axis.set_xlabel("sentence length (tokens)")
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.grid(True, which="both", alpha=0.3)


"""The table of results/disan/README.md: DiSAN and the bag in the recipe sweep (full GloVe 6B
50-d vocabulary, seed 0), the dev score of every recipe and the test score of the recipe chosen
on dev (`disan_sweep`), from results/encoders/runs/sweep_{disan,bag}_<task>_<recipe>/."""

from __future__ import annotations

from reports import encoder_runs as runs
from reports import encoder_tables
from reports.markdown import DASH, bold, markdown


def disan_sweep_table() -> str:
    """Every committed sweep run of DiSAN and the bag: its dev score, the test score of the
    recipe chosen on dev (in bold)."""
    choices = encoder_tables.sweep_choices()
    rows = []
    for family in ("disan", "bag"):
        for task in runs.SWEEP_TASKS:
            for variant in runs.SWEEP[family]:
                path = encoder_tables.RUNS / f"sweep_{family}_{task}_{variant}"
                if not (path / "results.md").is_file():
                    continue
                run = encoder_tables.read_run(path)
                metric = encoder_tables.PRIMARY[task][0]
                chosen = choices[family][task] == variant
                dev = encoder_tables.formatted(task, run["dev"][metric])
                test = encoder_tables.formatted(task, run["test"][metric]) if chosen else DASH
                rows.append([encoder_tables.MODEL_NAMES[family], encoder_tables.TASK_NAMES[task],
                             bold(variant) if chosen else variant, bold(dev) if chosen else dev,
                             str(run["step"]), run["steps"], run["stopped by"], test])
    return markdown(["model", "task", "recipe", "dev", "best step", "steps", "stopped by",
                     "test (chosen recipe)"], rows)

"""Mean ± standard deviation over seeds: groups finished training runs whose configs differ only in
`train.seed` (and in bookkeeping such as log_every), and tabulates each group's dev and test
metrics at its best-dev checkpoint, read from the runs' metrics.jsonl.

  python -m train.compare RUN_DIR [RUN_DIR ...] [--output table.md]
  e.g. python -m train.compare /tmp/runs/disan_sick_e_s* /tmp/runs/bag_sick_e_s*

Each group is labelled by model and dataset plus the config values that set it apart from the
other groups of that model and dataset. A run is grouped by its config.json, which a resumed run
updates with the changes it may make (a longer run, another eval_every, ...); config keys newer
than a run take their defaults. A run named twice (the same directory reached two ways, e.g. by
overlapping globs) is counted once, with a note on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxenc import cli
from jaxenc import configs as base
from jaxenc.errors import ConfigError, DataError
from jaxenc.training import checkpointing, report
from jaxenc.training.checkpointing import flatten

# Config entries that do not change a run's results: left out of grouping and labels. The
# sections of other runs (a Transformer twin under `baselines`) and of what is done after training
# do not change the main run either: a run with a twin groups with the same run without one.
BOOKKEEPING = frozenset({"train.seed", "train.log_every", "train.progress_bar",
                         "data.data_dir", "data.tfds_dir", "data.eval_batch_size",
                         "train.compilation_cache"})


def _is_bookkeeping(key: str) -> bool:
    return key in BOOKKEEPING or key.split(".")[0] in checkpointing.RESUMABLE_SECTIONS
_NOT_METRICS = frozenset({"step", "split", "loss"})
# What a run's config.json must hold: the defaults of newer keys depend on them.
REQUIRED_KEYS = ("model.name", "task.dataset")


def read_run(workdir: str | os.PathLike) -> dict[str, Any]:
    """{"workdir", "config" (flat), "seed", "step", "dev": {metric: v}, "test": {metric: v}} of a
    finished run: the last test record and the dev record of the same (best) step."""
    workdir = Path(workdir)
    metrics_path = workdir / report.METRICS_FILE
    config_path = workdir / checkpointing.CONFIG_FILE
    for path in (config_path, metrics_path):
        if not path.is_file():
            raise DataError("file not found", path=path,
                            fix="give run directories written by python -m train.main")
    config = flatten(checkpointing.saved_config(workdir))
    missing = [key for key in REQUIRED_KEYS if key not in config]
    if missing:
        raise DataError(f"lacks {' and '.join(missing)}, which every train.main config has",
                        path=config_path,
                        fix="give run directories written by python -m train.main")
    # Keys added to the configs after the run was made ran with their defaults' behaviour.
    try:
        defaults = flatten(base.get_config(f"{config['model.name']},{config['task.dataset']}")
                           .to_dict())
    except ConfigError as error:  # e.g. a model this version does not have
        raise DataError(str(error), path=config_path) from None
    config = {**defaults, **config}
    tests = report.read_metrics(metrics_path, "test", latest=False)
    if not tests:
        raise DataError("no test result: the run has not finished", path=metrics_path,
                        fix="let the run finish (re-running train.main in it resumes)")
    test = tests[-1]
    dev = {record["step"]: record for record in report.read_metrics(metrics_path, "dev")}
    if test["step"] not in dev:
        raise DataError(f"no dev result at the best step {test['step']}", path=metrics_path,
                        fix="give run directories written by python -m train.main")
    select = lambda record: {k: v for k, v in record.items() if k not in _NOT_METRICS}
    return {"workdir": str(workdir), "config": config, "seed": config["train.seed"],
            "step": test["step"], "dev": select(dev[test["step"]]), "test": select(test)}


def group_runs(runs: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """[(label, runs)] in first-seen order; runs in a group share every non-bookkeeping config
    value. The label: model, dataset, and the values that set the group apart from the other
    groups of the same model and dataset."""
    groups: dict[str, list[dict]] = {}
    for run in runs:
        key = json.dumps(sorted((k, v) for k, v in run["config"].items()
                                 if not _is_bookkeeping(k)))
        groups.setdefault(key, []).append(run)
    configs = [members[0]["config"] for members in groups.values()]
    labelled = []
    for members, config in zip(groups.values(), configs, strict=True):
        kind = (config["model.name"], config["task.dataset"])
        siblings = [c for c in configs if (c["model.name"], c["task.dataset"]) == kind]
        details = [f"{k}={_value(v)}" for k, v in sorted(config.items())
                   if not _is_bookkeeping(k) and len({json.dumps(c.get(k)) for c in siblings}) > 1]
        labelled.append((" ".join([*kind, *details]), members))
    return labelled


def _value(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _mean_std(values: Sequence[float]) -> str:
    """"m ± s" (sample standard deviation) over several values, the value alone for one."""
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def summary_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per group: label, seeds, then "dev <metric>" / "test <metric>" as mean ± std."""
    rows = []
    for label, members in group_runs(runs):
        row = {"runs": label, "seeds": ",".join(str(run["seed"]) for run in members)}
        for split in ("dev", "test"):
            for metric in members[0][split]:
                row[f"{split} {metric}"] = _mean_std([run[split][metric] for run in members])
        rows.append(row)
    return rows


def drop_repeats(workdirs: Sequence[str | os.PathLike]) -> list[str]:
    """`workdirs` without those naming a run listed before (the same resolved path: a symlink, a
    trailing slash, two globs matching it), each dropped one noted on stderr. A run counted
    twice would weigh double in its group's mean and shrink its standard deviation."""
    seen: dict[Path, str] = {}
    kept = []
    for workdir in map(str, workdirs):
        resolved = Path(workdir).resolve()
        if resolved in seen:
            print(f"note: {workdir} is the run {seen[resolved]} again; counted once",
                  file=sys.stderr)
            continue
        seen[resolved] = workdir
        kept.append(workdir)
    return kept


@cli.reports_errors
def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(
        prog="python -m train.compare", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workdirs", nargs="+", help="finished train.main run directories")
    parser.add_argument("--output", help="also write the markdown table to this file")
    args = parser.parse_args(argv)
    runs = [read_run(workdir) for workdir in drop_repeats(args.workdirs)]
    table = report.markdown_table(summary_rows(runs))
    if args.output:
        Path(args.output).write_text(table + "\n")
    print(table)
    return table


def command() -> None:
    """The `jaxenc-compare` command (a console script's return value would be its exit status)."""
    main()


if __name__ == "__main__":
    command()

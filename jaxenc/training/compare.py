"""Mean ± standard deviation over seeds: groups finished training runs whose configs differ only in
`train.seed` (and in bookkeeping such as log_every), and tabulates each group's dev and test
metrics at its best-dev checkpoint, read from the runs' metrics.jsonl.

  python -m train.compare RUN_DIR [RUN_DIR ...] [--output table.md]
  e.g. python -m train.compare /tmp/runs/disan_sick_e_s* /tmp/runs/bag_sick_e_s*

A run directory brings along the runs train.main trained with it: its config's baselines
(RUN_DIR/baselines/<name>) and the further seeds of train.seeds (RUN_DIR/seeds/<seed>, each
with its baselines), so `python -m train.compare workdir/default` tabulates every model of the
main job, and `python -m train.compare RUN_DIR` the table a multi-seed comparison printed. Such a
run that has not finished yet (train.main trains them one after another) is left out with a note
on stderr naming it; a run directory named on the command line that has not finished is an
error. Train time and encode rate are means over the runs that recorded them.

Each group is labelled by model and dataset plus the config values that set it apart from the
other groups of that model and dataset. A run is grouped by its config.json, which a resumed run
updates with the changes it may make (a longer run, another eval_every, ...); config keys newer
than a run take their defaults. A run named twice (the same directory reached two ways, e.g. by
overlapping globs, or named besides the run whose baseline it is) is counted once, with a note on
stderr.
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
from jaxenc.training import run_files, run_report
from jaxenc.training.run_files import flatten

# Config entries that do not change a run's results: left out of grouping and labels. The
# sections of other runs (a Transformer twin under `baselines`) and of what is done after training
# do not change the main run either: a run with a twin groups with the same run without one.
BOOKKEEPING = frozenset({"train.seed", "train.log_every", "train.progress_bar",
                         "data.data_dir", "data.tfds_dir", "data.eval_batch_size",
                         "train.compilation_cache"})


def _is_bookkeeping(key: str) -> bool:
    return key in BOOKKEEPING or key.split(".")[0] in run_files.RESUMABLE_SECTIONS
_NOT_METRICS = frozenset({"step", "split", "loss"})
# table column -> cost record key (run_report.COST), each a mean over the group's runs that have it
COST_COLUMNS = {"train s": run_report.TRAIN_SECONDS, "encode sent/s": run_report.ENCODE_RATE}
# What a run's config.json must hold: the defaults of newer keys depend on them.
REQUIRED_KEYS = ("model.name", "task.dataset")


class UnfinishedRunError(DataError):
    """A run directory whose training has not finished: no metrics.jsonl or no test result yet."""


def read_run(workdir: str | os.PathLike) -> dict[str, Any]:
    """{"workdir", "config" (flat), "seed", "step", "dev": {metric: v}, "test": {metric: v}} of a
    finished run: the last test record and the dev record of the same (best) step."""
    workdir = Path(workdir)
    metrics_path = workdir / run_report.METRICS_FILE
    config_path = workdir / run_files.CONFIG_FILE
    for path in (config_path, metrics_path):
        if not path.is_file():  # no metrics.jsonl beside a config.json: a run just started
            error = DataError if path == config_path else UnfinishedRunError
            raise error("file not found", path=path,
                        fix="give run directories written by python -m train.main")
    config = flatten(run_files.saved_config(workdir))
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
    tests = run_report.read_metrics(metrics_path, "test", latest=False)
    if not tests:
        raise UnfinishedRunError("no test result: the run has not finished",
                                 path=metrics_path,
                                 fix="let the run finish (re-running train.main in it resumes)")
    test = tests[-1]
    dev = {record["step"]: record for record in run_report.read_metrics(metrics_path, "dev")}
    if test["step"] not in dev:
        raise DataError(f"no dev result at the best step {test['step']}", path=metrics_path,
                        fix="give run directories written by python -m train.main")
    select = lambda record: {k: v for k, v in record.items() if k not in _NOT_METRICS}
    cost = {}  # runs that predate the cost records have none
    for record in run_report.read_metrics(metrics_path, run_report.COST, latest=False):
        cost.update(select(record))
    return {"workdir": str(workdir), "config": config, "seed": config["train.seed"],
            "step": test["step"], "dev": select(dev[test["step"]]), "test": select(test),
            "cost": cost}


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


def summary_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per group: label, seeds, then "dev <metric>" / "test <metric>" as mean ± std."""
    rows = []
    for label, members in group_runs(runs):
        row = {"runs": label, "seeds": ",".join(str(run["seed"]) for run in members)}
        for split in ("dev", "test"):
            for metric in members[0][split]:
                row[f"{split} {metric}"] = run_report.mean_std(
                    [run[split][metric] for run in members])
        for column, key in COST_COLUMNS.items():
            values = [run["cost"][key] for run in members if key in run["cost"]]
            if values:
                row[column] = round(statistics.mean(values))
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


def baseline_runs(workdir: str | os.PathLike) -> list[Path]:
    """The run directories of `workdir`'s baselines (baselines/<name> with a config.json): in
    the order of the baselines section of workdir's config.json (train.main's order), then
    any others in name order; [] when there are none."""
    folder = Path(workdir) / run_files.BASELINES_DIR
    if not folder.is_dir():
        return []
    found = {path.name: path for path in folder.iterdir()
             if (path / run_files.CONFIG_FILE).is_file()}
    try:
        order = list(json.loads((Path(workdir) / run_files.CONFIG_FILE).read_text())
                     .get("baselines") or {})
    except (OSError, ValueError, AttributeError):  # read_run names a bad config.json
        order = []
    names = [name for name in order if name in found] + sorted(set(found) - set(order))
    return [found[name] for name in names]


def seed_folders(workdir: str | os.PathLike) -> list[Path]:
    """The folders of `workdir`'s further seeds (seeds/<seed> with a config.json), by seed."""
    folder = Path(workdir) / run_files.SEEDS_DIR
    if not folder.is_dir():
        return []
    return sorted((path for path in folder.iterdir()
                   if path.name.isdigit() and (path / run_files.CONFIG_FILE).is_file()),
                  key=lambda path: int(path.name))


def companion_runs(workdir: str | os.PathLike) -> list[Path]:
    """The runs train.main trained with `workdir`'s: its baselines' (`baseline_runs`), then
    for each further seed (`seed_folders`) that seed's run and its baselines'."""
    return [*baseline_runs(workdir),
            *(run for seed in seed_folders(workdir) for run in (seed, *baseline_runs(seed)))]


def with_baselines(workdirs: Sequence[str | os.PathLike]) -> list[tuple[str, bool]]:
    """(run directory, named on the command line) for each of `workdirs` followed by the runs
    trained with it (`companion_runs`), each run once (`drop_repeats` for those named)."""
    named = drop_repeats(workdirs)
    seen = {Path(workdir).resolve() for workdir in named}
    runs = []
    for workdir in named:
        runs.append((workdir, True))
        for baseline in companion_runs(workdir):
            if baseline.resolve() not in seen:
                seen.add(baseline.resolve())
                runs.append((str(baseline), False))
    return runs


def read_runs(workdirs: Sequence[str | os.PathLike]) -> list[dict[str, Any]]:
    """`read_run` of each of `workdirs` and of their baselines' runs (`with_baselines`); a
    baseline's run that has not finished is left out, with a note on stderr."""
    runs = []
    for workdir, named in with_baselines(workdirs):
        try:
            runs.append(read_run(workdir))
        except UnfinishedRunError:
            if named:
                raise
            print(f"note: {workdir} has not finished; left out", file=sys.stderr)
    return runs


@cli.reports_errors
def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(
        prog="python -m train.compare", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workdirs", nargs="+", help="finished train.main run directories; the "
                        "runs of their baselines (RUN_DIR/baselines/*) are compared too")
    parser.add_argument("--output", help="also write the markdown table to this file")
    args = parser.parse_args(argv)
    runs = read_runs(args.workdirs)
    table = run_report.markdown_table(summary_rows(runs))
    if args.output:
        Path(args.output).write_text(table + "\n")
    print(table)
    return table


def command() -> None:
    """The `jaxenc-compare` command (a console script's return value would be its exit status)."""
    main()


if __name__ == "__main__":
    command()

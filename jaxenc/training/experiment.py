"""Every training run of a config: `run(config, workdir)` trains the configured model, then each
baseline of `config.baselines` (in workdir/baselines/<name>: same task, data and optimiser,
another model section), for each of `train.seeds` seeds (`planned_runs`), each one a
`loop.train_and_evaluate`, and writes one results table and one curves plot for all of them
(`write_report`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import ml_collections

from jaxenc.errors import ConfigError
from jaxenc.records import Example
from jaxenc.training import locking, loop, preparation, run_files, run_report
from jaxenc.training.input_pipeline import load_splits
from jaxenc.training.sections import Sections
from jaxenc.training.sharding import check_batch_sizes, initialize_distributed, make_mesh


def planned_runs(config: ml_collections.ConfigDict, workdir: str | Path
                 ) -> list[tuple[ml_collections.ConfigDict, Path]]:
    """(config, workdir) of every training run of `config`: for each of its `train.seeds` seeds
    (train.seed, train.seed + 1, ...; the first in `workdir`, each other one in
    workdir/seeds/<seed>), the configured model and then each baseline (in
    <that folder>/baselines/<name>: same task and data, another model section, and the values
    of `recipes.<name>`). Each run's config names its own seed and one seed."""
    workdir, runs = Path(workdir), []
    recipes = config.get("recipes") or {}
    for name in recipes:
        if name not in config.baselines:
            raise ConfigError(f"recipes.{name}: no baseline {name!r} (fix: name one of "
                              f"{', '.join(config.baselines) or 'no baselines'})")
    for index in range(config.train.seeds):
        seed = config.train.seed + index
        folder = workdir if index == 0 else workdir / run_files.SEEDS_DIR / str(seed)
        for name, model_cfg in {"": config.model, **config.baselines}.items():
            one = ml_collections.ConfigDict(config.copy_and_resolve_references().to_dict())
            one.model = model_cfg
            if name:
                one.baselines = ml_collections.ConfigDict()  # a baseline's run is one run
                one.recipes = ml_collections.ConfigDict()
                _apply_recipe(one, name, recipes.get(name) or {})
            one.train.update(seed=seed, seeds=1)
            runs.append((one, folder / run_files.BASELINES_DIR / name if name else folder))
    return runs


def _apply_recipe(config: ml_collections.ConfigDict, name: str, recipe: Mapping) -> None:
    """Sets `recipe`'s values ({section: {key: value}}, recipes.<name>) in `config`, each a key
    the config has outside the model, baselines and recipes sections."""
    for section, values in recipe.items():
        for key, value in run_files.flatten(values).items():
            *parents, leaf = [section, *key.split(".")]
            target = None if section in ("model", "baselines", "recipes") else config
            for part in parents:
                target = target.get(part) if isinstance(target, ml_collections.ConfigDict) else None
            if not isinstance(target, ml_collections.ConfigDict) or leaf not in target:
                raise ConfigError(f"recipes.{name}.{section}.{key}: no such key (fix: name a key "
                                  "of the task, data, optim, train or checkpoint section)")
            target[leaf] = value


def run(config: ml_collections.ConfigDict, workdir: str | Path) -> list[dict[str, Any]]:
    """Trains every run of `planned_runs` one after another; writes results.md (with several
    seeds: each model's mean ± std over them) and curves.png in `workdir`; returns the rows.
    Holds `workdir`'s lock (`locking.hold`) from once the configs are checked."""
    if config.train.distributed:
        initialize_distributed()
    preparation.validate(config)
    workdir = Path(workdir)
    runs = planned_runs(config, workdir)
    for cfg, path in runs:  # every mistake is reported before the first run starts
        preparation.validate(cfg)
        check_batch_sizes(cfg.data, make_mesh())  # the mesh train_and_evaluate makes
        run_files.check_compatible(path, cfg)
    with locking.hold(workdir):
        splits: dict[tuple, dict[str, list[Example]]] = {}  # read once per split seed and data
        rows = []
        for cfg, path in runs:
            sections = Sections.of(cfg)
            task = sections.task
            source = (sections.split_seed, task.dataset, task.dev_fraction, task.test_fraction,
                      sections.data)
            if source not in splits:
                splits[source] = load_splits(sections)
            rows.append(loop.train_and_evaluate(cfg, path, splits=splits[source]))
        if jax.process_index() == 0:
            write_report(workdir, rows, config.train.seeds)
    return rows


def write_report(workdir: Path, rows: Sequence[dict[str, Any]], seeds: int = 1) -> str:
    """results.md and curves.png (every model's train loss and dev metric, first seed). `rows`:
    those of `planned_runs`, seed after seed. One seed: a row per run; several: a row per model
    with the mean ± std over its seeds (`run_report.seed_summary`), then a row per run."""
    metric = next(key for key in rows[0] if key.startswith("dev "))[len("dev "):]
    first_seed = rows[:len(rows) // seeds]
    records = {row["model"]: run_report.read_metrics(Path(row["workdir"]) / run_report.METRICS_FILE)
               for row in first_seed}
    run_report.plot_curves(records, metric, workdir / run_report.CURVES_FILE)
    per_run = [{k: v for k, v in row.items() if k not in ("workdir", "notes")} for row in rows]
    title = f"{rows[0]['dataset']}: {', '.join(row['model'] for row in first_seed)}"
    notes = [f"Best dev checkpoint of each model, evaluated on test; train s: the training "
             f"steps, their compiling included; encode sent/s (the train command's): "
             f"`encode(list_of_str)` of test sentences end to end "
             f"(tokenise, parse, bucket, run). Curves: {run_report.CURVES_FILE}; per-step metrics: "
             f"{run_report.METRICS_FILE} in each run's workdir.",
             *(f"{row['model']}: {note}" for row in rows for note in row["notes"])]
    if seeds == 1:
        return run_report.write_results(workdir, title, per_run, notes=notes)
    summary = run_report.seed_summary(per_run, seeds)
    return run_report.write_results(
        workdir, f"{title} ({seeds} seeds)", summary,
        notes=[f"Mean ± sample standard deviation over seeds {summary[0]['seeds']}. Every run:",
               run_report.markdown_table(per_run), *notes])

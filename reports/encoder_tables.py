"""The encoder tables, built from the run files committed under results/encoders/runs/<run>/
(results.md, config.json, dev / test metric records; written by `python -m reports.encoder_runs
collect`) and nothing else; each sits between the markers `<!-- table.py: NAME -->` and
`<!-- /table.py -->` of README.md, docs/results.md or results/encoders/README.md
(reports.pages):
  headline  one row per encoder: its paper, the structure it reads and its TREC test accuracy,
            mean ± std over the seeded table runs `<model>_trec_s<seed>` when any are
            committed, else the test accuracy of its family's sweep run chosen on dev (seed 0)
  sweep     the recipe sweep (seed 0): each variant's dev score, the step of its best dev score,
            where it stopped and why; the chosen variant of each family and task (best dev) in bold
  encoders  test mean ± std over seeds of each model's `<model>_<task>_s<seed>` runs (3 seeds;
            5 for the Dependency-Transformer, its ablation and the Tree-LSTM) at its recipe
  versus_bag  each model's mean test score minus the bag's, per task (seeds on each side)
  pairs     the Dependency-Transformer minus its `variant=transformer` ablation and minus the
            Tree-LSTM, test score seed by seed (`PAIRS`), with their mean ± std
  mrpc_baselines  MRPC test accuracy seed by seed: the linear classifiers of
            reports.mrpc_baselines (results/encoders/mrpc_baselines.json), the trained runs and
            their best-dev steps
  transfer  the transfer tasks of the bag of glove-6b-50d vectors beside the papers' numbers,
            from results/transfer/bag_glove-6b-50d/results.json (`eval.transfer`)
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from jaxenc.evaluation.transfer_report import render_markdown
from jaxenc.training import compare
from reports import encoder_runs as runs
from reports.run_files import ENCODER_RUNS, RESULTS

RUNS = ENCODER_RUNS
TRANSFER = RESULTS / "transfer" / "bag_glove-6b-50d" / "results.json"
MRPC_BASELINES = RESULTS / "encoders" / "mrpc_baselines.json"
TASK_NAMES = {"trec": "TREC", "sick_r": "SICK-R", "sick_e": "SICK-E", "sst2": "SST-2",
              "mrpc": "MRPC", "sst5": "SST-5"}
# task -> (primary metric, its name, scale, format)
ACCURACY = ("accuracy", "acc", 100, "{:.2f}")
PRIMARY = {"trec": ACCURACY, "sick_r": ("pearson", "Pearson", 1, "{:.3f}"), "sick_e": ACCURACY,
           "sst2": ACCURACY, "mrpc": ACCURACY, "sst5": ACCURACY}
# family -> the recipe flags named beside its rows: those whose non-default values depart from
# its paper (the model's docstring) and, for PSAN, fixed word vectors (its paper's protocol;
# every other recipe fine-tunes them)
NAMED_FLAGS = {"psan": ("model.memory", "model.memory_norm", "model.freeze_embeddings"),
               "dependency_transformer": ("model.sentence_vector",)}


def _named(name: str, model: str, detail: str = "") -> str:
    """A model's row name: `name`, then in parentheses `detail` and, for each recipe (runs.RECIPES)
    that sets flags to name (NAMED_FLAGS), the tasks of the model that take it ("every task"
    when all do) and those flags."""
    family = runs.MODELS[model][1]
    tasks_by_flags: dict[str, list[str]] = {}
    model_tasks = runs.MODEL_TASKS.get(model, runs.TABLE_TASKS)
    for task in model_tasks:
        variant = runs.RECIPES.get(family, {}).get(runs.RECIPE_TASK[task])
        flags = ", ".join(f"`{key.removeprefix('model.')}={value}`"
                          for key, value in runs.SWEEP[family].get(variant, {}).items()
                          if key in NAMED_FLAGS.get(family, ()))
        if flags:
            tasks_by_flags.setdefault(flags, []).append(TASK_NAMES[task])
    notes = [detail] if detail else []
    notes += [f"{'every task' if len(tasks) == len(model_tasks) else ', '.join(tasks)}: {flags}"
              for flags, tasks in tasks_by_flags.items()]
    return f"{name} ({'; '.join(notes)})" if notes else name


MODEL_NAMES = {"bag": "bag of embeddings", "disan": "DiSAN", "psan": _named("PSAN", "psan"),
               "tree_lstm": "Tree-LSTM (spaCy dependency trees)",
               "transformer": "Transformer",
               "dt": _named("Dependency-Transformer", "dt", "spaCy trees"),
               "dt_plain": _named("Dependency-Transformer `variant=transformer`", "dt_plain",
                                  "no relations"),
               "disan_300": "DiSAN, d_h 150 (300-d sentence vectors)"}
# model key -> (name, paper, structure it reads) of the headline table (one row per encoder at
# its default size, so not disan_300); the static rows have no TREC run: their cell points to
# their results page (links relative to the repository root).
HEADLINE = {
    "bag": ("bag of embeddings", "mean of word vectors (baseline)", "none: which words occur"),
    "disan": ("DiSAN", "Shen et al. 2018", "word order, forward and backward (masks)"),
    "psan": ("PSAN", "Wu et al. 2018", "phrase divisions of a constituency tree (spaCy-derived)"),
    "tree_lstm": ("Tree-LSTM", "Tai et al. 2015 (Child-Sum)", "dependency tree (spaCy)"),
    "transformer": ("Transformer", "Vaswani et al. 2017", "word positions"),
    "dt": ("Dependency-Transformer", "Ma et al. 2022",
           "dependency relations and tree levels (spaCy)"),
    "dt_plain": ("Dependency-Transformer, no relations", "Ma et al. 2022 (`variant=transformer`)",
                 "word positions"),
}
STATIC_ROWS = {
    "phrase_transformer": ("PhraseTransformer", "ICLR 2020 submission",
                           "n-gram or dependency-arc phrases",
                           "POS tagging, Multi30k: "
                           "[results/phrase_transformer](results/phrase_transformer/README.md)"),
    "meanmax_aae": ("Mean-Max AAE", "Zhang et al. 2018", "none (unsupervised autoencoder)",
                    "frozen transfer tasks: [results/meanmax_aae](results/meanmax_aae/README.md)"),
}
MAX_SEEDS = 10  # seeds looked for per model and task
# (model, other): the differences the pairs table reports seed by seed
PAIRS = (("dt", "dt_plain"), ("dt", "tree_lstm"))


def read_run(path: Path) -> dict:
    """compare.read_run plus the results.md row's 'steps' and 'stopped by'."""
    run = compare.read_run(path)
    header, row = ([cell.strip() for cell in line.strip().strip("|").split("|")]
                   for line in (path / "results.md").read_text().splitlines()
                   if line.startswith("| "))
    values = dict(zip(header, row, strict=True))
    run["steps"], run["stopped by"] = values["steps"], values.get("stopped by", "cap")
    return run


def formatted(task: str, value: float) -> str:
    _, _, scale, form = PRIMARY[task]
    return form.format(value * scale)


def sweep_choices() -> dict[str, dict[str, str]]:
    """family -> task -> the variant with the best seed-0 dev score among the sweep's runs (of
    equal scores, the first in runs.SWEEP's order)."""
    choices: dict[str, dict[str, str]] = {}
    for family, variants in runs.SWEEP.items():
        for task in runs.SWEEP_TASKS:
            scores = {}
            for variant in variants:
                path = RUNS / f"sweep_{family}_{task}_{variant}"
                if (path / "results.md").is_file():
                    scores[variant] = read_run(path)["dev"][PRIMARY[task][0]]
            if scores:
                choices.setdefault(family, {})[task] = max(scores, key=scores.get)
    return choices


def sweep_table() -> str:
    choices = sweep_choices()
    lines = ["| family | task | recipe | dev | best step | steps | stopped by |",
             "|---|---|---|---|---|---|---|"]
    for family, variants in runs.SWEEP.items():
        for task in runs.SWEEP_TASKS:
            for variant in variants:
                path = RUNS / f"sweep_{family}_{task}_{variant}"
                if not (path / "results.md").is_file():
                    continue
                run = read_run(path)
                chosen = choices[family][task] == variant
                name = f"**{variant}**" if chosen else variant
                dev = formatted(task, run["dev"][PRIMARY[task][0]])
                lines.append(f"| {family} | {TASK_NAMES[task]} | {name} | "
                             f"{f'**{dev}**' if chosen else dev} | {run['step']} | "
                             f"{run['steps']} | {run['stopped by']} |")
    return "\n".join(lines)


def _cell(values: list[float], task: str) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return formatted(task, values[0])
    return (f"{formatted(task, statistics.mean(values))} ± "
            f"{formatted(task, statistics.stdev(values))}")


def committed_names(model: str, task: str) -> dict[int, str]:
    """seed -> the name of the committed run of `model` on `task` at its recipe (seed 0 of a
    sweep model on a sweep task is the chosen sweep run: runs.run_name)."""
    names = {seed: runs.run_name(model, task, seed) for seed in range(MAX_SEEDS)}
    return {seed: name for seed, name in names.items()
            if name is not None and (RUNS / name / "results.md").is_file()}


def seeded_runs(model: str, task: str) -> dict[int, dict]:
    """seed -> the committed run of `model` on `task` at its recipe (committed_names)."""
    return {seed: read_run(RUNS / name) for seed, name in committed_names(model, task).items()}


def seed_runs(model: str, task: str) -> list[dict]:
    """The committed runs of `model` on `task` at its recipe, one per seed."""
    return list(seeded_runs(model, task).values())


def _test_scores(model: str, task: str, split: str = "test") -> list[float]:
    """The primary `split` metric of each committed seed run of `model` on `task` (test at the
    best-dev checkpoint, or that checkpoint's dev score)."""
    return [run[split][PRIMARY[task][0]] for run in seed_runs(model, task)]


def _signed(task: str, value: float) -> str:
    """A difference of two `task` scores, signed, in the task's scale and digits."""
    _, _, scale, form = PRIMARY[task]
    return form.replace("{:", "{:+").format(value * scale)


def _headline_cell(model: str) -> str:
    """TREC test accuracy over the committed seeds of the model's recipe, else —."""
    seeded = [run["test"]["accuracy"] for run in seed_runs(model, "trec")]
    if not seeded:
        return "—"
    return f"{_cell(seeded, 'trec')} ({len(seeded)} seed{'s' if len(seeded) > 1 else ''})"


def headline_table() -> str:
    lines = ["| encoder | paper | structure it reads | TREC test accuracy (%) |",
             "|---|---|---|---|"]
    for model, (name, paper, structure) in HEADLINE.items():
        lines.append(f"| {name} | {paper} | {structure} | {_headline_cell(model)} |")
    lines += [f"| {' | '.join(row)} |" for row in STATIC_ROWS.values()]
    return "\n".join(lines)


def encoders_table(tasks: tuple[str, ...] = runs.TABLE_TASKS) -> str:
    lines = ["| model | " + " | ".join(f"{TASK_NAMES[t]} {PRIMARY[t][1]}" for t in tasks)
             + " | seeds |", "|---" * (len(tasks) + 2) + "|"]
    for model in runs.MODELS:
        found = {task: seed_runs(model, task) for task in tasks}
        if not any(found.values()):
            continue
        cells = [_cell([run["test"][PRIMARY[task][0]] for run in found[task]], task)
                 for task in tasks]
        seeds = " / ".join(str(len(found[task])) for task in tasks)
        lines.append(f"| {MODEL_NAMES[model]} | {' | '.join(cells)} | {seeds} |")
    if len(lines) == 2:
        return ("No seeded table run is committed yet (`python -m reports.encoder_runs table`, "
                "then `collect`).")
    return "\n".join(lines)


def dependency_tasks_table() -> str:
    """The Dependency-Transformer paper's SST-2 (phrase-level training) and MRPC, for the
    models that train on them (runs.DEPENDENCY_MODELS)."""
    return encoders_table(runs.DEPENDENCY_TASKS)


def progress_table() -> str:
    """Per model and task: the committed seed runs of the table's protocol (seeds
    0..runs.SEEDS[model]-1) over the protocol's count; — where the model does not train on the
    task (runs.MODEL_TASKS)."""
    tasks = tuple(runs.TASKS)
    lines = ["| model | " + " | ".join(TASK_NAMES[task] for task in tasks) + " |",
             "|---" * (len(tasks) + 1) + "|"]
    done = planned = 0
    for model in runs.MODELS:
        cells = []
        for task in tasks:
            if task not in runs.MODEL_TASKS.get(model, runs.TABLE_TASKS):
                cells.append("—")
                continue
            found = sum(seed < runs.SEEDS[model] for seed in committed_names(model, task))
            done, planned = done + found, planned + runs.SEEDS[model]
            cells.append(f"{found}/{runs.SEEDS[model]}")
        lines.append(f"| {MODEL_NAMES[model]} | {' | '.join(cells)} |")
    return "\n".join([*lines, "", f"{done} of the {planned} planned table runs are committed."])


def versus_bag_table(tasks: tuple[str, ...] = runs.TABLE_TASKS, split: str = "test") -> str:
    """Each model's mean `split` score (test, or dev at the best-dev checkpoint) minus the bag's
    over their committed seeds, per task, with the seeds behind each side."""
    lines = ["| model | " + " | ".join(f"{TASK_NAMES[t]} {PRIMARY[t][1]}" for t in tasks)
             + " |", "|---" * (len(tasks) + 1) + "|"]
    bag = {task: _test_scores("bag", task, split) for task in tasks}
    for model in runs.MODELS:
        if model == "bag":
            continue
        cells = []
        for task in tasks:
            mine = _test_scores(model, task, split)
            if not mine or not bag[task]:
                cells.append("—")
                continue
            difference = statistics.mean(mine) - statistics.mean(bag[task])
            cells.append(f"{_signed(task, difference)} ({len(mine)} vs {len(bag[task])})")
        if any(cell != "—" for cell in cells):
            lines.append(f"| {MODEL_NAMES[model]} | {' | '.join(cells)} |")
    return "\n".join(lines)


def pair_differences(model: str, other: str, task: str) -> dict[int, float]:
    """seed -> test score of `model` minus `other`'s on `task`, for the seeds both have."""
    metric = PRIMARY[task][0]
    mine, theirs = seeded_runs(model, task), seeded_runs(other, task)
    return {seed: mine[seed]["test"][metric] - theirs[seed]["test"][metric]
            for seed in sorted(set(mine) & set(theirs))}


def pairs_table() -> str:
    """The Dependency-Transformer against its no-relation ablation and the Tree-LSTM, runs
    paired by their seed, per task."""
    lines = ["| comparison | task | seeds | test difference per seed | mean ± std |",
             "|---|---|---|---|---|"]
    for model, other in PAIRS:
        for task in TASK_NAMES:
            differences = pair_differences(model, other, task)
            if not differences:
                continue
            _, name, scale, form = PRIMARY[task]
            per_seed = ", ".join(f"s{seed}: {_signed(task, value)}"
                                 for seed, value in differences.items())
            values = list(differences.values())
            spread = (f" ± {form.format(statistics.stdev(values) * scale)}"
                      if len(values) > 1 else "")
            lines.append(f"| {HEADLINE[model][0]} − {HEADLINE[other][0]} | {TASK_NAMES[task]} "
                         f"{name} | {len(values)} | {per_seed} | "
                         f"{_signed(task, statistics.mean(values))}{spread} |")
    if len(lines) == 2:
        return ("No seed pair is committed yet (`python -m reports.encoder_runs table --models "
                "dt,dt_plain,tree_lstm`, then `collect`).")
    return "\n".join(lines)


def diagnoses_table() -> str:
    """The committed runs of runs.DIAGNOSES, each a model at its recipe with the flags named,
    beside the table run of the same model, task and seed (without those flags) once
    committed."""
    lines = ["| run | model | task | seed | flags besides the recipe | dev | test | stopped by "
             "| table run: dev | test |", "|---" * 10 + "|"]
    for name, (model, task, seed, flags) in runs.DIAGNOSES.items():
        path = RUNS / name
        if not (path / "results.md").is_file():
            continue
        run, metric = read_run(path), PRIMARY[task][0]
        named = ", ".join(f"`{key}={value}`" for key, value in flags.items())
        table_path = RUNS / runs.run_name(model, task, seed)
        if (table_path / "results.md").is_file():
            table_run = read_run(table_path)
            beside = (f"{formatted(task, table_run['dev'][metric])} | "
                      f"{formatted(task, table_run['test'][metric])}")
        else:
            beside = "— | —"
        lines.append(f"| {name} | {HEADLINE[model][0]} | {TASK_NAMES[task]} | {seed} | {named} "
                     f"| {formatted(task, run['dev'][metric])} | "
                     f"{formatted(task, run['test'][metric])} | {run['stopped by']} | {beside} |")
    if len(lines) == 2:
        return "No diagnosis run is committed yet (`python -m reports.encoder_runs diagnose`)."
    return "\n".join(lines)


def dev_after_best(name: str, task: str) -> list[float]:
    """The primary dev scores (scaled as shown) of the committed run `name` at the evaluations
    after its best-dev checkpoint: the plateau patience waited through before stopping."""
    metric, _, scale, _ = PRIMARY[task]
    records = [json.loads(line) for line in (RUNS / name / "metrics.jsonl").read_text()
               .splitlines()]
    best_step = next(record["step"] for record in records if record["split"] == "test")
    return [scale * record[metric] for record in records
            if record["split"] == "dev" and record["step"] > best_step]


def dev_changes(name: str, task: str) -> list[float]:
    """The absolute changes of the primary dev score between consecutive evaluations after the
    best-dev checkpoint of the committed run `name` (scaled as shown)."""
    plateau = dev_after_best(name, task)
    return [abs(after - before) for before, after in zip(plateau[:-1], plateau[1:], strict=True)]


def dev_noise_table(task: str = "trec") -> str:
    """Per model: the seed spread of its test score beside how much its dev score moves from
    one evaluation to the next after the best checkpoint, and the level it stays at there
    (means over its seeds' runs): a noisy plateau makes the best-dev checkpoint, and so the
    test score, vary more between seeds; the plateau's level separates a lower plateau from a
    lucky or unlucky pick."""
    _, name, scale, form = PRIMARY[task]
    lines = [f"| model | seeds | {TASK_NAMES[task]} test {name}, mean ± std | dev change between "
             "evaluations after the best, mean | dev after the best, mean |",
             "|---|---|---|---|---|"]
    for model in runs.MODELS:
        found = list(committed_names(model, task).values())
        if len(found) < 2:
            continue
        changes = [change for run in found for change in dev_changes(run, task)]
        plateau = [score for run in found for score in dev_after_best(run, task)]
        lines.append(f"| {HEADLINE.get(model, (MODEL_NAMES[model],))[0]} | {len(found)} | "
                     f"{_cell(_test_scores(model, task), task)} | "
                     f"{form.format(statistics.mean(changes))} | "
                     f"{form.format(statistics.mean(plateau))} |")
    return "\n".join(lines)


def _seed_row(label: str, scores: dict[int, float], steps: dict[int, str] | None = None) -> str:
    """One row of the MRPC baselines table: test accuracy (%) per seed 0-4, mean ± std, and
    the best-dev step of each seed's run (trained rows)."""
    cells = [f"{scores[seed]:.2f}" if seed in scores else "—" for seed in range(5)]
    values = list(scores.values())
    spread = f"{statistics.mean(values):.2f}" + (
        f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else "")
    best_steps = ", ".join(steps[seed] for seed in sorted(steps)) if steps else "—"
    return f"| {label} | {' | '.join(cells)} | {spread} | {best_steps} |"


def _trained_row(label: str, by_seed: dict[int, dict]) -> str:
    """`_seed_row` of trained runs (seed -> `_run`): test accuracy and best-dev step."""
    return _seed_row(label, {seed: 100 * run["test"]["accuracy"] for seed, run in by_seed.items()},
                     {seed: str(run["step"]) for seed, run in by_seed.items()})


def mrpc_baselines_table() -> str:
    """MRPC test accuracy seed by seed: the linear classifiers of reports.mrpc_baselines (word
    overlap; the untrained bag's pair features) on the split each seed carves, the table runs of
    the models that train on MRPC, and the diagnosis runs of runs.DIAGNOSES with the word
    vectors fixed."""
    baselines = json.loads(MRPC_BASELINES.read_text())
    majority = f"{baselines['majority_test']:.2f}"
    lines = ["| MRPC test accuracy | s0 | s1 | s2 | s3 | s4 | mean ± std "
             "| best-dev step per seed |",
             "|---" * 8 + "|",
             f"| majority class (paraphrase; one test set) | {majority} | {majority} | {majority} "
             f"| {majority} | {majority} | {majority} | — |"]
    for name, label in (("overlap", "word overlap (5 numbers), logistic regression"),
                        ("untrained_bag", "bag of glove-6b-50d, untrained (pair features "
                                          "abs(u - v), u * v), logistic regression")):
        lines.append(_seed_row(label, {int(seed): row["test"]
                                       for seed, row in baselines["baselines"][name].items()}))
    for model in runs.DEPENDENCY_MODELS:
        lines.append(_trained_row(f"{HEADLINE[model][0]} (trained, word vectors fine-tuned)",
                                  seeded_runs(model, "mrpc")))
    for model in runs.DEPENDENCY_MODELS:
        frozen = {seed: read_run(RUNS / name) for name, (diag_model, task, seed, flags)
                  in runs.DIAGNOSES.items()
                  if (diag_model, task) == (model, "mrpc") and flags.get("model.freeze_embeddings")
                  and (RUNS / name / "results.md").is_file()}
        if frozen:
            lines.append(_trained_row(f"{HEADLINE[model][0]} (trained, word vectors fixed: "
                                      "`model.freeze_embeddings=True`)", frozen))
    return "\n".join(lines)


def transfer_table() -> str:
    """The results table of `eval.transfer`'s report (ours beside the papers' numbers)."""
    return render_markdown(json.loads(TRANSFER.read_text())).split("\n\n")[1]

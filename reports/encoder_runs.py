"""The runs behind every encoder table: the recipe sweep on dev, the seeded table runs, and the
files of each finished run committed under results/encoders/runs/<run>/.

Every run is `python -m train.main --config=train/configs/base.py:MODEL,DATASET` with the full
GloVe 6B 50-d vocabulary (`data.embeddings=glove-6b-50d`, fine-tuned unless a recipe fixes them),
Adam with global-norm clipping 5 and no L2, batch 64, a dev evaluation every epoch (SST-5 and the
SST-2 phrases: every 1,000 steps) and early stopping after `PATIENCE` evaluations without a dev
improvement, under a generous cap (`TASKS`); the best dev checkpoint is evaluated on test. Family
recipes differ only where the sweep chose (`SWEEP`, seed 0, dev scores only; `python -m
reports sweep`).

  python -m reports.encoder_runs sweep [--parallel 2] [--families disan,psan] [--tasks trec]
  python -m reports.encoder_runs table [--parallel 2] [--models dt,tree_lstm] [--seeds 3,4]
  python -m reports.encoder_runs diagnose     # the experiments of the diagnoses (DIAGNOSES)
  python -m reports.encoder_runs collect      # finished runs' files -> results/encoders/runs/
  python -m reports.encoder_runs list sweep   # the commands, one a line
  RUNS=DIR python -m reports.encoder_runs table --again --models dt --tasks sst5 --seeds 0

Workdirs (checkpoints included) go to $RUNS (default ../runs, beside the repository). A run
whose results.md exists there or among the committed runs is skipped, an unfinished one
resumes, and one that another queue holds (its lock file) is left to it, so queues can be
started at any time, side by side. `--again` trains committed runs too (their checkpoints are not
committed), into $RUNS.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from reports.run_files import ENCODER_RUNS, REPO

COMMITTED = ENCODER_RUNS
PATIENCE = 5

COMMON = {
    "data.embeddings": "glove-6b-50d", "model.embed_dim": 50, "data.batch_size": 64,
    "optim.name": "adam", "optim.learning_rate": 1e-3, "optim.weight_decay": 0.0,
    "optim.clip_norm": 5.0, "train.patience": PATIENCE, "train.log_every": 20,
    "train.progress_bar": False, "checkpoint.keep": 1,
}
# task key -> (dataset, overrides): the cap is far beyond where patience stops the runs.
TASKS = {
    "trec": ("trec", {"train.epochs": 60}),
    "sick_r": ("sick_r", {"train.epochs": 60}),
    "sick_e": ("sick_e", {"train.epochs": 60}),
    # SST-2 as the Dependency-Transformer paper trains it: every labelled phrase of the training
    # trees (dev and test: whole sentences), a dev evaluation every 1,000 steps
    "sst2": ("sst2_phrases", {"train.num_steps": 60_000, "train.eval_every": 1000}),
    "mrpc": ("mrpc", {"train.epochs": 60}),
    "sst5": ("sst5_phrases", {"data.phrase_repeats": 3, "task.head.activation": "relu",
                              "train.num_steps": 60_000, "train.eval_every": 1000}),
}
# model key -> (encoder, its family, overrides that make it this model)
MODELS = {
    "bag": ("bag", "bag", {}),
    "disan": ("disan", "disan", {}),
    "psan": ("psan", "psan", {"model.freeze_embeddings": False}),
    "tree_lstm": ("tree_lstm", "tree_lstm", {}),
    "transformer": ("transformer", "transformer", {}),
    "dt": ("dependency_transformer", "dependency_transformer", {}),
    "dt_plain": ("dependency_transformer", "dependency_transformer",
                 {"model.variant": "transformer"}),
    "disan_300": ("disan", "disan", {"model.hidden": 150}),
}
# tasks some models only train on: DiSAN with d_h 150 (300-d sentence vectors, PSAN's and the
# Transformer's size) is PSAN's Table 5 comparison at equal size, on TREC; SST-2 and MRPC are
# the Dependency-Transformer paper's tasks, trained by the dependency models, their ablation
# and the bag
TABLE_TASKS = ("trec", "sick_r", "sick_e", "sst5")
DEPENDENCY_TASKS = ("sst2", "mrpc")
DEPENDENCY_MODELS = ("bag", "tree_lstm", "dt", "dt_plain")
MODEL_TASKS = {"disan_300": ("trec",),
               **{model: TABLE_TASKS + DEPENDENCY_TASKS for model in DEPENDENCY_MODELS}}
# seeds of the table per model: five for the Dependency-Transformer, its ablation and the
# Tree-LSTM (the Dependency-Transformer paper's protocol, differences reported per seed pair),
# three for the others
SEEDS = {model: 5 if model in ("tree_lstm", "dt", "dt_plain") else 3 for model in MODELS}
# family -> variant name -> overrides. Each variant runs with seed 0 on the sweep tasks; the
# recipe with the best dev score of a task becomes that family's recipe for the task (RECIPES).
SWEEP = {
    "bag": {"lr1e-3": {}, "lr3e-3": {"optim.learning_rate": 3e-3}},
    "disan": {"lr1e-3": {"model.keep_prob": 1.0},
              "lr1e-3_keep0.75": {"model.keep_prob": 0.75},
              "lr3e-4": {"model.keep_prob": 1.0, "optim.learning_rate": 3e-4}},
    "psan": {"lr1e-3": {"model.keep_prob": 1.0},
             "lr1e-3_keep0.75": {"model.keep_prob": 0.75},
             "lr3e-4": {"model.keep_prob": 1.0, "optim.learning_rate": 3e-4},
             "lr1e-3_norm": {"model.keep_prob": 1.0, "model.memory_norm": "layer"},
             "lr3e-3_norm": {"model.keep_prob": 1.0, "model.memory_norm": "layer",
                             "optim.learning_rate": 3e-3},
             "lr1e-3_highway_norm": {"model.keep_prob": 1.0, "model.memory_norm": "layer",
                                     "model.memory": "highway"},
             # the paper keeps the word vectors fixed (the other recipes fine-tune them)
             "lr1e-3_frozen": {"model.keep_prob": 1.0, "model.freeze_embeddings": True},
             "lr1e-3_highway_norm_frozen": {"model.keep_prob": 1.0, "model.memory_norm": "layer",
                                            "model.memory": "highway",
                                            "model.freeze_embeddings": True}},
    "tree_lstm": {"lr1e-3": {}, "lr3e-3": {"optim.learning_rate": 3e-3}},
    "transformer": {
        "post_lr3e-4_scaled": {"optim.learning_rate": 3e-4, "model.scale_embeddings": True,
                               "model.dropout_rate": 0.0},
        "post_lr1e-3_warmup": {"optim.warmup_steps": 500, "model.scale_embeddings": True,
                               "model.dropout_rate": 0.0},
        "post_lr3e-4_scaled_drop0.1": {"optim.learning_rate": 3e-4,
                                       "model.scale_embeddings": True},
        "post_lr3e-4_unscaled": {"optim.learning_rate": 3e-4, "model.dropout_rate": 0.0},
        "pre_lr1e-3_scaled": {"model.layer_norm": "pre", "model.scale_embeddings": True,
                              "model.dropout_rate": 0.0},
        "pre_lr3e-4_scaled": {"model.layer_norm": "pre", "optim.learning_rate": 3e-4,
                              "model.scale_embeddings": True, "model.dropout_rate": 0.0},
        # capacity: one layer instead of two (the SICK-R diagnosis, results/encoders/README.md)
        "post_lr1e-3_warmup_1layer": {"optim.warmup_steps": 500, "model.scale_embeddings": True,
                                      "model.dropout_rate": 0.0, "model.num_layers": 1},
    },
}
# The Dependency-Transformer's sweep: the Transformer's recipes for the two tasks, and on SICK-R
# the mean of the word nodes instead of the [root] output as the sentence vector (the diagnosis
# of its SICK-R score, results/encoders/README.md), on both tasks
SWEEP["dependency_transformer"] = {
    "post_lr3e-4_unscaled": SWEEP["transformer"]["post_lr3e-4_unscaled"],
    "post_lr3e-4_unscaled_mean": {**SWEEP["transformer"]["post_lr3e-4_unscaled"],
                                  "model.sentence_vector": "mean"},
    "pre_lr3e-4_scaled": SWEEP["transformer"]["pre_lr3e-4_scaled"],
    "pre_lr3e-4_scaled_mean": {**SWEEP["transformer"]["pre_lr3e-4_scaled"],
                               "model.sentence_vector": "mean"},
}
SWEEP_TASKS = ("trec", "sick_r")
# (family, task) -> the candidates the sweep did not train on that task: left out of its plan,
# so that the plan is what results/encoders/runs holds (a family's recipe for the task is chosen
# among the others)
UNTRIED = {
    ("psan", "trec"): ("lr1e-3_keep0.75", "lr3e-4", "lr1e-3_norm", "lr3e-3_norm",
                       "lr1e-3_highway_norm", "lr1e-3_highway_norm_frozen"),
    ("psan", "sick_r"): ("lr1e-3_keep0.75", "lr3e-4", "lr1e-3_frozen"),
    ("disan", "sick_r"): ("lr3e-4",),
    ("transformer", "sick_r"): ("post_lr3e-4_scaled", "pre_lr1e-3_scaled"),
    ("dependency_transformer", "trec"): ("pre_lr3e-4_scaled", "pre_lr3e-4_scaled_mean"),
    ("dependency_transformer", "sick_r"): ("post_lr3e-4_unscaled", "post_lr3e-4_unscaled_mean"),
}


def candidates(family: str, task: str) -> list[str]:
    """The sweep variants of `family` trained on `task` (SWEEP's, less UNTRIED's)."""
    return [variant for variant in SWEEP[family]
            if variant not in UNTRIED.get((family, task), ())]


# the model each family's sweep trains
SWEEP_MODEL = {"bag": "bag", "disan": "disan", "psan": "psan", "tree_lstm": "tree_lstm",
               "transformer": "transformer", "dependency_transformer": "dt"}
# family -> task -> the sweep variant with the best dev score (tests/reports/test_encoder_tables.py
# checks these against the committed sweep runs)
RECIPES: dict[str, dict[str, str]] = {
    "bag": {"trec": "lr3e-3", "sick_r": "lr3e-3"},
    "disan": {"trec": "lr1e-3_keep0.75", "sick_r": "lr1e-3"},
    "tree_lstm": {"trec": "lr3e-3", "sick_r": "lr3e-3"},
    "transformer": {"trec": "post_lr3e-4_unscaled", "sick_r": "pre_lr3e-4_scaled"},
    "psan": {"trec": "lr1e-3", "sick_r": "lr1e-3_highway_norm_frozen"},
    "dependency_transformer": {"trec": "post_lr3e-4_unscaled_mean",
                               "sick_r": "pre_lr3e-4_scaled_mean"},
}


# Tasks outside the sweep take the recipe of the sweep task they resemble: the pair tasks
# SICK-R's, the single-sentence classifications TREC's.
RECIPE_TASK = {"trec": "trec", "sick_r": "sick_r", "sick_e": "sick_r", "mrpc": "sick_r",
               "sst2": "trec", "sst5": "trec"}

# Experiments behind the diagnoses of results/encoders/README.md: run name -> (model, task, seed,
# overrides on top of the model's recipe for the task). The TREC seeds of the Transformer swapped
# between the carved dev split and the rest of the seed (initialisation, batch order): seed s with
# split_seed 1-s, beside the table's seeds 0 and 1 (split_seed = seed). The Dependency-Transformer
# and its ablation with the paper's [root] sentence vector, beside their table runs at the chosen
# mean of the word nodes (on SST-5, where the Child-Sum Tree-LSTM's root state is ahead of it at
# every seed, the paper's [root] node is the like-for-like vector; on SST-2, where it trails the
# Tree-LSTM on long sentences and negations, sst_breakdown.py). The Dependency-Transformer on
# SST-5 with dropout 0.1, beside its table runs at TREC's recipe (no dropout), whose dev accuracy
# peaks early and then falls, and with Adam 1e-3 after 500 warm-up steps instead of 3e-4: its dev
# accuracy starts lower than the bag's and the Tree-LSTM's and climbs more slowly. PSAN on the pair
# tasks with its word vectors fine-tuned (as every other model's), beside its table runs with them
# fixed (the paper's protocol, which the SICK-R sweep chose). The bag, the Tree-LSTM and the
# Dependency-Transformer on MRPC with their word vectors fixed, beside their table runs that
# fine-tune them: on MRPC's 3,668 training pairs every fine-tuned model is below a linear classifier
# on fixed bag vectors (mrpc_baselines.py). The Transformer on SST-5 with its SICK-R recipe's
# pre-LayerNorm and scaled embeddings, beside its table runs at TREC's post-LayerNorm recipe. DiSAN
# on SST-5 at seed 2 with a patience of 10 evaluations, beside its table run, which stopped 5
# evaluations after a dev peak at step 2,000 (its other seeds peak at 10,000-14,000). PSAN on SST-5
# at seed 1 with a patience of 10, beside its table run, which stopped 5 evaluations after a dev
# peak at step 4,000 (seed 0 peaks at 11,000).
DIAGNOSES = {
    **{f"diag_{model}_{task}_s{seed}_root": (model, task, seed, {"model.sentence_vector": "root"})
       for model, task, seed in (("dt", "trec", 1), ("dt", "trec", 2), ("dt_plain", "trec", 0),
                                 ("dt_plain", "trec", 1), ("dt_plain", "trec", 2),
                                 ("dt_plain", "sick_r", 0), ("dt", "sick_e", 0),
                                 ("dt_plain", "sick_e", 0), ("dt", "sst5", 0),
                                 ("dt", "sst5", 1), ("dt", "sst2", 0),
                                 ("dt", "sst2", 1))},
    **{f"diag_psan_{task}_s{seed}_finetuned": ("psan", task, seed,
                                                {"model.freeze_embeddings": False})
       for task, seed in (("sick_r", 1), ("sick_r", 2), ("sick_e", 0), ("sick_e", 1),
                          ("sick_e", 2))},
    "diag_transformer_trec_s0_split1": ("transformer", "trec", 0, {"task.split_seed": 1}),
    "diag_transformer_trec_s1_split0": ("transformer", "trec", 1, {"task.split_seed": 0}),
    "diag_transformer_sst5_s0_pre": ("transformer", "sst5", 0,
                                     {"model.layer_norm": "pre", "model.scale_embeddings": True}),
    "diag_dt_sst5_s0_dropout": ("dt", "sst5", 0, {"model.dropout_rate": 0.1}),
    "diag_dt_sst5_s0_lr1e-3_warmup": ("dt", "sst5", 0, {"optim.learning_rate": 1e-3,
                                                        "optim.warmup_steps": 500}),
    "diag_disan_sst5_s2_patience10": ("disan", "sst5", 2, {"train.patience": 10}),
    "diag_psan_sst5_s1_patience10": ("psan", "sst5", 1, {"train.patience": 10}),
    **{f"diag_{model}_mrpc_s{seed}_frozen": (model, "mrpc", seed, {"model.freeze_embeddings": True})
       for seed in (0, 1, 2) for model in ("bag", "tree_lstm", "dt")},
    "diag_dt_sst2_s0_distance6": ("dt", "sst2", 0, {"model.max_distance": 6}),
    "diag_dt_sst2_s0_layers6": ("dt", "sst2", 0, {"model.num_layers": 6}),
}


def runs_root() -> Path:
    return Path(os.environ.get("RUNS", REPO.parent / "runs"))


def command(model: str, task: str, seed: int, overrides: dict) -> list[str]:
    """The train.main command of one run (its --workdir appended by the caller)."""
    encoder, _, model_overrides = MODELS[model]
    dataset, task_overrides = TASKS[task]
    flags = {**COMMON, **task_overrides, **model_overrides, **overrides, "train.seed": seed}
    return [sys.executable, "-m", "train.main",
            f"--config=train/configs/base.py:{encoder},{dataset}",
            *(f"--config.{key}={value}" for key, value in flags.items())]


def sweep_plan(families: list[str], tasks: list[str],
               variants: list[str] | None = None) -> dict[str, list[str]]:
    """The sweep's runs of `families` on `tasks` (only the named `variants`, when given)."""
    return {f"sweep_{family}_{task}_{variant}":
            command(SWEEP_MODEL[family], task, 0, SWEEP[family][variant])
            for task in tasks for family in families for variant in candidates(family, task)
            if not variants or variant in variants}


def run_name(model: str, task: str, seed: int) -> str | None:
    """The run of `model` on `task` with `seed` at its family's recipe: seed 0 of the model a
    family's sweep trains, on a sweep task, is that sweep's chosen run (the same command); None
    while the task's recipe is not chosen."""
    family = MODELS[model][1]
    variant = RECIPES.get(family, {}).get(RECIPE_TASK[task])
    if variant is None:
        return None
    if seed == 0 and task in SWEEP_TASKS and SWEEP_MODEL.get(family) == model:
        return f"sweep_{family}_{task}_{variant}"
    return f"{model}_{task}_s{seed}"


def table_plan(models: list[str], tasks: list[str],
               seeds: list[int] | None = None) -> dict[str, list[str]]:
    """The table's runs of `models` on `tasks` (those each model trains, MODEL_TASKS) with
    `seeds`, by default each model's protocol (SEEDS), lower seeds first."""
    plan = {}
    for seed in seeds if seeds is not None else range(max(SEEDS.values())):
        for task in tasks:
            for model in models:
                if (task not in MODEL_TASKS.get(model, TABLE_TASKS)
                        or (seeds is None and seed >= SEEDS[model])):
                    continue
                name = run_name(model, task, seed)
                if name is None:
                    print(f"{model} on {task}: no {RECIPE_TASK[task]} recipe chosen yet (run "
                          "the sweep)", file=sys.stderr)
                    continue
                family = MODELS[model][1]
                variant = RECIPES[family][RECIPE_TASK[task]]
                plan[name] = command(model, task, seed, SWEEP[family][variant])
    return plan


def diagnosis_plan() -> dict[str, list[str]]:
    plan = {}
    for name, (model, task, seed, extra) in DIAGNOSES.items():
        family = MODELS[model][1]
        recipe = SWEEP[family][RECIPES[family][RECIPE_TASK[task]]]
        plan[name] = command(model, task, seed, {**recipe, **extra})
    return plan


def run_one(name: str, argv: list[str], again: bool = False) -> str:
    """Runs `argv` into $RUNS/<name> unless it is finished there, or (without `again`) among the
    committed runs; returns one line saying what happened."""
    workdir = runs_root() / name
    if (workdir / "results.md").is_file() or (
            not again and (COMMITTED / name / "results.md").is_file()):
        return f"done already: {name}"
    with open(runs_root() / f"{name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"held by another queue: {name}"
        with open(runs_root() / f"{name}.log", "a") as log:
            status = subprocess.run([*argv, f"--workdir={workdir}"], cwd=REPO, stdout=log,
                                    stderr=subprocess.STDOUT, check=False).returncode
    return f"{'finished' if status == 0 else f'FAILED ({status})'}: {name}"


def queue(plan: dict[str, list[str]], parallel: int, again: bool = False) -> None:
    runs_root().mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(parallel) as pool:
        for line in pool.map(lambda item: run_one(*item, again=again), plan.items()):
            print(line, flush=True)


def planned_names() -> set[str]:
    """The name of every run this script plans: the sweep's, the table's and the diagnoses'."""
    return {*sweep_plan(list(SWEEP), list(SWEEP_TASKS)),
            *table_plan(list(MODELS), [*TABLE_TASKS, *DEPENDENCY_TASKS]), *diagnosis_plan()}


def collect() -> None:
    """Each finished run's results.md, config.json and dev / test metric records (no train
    records, no checkpoints) into results/encoders/runs/<run>/; a folder of $RUNS that is no
    planned run (another script's output) is named and left."""
    planned = planned_names()
    for results in sorted(runs_root().glob("*/results.md")):
        source, target = results.parent, COMMITTED / results.parent.name
        if source.name not in planned:
            print(f"skipped {source}: not a run of encoder_runs' plans")
            continue
        copy_run_files(source, target)
        print(f"collected {target.relative_to(REPO)}")


def copy_run_files(source: Path, target: Path) -> None:
    """A finished run's results.md, config.json and dev / test metric records (no train
    records, no checkpoints) from its workdir `source` into the folder `target`."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "results.md", target / "results.md")
    shutil.copyfile(source / "config.json", target / "config.json")
    records = [line for line in (source / "metrics.jsonl").read_text().splitlines()
               if json.loads(line)["split"] in ("dev", "test")]
    (target / "metrics.jsonl").write_text("".join(f"{line}\n" for line in records))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=("sweep", "table", "diagnose", "collect", "list"))
    parser.add_argument("what", nargs="?", default="sweep",
                        help="list: sweep, table or diagnose")
    parser.add_argument("--families", default=",".join(SWEEP), help="sweep: families")
    parser.add_argument("--variants", default="", help="sweep: only these variants")
    parser.add_argument("--models", default=",".join(MODELS), help="table: model keys")
    parser.add_argument("--tasks", default="", help="default: the sweep's or the table's")
    parser.add_argument("--seeds", default="",
                        help="table: seeds (default: each model's, SEEDS: 5 for dt, dt_plain "
                             "and tree_lstm, 3 for the others)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time")
    parser.add_argument("--again", action="store_true",
                        help="train runs whose files are committed too (into $RUNS: a run "
                             "trained again for the checkpoint its committed files lack)")
    args = parser.parse_args()
    if args.stage == "collect":
        collect()
        return
    stage = args.what if args.stage == "list" else args.stage
    if stage == "diagnose":
        plan = diagnosis_plan()
    elif stage == "sweep":
        plan = sweep_plan(args.families.split(","),
                          args.tasks.split(",") if args.tasks else list(SWEEP_TASKS),
                          args.variants.split(",") if args.variants else None)
    else:
        plan = table_plan(args.models.split(","),
                          args.tasks.split(",") if args.tasks
                          else [*TABLE_TASKS, *DEPENDENCY_TASKS],
                          [int(seed) for seed in args.seeds.split(",")] if args.seeds
                          else None)
    if args.stage == "list":
        print("\n".join(f"{name}: {' '.join(argv[1:])}" for name, argv in plan.items()))
    else:
        queue(plan, args.parallel, args.again)


if __name__ == "__main__":
    main()

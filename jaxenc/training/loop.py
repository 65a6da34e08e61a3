"""The training job: one training run, data -> vocabulary -> features -> batches
(`preparation.prepare`) -> jitted steps over a mesh. `train_and_evaluate(config, workdir)`:

- refuses to resume on other data than it was trained on (each split's example count and content
  hash, `run_files.data_identity`; the same data at another data.data_dir resumes; a run
  that predates the record resumes uncompared and records it);
- evaluates on dev every `train.eval_every` steps (0: once per epoch) and at the end, keeps the
  `checkpoint.best_k` best parameter sets by the task's primary metric, stops after
  `train.patience` evaluations without improvement (0: never) once `train.patience_min_epochs`
  passes have also gone by since the best one, then evaluates the best parameters on dev and test;
- saves the full state (params, optimiser state, step, RNG key, data position) every
  `checkpoint.every` steps (0: at every evaluation) and resumes from the latest checkpoint
  exactly like an uninterrupted run, "train" records included;
- appends metrics to metrics.jsonl, with a progress bar of loss and throughput;
- on SIGTERM or SIGINT ends the step in progress, saves a checkpoint at it and raises
  `Preempted` (`jaxenc.training.preemption`: every process saves the same step); holds
  `workdir/.lock` while it trains (a second run fails naming the first one's PID);
- stops with one line (`train.nonfinite="stop"`) or skips the update (`"skip"`) of a step whose
  loss or gradient norm is nan or inf or whose loss is above `train.divergence_bound`; a dev
  evaluation that is not finite never becomes a best checkpoint; a write the system refuses is
  one line naming the path (`jaxenc.errors.WriteError`), earlier checkpoints intact.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import math
import time
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np
import tqdm
from jax.sharding import Mesh

from jaxenc.data.batching import Batcher
from jaxenc.errors import DivergedError, NonFiniteError
from jaxenc.records import Example
from jaxenc.tasks.base import Task
from jaxenc.training import (
    checkpointing,
    compilation,
    locking,
    measure,
    preparation,
    run_files,
    run_report,
)
from jaxenc.training.input_pipeline import DECODE, EVAL_SPLITS, load_splits
from jaxenc.training.preemption import PreemptionWatch
from jaxenc.training.sharding import make_mesh, replicated, shard_batch
from jaxenc.training.state import TrainState
from jaxenc.training.steps import (
    CompiledPerShape,
    EvalStep,
    make_test_step,
    make_train_step,
    to_host,
)

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- evaluation


def collect(step: EvalStep, params: dict, batcher: Batcher, mesh: Mesh) -> dict[str, np.ndarray]:
    """`step`'s per-example outputs over every real example of `batcher` (filler rows left out),
    concatenated in batch order."""
    collected = collections.defaultdict(list)
    for batch in batcher.epoch(0):
        outputs = to_host(step(params, shard_batch(batch, mesh)))
        real = batch["weight"] > 0
        for key, value in outputs.items():
            collected[key].append(value[real])
    return {key: np.concatenate(parts) for key, parts in collected.items()}


def evaluate(eval_step: EvalStep, params: dict, batcher: Batcher, task: Task,
             mesh: Mesh) -> dict[str, float]:
    """The task's metrics over every real example of `batcher` (filler rows left out)."""
    return task.summarize(collect(eval_step, params, batcher, mesh))


# ----------------------------------------------------------------------------- training


def metrics_file(workdir: Path) -> run_report.MetricsLog:
    """The run's metrics.jsonl, written by process 0 only (every process computes the same)."""
    return run_report.MetricsLog(workdir / run_report.METRICS_FILE,
                                 enabled=jax.process_index() == 0)


@dataclasses.dataclass
class Position:
    """The loop's own resumable state, saved beside each checkpoint as JSON.

    epoch, batch: where the next training batch comes from; top_scores: the best dev scores so far
    (descending, at most checkpoint.best_k); best_step: the step of the best one;
    evals_since_best: evaluations without improvement; stopped: early stopping fired;
    train_seconds: training time so far, over all (resumed) runs; window: what the next "train"
    record averages so far (`_TrainLog.snapshot`), so that a run resumed between two records
    writes the record an uninterrupted run writes; compiled: {batch shape: the train step's
    compiled footprint in MiB} over all (resumed) runs, for the results row
    (`measure.footprints_mib`); config: the plain config of the run that saved the checkpoint
    (a resumed run is checked against it, not against config.json alone; {} in checkpoints
    saved without it).
    """

    epoch: int = 0
    batch: int = 0
    top_scores: list[float] = dataclasses.field(default_factory=list)
    best_step: int = -1
    evals_since_best: int = 0
    stopped: bool = False
    train_seconds: float = 0.0
    window: dict[str, Any] = dataclasses.field(default_factory=dict)
    compiled: dict[str, float | None] = dataclasses.field(default_factory=dict)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)

    def record_evaluation(self, step: int, score: float, patience: int, best_k: int,
                          min_steps: int = 0) -> bool:
        """Updates the best scores and the early-stopping counter: stopped once `patience`
        evaluations (0: never stops) and at least `min_steps` steps have gone by since the best
        one. True when `score` is among the `best_k` best so far (its parameters are worth
        keeping). A score that is nan or inf counts as no improvement and is never kept."""
        finite = math.isfinite(score)
        if finite and (not self.top_scores or score > self.top_scores[0]):
            self.best_step, self.evals_since_best = step, 0
        else:
            self.evals_since_best += 1
        self.stopped = (0 < patience <= self.evals_since_best
                        and step - max(self.best_step, 0) >= min_steps)
        if not finite or (len(self.top_scores) == best_k and score <= self.top_scores[-1]):
            return False
        self.top_scores = sorted([*self.top_scores, score], reverse=True)[:best_k]
        return True


class _TrainLog:
    """Averages the step statistics between log points, measures training throughput
    (evaluation time excluded) and finds the bad steps (statistics not finite, or a loss above
    `bound`, the train.divergence_bound; 0: no bound); writes
    "train" records (over the steps not skipped) and updates the progress bar.

    The statistics are fetched from the devices only at the loop's sync points (`bad_steps`) and
    kept as Python floats, so the window since the last record can be saved with a checkpoint
    (`snapshot`, into the position) and a resumed run, which starts from the position's window,
    averages exactly the numbers an uninterrupted run averages."""

    def __init__(self, metrics_log: run_report.MetricsLog, bar: tqdm.tqdm, position: Position,
                 bound: float = 0.0):
        self.metrics_log, self.bar, self.position, self.bound = metrics_log, bar, position, bound
        self.pending: list[tuple[int, dict[str, jax.Array]]] = []  # (step, its statistics)
        window = position.window
        self.stats: list[dict[str, float]] = list(window.get("stats", []))  # of finite steps
        self.skipped: int = window.get("skipped", 0)
        self.examples: float = window.get("examples", 0.0)
        self.seconds: float = window.get("seconds", 0.0)
        self.restart_clock()

    def restart_clock(self) -> None:
        """Leaves the time since the clock last started out of the training time."""
        self.start = time.perf_counter()

    def _tick(self) -> None:
        """Counts the time since the clock last started as training time, and restarts it."""
        now = time.perf_counter()
        self.seconds += now - self.start
        self.position.train_seconds += now - self.start
        self.start = now

    def add(self, step: int, stats: dict[str, jax.Array], examples: float) -> None:
        self.pending.append((step, stats))
        self.examples += examples
        self.bar.update(1)

    def bad_steps(self) -> list[tuple[int, dict[str, float]]]:
        """(step, statistics) of the steps added since the last call whose loss or gradient
        norm is nan or inf or whose loss is above the bound; they are left out of the next
        record. Waits for those steps."""
        fetched, self.pending = jax.device_get(self.pending), []
        bad = []
        for step, stats in fetched:
            stats = {key: float(value) for key, value in stats.items()}
            if all(math.isfinite(value) for value in stats.values()) and not diverged(
                    stats["loss"], self.bound):
                self.stats.append(stats)
            else:
                bad.append((step, stats))
        self.skipped += len(bad)
        return bad

    def snapshot(self) -> None:
        """Stores the window since the last record in the position (before a checkpoint is
        saved; `bad_steps` has fetched every step added)."""
        self._tick()
        self.position.window = {"stats": list(self.stats), "skipped": self.skipped,
                                "examples": self.examples, "seconds": self.seconds}

    def flush(self, step: int) -> None:
        """Writes the "train" record of `step` over the window (`bad_steps` has fetched every
        step added) and starts the next window."""
        self._tick()
        record = {"epoch": self.position.epoch}
        if self.skipped:
            record["skipped_steps"] = self.skipped
        if self.stats:  # else the record holds the count of skipped steps only
            record.update({key: float(np.mean([s[key] for s in self.stats]))
                           for key in self.stats[0]})
            record["examples_per_second"] = self.examples / max(self.seconds, 1e-9)
            self.bar.set_postfix(loss=f"{record['loss']:.4f}",
                                 ex_per_s=f"{record['examples_per_second']:.0f}")
        self.metrics_log.write(step, "train", record)
        self.stats, self.skipped, self.examples, self.seconds = [], 0, 0.0, 0.0


def diverged(loss: float, bound: float) -> bool:
    """Whether a finite training `loss` is above train.divergence_bound `bound` (0: no bound)."""
    return 0 < bound < loss


def _handle_bad_steps(bad: list[tuple[int, dict[str, float]]], policy: str, bound: float,
                      checkpoints: checkpointing.Checkpoints) -> None:
    """Steps whose loss or gradient norm is not finite, or whose loss is above `bound`: logged
    when `policy` is "skip" (the train step kept the state), else NonFiniteError (DivergedError
    for a finite loss above the bound) naming the first, once the checkpoints written before it
    are on disk (none is written after it)."""
    if not bad:
        return
    if policy == "skip":
        steps = [step for step, _ in bad]
        log.warning("skipped the updates of %d step(s) whose loss or gradient norm is not finite "
                    "or whose loss is above train.divergence_bound=%g (train.nonfinite=skip): %s",
                    len(steps), bound, ", ".join(map(str, steps)))
        return
    step, stats = bad[0]
    checkpoints.wait()
    latest = checkpoints.latest_step()
    kept = (f"the latest checkpoint (step {latest}) is the last good one" if latest is not None
            else "no checkpoint was saved before it")
    values = f"step {step}: training loss {stats['loss']}, gradient norm {stats['grad_norm']}"
    fix = ("lower --config.optim.learning_rate or set --config.optim.clip_norm, check the data "
           "and word vectors for nan/inf, or rerun with --config.train.nonfinite=skip to skip "
           "such steps")
    if all(math.isfinite(value) for value in stats.values()):
        raise DivergedError(
            f"{values}: the loss is above --config.train.divergence_bound={bound:g}, the run "
            f"diverged; stopped, {kept} (fix: {fix}; a larger bound, or 0 for none, if such "
            "a loss is expected)")
    raise NonFiniteError(f"{values}; stopped, {kept} (fix: {fix})")


def fit(setup: preparation.Setup, state: TrainState, position: Position,
        checkpoints: checkpointing.Checkpoints) -> tuple[TrainState, Position]:
    """Trains from `state` / `position` to the end (or early stop); returns the final state and
    position. On SIGTERM / SIGINT saves a checkpoint after the step in progress and raises
    `Preempted` (`PreemptionWatch`)."""
    mesh, task = setup.mesh, setup.task
    train_cfg, batcher = setup.sections.train, setup.batchers["train"]
    total_steps = train_cfg.num_steps or train_cfg.epochs * batcher.num_batches
    eval_every = train_cfg.eval_every or batcher.num_batches
    checkpoint_every = setup.sections.checkpoint.every or eval_every
    bound = train_cfg.divergence_bound
    train_step = make_train_step(setup.model, task, setup.tx, mesh,
                                 skip_nonfinite=train_cfg.nonfinite == "skip", loss_bound=bound)
    metrics_log = metrics_file(setup.workdir)
    step = int(state.step)
    bar = tqdm.tqdm(total=total_steps, initial=step, unit="step", mininterval=1.0,
                    desc=f"{setup.config.model.name}/{setup.info.name}",
                    # None: shown on a terminal only, so logs (CI, nohup) stay readable
                    disable=None if train_cfg.progress_bar and jax.process_index() == 0 else True)
    train_log = _TrainLog(metrics_log, bar, position, bound)
    with PreemptionWatch() as watch, contextlib.closing(bar):
        while step < total_steps and not position.stopped:
            for batch in batcher.epoch(position.epoch, position.batch):
                state, stats = train_step(state, shard_batch(batch, mesh))
                step, position.batch = step + 1, position.batch + 1
                train_log.add(step, stats, float(batch["weight"].sum()))
                last = step == total_steps
                record = step % train_cfg.log_every == 0 or last
                evaluation = step % eval_every == 0 or last
                save = step % checkpoint_every == 0 or last
                if record or evaluation or save:  # nothing non-finite or diverged may reach them
                    _handle_bad_steps(train_log.bad_steps(), train_cfg.nonfinite, bound,
                                      checkpoints)
                if record:
                    train_log.flush(step)
                if evaluation:
                    _evaluate_dev(setup, state, step, checkpoints, train_log)
                saved = save or position.stopped
                if saved:
                    _save(checkpoints, state, position, train_log, train_step)
                if watch.reached(step):  # after the step's evaluation and save
                    if not saved:
                        _handle_bad_steps(train_log.bad_steps(), train_cfg.nonfinite, bound,
                                          checkpoints)
                        _save(checkpoints, state, position, train_log, train_step)
                    _stop(checkpoints, watch, step, setup.workdir)
                if step >= total_steps or position.stopped:
                    break
            else:
                position.epoch, position.batch = position.epoch + 1, 0
        checkpoints.wait()  # the last checkpoint is complete before the handlers go
        if watch.reached(step):  # a signal during that wait or the last step's evaluation
            _stop(checkpoints, watch, step, setup.workdir)
    if position.stopped:
        log.info("early stopping at step %d: no dev improvement in %d evaluations since the "
                 "best, at step %d", step, position.evals_since_best, position.best_step)
    return state, position


def _save(checkpoints: checkpointing.Checkpoints, state: TrainState, position: Position,
          train_log: _TrainLog, train_step: CompiledPerShape) -> None:
    """Saves a periodic checkpoint: the state, and the position with the window of the next
    "train" record and the footprints of the shapes compiled so far."""
    train_log.snapshot()
    position.compiled.update(measure.footprints_mib(train_step, position.compiled))
    checkpoints.save(state, dataclasses.asdict(position))


def _stop(checkpoints: checkpointing.Checkpoints, watch: PreemptionWatch, step: int,
          workdir: Path) -> None:
    """Raises `Preempted` once the checkpoint of `step` is on disk."""
    checkpoints.wait()
    raise watch.preempted(step, str(workdir / run_files.LATEST_DIR / str(step)))


def _evaluate_dev(setup: preparation.Setup, state: TrainState, step: int,
                  checkpoints: checkpointing.Checkpoints, train_log: _TrainLog) -> None:
    """Evaluates on dev (not timed as training), records it, and keeps the params when they
    are among the best."""
    name, task, position = setup.config.model.name, setup.task, train_log.position
    train_cfg = setup.sections.train
    dev = evaluate(setup.eval_step, state.params, setup.batchers["dev"], task, setup.mesh)
    train_log.metrics_log.write(step, "dev", dev)
    train_log.bar.write(f"{name} step {step}: dev "
                        + ", ".join(f"{k} {v:.4f}" for k, v in dev.items()))
    if setup.samples is not None:
        train_log.bar.write("\n".join(setup.samples(state.params)))
    score = dev[task.primary_metric]
    if not math.isfinite(score):
        log.warning("%s step %d: dev %s is %s, never a best checkpoint", name, step,
                    task.primary_metric, score)
    if position.record_evaluation(step, score, train_cfg.patience,
                                  setup.sections.checkpoint.best_k,
                                  min_steps=math.ceil(train_cfg.patience_min_epochs
                                                      * setup.batchers["train"].num_batches)):
        checkpoints.save_best(state, score, {"step": step, **dev})
    train_log.restart_clock()


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str | Path,
                       mesh: Mesh | None = None,
                       splits: dict[str, list[Example]] | None = None) -> dict[str, Any]:
    """Trains one model on one task in `workdir` (module docstring) and returns its results row:
    model, dataset, parameter counts, steps, what stopped the run ("patience": train.patience
    evaluations without a dev improvement; "cap": the step budget), best step, dev primary
    metric, test metrics (with a generating task's, e.g. BLEU), training seconds, the number of
    batch shapes the train step compiled and the largest one's compiled footprint (over all
    resumed runs: a run resumed at its last step reports what the uninterrupted run did), the
    XLA compilations of this process that the persistent compilation cache
    (train.compilation_cache) did not serve ("compiles") and those it did ("cache hits"), and
    "notes" (lines for results.md, e.g. sacrebleu's score). `splits` are the examples when
    already loaded (`experiment.run` shares them with the baselines). Holds `workdir`'s lock
    (`locking.hold`) while it trains."""
    workdir = Path(workdir)
    preparation.validate(config)
    changes = run_files.check_compatible(workdir, config)
    with (locking.hold(workdir),
          compilation.persistent_cache(config.train.compilation_cache),
          compilation.CompileRecorder() as recorder):
        row = _train_and_evaluate(config, workdir, changes, mesh, splits)
    stats = recorder.stats
    log.info("%s: %d XLA compilation(s), %d of them from the persistent cache; %.1f s tracing, "
             "lowering and compiling", config.model.name, stats.compilations, stats.cache_hits,
             stats.trace_s + stats.lower_s + stats.compile_s)
    row.update({"compiles": stats.compiled, "cache hits": stats.cache_hits})
    return row


def _train_and_evaluate(config: ml_collections.ConfigDict, workdir: Path,
                        changes: dict[str, tuple[Any, Any]], mesh: Mesh | None,
                        splits: dict[str, list[Example]] | None) -> dict[str, Any]:
    """`train_and_evaluate` inside its lock and compilation cache; `changes`: the config's
    changes to record (`run_files.check_compatible`)."""
    splits = load_splits(config) if splits is None else splits
    identity = run_files.data_identity(splits)
    data_recorded = run_files.check_data(workdir, identity)
    setup = preparation.prepare(config, workdir, make_mesh() if mesh is None else mesh, splits,
                                identity)
    checkpoints = checkpointing.Checkpoints(workdir, setup.sections.checkpoint.keep,
                                            setup.sections.checkpoint.best_k)
    state, position = setup.state, Position()
    restored = checkpoints.restore_latest(state)
    if restored is not None:
        state, position = restored[0], Position(**restored[1])
        run_files.check_checkpoint_config(
            position.config, config,
            workdir / run_files.LATEST_DIR / str(int(state.step)))
        log.info("resuming from step %d (epoch %d, batch %d)", int(state.step), position.epoch,
                 position.batch)
    position.config = run_files.config_to_dict(config)
    metrics_file(workdir).drop_after(int(state.step))
    if jax.process_index() == 0:
        if not data_recorded:
            run_files.record_data(workdir, identity)
        if changes:
            run_files.record_changes(workdir, config, changes)
            log.info("config changes recorded in %s: %s", run_files.CONFIG_FILE, ", ".join(
                f"{key} {old!r} -> {new!r}" for key, (old, new) in changes.items()))
    log.info("%s -> %s", setup.summary, workdir)
    state, position = fit(setup, state, position, checkpoints)

    checkpoints.wait()
    tested = position.best_step if position.best_step >= 0 else None  # the step results name
    best = jax.device_put(checkpoints.restore_best_params(state.params, tested),
                          replicated(setup.mesh))
    checkpoints.close()
    final = {split: evaluate(setup.eval_step, best, setup.batchers[split], setup.task, setup.mesh)
             for split in EVAL_SPLITS}
    notes = []
    if setup.task.generates:  # e.g. BLEU of decoded translations
        outputs = collect(make_test_step(setup.model, setup.task, setup.mesh), best,
                          setup.batchers[DECODE], setup.mesh)
        generated, notes = setup.task.test_metrics(outputs, splits["test"])
        final["test"].update(generated)
    metrics_file(workdir).write(position.best_step, "test", final["test"])
    metrics_file(workdir).write(position.best_step, run_report.COST, {
        run_report.TRAIN_SECONDS: round(position.train_seconds, 1)})
    total, outside = preparation.count_params(state.params)
    metric = setup.task.primary_metric
    return {
        "model": config.model.name, "dataset": setup.info.name,
        "seed": setup.sections.train.seed,
        "params": total, "params w/o embeddings": outside,
        "steps": int(state.step), "stopped by": "patience" if position.stopped else "cap",
        "best step": position.best_step,
        f"dev {metric}": final["dev"][metric],
        **{f"test {name}": value for name, value in final["test"].items() if name != "loss"},
        "train s": round(position.train_seconds),
        "train peak MiB": round(measure.peak_mib(position.compiled), 1),
        "compiled shapes": len(position.compiled),
        "workdir": str(workdir), "notes": notes,
    }

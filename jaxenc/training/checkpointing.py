"""Checkpoints of a run directory, and loading a trained encoder back from one.

Layout of a workdir:
  config.json           the run's config (a later run with other model/task sections is refused)
  vocab.txt             the input vocabulary (+ target_vocab.txt / tags.txt when the task has them)
  checkpoints/<step>/   periodic: the full TrainState + the loop position (keep the last `keep`)
  best/<step>/          the parameters of the `best_k` best dev evaluations
  metrics.jsonl, results.md, curves.png   (jaxenc.training.report)

orbax writes every checkpoint to a temporary folder and renames it when complete, so a run killed
at any moment leaves only whole checkpoints; the next run resumes from the latest one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import ml_collections
import orbax.checkpoint as ocp

from jaxenc.data.vocab import Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.models.registry import build_encoder
from jaxenc.training.state import TrainState

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
COMPARED_SECTIONS = ("model", "task")  # a checkpoint belongs to one model on one task


def _section(config: Mapping, name: str) -> dict:
    """A config section as plain JSON values (tuples become lists), for comparison."""
    return json.loads(json.dumps(config.get(name, {}), default=list))


def config_to_dict(config: ml_collections.ConfigDict) -> dict:
    """The config as plain JSON values."""
    return json.loads(config.to_json_best_effort())


def check_compatible(workdir: str | os.PathLike, config: ml_collections.ConfigDict) -> None:
    """ConfigError when `workdir` already holds a run whose model or task section differs."""
    path = Path(workdir) / CONFIG_FILE
    if not path.is_file():
        return
    saved, current = json.loads(path.read_text()), config_to_dict(config)
    for name in COMPARED_SECTIONS:
        old, new = _section(saved, name), _section(current, name)
        changed = sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
        if changed:
            key = changed[0]
            raise ConfigError(
                f"{workdir} holds a checkpoint trained with {name}.{key}={old.get(key)!r}, the "
                f"config says {new.get(key)!r} (fix: use a new --workdir, or the same config)")


def save_run_files(workdir: str | os.PathLike, config: ml_collections.ConfigDict,
                   vocabularies: Mapping[str, Vocabulary]) -> None:
    """Writes config.json and one `<name>.txt` per vocabulary ("vocab", "target_vocab", ...)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / CONFIG_FILE).write_text(json.dumps(config_to_dict(config), indent=2) + "\n")
    for name, vocab in vocabularies.items():
        vocab.save(workdir / f"{name}.txt")


def load_config(workdir: str | os.PathLike) -> ml_collections.ConfigDict:
    """The config a run in `workdir` was trained with."""
    path = Path(workdir) / CONFIG_FILE
    if not path.is_file():
        raise ConfigError(f"{workdir} is not a training run directory (no {CONFIG_FILE}) (fix: "
                          "pass the --workdir of a finished `python -m train.main` run)")
    return ml_collections.ConfigDict(json.loads(path.read_text()))


class Checkpoints:
    """Periodic full-state checkpoints for resuming, and best-k parameter checkpoints by dev metric.

    Each periodic checkpoint stores the TrainState and a JSON `position` (the loop's own state:
    next epoch and batch index, early-stopping counters); each best checkpoint stores the params
    and the dev metrics they reached.
    """

    def __init__(self, workdir: str | os.PathLike, keep: int, best_k: int):
        workdir = Path(workdir).absolute()
        self._latest = ocp.CheckpointManager(
            workdir / "checkpoints", item_names=("state", "position"),
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True))
        self._best = ocp.CheckpointManager(
            workdir / "best", item_names=("params", "dev"),
            options=ocp.CheckpointManagerOptions(
                max_to_keep=best_k, best_fn=lambda metrics: metrics["score"], best_mode="max",
                create=True))

    def latest_step(self) -> int | None:
        return self._latest.latest_step()

    def best_step(self) -> int | None:
        return self._best.best_step()

    def save(self, state: TrainState, position: Mapping[str, Any]) -> None:
        """Saves the full state at its step (periodic checkpoint)."""
        self._latest.save(int(state.step), args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), position=ocp.args.JsonSave(dict(position))))

    def save_best(self, state: TrainState, score: float, metrics: Mapping[str, Any]) -> None:
        """Offers the params at this step as a best checkpoint ranked by `score` (higher wins);
        `metrics` (JSON) are stored beside them."""
        self._best.save(int(state.step), metrics={"score": float(score)},
                        args=ocp.args.Composite(params=ocp.args.StandardSave(state.params),
                                                dev=ocp.args.JsonSave(dict(metrics))))

    def restore_latest(self, target: TrainState) -> tuple[TrainState, dict] | None:
        """(state, position) of the latest periodic checkpoint, shaped and sharded like `target`
        (concrete or abstract arrays), or None when there is none."""
        step = self._latest.latest_step()
        if step is None:
            return None
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        restored = self._latest.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), position=ocp.args.JsonRestore()))
        return restored.state, dict(restored.position)

    def restore_best_params(self, target: Any = None) -> dict:
        """Params of the best checkpoint, shaped and sharded like `target` when given."""
        step = self._best.best_step()
        if step is None:
            raise ConfigError("no best checkpoint saved yet (fix: train with a dev split until "
                              "at least one evaluation has run)")
        abstract = None if target is None else jax.tree.map(ocp.utils.to_shape_dtype_struct,
                                                             target)
        restored = self._best.restore(step, args=ocp.args.Composite(
            params=ocp.args.StandardRestore(abstract)))
        return restored.params

    def wait(self) -> None:
        """Blocks until pending asynchronous writes are on disk."""
        self._latest.wait_until_finished()
        self._best.wait_until_finished()

    def close(self) -> None:
        self._latest.close()
        self._best.close()


def load_trained_encoder(workdir: str | os.PathLike
                         ) -> tuple[nn.Module, dict, Vocabulary, ml_collections.ConfigDict]:
    """(encoder module, its params, input vocabulary, run config) of the best checkpoint.

    Encode with `module.apply({"params": params}, sentence_fields, train=False)["sentence"]`.
    """
    config = load_config(workdir)
    vocab = Vocabulary.load(Path(workdir) / VOCAB_FILE, lowercase=config.data.lowercase)
    checkpoints = Checkpoints(workdir, keep=config.checkpoint.keep,
                              best_k=config.checkpoint.best_k)
    try:
        params = checkpoints.restore_best_params()
    finally:
        checkpoints.close()
    return build_encoder(config.model, len(vocab)), params["encoder"], vocab, config

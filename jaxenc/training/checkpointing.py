"""Checkpoints of a run directory (its layout: `jaxenc.training.run_files`), and loading a
trained encoder back from one.

orbax writes every checkpoint to a temporary folder and renames it when complete, so a run killed
at any moment leaves only whole checkpoints; the next run resumes from the latest one. Each
finished checkpoint is then sealed with the checksums of its files (`integrity`); a checkpoint
whose files no longer match, or that cannot be restored, is set aside as `<step>.corrupted` with
a one-line warning and the run resumes from the newest intact one. A write the operating system
refuses (a full disk, a read-only folder) is a one-line `WriteError` naming the path: the
checkpoint being written stays a temporary folder, which the next run deletes, and the ones
before it stay intact.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import ml_collections
import orbax.checkpoint as ocp

from jaxenc.data.vocab import Vocabulary
from jaxenc.errors import ConfigError, DataError, WriteError
from jaxenc.files import write_error, writing
from jaxenc.models.registry import build_encoder
from jaxenc.training import integrity, run_files
from jaxenc.training.state import TrainState

log = logging.getLogger(__name__)


# How tensorstore (under orbax) reports the operating system's error of a failed write, e.g.
# "... Failed to write 27429 bytes to file 15: No space left on device [os_error_code='28']".
_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)")


def _os_error(error: Exception) -> OSError | None:
    """The OSError that `error` is or reports (orbax raises tensorstore's as a ValueError), else
    None."""
    if isinstance(error, OSError):
        return error
    found = _OS_ERROR_CODE.search(str(error))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code))


def _describe(error: Exception) -> str:
    """The first line of an orbax / tensorstore error (their messages run to a hundred lines)."""
    lines = str(error).strip().splitlines() or [""]
    return f"{type(error).__name__}: {lines[0][:200]}"


class _CheckpointManager(ocp.CheckpointManager):
    """orbax's manager with JAX's preemption sync point left to the training loop alone. orbax
    asks it too, also from its thread that finalises a save, with that checkpoint's step,
    older than the loop's; JAX's service agrees on the step after the last one each process
    asked about (`jaxenc.training.preemption`), so such a call could set the agreed step behind
    a process that has passed it. The loop saves when it has reached that step."""

    def reached_preemption(self, step: int) -> bool:
        return False


class Checkpoints:
    """Periodic full-state checkpoints for resuming, and best-k parameter checkpoints by dev metric.

    Each periodic checkpoint stores the TrainState and a JSON `position` (the loop's own state:
    next epoch and batch index, early-stopping counters); each best checkpoint stores the params
    and the dev metrics they reached. Corrupted checkpoints are set aside as they are found (module
    doc) when periodic; a corrupted best checkpoint is a DataError naming the file, whether the
    run trains or is read (`repair=False`: nothing is renamed).
    """

    def __init__(self, workdir: str | os.PathLike, keep: int, best_k: int, *,
                 repair: bool = True):
        workdir = Path(workdir).absolute()
        self.set_aside: list[Path] = []  # corrupted step folders renamed by this object
        self._unsealed: dict[ocp.CheckpointManager, list[int]] = {}  # saved, not yet sealed
        if repair:
            self._set_aside_corrupted(workdir / run_files.LATEST_DIR)
        # A damaged best checkpoint is never replaced by another one: the results name its step.
        self._set_aside_corrupted(workdir / run_files.BEST_DIR, repair=False)
        # Both managers may save the same step at once; in a multi-process run orbax's barriers
        # are named by the step folder, so each manager prefixes its own. The run that trains
        # (`repair`) deletes the temporary folders of saves that never finished (a full disk);
        # a reader leaves them to the run that may be writing them.
        processes = lambda name: ocp.options.MultiprocessingOptions(barrier_sync_key_prefix=name)
        with writing(workdir):
            self._latest = _CheckpointManager(
                workdir / run_files.LATEST_DIR, item_names=("state", "position"),
                options=ocp.CheckpointManagerOptions(
                    max_to_keep=keep, create=True, cleanup_tmp_directories=repair,
                    multiprocessing_options=processes(run_files.LATEST_DIR)))
            self._best = _CheckpointManager(  # handlers named: their metadata is read back
                workdir / run_files.BEST_DIR,
                item_handlers={"params": ocp.StandardCheckpointHandler(),
                               "dev": ocp.JsonCheckpointHandler()},
                options=ocp.CheckpointManagerOptions(
                    max_to_keep=best_k, best_fn=lambda metrics: metrics["score"],
                    best_mode="max", create=True, cleanup_tmp_directories=repair,
                    multiprocessing_options=processes(run_files.BEST_DIR)))

    def _set_aside_corrupted(self, folder: Path, repair: bool = True) -> None:
        """Sets aside each step folder whose files differ from their checksums (or, without
        `repair`, raises DataError naming the first such file)."""
        for step_folder in run_files.step_folders(folder):
            found = integrity.problem(step_folder)
            if found is None:
                continue
            path, what = found
            if not repair:
                raise DataError(f"checkpoint file is corrupted: {what}", path=path,
                                fix=f"retrain, or restore {step_folder} from a copy")
            self._set_aside(step_folder, f"{path}: {what}")

    def _set_aside(self, step_folder: Path, reason: str) -> None:
        """Renames a corrupted step folder out of orbax's sight, with a one-line warning."""
        if jax.process_index() == 0:
            with writing(step_folder):
                moved = integrity.set_aside(step_folder)
            log.warning("checkpoint %s is corrupted (%s): set aside as %s; using the newest "
                        "intact checkpoint", step_folder, reason, moved.name)
        self.set_aside.append(step_folder)

    def latest_step(self) -> int | None:
        return self._latest.latest_step()

    def best_step(self) -> int | None:
        """The step of the best kept checkpoint: the highest dev score, the earliest step among
        equal scores (the training loop's "best step", `loop.Position.record_evaluation`)."""
        scores = {step: (self._best.metrics(step) or {}).get("score")
                  for step in self._best.all_steps()}
        ranked = [(-score, step) for step, score in scores.items()
                  if isinstance(score, float) and math.isfinite(score)]
        return min(ranked)[1] if ranked else None

    @contextlib.contextmanager
    def _writing(self, manager: ocp.CheckpointManager, steps: Sequence[int]) -> Iterator[None]:
        """Turns the operating system's refusal of a write of `manager`'s checkpoints `steps`
        (raised by orbax at the save or when waiting for it) into a one-line WriteError naming
        the step folder and the newest checkpoint that is complete."""
        try:
            yield
        except WriteError:
            raise
        except Exception as error:  # orbax re-raises its writer threads' errors as they were
            os_error = _os_error(error)
            if os_error is None:
                raise
            directory = Path(str(manager.directory))
            folder = directory / str(steps[-1]) if steps else directory
            complete = [int(path.name) for path in run_files.step_folders(directory)
                        if path.name not in map(str, steps)]
            kept = f"step {complete[0]}" if complete else "none"
            raise write_error(os_error, folder, f"checkpoint {', '.join(map(str, steps))} not "
                              f"saved, newest complete checkpoint there: {kept}") from None

    def _seal(self, manager: ocp.CheckpointManager) -> None:
        """Waits for `manager`'s pending save, then seals the checkpoints this object saved."""
        steps = self._unsealed.pop(manager, [])
        with self._writing(manager, steps):
            manager.wait_until_finished()
            for step in steps if jax.process_index() == 0 else ():
                folder = Path(str(manager.directory)) / str(step)
                if folder.is_dir():  # not already deleted by max_to_keep
                    integrity.seal(folder)

    def _save(self, manager: ocp.CheckpointManager, step: int, **kwargs: Any) -> None:
        self._seal(manager)
        with self._writing(manager, [step]):
            manager.save(step, **kwargs)
        self._unsealed.setdefault(manager, []).append(step)

    def save(self, state: TrainState, position: Mapping[str, Any]) -> None:
        """Saves the full state at its step (periodic checkpoint)."""
        self._save(self._latest, int(state.step), args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), position=ocp.args.JsonSave(dict(position))))

    def save_best(self, state: TrainState, score: float, metrics: Mapping[str, Any]) -> None:
        """Offers the params at this step as a best checkpoint ranked by `score` (higher wins);
        `metrics` (JSON) are stored beside them."""
        self._save(self._best, int(state.step), metrics={"score": float(score)},
                   args=ocp.args.Composite(params=ocp.args.StandardSave(state.params),
                                           dev=ocp.args.JsonSave(dict(metrics))))

    def restore_latest(self, target: TrainState) -> tuple[TrainState, dict] | None:
        """(state, position) of the newest intact periodic checkpoint, shaped and sharded like
        `target` (concrete or abstract arrays), or None when there is none; one that cannot be
        restored is set aside. ConfigError when there were checkpoints but none is intact."""
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        while (step := self._latest.latest_step()) is not None:
            try:
                restored = self._latest.restore(step, args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(abstract), position=ocp.args.JsonRestore()))
            except Exception as error:  # orbax and tensorstore raise many types, even Exception
                self._set_aside(Path(str(self._latest.directory)) / str(step), _describe(error))
                self._latest.reload()
                continue
            return restored.state, dict(restored.position)
        directory = Path(str(self._latest.directory))
        corrupted = [path.name for path in self.set_aside if path.parent == directory]
        if corrupted:
            raise ConfigError(f"{directory}: no intact checkpoint (steps {', '.join(corrupted)} "
                              f"are corrupted, set aside as <step>{integrity.SET_ASIDE_SUFFIX}) "
                              f"(fix: use a new --workdir, or delete {directory.parent} to train "
                              "again from the start)")
        return None

    def restore_best_params(self, target: Any = None, step: int | None = None) -> dict:
        """Params of the best checkpoint (`best_step`), or of the best checkpoint of `step` (the
        one a training run's results name), shaped and sharded like `target` when given, else
        on this process's first device (whatever devices and processes trained them)."""
        directory = Path(str(self._best.directory))
        if step is not None and step not in self._best.all_steps():
            raise DataError(f"the best checkpoint of step {step} is missing",
                            path=directory / str(step),
                            fix="retrain, or restore the folder from a copy")
        step = self.best_step() if step is None else step
        if step is None:
            raise ConfigError("no best checkpoint: no dev evaluation has run, or none gave a "
                              "finite score (fix: train with a dev split until an evaluation "
                              "gives one)")
        try:
            if target is None:  # from the saved shapes: orbax refuses another device topology
                device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
                abstract = jax.tree.map(
                    lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device),
                    self._best.item_metadata(step)["params"])
            else:
                abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
            restored = self._best.restore(step, args=ocp.args.Composite(
                params=ocp.args.StandardRestore(abstract)))
        except Exception as error:  # as in restore_latest
            raise DataError(f"best checkpoint cannot be restored ({_describe(error)})",
                            path=directory / str(step),
                            fix="retrain, or restore the folder from a copy") from None
        return restored.params

    def wait(self) -> None:
        """Blocks until pending asynchronous writes are on disk, and seals them."""
        self._seal(self._latest)
        self._seal(self._best)

    def close(self) -> None:
        """Waits for (and seals) pending writes, then releases orbax's resources."""
        self.wait()
        self._latest.close()
        self._best.close()


def load_trained_encoder(workdir: str | os.PathLike
                         ) -> tuple[nn.Module, dict, Vocabulary, ml_collections.ConfigDict]:
    """(encoder module, its params, input vocabulary, run config) of the best checkpoint.

    Encode with `module.apply({"params": params}, sentence_fields, train=False)["sentence"]`.
    """
    module, params, vocab, config = load_trained_model(workdir)
    return module, params["encoder"], vocab, config


def load_trained_model(workdir: str | os.PathLike
                       ) -> tuple[nn.Module, dict, Vocabulary, ml_collections.ConfigDict]:
    """(encoder module, the task model's params: "encoder" and, for a task with one, "head",
    input vocabulary, run config) of the best checkpoint."""
    config = run_files.load_config(workdir)
    vocab = Vocabulary.load(Path(workdir) / run_files.VOCAB_FILE, lowercase=config.data.lowercase)
    checkpoints = Checkpoints(workdir, keep=config.checkpoint.keep,
                              best_k=config.checkpoint.best_k, repair=False)
    try:
        params = checkpoints.restore_best_params()
    finally:
        checkpoints.close()
    return build_encoder(config.model, len(vocab)), params, vocab, config

"""Jitted train and eval steps over a data-parallel mesh.

Params and optimiser state are replicated, every batch array is split over the mesh's "data"
axis along its batch dimension; XLA inserts the gradient all-reduce. The state argument of the
train step is donated (updated in place). Both steps compile once per bucket shape; the train
step ahead of time (`CompiledPerShape`), so its executables, and their memory analysis, are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from jaxenc.tasks.base import Task
from jaxenc.training.sharding import data_sharded, replicated
from jaxenc.training.state import TrainState

Batch = Mapping[str, jax.Array]
TrainStep = Callable[[TrainState, Batch], tuple[TrainState, dict[str, jax.Array]]]
EvalStep = Callable[[dict, Batch], dict[str, jax.Array]]


class CompiledPerShape:
    """A jitted (state, batch) step compiled ahead of time once per batch shape, the executables
    kept: calls of a shape seen before run its executable, and `executables` gives XLA's memory
    analysis of each without compiling it again (a `.lower().compile()` of the jitted function
    would). The state's shapes never change within a run, so the batch's alone key the cache."""

    def __init__(self, jitted: Callable) -> None:
        self.jitted = jitted
        self.executables: dict[tuple, jax.stages.Compiled] = {}

    def __call__(self, state: TrainState, batch: Batch) -> tuple[TrainState, dict[str, jax.Array]]:
        key = tuple(sorted((name, value.shape, value.dtype) for name, value in batch.items()))
        executable = self.executables.get(key)
        if executable is None:
            executable = self.executables[key] = self.jitted.lower(state, batch).compile()
        return executable(state, batch)


def make_train_step(model: nn.Module, task: Task, tx: optax.GradientTransformation,
                    mesh: Mesh, skip_nonfinite: bool = False,
                    loss_bound: float = 0.0) -> CompiledPerShape:
    """(state, batch) -> (next state, {"loss", "grad_norm"}); dropout key fold_in(rng, step).

    With `skip_nonfinite`, a step whose loss or gradient norm is nan or inf, or whose loss is
    above `loss_bound` (train.divergence_bound; 0: no bound), keeps the params and optimiser
    state it was given (only the step counter advances)."""

    def train_step(state: TrainState, batch: Batch) -> tuple[TrainState, dict[str, jax.Array]]:
        dropout_key = jax.random.fold_in(state.rng, state.step)

        def loss_fn(params: dict) -> jax.Array:
            outputs = model.apply({"params": params}, batch, train=True,
                                  rngs={"dropout": dropout_key})
            return task.loss(outputs, batch)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        if skip_nonfinite:
            good = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
            if loss_bound > 0:
                good &= loss <= loss_bound
            keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(good, n, o), new, old)
            params, opt_state = keep(params, state.params), keep(opt_state, state.opt_state)
        next_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
        return next_state, {"loss": loss, "grad_norm": grad_norm}

    return CompiledPerShape(jax.jit(
        train_step, in_shardings=(replicated(mesh), data_sharded(mesh)),
        out_shardings=(replicated(mesh), replicated(mesh)), donate_argnums=0))


def make_eval_step(model: nn.Module, task: Task, mesh: Mesh) -> EvalStep:
    """(params, batch) -> per-example `task.eval_outputs` [B] (split over "data" like the batch)."""

    def eval_step(params: dict, batch: Batch) -> dict[str, jax.Array]:
        outputs = model.apply({"params": params}, batch, train=False)
        return task.eval_outputs(outputs, batch)

    return jax.jit(eval_step, in_shardings=(replicated(mesh), data_sharded(mesh)),
                   out_shardings=data_sharded(mesh))


def make_test_step(model: nn.Module, task: Task, mesh: Mesh) -> EvalStep:
    """(params, batch) -> per-example `task.test_outputs` plus the batch's "index" (generating
    tasks, e.g. decoded translations; split over "data" like the batch)."""

    def test_step(params: dict, batch: Batch) -> dict[str, jax.Array]:
        return {**task.test_outputs(model, params, batch), "index": batch["index"]}

    return jax.jit(test_step, in_shardings=(replicated(mesh), data_sharded(mesh)),
                   out_shardings=data_sharded(mesh))


def to_host(tree: dict[str, jax.Array]) -> dict[str, np.ndarray]:
    """Global (possibly multi-host) arrays -> full numpy arrays on this host."""
    if jax.process_count() > 1:
        return multihost_utils.process_allgather(tree, tiled=True)
    return jax.tree.map(np.asarray, tree)

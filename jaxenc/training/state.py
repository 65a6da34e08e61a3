"""The training state: everything a resumed run needs that lives on the device."""

from __future__ import annotations

from collections.abc import Mapping

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxenc.layers.embed import EMBEDDING_PARAM, set_pretrained


@flax.struct.dataclass
class TrainState:
    """Attributes:
      step: int32[], optimiser steps taken.
      params: the task model's parameters ({"encoder": ..., "head" | "decoder": ...}).
      opt_state: the optax state of `params`.
      rng: uint32[2], the run's base dropout key; step s uses fold_in(rng, s).
    """

    step: jax.Array
    params: dict
    opt_state: optax.OptState
    rng: jax.Array


def init_params(model: nn.Module, batch: Mapping[str, np.ndarray], seed: int) -> dict:
    """Parameters of `model` initialised from PRNGKey(seed) on an example batch (shapes only)."""
    init = jax.jit(lambda key, example: model.init(key, example, train=False))
    variables = init(jax.random.PRNGKey(seed), dict(batch))
    return variables["params"]


def with_pretrained_embeddings(params: dict, matrix: np.ndarray) -> dict:
    """params with the encoder's word table replaced by `matrix` float32[V, D]."""
    return set_pretrained(params, matrix, ("encoder", *EMBEDDING_PARAM))


def create_train_state(params: dict, tx: optax.GradientTransformation, seed: int,
                       sharding: jax.sharding.Sharding | None = None) -> TrainState:
    """The step-0 state, built in one jitted call and placed with `sharding` when given. The
    dropout key is derived from the seed, independently of the initialisation key."""

    def create(params: dict) -> TrainState:
        return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                          rng=jax.random.fold_in(jax.random.PRNGKey(seed), 1))

    return jax.jit(create, out_shardings=sharding)(params)

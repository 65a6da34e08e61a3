"""Optimisers from the config: L2 on weight matrices, global-norm clipping, frozen embeddings.

The update is, in order: g += weight_decay * W for weight matrices only (the gradient of
weight_decay / 2 * ||W||^2, i.e. TF's `weight_decay * tf.nn.l2_loss(W)` as in DiSAN's code), clip
the global norm of g to `clip_norm`, then the named optimiser. Frozen word tables (every
`embed/embedding` leaf, e.g. an encoder's) get no update and no optimiser state; learned position
and level tables are not word tables and keep training. With `flatten` the clipping and the
optimiser act on one vector of all trainable parameters (`optax.flatten`): the same update up to
float rounding in the global norm, in a few kernels per step where per-leaf updates launch a few
per parameter leaf (hundreds for a Transformer on an accelerator). Its optimiser state is that
vector's, so a run saved with per-leaf state resumes with `flatten` False.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import optax

from jaxenc.errors import ConfigError
from jaxenc.layers.embed import EMBEDDING_PARAM
from jaxenc.training.sections import Optim

Params = dict

EMBEDDING_LEAF = "embedding"  # leaf name of WordEmbed / nn.Embed tables
KERNEL_LEAF = "kernel"  # leaf name of every weight matrix (nn.Dense, nn.DenseGeneral, layers/)


def _leaf_name(path: tuple) -> str:
    return str(getattr(path[-1], "key", path[-1]))


def weight_decay_mask(params: Params) -> Params:
    """True for weight matrices (leaves named "kernel"), False for biases (also the [H, d_k] ones
    of multi-head projections), LayerNorm scales and embedding tables; shaped like `params`."""
    return jax.tree_util.tree_map_with_path(lambda path, _: _leaf_name(path) == KERNEL_LEAF,
                                            params)


def _is_word_table(path: tuple) -> bool:
    """Whether a leaf is a word table (`embed/embedding`); position or level tables are not."""
    names = tuple(str(getattr(key, "key", key)) for key in path[-len(EMBEDDING_PARAM):])
    return names == EMBEDDING_PARAM


def trainable_labels(params: Params, freeze_embeddings: bool) -> Params:
    """"frozen" for the word tables when `freeze_embeddings` (learned position and level tables
    keep training), else "trainable" (per leaf)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, _: "frozen" if freeze_embeddings and _is_word_table(path) else "trainable",
        params)


LearningRate = float | optax.Schedule

# name -> (learning rate, optim section) -> the optimiser.
OPTIMIZERS: dict[str, Callable[[LearningRate, Optim], optax.GradientTransformation]] = {
    "adadelta": lambda lr, cfg: optax.adadelta(lr, rho=cfg.rho, eps=cfg.eps),
    "adam": lambda lr, cfg: optax.adam(lr, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps),
    "adagrad": lambda lr, cfg: optax.adagrad(lr, initial_accumulator_value=cfg.initial_accumulator,
                                             eps=cfg.eps),
    "sgd": lambda lr, cfg: optax.sgd(lr, momentum=cfg.momentum or None),
}


def learning_rate(optim: Optim) -> LearningRate:
    """The constant learning rate, ramped up linearly from 0 over `warmup_steps` if > 0."""
    if optim.warmup_steps > 0:
        return optax.linear_schedule(0.0, optim.learning_rate, optim.warmup_steps)
    return optim.learning_rate


def build_optimizer(optim: Optim | Mapping[str, Any], params: Params,
                    freeze_embeddings: bool = False) -> optax.GradientTransformation:
    """The full update rule (module docstring) of the optim section (jaxenc.training.sections:
    name, learning_rate, warmup_steps, weight_decay, clip_norm (<= 0: no clipping), the
    optimiser's own constants and flatten) for parameters shaped like `params`."""
    optim = optim if isinstance(optim, Optim) else Optim.of(optim)
    if optim.name not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optim.name!r} (fix: set --config.optim.name "
                          f"to one of {', '.join(OPTIMIZERS)})")
    steps = []
    if optim.clip_norm > 0:
        steps.append(optax.clip_by_global_norm(optim.clip_norm))
    steps.append(OPTIMIZERS[optim.name](learning_rate(optim), optim))
    update = optax.flatten(optax.chain(*steps)) if optim.flatten else optax.chain(*steps)
    if optim.weight_decay > 0:  # per leaf (its mask names leaves), fused into the flattening
        update = optax.chain(
            optax.add_decayed_weights(optim.weight_decay, weight_decay_mask), update)
    return optax.multi_transform({"trainable": update, "frozen": optax.set_to_zero()},
                                 trainable_labels(params, freeze_embeddings))

"""Word embedding table with a zero padding row and an optional frozen (fixed) mode."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

PAD_ID = 0
EMBEDDING_PARAM = ("embed", "embedding")  # path of the table inside an encoder's params


def symmetric_uniform(limit: float) -> nn.initializers.Initializer:
    """Initializer drawing U(-limit, limit)."""

    def init(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -limit, limit)

    return init


class WordEmbed(nn.Module):
    """tokens int32[B, L] -> float[B, L, features].

    Initialised U(-0.05, 0.05) (DiSAN's OOV rule); pretrained vectors are written into the table
    with `set_pretrained` after `init`. `trainable=False` keeps the table fixed (PSAN, Mean-Max
    AAE): gradients stop here and the optimiser masks it out. The padding id always embeds to zero.
    """

    vocab_size: int
    features: int
    trainable: bool = True

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        table = self.param("embedding", symmetric_uniform(0.05), (self.vocab_size, self.features))
        return look_up(table, tokens, trainable=self.trainable)


def look_up(table: jax.Array, tokens: jax.Array, *, trainable: bool = True) -> jax.Array:
    """Rows of `table` [V, D] for `tokens` int32[...] -> [..., D]; PAD rows are zero, and a
    table that is not `trainable` gets no gradient (a fixed table, or one shared from elsewhere:
    Mean-Max AAE's decoder reads its encoder's)."""
    if not trainable:
        table = jax.lax.stop_gradient(table)
    vectors = jnp.take(table, tokens, axis=0)
    return vectors * (tokens != PAD_ID)[..., None].astype(vectors.dtype)


def set_pretrained(params: dict, matrix: np.ndarray, path: tuple[str, ...] = EMBEDDING_PARAM):
    """Returns params with the embedding table at `path` replaced by `matrix` [V, D]."""
    node = params
    for key in path[:-1]:
        node = node[key]
    old = node[path[-1]]
    if tuple(old.shape) != tuple(matrix.shape):
        raise ValueError(f"embedding table is {old.shape}, vectors are {matrix.shape}")
    new_leaf = jnp.asarray(matrix, dtype=old.dtype)

    def replace(tree: dict, keys: tuple[str, ...]) -> dict:
        if len(keys) == 1:
            return {**tree, keys[0]: new_leaf}
        return {**tree, keys[0]: replace(tree[keys[0]], keys[1:])}

    return replace(params, path)

"""Multi-head attention with the score path open (Vaswani et al. 2017, eq. 1, and its variants).

For queries X_q [B, Lq, D_q] and memory X_k [B, Lk, D_k], per head h (H heads of width d_k):

    Q_h = a(X_q W_h^Q), K_h = a(X_k W_h^K), V_h = a(X_k W_h^V)      a: `projection_activation`
    S_h = Q_h K_h^T / sqrt(d_k) + bias_h(Q)                           `score_bias` (optional)
    P_h = normalizer(S_h, mask)                                       masked softmax by default
    O_h = g(P_h V_h)                                                  g: `head_activation`
    out = Concat(O_1..O_H) W_O                                        unless output_projection=False

The extension points are what the encoders need beyond the plain Transformer:
- score bias: Dependency-Transformer's gated relation scores (computed on device from relation
  ids; it receives the projected per-head queries [B, Lq, H, d_k] and returns [B, H, Lq, Lk]);
- normaliser: a function (scores [B, H, Lq, Lk], mask bool[B, 1, Lq, Lk]) -> weights;
- head activation: PhraseTransformer phase 2 applies a sigmoid to each head's output (eq. 5-7);
- no output projection, ReLU projections: Mean-Max AAE's encoder (heads concatenated);
- sparse keys: `key_index` int[(B,) Lq, Kn] lists the Kn memory positions each query may attend
  (PhraseTransformer phase 2's neighbour lists); K and V are projected once and gathered per
  query, so scores, mask and weights are [B, H, Lq, Kn] instead of [B, H, Lq, Lk].
The attention weights are sown into the "intermediates" collection as `attention_weights`
[B, H, Lq, Lk] (`jaxenc.viz` reads them with `mutable=["intermediates"]`; free otherwise).
Masks follow `jaxenc.layers.masks` (any object with `rows`/`matrix`, or a bool array).
Mixed precision: projections and products run in `dtype`, scores are normalised in float32.
"""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.layers.dense import get_activation
from jaxenc.layers.masks import Mask, as_mask, masked_softmax

DEFAULT_KERNEL_INIT = nn.initializers.xavier_uniform()

ScoreBias = Callable[[jax.Array], jax.Array]
"""query heads [B, Lq, H, d_k] -> additive scores [B, H, Lq, Lk]."""
Normalizer = Callable[[jax.Array, jax.Array], jax.Array]
"""(scores [B, H, Lq, Lk], mask bool broadcastable to it) -> attention weights."""


def gather_rows(values: jax.Array, index: jax.Array) -> jax.Array:
    """values [B, L, ...], index int[I, J] (shared by the batch) or int[B, I, J] -> [B, I, J, ...]:
    values[b, index[b]] for every b. An index of -1 reads row 0; the caller masks it."""
    index = jnp.broadcast_to(jnp.maximum(index, 0), (values.shape[0], *index.shape[-2:]))
    return jax.vmap(lambda rows, rows_index: rows[rows_index])(values, index)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (module docstring): queries [B, Lq, Dq], memory [B, Lk, Dk] ->
    [B, Lq, D_out] (D_out = out_features or Dq; H * d_k without the output projection).

    Attributes:
      num_heads: H; `qkv_features` must be divisible by it.
      qkv_features: total width of the projected queries/keys/values (default: query width).
      out_features: width of the output projection (default: query width).
      output_projection: False concatenates the heads without W_O (Mean-Max AAE).
      projection_activation: activation on the Q, K, V projections (ACTIVATIONS name).
      head_activation: activation on each head's weighted sum (PhraseTransformer: "sigmoid").
      normalizer: scores -> weights (default `masked_softmax` over keys).
      dropout_rate: dropout on the attention weights (training only).
      dtype: computation dtype (parameters stay float32).
    """

    num_heads: int
    qkv_features: int | None = None
    out_features: int | None = None
    output_projection: bool = True
    projection_activation: str = "linear"
    head_activation: str = "linear"
    normalizer: Normalizer = masked_softmax
    dropout_rate: float = 0.0
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, queries: jax.Array, memory: jax.Array, mask: Mask | jax.Array, *,
                 train: bool, score_bias: ScoreBias | None = None,
                 key_index: jax.Array | None = None) -> jax.Array:
        """queries [B, Lq, Dq], memory [B, Lk, Dk], mask (bool[B, Lq, Lk] or a Mask with [B]).

        With `key_index` int[(B,) Lq, Kn] (sparse keys, module docstring; -1 = no key) the mask
        and the score bias are over [B, Lq, Kn] and the sown weights are [B, H, Lq, Kn].
        """
        features = self.qkv_features or queries.shape[-1]
        if features % self.num_heads:
            raise ValueError(f"qkv_features={features} is not divisible by {self.num_heads} heads")
        head_dim = features // self.num_heads
        activation = get_activation(self.projection_activation)

        def project(name: str, inputs: jax.Array) -> jax.Array:  # [B, L, D] -> [B, L, H, d_k]
            return activation(nn.DenseGeneral((self.num_heads, head_dim), dtype=self.dtype,
                                              kernel_init=DEFAULT_KERNEL_INIT, name=name)(inputs))

        query, key = project("query", queries), project("key", memory)
        value = project("value", memory)
        keys = "bkhd"  # the key axes of K and V: shared by all queries, or gathered per query
        if key_index is not None:
            key, value, keys = gather_rows(key, key_index), gather_rows(value, key_index), "bqkhd"
        scores = jnp.einsum(f"bqhd,{keys}->bhqk", query, key) / np.sqrt(head_dim).astype(self.dtype)
        scores = scores.astype(jnp.float32)
        if score_bias is not None:
            scores = scores + score_bias(query)
        valid = as_mask(mask).matrix(queries.shape[1], scores.shape[-1])
        weights = self.normalizer(scores, valid[:, None])
        self.sow("intermediates", "attention_weights", weights)
        weights = nn.Dropout(self.dropout_rate)(weights, deterministic=not train)
        heads = jnp.einsum(f"bhqk,{keys}->bqhd", weights.astype(self.dtype), value)
        heads = get_activation(self.head_activation)(heads)
        if not self.output_projection:
            return heads.reshape(*heads.shape[:-2], features)
        return nn.DenseGeneral(self.out_features or queries.shape[-1], axis=(-2, -1),
                               dtype=self.dtype, kernel_init=DEFAULT_KERNEL_INIT,
                               name="out")(heads)

"""Multi-head attention with the score path open (Vaswani et al. 2017, eq. 1, and its variants).

For queries X_q [B, Lq, D_q] and memory X_k [B, Lk, D_k], per head h (H heads of width d_k):

    Q_h = a(X_q W_h^Q), K_h = a(X_k W_h^K), V_h = a(X_k W_h^V)      a: `projection_activation`
    S_h = Q_h K_h^T / sqrt(d_k) + bias_h(Q)                           `score_bias` (optional)
    P_h = normalizer(S_h, mask)                                       masked softmax by default
    O_h = g(P_h V_h)                                                  g: `head_activation`
    out = Concat(O_1..O_H) W_O                                        unless output_projection=False

Extension points beyond the plain Transformer: a score bias (the Dependency-Transformer's gated
relation scores: per-head queries [B, Lq, H, d_k] -> [B, H, Lq, Lk]); a normaliser (scores
[B, H, Lq, Lk], mask bool[B, 1, Lq, Lk]) -> weights; a head activation (PhraseTransformer phase
2's sigmoid, eq. 5-7); no output projection and ReLU projections (Mean-Max AAE); sparse keys
(`key_index` int[(B,) Lq, Kn]: K and V projected once and gathered per query, so scores are
[B, H, Lq, Kn]; PhraseTransformer phase 2's neighbour lists). `implementation="auto"` uses
`jax.nn.dot_product_attention` (cuDNN's fused kernel on NVIDIA GPUs) where that is exact: plain
masked softmax, no dropout on the weights, dense keys; "einsum" always takes the path above,
"fused" refuses a call the fused path cannot compute exactly. A query with no valid key gives
zeros. The weights are sown as `attention_weights` [B, H, Lq, Lk] into "intermediates" only when
that collection is mutable (`jaxenc.viz`), and then the einsum path runs. Masks follow
`jaxenc.layers.masks`. Mixed precision: products in `dtype`, scores normalised in float32.

Decode mode (`decode=True`, "cache" mutable; same parameters, only where K and V come from
changes): self-attention (`position` p and `cache_length` given) writes the keys and values of
positions p .. p + Lq - 1 into `cached_key` / `cached_value` [N, cache_length, H, d_k], and query
p + i attends cached positions 0 .. p + i (and where `mask` allows); memory attention (no
`position`) projects the memory once into `memory_key` / `memory_value` [N, Lk, H, d_k] when the
cache is created, and later calls ignore `memory`.
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
IMPLEMENTATIONS = ("auto", "fused", "einsum")


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
      implementation: "auto", "fused" or "einsum" (module docstring).
      decode: read K and V from the "cache" collection (module docstring).
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
    implementation: str = "auto"
    decode: bool = False
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, queries: jax.Array, memory: jax.Array, mask: Mask | jax.Array | None, *,
                 train: bool, score_bias: ScoreBias | None = None,
                 key_index: jax.Array | None = None, position: jax.Array | None = None,
                 cache_length: int | None = None) -> jax.Array:
        """queries [B, Lq, Dq], memory [B, Lk, Dk], mask (bool[B, Lq, Lk] or a Mask with [B]).

        With `key_index` int[(B,) Lq, Kn] (sparse keys, module docstring; -1 = no key) the mask
        and the score bias are over [B, Lq, Kn] and the sown weights are [B, H, Lq, Kn].
        Decode mode (module docstring): self-attention with `position` int32[] and
        `cache_length`, memory [B, Lq, Dk] the new positions' inputs, `mask` over
        [B, Lq, cache_length] or None; memory attention without them; dense keys only.
        """
        features = self.qkv_features or queries.shape[-1]
        if features % self.num_heads:
            raise ValueError(f"qkv_features={features} is not divisible by {self.num_heads} heads")
        head_dim = features // self.num_heads
        activation = get_activation(self.projection_activation)

        def project(name: str, inputs: jax.Array) -> jax.Array:  # [B, L, D] -> [B, L, H, d_k]
            return activation(nn.DenseGeneral((self.num_heads, head_dim), dtype=self.dtype,
                                              kernel_init=DEFAULT_KERNEL_INIT, name=name)(inputs))

        query = project("query", queries)
        if self.decode:
            if key_index is not None:
                raise ValueError("decode mode reads dense keys from the cache: no key_index")
            key, value, valid = self._cached(project, query, memory, mask, position,
                                             cache_length)
        else:
            key, value = project("key", memory), project("value", memory)
            keys = key.shape[1] if key_index is None else key_index.shape[-1]
            valid = as_mask(mask).matrix(query.shape[1], keys)
        if self._fused(train, key_index):
            heads = jax.nn.dot_product_attention(
                query, key, value, None if score_bias is None else score_bias(query),
                valid[:, None])
            # a row with no valid key: zeros, as the masked softmax gives (not the mean of V)
            heads = heads * jnp.any(valid, axis=-1)[:, :, None, None].astype(heads.dtype)
        else:
            heads = self._einsum_heads(query, key, value, valid, train, score_bias, key_index)
        heads = get_activation(self.head_activation)(heads)
        if not self.output_projection:
            return heads.reshape(*heads.shape[:-2], features)
        return nn.DenseGeneral(self.out_features or queries.shape[-1], axis=(-2, -1),
                               dtype=self.dtype, kernel_init=DEFAULT_KERNEL_INIT,
                               name="out")(heads)

    def _cached(self, project: Callable[[str, jax.Array], jax.Array], query: jax.Array,
                memory: jax.Array, mask: Mask | jax.Array | None, position: jax.Array | None,
                cache_length: int | None) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Decode mode (module docstring): (key, value [B, K, H, d_k] read from the "cache"
        collection, valid bool[B, Lq, K]) for the projected query [B, Lq, H, d_k]; K is
        cache_length for self-attention, the memory's length for memory attention."""
        batch, length = query.shape[:2]
        if position is None:
            key = self.variable("cache", "memory_key", lambda: project("key", memory)).value
            value = self.variable("cache", "memory_value", lambda: project("value", memory)).value
            valid = as_mask(mask).matrix(length, key.shape[1])
            return key, value, jnp.broadcast_to(valid, (batch, length, key.shape[1]))
        shape = (batch, cache_length, *query.shape[2:])
        start = (0, position, 0, 0)
        written = []
        for name, variable in (("key", "cached_key"), ("value", "cached_value")):
            cache = self.variable("cache", variable, jnp.zeros, shape, self.dtype)
            cache.value = jax.lax.dynamic_update_slice(
                cache.value, project(name, memory).astype(cache.value.dtype), start)
            written.append(cache.value)
        valid = jnp.arange(cache_length) <= (position + jnp.arange(length))[:, None]
        if mask is not None:
            valid = valid & as_mask(mask).matrix(length, cache_length)
        return *written, jnp.broadcast_to(valid, (batch, length, cache_length))

    def _einsum_heads(self, query: jax.Array, key: jax.Array, value: jax.Array,
                      valid: jax.Array, train: bool, score_bias: ScoreBias | None,
                      key_index: jax.Array | None) -> jax.Array:
        """The heads [B, Lq, H, d_k] of the projected query [B, Lq, H, d_k], key and value
        [B, Lk, H, d_k] through scores, the normaliser over `valid` bool[B, Lq, Lk (or Kn)]
        (weights sown) and dropout."""
        keys = "bkhd"  # the key axes of K and V: shared by all queries, or gathered per query
        if key_index is not None:
            key, value, keys = gather_rows(key, key_index), gather_rows(value, key_index), "bqkhd"
        head_dim = query.shape[-1]
        scores = jnp.einsum(f"bqhd,{keys}->bhqk", query, key) / np.sqrt(head_dim).astype(self.dtype)
        scores = scores.astype(jnp.float32)
        if score_bias is not None:
            scores = scores + score_bias(query)
        weights = self.normalizer(scores, valid[:, None])
        self.sow("intermediates", "attention_weights", weights)
        weights = nn.Dropout(self.dropout_rate)(weights, deterministic=not train)
        return jnp.einsum(f"bhqk,{keys}->bqhd", weights.astype(self.dtype), value)

    def _fused(self, train: bool, key_index: jax.Array | None) -> bool:
        """Whether this call takes `jax.nn.dot_product_attention` (module docstring); never
        while the "intermediates" collection is mutable (`init`, `jaxenc.viz`): the weights
        are sown then."""
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation={self.implementation!r} is not one of "
                             f"{', '.join(IMPLEMENTATIONS)}")
        exact = (self.normalizer is masked_softmax and key_index is None
                 and (self.dropout_rate == 0.0 or not train))
        if self.implementation == "fused" and not exact:
            raise ValueError("implementation='fused' needs the masked softmax, dense keys and no "
                             "dropout on the attention weights")
        return (exact and self.implementation != "einsum"
                and not self.is_mutable_collection("intermediates"))

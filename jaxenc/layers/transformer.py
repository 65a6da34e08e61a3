"""Transformer building blocks (Vaswani et al., 2017) with explicit boolean masks.

Shapes: B batch, Lq queries, Lk keys, D features, H heads. A mask is bool[B, Lq, Lk] (or anything
broadcastable to it): True where query i may attend to key j. Rows with no valid key (padding
queries, empty sentences) produce zeros, never NaN (`jaxenc.layers.masks.masked_softmax`).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.layers.masks import length_mask, masked_softmax

DEFAULT_KERNEL_INIT = nn.initializers.xavier_uniform()


def sinusoidal_positions(length: int, features: int) -> jax.Array:
    """float32[length, features]: PE(p, 2i) = sin(p / 10000^(2i/D)), PE(p, 2i+1) = cos(...)."""
    positions = np.arange(length)[:, None]
    rates = 1.0 / (10000.0 ** (np.arange(0, features, 2) / features))
    table = np.zeros((length, features), np.float32)
    table[:, 0::2] = np.sin(positions * rates)
    table[:, 1::2] = np.cos(positions * rates[: features // 2])
    return jnp.asarray(table)


def padding_attention_mask(query_lengths: jax.Array, query_len: int,
                           key_lengths: jax.Array, key_len: int) -> jax.Array:
    """bool[B, Lq, Lk]: real queries may attend to real keys. lengths: int[B]."""
    queries = length_mask(query_lengths, query_len)
    keys = length_mask(key_lengths, key_len)
    return queries[:, :, None] & keys[:, None, :]


def causal_mask(length: int) -> jax.Array:
    """bool[1, length, length]: query i sees keys j <= i (decoder self-attention)."""
    return jnp.tril(jnp.ones((length, length), bool))[None]


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_H) W_O with
    head_h = softmax(Q W_h^Q (K W_h^K)^T / sqrt(d_k)) V W_h^V (Vaswani et al. 2017, eq. 1).

    Attributes:
      num_heads: H; `qkv_features` must be divisible by it.
      qkv_features: total width of the projected queries/keys/values (default: query width).
      out_features: width of the output projection (default: query width).
      dropout_rate: dropout on the attention weights (training only).
    """

    num_heads: int
    qkv_features: int | None = None
    out_features: int | None = None
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, queries: jax.Array, memory: jax.Array, mask: jax.Array, *,
                 train: bool) -> jax.Array:
        """queries [B, Lq, Dq], memory [B, Lk, Dk], mask bool[B, Lq, Lk] -> [B, Lq, D_out]."""
        features = self.qkv_features or queries.shape[-1]
        if features % self.num_heads:
            raise ValueError(f"qkv_features={features} is not divisible by {self.num_heads} heads")
        head_dim = features // self.num_heads

        def project(name: str, inputs: jax.Array) -> jax.Array:  # [B, L, D] -> [B, L, H, d_k]
            return nn.DenseGeneral((self.num_heads, head_dim), kernel_init=DEFAULT_KERNEL_INIT,
                                   name=name)(inputs)

        query, key = project("query", queries), project("key", memory)
        value = project("value", memory)
        scores = jnp.einsum("bqhd,bkhd->bhqk", query, key) / np.sqrt(head_dim).astype(np.float32)
        weights = masked_softmax(scores, mask[:, None])
        weights = nn.Dropout(self.dropout_rate)(weights, deterministic=not train)
        heads = jnp.einsum("bhqk,bkhd->bqhd", weights, value)
        return nn.DenseGeneral(self.out_features or queries.shape[-1], axis=(-2, -1),
                               kernel_init=DEFAULT_KERNEL_INIT, name="out")(heads)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2: [B, L, D] -> [B, L, D] with hidden width `hidden`."""

    hidden: int
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        h = nn.relu(nn.Dense(self.hidden, kernel_init=DEFAULT_KERNEL_INIT, name="hidden")(x))
        h = nn.Dropout(self.dropout_rate)(h, deterministic=not train)
        return nn.Dense(x.shape[-1], kernel_init=DEFAULT_KERNEL_INIT, name="output")(h)


class EncoderBlock(nn.Module):
    """Post-norm encoder layer: x = LN(x + Drop(MHA(x, x))); x = LN(x + Drop(FFN(x)))."""

    num_heads: int
    ff_features: int
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array, *, train: bool) -> jax.Array:
        """x [B, L, D], mask bool[B, L, L] -> [B, L, D]."""
        drop = nn.Dropout(self.dropout_rate, deterministic=not train)
        attended = MultiHeadAttention(self.num_heads, dropout_rate=self.attention_dropout_rate,
                                      name="self_attention")(x, x, mask, train=train)
        x = nn.LayerNorm(name="attention_norm")(x + drop(attended))
        transformed = FeedForward(self.ff_features, self.dropout_rate, name="ffn")(x, train=train)
        return nn.LayerNorm(name="ffn_norm")(x + drop(transformed))


class DecoderBlock(nn.Module):
    """Post-norm decoder layer: causal self-attention, attention over the encoder memory, FFN."""

    num_heads: int
    ff_features: int
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, y: jax.Array, memory: jax.Array, self_mask: jax.Array,
                 memory_mask: jax.Array, *, train: bool) -> jax.Array:
        """y [B, T, D], memory [B, S, D], self_mask bool[B, T, T], memory_mask bool[B, T, S]."""
        drop = nn.Dropout(self.dropout_rate, deterministic=not train)
        attention = lambda name: MultiHeadAttention(
            self.num_heads, dropout_rate=self.attention_dropout_rate, name=name)
        y = nn.LayerNorm(name="self_attention_norm")(
            y + drop(attention("self_attention")(y, y, self_mask, train=train)))
        y = nn.LayerNorm(name="memory_attention_norm")(
            y + drop(attention("memory_attention")(y, memory, memory_mask, train=train)))
        transformed = FeedForward(self.ff_features, self.dropout_rate, name="ffn")(y, train=train)
        return nn.LayerNorm(name="ffn_norm")(y + drop(transformed))

"""Transformer building blocks (Vaswani et al., 2017): the input stage, encoder and decoder
layers, and the decoder stack that seq2seq tasks put on any encoder's memory.

Shapes: B batch, L / T positions, S memory slots, D features, H heads of width d_k. Attention
masks follow `jaxenc.layers.masks` (query rows with no valid key give zeros, never NaN);
multi-head attention is the one core of `jaxenc.layers.attention`, whose decode mode (the same
parameters) serves decoders that generate one position at a time with a key/value cache
(`TransformerDecoder`, jaxenc.models.meanmax_aae.MeanMaxDecoder; jaxenc.tasks.decoding).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.layers.attention import DEFAULT_KERNEL_INIT, MultiHeadAttention, ScoreBias
from jaxenc.layers.embed import WordEmbed, look_up
from jaxenc.layers.masks import DirectionalMask, Mask, length_mask

POSITIONS = ("sinusoidal", "learned", "none")


def sinusoidal_positions(length: int, features: int) -> jax.Array:
    """float32[length, features]: PE(p, 2i) = sin(p / 10000^(2i/D)), PE(p, 2i+1) = cos(...)."""
    positions = np.arange(length)[:, None]
    rates = 1.0 / (10000.0 ** (np.arange(0, features, 2) / features))
    table = np.zeros((length, features), np.float32)
    table[:, 0::2] = np.sin(positions * rates)
    table[:, 1::2] = np.cos(positions * rates[: features // 2])
    return jnp.asarray(table)


def input_stage(tokens: jax.Array, *, vocab_size: int, embed_dim: int, model_dim: int,
                dropout_rate: float, train: bool, positions: str = "sinusoidal",
                max_positions: int = 512, trainable_embeddings: bool = True,
                embedding_scale: float = 1.0, dtype: jnp.dtype = jnp.float32,
                word_table: jax.Array | None = None, first_position: jax.Array | int = 0,
                position_rows: int | None = None) -> jax.Array:
    """tokens int32[B, L] -> Dropout(s W_in e(w) + PE) [B, L, model_dim], shared by encoders and
    decoders (s = `embedding_scale`; Vaswani et al. use sqrt(model_dim)).

    Call it inside a module's compact `__call__`: its submodules belong to that module ("embed",
    the word table `jaxenc.layers.embed.WordEmbed`; "input_projection" when embed_dim !=
    model_dim; "positions" for learned positions, `max_positions` rows: positions past the last
    row share it, so text longer than the table still encodes). `word_table` float[V, embed_dim]:
    read the words from this table (fixed: no gradient) instead of an own "embed" (a decoder
    that shares its encoder's table). `first_position` int32[] is the position of tokens[:, 0]
    (a decoder in decode mode gets positions p .. p + L - 1); the sinusoidal rows then come from
    a table of `position_rows` rows (the longest sequence decoded; default L), the same values
    a full-length run adds at those positions.
    """
    if word_table is None:
        x = WordEmbed(vocab_size, embed_dim, trainable=trainable_embeddings, name="embed")(tokens)
    else:
        x = look_up(word_table, tokens, trainable=False)
    x = x.astype(dtype)
    if embed_dim != model_dim:
        x = nn.Dense(model_dim, kernel_init=DEFAULT_KERNEL_INIT, dtype=dtype,
                     name="input_projection")(x)
    x = x * embedding_scale
    length = tokens.shape[1]
    if positions == "sinusoidal":
        table = sinusoidal_positions(position_rows or length, model_dim).astype(dtype)
        x = x + jax.lax.dynamic_slice_in_dim(table, first_position, length)
    elif positions == "learned":
        table = nn.Embed(max_positions, model_dim, dtype=dtype, name="positions")
        x = x + table(jnp.minimum(first_position + jnp.arange(length), max_positions - 1))
    return nn.Dropout(dropout_rate)(x, deterministic=not train)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2: [B, L, D] -> [B, L, D] with hidden width `hidden`."""

    hidden: int
    dropout_rate: float = 0.0
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        dense = lambda width, name: nn.Dense(width, kernel_init=DEFAULT_KERNEL_INIT,
                                             dtype=self.dtype, name=name)
        h = nn.relu(dense(self.hidden, "hidden")(x))
        h = nn.Dropout(self.dropout_rate)(h, deterministic=not train)
        return dense(x.shape[-1], "output")(h)


class EncoderBlock(nn.Module):
    """Encoder layer, post-norm (Vaswani et al. 2017, the default):
        x = LN(x + Drop(MHA(x, x))); x = LN(x + Drop(FFN(x)));
    or pre-norm (`pre_norm`; Xiong et al. 2020: no warm-up needed, a final LN after the stack):
        x = x + Drop(MHA(LN(x), LN(x))); x = x + Drop(FFN(LN(x))).

    `score_bias` (see jaxenc.layers.attention) adds e.g. relation scores to the self-attention.
    """

    num_heads: int
    ff_features: int
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.0
    pre_norm: bool = False
    attention_impl: str = "auto"  # MultiHeadAttention.implementation
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, mask: Mask | jax.Array, *, train: bool,
                 score_bias: ScoreBias | None = None) -> jax.Array:
        """x [B, L, D], mask over [B, L, L] -> [B, L, D]."""
        drop = nn.Dropout(self.dropout_rate, deterministic=not train)
        attention_norm = nn.LayerNorm(dtype=self.dtype, name="attention_norm")
        ffn_norm = nn.LayerNorm(dtype=self.dtype, name="ffn_norm")
        attention = MultiHeadAttention(self.num_heads, dropout_rate=self.attention_dropout_rate,
                                       implementation=self.attention_impl, dtype=self.dtype,
                                       name="self_attention")
        ffn = FeedForward(self.ff_features, self.dropout_rate, self.dtype, name="ffn")
        if self.pre_norm:
            normed = attention_norm(x)
            x = x + drop(attention(normed, normed, mask, train=train, score_bias=score_bias))
            return x + drop(ffn(ffn_norm(x), train=train))
        x = attention_norm(x + drop(attention(x, x, mask, train=train, score_bias=score_bias)))
        return ffn_norm(x + drop(ffn(x, train=train)))


class DecoderBlock(nn.Module):
    """Post-norm decoder layer: causal self-attention, attention over the encoder memory, FFN."""

    num_heads: int
    ff_features: int
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.0
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, y: jax.Array, memory: jax.Array, self_mask: Mask | jax.Array | None,
                 memory_mask: Mask | jax.Array, *, train: bool,
                 position: jax.Array | None = None, cache_length: int | None = None) -> jax.Array:
        """y [B, T, D], memory [B, S, D]; masks over [B, T, T] and [B, T, S].

        With `cache_length` (MultiHeadAttention's decode mode, "cache" mutable): y [N, L, D] are
        positions position .. position + L - 1 of a sequence of at most cache_length,
        `self_mask` is None or over [N, L, cache_length] (the cache masks the later positions)
        and memory_mask is over [N, L, S].
        """
        drop = nn.Dropout(self.dropout_rate, deterministic=not train)
        norm = lambda name: nn.LayerNorm(dtype=self.dtype, name=name)
        decode = cache_length is not None
        attention = lambda name: MultiHeadAttention(
            self.num_heads, dropout_rate=self.attention_dropout_rate, decode=decode,
            dtype=self.dtype, name=name)
        cache = dict(position=position, cache_length=cache_length) if decode else {}
        y = norm("self_attention_norm")(
            y + drop(attention("self_attention")(y, y, self_mask, train=train, **cache)))
        y = norm("memory_attention_norm")(
            y + drop(attention("memory_attention")(y, memory, memory_mask, train=train)))
        transformed = FeedForward(self.ff_features, self.dropout_rate, self.dtype,
                                  name="ffn")(y, train=train)
        return norm("ffn_norm")(y + drop(transformed))


def decoder_masks(input_lengths: jax.Array, length: int,
                  memory_mask: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The masks of a decoder over T = `length` target positions with lengths int32[B] reading S
    memory slots (memory_mask bool[B, S]): real positions bool[B, T], causal self-attention
    bool[B, T, T] (position t sees 0..t, padding rows see nothing) and memory attention
    bool[B, T, S] (real positions see the real slots)."""
    real = length_mask(input_lengths, length)
    self_mask = DirectionalMask(input_lengths, "causal").matrix(length) & real[..., None]
    return real, self_mask, real[..., :, None] & memory_mask[..., None, :]


class TransformerDecoder(nn.Module):
    """Target tokens [B, T] (shifted right, starting with BOS) + an encoder's memory -> logits
    [B, T, V].

    `input_stage` (embedding + sinusoidal positions + dropout), `num_layers` DecoderBlocks
    (causal self-attention, attention over the memory slots that `memory_mask` marks real, FFN),
    Dense over V. The memory is the encoder output contract's `memory` [B, S, D_m] (word states,
    plus hypernodes or pooled slots for some encoders), projected to model_dim when D_m differs.

    Decode mode (`cache_length`, jaxenc.tasks.decoding) generates one position per call with a
    key/value cache in the "cache" collection, per layer: `self_attention` {`cached_key`,
    `cached_value`} [N, cache_length, H, d_k] and `memory_attention` {`memory_key`,
    `memory_value`} [N, S, H, d_k] (MultiHeadAttention's decode mode). A step then costs O(1)
    positions of projections and feed-forward plus O(cache_length) attention reads per row, so a
    sequence of T tokens costs O(T) positions, where rerunning the decoder over the token buffer
    at every step (`position` without `cache_length`) costs O(T) positions per step, O(T^2) in all.
    """

    vocab_size: int
    model_dim: int = 256
    num_layers: int = 1
    num_heads: int = 4
    ff_dim: int = 512
    dropout_rate: float = 0.1
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, inputs: jax.Array, input_lengths: jax.Array | None, memory: jax.Array,
                 memory_mask: jax.Array, *, train: bool, position: jax.Array | None = None,
                 cache_length: int | None = None) -> jax.Array:
        """inputs int32[B, T], input_lengths int32[B], memory [B, S, D_m], memory_mask
        bool[B, S] -> logits float32[B, T, V]; with `position` int32[] only that position's
        logits [B, V] (the full-buffer decoding reference).

        With `cache_length` (decode mode, inference, "cache" mutable): inputs int32[N, L] are
        the tokens at positions position .. position + L - 1 (L = 1 per decoding step) of a
        sequence of at most cache_length tokens, input_lengths is not read, and the result is
        logits float32[N, L, V], those of a full run over the sequence so far. The call that
        creates the cache (zeros, then its positions written) also projects the memory into it;
        later calls read the memory's keys and values from the cache.
        """
        decode = cache_length is not None
        y = input_stage(inputs, vocab_size=self.vocab_size, embed_dim=self.model_dim,
                        model_dim=self.model_dim, dropout_rate=self.dropout_rate, train=train,
                        dtype=self.dtype, first_position=position if decode else 0,
                        position_rows=cache_length)
        if memory.shape[-1] != self.model_dim:
            memory = nn.Dense(self.model_dim, kernel_init=DEFAULT_KERNEL_INIT, dtype=self.dtype,
                              name="memory_projection")(memory)
        if decode:
            real, self_mask, memory_rows = None, None, memory_mask[:, None, :]
        else:
            real, self_mask, memory_rows = decoder_masks(input_lengths, inputs.shape[1],
                                                         memory_mask)
        for layer in range(self.num_layers):
            y = DecoderBlock(self.num_heads, self.ff_dim, self.dropout_rate, dtype=self.dtype,
                             name=f"layer_{layer}")(y, memory, self_mask, memory_rows,
                                                    train=train, position=position,
                                                    cache_length=cache_length)
        if not decode:
            y = y * real[..., None].astype(y.dtype)
            if position is not None:
                y = jnp.take(y, position, axis=1)
        return nn.Dense(self.vocab_size, kernel_init=DEFAULT_KERNEL_INIT, dtype=self.dtype,
                        name="logits")(y).astype(jnp.float32)

"""Mean-Max Attention Autoencoder (Zhang et al., EMNLP 2018).

An unsupervised sentence encoder trained to reconstruct its input (task.dataset="corpus": any text
file, jaxenc/data/corpus.py). Equation numbers are the paper's.

Encoder (`MeanMaxAAE`), one layer:
    eq. 1-2   x_t = e_t + p_t                 fixed word vectors + `positions` (sinusoidal, or
                                              `max_positions` learned rows as the code)
    eq. 8     a_t = MultiHead(x_t, x, x)      embed_dim -> model_dim, heads concatenated, NO
                                              residual, NO output projection (eq. 3-7; ReLU on
                                              Q/K/V: `relu_projections`)
    eq. 9     ā_t = LN(a_t)
    eq. 10-11 h_t = LN(FFN(ā_t) + ā_t)        FFN model_dim -> ff_dim (ReLU) -> model_dim
    eq. 12-14 z = [max_t h_t ; mean_t h_t]    over the real tokens only: the two memory slots
With `end_token` the encoder appends </s> at every call (tokens [B, L] -> [B, L + 1], EOS at
index lengths[b]; an empty row gets none and stays zero) and eq. 8-14 run over the n + 1 positions.
Decoder (`MeanMaxDecoder`), one layer, over y = <s> + the target shifted right + positions:
    eq. 15-16 ā_t = LN(MultiHead(y_t, y_<=t, y_<=t))   causal, no residual
    eq. 17-18 ā^z_t = LN(MultiHead(ā_t, z, z) + ā_t)   over the memory slots, residual
    eq. 19-20 h_t = LN(FFN(ā^z_t) + ā^z_t)
    eq. 21    P(w_t | w_<t, z) = softmax(W h_t + b)    over the input vocabulary
    eq. 22    token cross-entropy incl. </s> (label smoothing: task.head.decoder.label_smoothing)
Dropout (`dropout_rate`) acts on the inputs and the attention weights; padding is masked
everywhere (keys, pooling, loss). Outputs: `tokens` h [B, L, model_dim] (the end token's state
pooled, not returned); `memory` [B, S, model_dim] (S = 2 slots, max then mean; 1 under
`pooling` "mean" / "max"); `memory_mask` bool[B, S]; `sentence` [B, S * model_dim], each slot
L2-normalised, then concatenated. Where the paper and the code differ: docs/models.md.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.data.vocab import EOS
from jaxenc.layers.attention import DEFAULT_KERNEL_INIT, IMPLEMENTATIONS, MultiHeadAttention
from jaxenc.layers.masks import (
    Mask,
    PaddingMask,
    at_least_float32,
    length_mask,
    masked_max,
    masked_mean,
)
from jaxenc.layers.transformer import (
    POSITIONS,
    FeedForward,
    decoder_masks,
    input_stage,
)
from jaxenc.models.config import EncoderConfig, require
from jaxenc.models.registry import EncoderSpec, encoder_outputs

POOLINGS = ("meanmax", "mean", "max")
NORM_EPSILON = 1e-12  # squared norms below this count as zero vectors (no NaN gradient)


@dataclasses.dataclass(frozen=True)
class MeanMaxAAEConfig(EncoderConfig):
    """The paper's setting (section 4.2; the code's conf.json where the paper is silent).

    Attributes (besides EncoderConfig's; the word vectors are fixed GloVe, 300-d):
      model_dim: d_m, the width of the attention output and of the hidden vectors (2048).
      ff_dim: d_f, the FFN's inner width (4096).
      num_heads: l, parallel attention heads (8).
      dropout_rate: dropout on the inputs and on every attention's weights (0.5).
      positions: "sinusoidal" (paper eq. 1-2), "learned" (the code: `max_positions` rows) or
        "none"; the encoder and the decoder have their own.
      max_positions: learned position rows (the code: maxlen 32 + 2).
      relu_projections: ReLU on the Q/K/V projections of every attention (the code; the paper's
        eq. 7 has none).
      pooling: "meanmax" (two memory slots), or the ablations "mean" / "max" (one slot).
      end_token: the encoder appends </s> (id EOS) after the last word of every non-empty
        input and reads and pools it (paper section 3.1; the code, at training and at encode
        time: module docstring); False reads the words only.
      attention: "auto", "einsum" or "fused": how every attention is computed (as the
        Transformer's `attention`; the same function).
    """

    BEFORE_OPTION = {"end_token": False, "attention": "einsum"}

    freeze_embeddings: bool = True
    model_dim: int = 2048
    ff_dim: int = 4096
    num_heads: int = 8
    dropout_rate: float = 0.5
    positions: str = "sinusoidal"
    max_positions: int = 34
    relu_projections: bool = True
    pooling: str = "meanmax"
    end_token: bool = True
    attention: str = "auto"

    def validate(self) -> None:
        require(self.pooling in POOLINGS, "pooling", self.pooling,
                f"is not one of {', '.join(POOLINGS)}", "meanmax")
        require(self.attention in IMPLEMENTATIONS, "attention", self.attention,
                f"is not one of {', '.join(IMPLEMENTATIONS)}", "auto")
        require(self.positions in POSITIONS, "positions", self.positions,
                f"is not one of {', '.join(POSITIONS)}", "sinusoidal")
        require(self.model_dim % self.num_heads == 0, "model_dim", self.model_dim,
                f"is not divisible by model.num_heads={self.num_heads}",
                self.num_heads * max(1, self.model_dim // self.num_heads))
        require(self.max_positions >= 1, "max_positions", self.max_positions,
                "is not a positive number of position rows", 34)
        require(0.0 <= self.dropout_rate < 1.0, "dropout_rate", self.dropout_rate,
                "is not in [0, 1)", 0.5)
        require(isinstance(self.end_token, bool), "end_token", self.end_token,
                "is not True or False", True)
        super().validate()


def _inputs(cfg: MeanMaxAAEConfig, tokens: jax.Array, vocab_size: int, *, train: bool,
            word_table: jax.Array | None = None, first_position: jax.Array | int = 0,
            position_rows: int | None = None) -> jax.Array:
    """eq. 1-2: tokens int32[B, L] -> Dropout(e_t + p_t) [B, L, embed_dim] (no projection);
    t counts from `first_position` (decode mode, `input_stage`)."""
    return input_stage(tokens, vocab_size=vocab_size, embed_dim=cfg.embed_dim,
                       model_dim=cfg.embed_dim, dropout_rate=cfg.dropout_rate, train=train,
                       positions=cfg.positions, max_positions=cfg.max_positions,
                       trainable_embeddings=not cfg.freeze_embeddings, dtype=cfg.compute_dtype,
                       word_table=word_table, first_position=first_position,
                       position_rows=position_rows)


def _attention(cfg: MeanMaxAAEConfig, name: str, queries: jax.Array, memory: jax.Array,
               mask: Mask | jax.Array | None, *, train: bool, decode: bool = False,
               position: jax.Array | None = None, cache_length: int | None = None) -> jax.Array:
    """eq. 3-7: MultiHead(queries [B, Lq, Dq], memory [B, Lk, Dk]) -> [B, Lq, model_dim], the
    heads concatenated without an output projection (call inside a compact method); `decode`,
    `position` and `cache_length` as MultiHeadAttention's decode mode."""
    return MultiHeadAttention(
        cfg.num_heads, qkv_features=cfg.model_dim, output_projection=False,
        projection_activation="relu" if cfg.relu_projections else "linear",
        dropout_rate=cfg.dropout_rate, implementation=cfg.attention, decode=decode,
        dtype=cfg.compute_dtype, name=name)(queries, memory, mask, train=train,
                                            position=position, cache_length=cache_length)


def _norm(name: str, x: jax.Array, dtype: jnp.dtype) -> jax.Array:
    return nn.LayerNorm(dtype=dtype, name=name)(x)


def _feed_forward(cfg: MeanMaxAAEConfig, x: jax.Array, *, train: bool) -> jax.Array:
    """eq. 10-11 / 19-20: LN(FFN(x) + x), [B, L, model_dim] -> [B, L, model_dim]."""
    transformed = FeedForward(cfg.ff_dim, dtype=cfg.compute_dtype, name="ffn")(x, train=train)
    return _norm("ffn_norm", transformed + x, cfg.compute_dtype)


def with_end_token(tokens: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
    """tokens int32[B, L], lengths int32[B] -> (int32[B, L + 1] with EOS at index lengths[b] of
    every row with lengths[b] > 0, PAD after; lengths + 1 there, 0 stays 0)."""
    padded = jnp.pad(tokens, ((0, 0), (0, 1)))
    end = (jnp.arange(padded.shape[1]) == lengths[:, None]) & (lengths > 0)[:, None]
    return (jnp.where(end, jnp.asarray(EOS, padded.dtype), padded),
            lengths + (lengths > 0).astype(lengths.dtype))


def pool(h: jax.Array, mask: jax.Array, pooling: str) -> jax.Array:
    """eq. 12-14: h [B, L, D] over the positions `mask` bool[B, L] marks real -> the memory slots
    [B, S, D]: (max, mean) for "meanmax", (mean,) or (max,) for the ablations; zeros for a
    sentence without a real position."""
    slots = {"max": (masked_max,), "mean": (masked_mean,),
             "meanmax": (masked_max, masked_mean)}[pooling]
    return jnp.stack([at_least_float32(reduce(h, mask)) for reduce in slots], axis=1)


def transfer_embedding(slots: jax.Array) -> jax.Array:
    """slots [B, S, D] -> [B, S * D]: each slot divided by its L2 norm (zero stays zero, with a
    finite gradient), concatenated in slot order."""
    slots = at_least_float32(slots)
    squared = jnp.sum(jnp.square(slots), axis=-1, keepdims=True)
    normalised = slots * jax.lax.rsqrt(jnp.maximum(squared, NORM_EPSILON))
    return normalised.reshape(slots.shape[0], -1)


class MeanMaxAAE(nn.Module):
    """{tokens int32[B, L], lengths int32[B]} (the words) -> {"tokens": h [B, L, d_m] of the
    words, "sentence": [B, S d_m], "memory": z [B, S, d_m], "memory_mask": bool[B, S]}; with
    `end_token` the encoder reads [B, L + 1] (module docstring)."""

    vocab_size: int
    config: MeanMaxAAEConfig = MeanMaxAAEConfig()

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        cfg = self.config
        words, word_lengths = sentence["tokens"], sentence["lengths"]
        tokens, lengths = (with_end_token(words, word_lengths) if cfg.end_token
                           else (words, word_lengths))  # [B, L (+ 1)]: the read positions
        real = length_mask(lengths, tokens.shape[1])
        x = _inputs(cfg, tokens, self.vocab_size, train=train)
        attended = _attention(cfg, "self_attention", x, x, PaddingMask(lengths, lengths),
                              train=train)  # eq. 8
        a = _norm("attention_norm", attended, cfg.compute_dtype)  # eq. 9
        h = _feed_forward(cfg, a, train=train) * real[..., None].astype(a.dtype)  # eq. 10-11
        memory = pool(h, real, cfg.pooling)  # eq. 12-14, over the words and </s>
        memory_mask = jnp.broadcast_to((lengths > 0)[:, None], memory.shape[:2])
        word_states = h[:, :words.shape[1]] * length_mask(
            word_lengths, words.shape[1])[..., None].astype(h.dtype)
        return encoder_outputs(tokens=word_states, sentence=transfer_embedding(memory),
                               memory=memory, memory_mask=memory_mask)


class MeanMaxDecoder(nn.Module):
    """Decoder inputs [B, T] ([BOS, w_1..w_n], PAD after) + the encoder's memory slots -> logits
    [B, T, V] over the input vocabulary (module docstring, eq. 15-21); the TransformerDecoder's
    call, plus the word table.

    Called by `jaxenc.tasks.seq2seq.Seq2Seq` with `word_table` float[V, embed_dim], the encoder's
    fixed word table, so the decoder reads the same vectors and has no table of its own.

    Decode mode (`cache_length`, jaxenc.tasks.decoding) generates one position per call with a
    key/value cache in the "cache" collection (MultiHeadAttention's decode mode):
    `self_attention` {`cached_key`, `cached_value`} [N, cache_length, H, d_m / H] and
    `memory_attention` {`memory_key`, `memory_value`} [N, S, H, d_m / H]. A step costs O(1)
    positions of projections and feed-forward plus O(cache_length) attention reads per row: a
    sequence of T tokens costs O(T) positions instead of the O(T^2) of rerunning the decoder
    over the token buffer at every step (`position` without `cache_length`).
    """

    vocab_size: int
    config: MeanMaxAAEConfig = MeanMaxAAEConfig()

    @nn.compact
    def __call__(self, inputs: jax.Array, input_lengths: jax.Array | None, memory: jax.Array,
                 memory_mask: jax.Array, *, train: bool, word_table: jax.Array,
                 position: jax.Array | None = None,
                 cache_length: int | None = None) -> jax.Array:
        """inputs int32[B, T], input_lengths int32[B], memory [B, S, d_m], memory_mask
        bool[B, S], word_table float[V, embed_dim] -> logits float32[B, T, V]; with `position`
        int32[] only that position's logits [B, V] (the full-buffer decoding reference).

        With `cache_length` (decode mode, inference, "cache" mutable): inputs int32[N, L] are
        the tokens at positions position .. position + L - 1 (L = 1 per decoding step) of a
        sequence of at most cache_length tokens, input_lengths is not read, and the result is
        logits float32[N, L, V], those of a full run over the sequence so far. The call that
        creates the cache also projects the memory slots into it.
        """
        cfg = self.config
        decode = cache_length is not None
        y = _inputs(cfg, inputs, self.vocab_size, train=train, word_table=word_table,
                    first_position=position if decode else 0, position_rows=cache_length)
        if decode:
            real, self_mask, memory_rows = None, None, memory_mask[:, None, :]
            cache = dict(position=position, cache_length=cache_length)
        else:
            real, self_mask, memory_rows = decoder_masks(input_lengths, inputs.shape[1],
                                                         memory_mask)
            cache = {}
        a = _attention(cfg, "self_attention", y, y, self_mask, train=train, decode=decode,
                       **cache)
        a = _norm("self_attention_norm", a, cfg.compute_dtype)  # eq. 15-16
        attended = _attention(cfg, "memory_attention", a, memory, memory_rows, train=train,
                              decode=decode)
        a = _norm("memory_attention_norm", attended + a, cfg.compute_dtype)  # eq. 17-18
        h = _feed_forward(cfg, a, train=train)  # eq. 19-20
        if not decode:
            h = h * real[..., None].astype(a.dtype)
            if position is not None:
                h = jnp.take(h, position, axis=1)
        return nn.Dense(self.vocab_size, kernel_init=DEFAULT_KERNEL_INIT, dtype=cfg.compute_dtype,
                        name="logits")(h).astype(jnp.float32)  # eq. 21


SPEC = EncoderSpec(config=MeanMaxAAEConfig, module=MeanMaxAAE, decoder=MeanMaxDecoder)

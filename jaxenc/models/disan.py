"""DiSAN: Directional Self-Attention Network (Shen et al., AAAI 2018), spec disan.md.

For a sentence x [n, d_e] of word embeddings, each direction (forward, backward; parameters not
shared) computes
    eq. 14:    h = sigma_h(W_h x + b_h)                                            [n, d_h]
    eq. 15-18: f(h_i, h_j) = c tanh((W_1 h_i + W_2 h_j + b_1) / c) + M_ij          [n, n, d_h]
               with the directional mask M^fw (key i < query j) or M^bw (i > j) and key padding
    eq. 11:    s_j = sum_i softmax_i(f(h_i, h_j)) ⊙ h_i (per feature; zeros if no valid key)
    eq. 19:    F = sigmoid(W_f1 s + b_f1 + W_f2 h + b_f2 + b_f)
    eq. 20:    u = F ⊙ h + (1 - F) ⊙ s, padding rows zeroed
and the sentence vector is the source2token attention over u = [u^fw; u^bw] [n, 2 d_h]:
    eq. 12:    f(u_i) = W sigma(W^(1) u_i + b^(1)) + b
    eq. 13:    s = sum_i softmax_i(f(u_i)) ⊙ u_i                                    [2 d_h]
Dropout (keep_prob) acts on the inputs of the linear maps, never on the summed values.

The token2token attention is "dense" (the [n, n, d_h] tensor, as the authors) or "blocked"
(blocks of queries, recomputed in the backward pass; jaxenc/layers/multidim_attention.py);
attention_impl="auto" takes blocked from `blocked_threshold` tokens up: on a CPU,
bench/bench_disan.py measures its training step 1.3-2.8x faster from 16 tokens up, with 3.4x (16
tokens) to 88x (512) less memory, growing linearly in n.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from jaxenc.errors import ConfigError
from jaxenc.layers.dense import DropoutDense, get_activation
from jaxenc.layers.embed import WordEmbed
from jaxenc.layers.fusion import FusionGate
from jaxenc.layers.masks import length_mask
from jaxenc.layers.multidim_attention import (
    IMPLEMENTATIONS,
    DirectionalMask,
    Source2Token,
    Token2TokenAttention,
)


class DirectionalSelfAttention(nn.Module):
    """Directional self-attention block (eq. 14-20): x [B, L, d_e], lengths [B] -> [B, L, d_h]."""

    direction: str
    hidden: int
    c: float = 5.0
    activation: str = "elu"
    keep_prob: float = 1.0
    attention_impl: str = "auto"
    block_size: int = 16
    blocked_threshold: int = 16

    @nn.compact
    def __call__(self, x: jax.Array, lengths: jax.Array, *, train: bool) -> jax.Array:
        hidden = DropoutDense(self.hidden, keep_prob=self.keep_prob, name="hidden")(x, train=train)
        h = get_activation(self.activation)(hidden)  # eq. 14
        context = Token2TokenAttention(
            score="scaled_tanh", c=self.c, keep_prob=self.keep_prob, impl=self.attention_impl,
            block_size=self.block_size, blocked_threshold=self.blocked_threshold,
            name="attention")(h, DirectionalMask(lengths, self.direction), train=train)  # eq. 15
        fused = FusionGate(keep_prob=self.keep_prob, name="fusion")(h, context, train=train)
        return fused * length_mask(lengths, x.shape[1])[..., None].astype(fused.dtype)


class DiSAN(nn.Module):
    """DiSAN encoder (eq. 12-20).

    sentence {tokens int32[B, L], lengths int32[B]}
      -> {"tokens": u [B, L, 2 d_h], "sentence": s [B, 2 d_h]}.
    """

    REQUIRED_FIELDS = ()

    vocab_size: int
    embed_dim: int = 300
    hidden: int = 300
    c: float = 5.0
    activation: str = "elu"
    keep_prob: float = 0.75
    attention_impl: str = "auto"
    block_size: int = 16
    blocked_threshold: int = 16
    freeze_embeddings: bool = False

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        tokens, lengths = sentence["tokens"], sentence["lengths"]
        x = WordEmbed(self.vocab_size, self.embed_dim, trainable=not self.freeze_embeddings,
                      name="embed")(tokens)
        directions = [
            DirectionalSelfAttention(
                direction, self.hidden, c=self.c, activation=self.activation,
                keep_prob=self.keep_prob, attention_impl=self.attention_impl,
                block_size=self.block_size, blocked_threshold=self.blocked_threshold,
                name=direction)(x, lengths, train=train)
            for direction in ("forward", "backward")]
        token_states = jnp.concatenate(directions, axis=-1)  # u = [u^fw; u^bw]
        valid = length_mask(lengths, tokens.shape[1])
        sentence_vector = Source2Token(activation=self.activation, keep_prob=self.keep_prob,
                                       name="source2token")(token_states, valid, train=train)
        return {"tokens": token_states, "sentence": sentence_vector}


def from_config(model_cfg: ml_collections.ConfigDict, vocab_size: int) -> DiSAN:
    """model_cfg: name="disan", embed_dim, hidden, c, activation, keep_prob, attention_impl
    ("auto" | "dense" | "blocked"), block_size, blocked_threshold, freeze_embeddings."""
    get_activation(model_cfg.activation)  # fails early on an unknown name
    if model_cfg.attention_impl not in IMPLEMENTATIONS:
        raise ConfigError(f"model.attention_impl={model_cfg.attention_impl!r} is not one of "
                          f"{', '.join(IMPLEMENTATIONS)} (fix: --config.model.attention_impl=auto)")
    if model_cfg.block_size < 1:
        raise ConfigError(f"model.block_size={model_cfg.block_size} is not a positive integer "
                          "(fix: --config.model.block_size=16)")
    if not 0.0 < model_cfg.keep_prob <= 1.0:
        raise ConfigError(f"model.keep_prob={model_cfg.keep_prob} is not in (0, 1] "
                          "(fix: --config.model.keep_prob=0.75, 1.0 for no dropout)")
    return DiSAN(
        vocab_size=vocab_size, embed_dim=model_cfg.embed_dim, hidden=model_cfg.hidden,
        c=model_cfg.c, activation=model_cfg.activation, keep_prob=model_cfg.keep_prob,
        attention_impl=model_cfg.attention_impl, block_size=model_cfg.block_size,
        blocked_threshold=model_cfg.blocked_threshold,
        freeze_embeddings=model_cfg.freeze_embeddings)

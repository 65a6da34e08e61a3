"""DiSAN: Directional Self-Attention Network (Shen et al., AAAI 2018).

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
Dropout (keep_prob) acts on the inputs of the linear maps, never on the summed values; j is the
query and i the key, as in the authors' code (docs/models.md).

`attention_impl`: "dense" (the [n, n, d_h] tensor, as the authors), "blocked" (query blocks
against all keys, recomputed in the backward pass) or "directional" (only the key blocks the
mask allows, about half; jaxenc/layers/multidim_attention.py); "auto" takes directional from
`blocked_threshold` tokens up. `examples_per_step` is jaxenc.layers.loops's.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.layers.dense import DropoutDense, get_activation
from jaxenc.layers.dropout import AUTO_BITS, check_mask_bits
from jaxenc.layers.embed import WordEmbed
from jaxenc.layers.fusion import FusionGate
from jaxenc.layers.masks import DirectionalMask, length_mask
from jaxenc.layers.multidim_attention import Source2Token, Token2TokenAttention, Token2TokenOptions
from jaxenc.models.config import EncoderConfig, require
from jaxenc.models.registry import EncoderSpec, encoder_outputs


@dataclasses.dataclass(frozen=True)
class DiSANConfig(EncoderConfig, Token2TokenOptions):
    """The paper's sizes: d_h = 300, c = 5, ELU, dropout keep 0.75 (SNLI; 0.7 for SST).

    Attributes (besides EncoderConfig's and Token2TokenOptions'):
      hidden: d_h, the width of each direction (the sentence vector is 2 d_h).
      c: the scaled-tanh bound of the scores (eq. 15).
      activation: sigma_h of eq. 14 and the source2token hidden layer.
      keep_prob: dropout keep probability on the inputs of every linear map (authors' code).
      dropout_bits: random bits per dropout decision (jaxenc/layers/dropout.py).
    """

    hidden: int = 300
    c: float = 5.0
    activation: str = "elu"
    keep_prob: float = 0.75
    # 0 (AUTO_BITS): the fewest random bits per decision that hold keep_prob exactly (2 for
    # 0.75; 8 for 0.7, i.e. 179/256), as drawing random words is a large share of a CPU step;
    # 8: one byte per decision; 32: flax's nn.Dropout bit for bit. All draw the same dropout in
    # distribution from different random streams, so a run reproduces bit for bit only with the
    # value it was trained with.
    dropout_bits: int = AUTO_BITS

    def validate(self) -> None:
        get_activation(self.activation)  # one-line ConfigError for an unknown name
        require(0.0 < self.keep_prob <= 1.0, "keep_prob", self.keep_prob, "is not in (0, 1]",
                "0.75 (1.0 for no dropout)")
        check_mask_bits(self.dropout_bits)
        super().validate()


class DirectionalSelfAttention(nn.Module):
    """Directional self-attention block (eq. 14-20): x [B, L, d_e], lengths [B] -> [B, L, d_h]."""

    direction: str
    config: DiSANConfig

    @nn.compact
    def __call__(self, x: jax.Array, lengths: jax.Array, *, train: bool) -> jax.Array:
        cfg, dtype = self.config, self.config.compute_dtype
        hidden = DropoutDense(cfg.hidden, keep_prob=cfg.keep_prob, dropout_bits=cfg.dropout_bits,
                              dtype=dtype, name="hidden")(x, train=train)
        h = get_activation(cfg.activation)(hidden)  # eq. 14
        context = Token2TokenAttention(
            score="scaled_tanh", c=cfg.c, keep_prob=cfg.keep_prob, dropout_bits=cfg.dropout_bits,
            options=cfg, dtype=dtype, name="attention")(
                h, DirectionalMask(lengths, self.direction), train=train)  # eq. 15
        fused = FusionGate(keep_prob=cfg.keep_prob, dropout_bits=cfg.dropout_bits, dtype=dtype,
                           name="fusion")(h, context, train=train)
        return fused * length_mask(lengths, x.shape[1])[..., None].astype(fused.dtype)


class DiSAN(nn.Module):
    """DiSAN encoder (eq. 12-20).

    sentence {tokens int32[B, L], lengths int32[B]}
      -> {"tokens": u [B, L, 2 d_h], "sentence": s [B, 2 d_h], "memory": u,
          "memory_mask": bool[B, L]}.
    """

    vocab_size: int
    config: DiSANConfig = DiSANConfig()

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        cfg = self.config
        tokens, lengths = sentence["tokens"], sentence["lengths"]
        x = WordEmbed(self.vocab_size, cfg.embed_dim, trainable=not cfg.freeze_embeddings,
                      name="embed")(tokens)
        directions = [DirectionalSelfAttention(direction, cfg, name=direction)(
            x, lengths, train=train) for direction in ("forward", "backward")]
        token_states = jnp.concatenate(directions, axis=-1)  # u = [u^fw; u^bw]
        valid = length_mask(lengths, tokens.shape[1])
        sentence_vector = Source2Token(activation=cfg.activation, keep_prob=cfg.keep_prob,
                                       dropout_bits=cfg.dropout_bits,
                                       dtype=cfg.compute_dtype, name="source2token")(
            token_states, valid, train=train)
        return encoder_outputs(tokens=token_states, sentence=sentence_vector,
                               memory=token_states, memory_mask=valid)


SPEC = EncoderSpec(config=DiSANConfig, module=DiSAN)

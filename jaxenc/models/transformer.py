"""Plain multi-head Transformer encoder: the "Multi-head" model of PSAN's Table 5.

h^0 = W_in e(w) + PE (sinusoidal positions; W_in only when the embedding width differs from d),
h^l = EncoderBlock(h^{l-1}) (Vaswani et al. 2017: multi-head self-attention and a position-wise
FFN, each with a residual connection and post-LayerNorm), padding keys masked in every layer.
Sentence vector = mean (or max) of the last layer over real tokens; with d = 300 this is the
300-d sentence vector that Table 5 compares against PSAN and DiSAN.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import ml_collections

from jaxenc.errors import ConfigError
from jaxenc.layers.embed import WordEmbed
from jaxenc.layers.masks import length_mask, masked_max, masked_mean
from jaxenc.layers.transformer import DEFAULT_KERNEL_INIT, EncoderBlock, sinusoidal_positions

POOLINGS = {"mean": masked_mean, "max": masked_max}


class TransformerEncoder(nn.Module):
    """{tokens int32[B, L], lengths int32[B]} -> {"tokens": [B, L, d], "sentence": [B, d]}."""

    REQUIRED_FIELDS = ()

    vocab_size: int
    embed_dim: int
    model_dim: int = 300
    num_layers: int = 2
    num_heads: int = 6
    ff_dim: int = 600
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.0
    pooling: str = "mean"

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        tokens = sentence["tokens"]
        length = tokens.shape[1]
        mask = length_mask(sentence["lengths"], length)
        x = WordEmbed(self.vocab_size, self.embed_dim, name="embed")(tokens)
        if self.embed_dim != self.model_dim:
            x = nn.Dense(self.model_dim, kernel_init=DEFAULT_KERNEL_INIT,
                         name="input_projection")(x)
        x = x + sinusoidal_positions(length, self.model_dim)
        x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)
        attention_mask = mask[:, :, None] & mask[:, None, :]
        for layer in range(self.num_layers):
            x = EncoderBlock(self.num_heads, self.ff_dim, self.dropout_rate,
                             self.attention_dropout_rate, name=f"layer_{layer}")(
                x, attention_mask, train=train)
            x = x * mask[..., None].astype(x.dtype)
        return {"tokens": x, "sentence": POOLINGS[self.pooling](x, mask)}


def from_config(model_cfg: ml_collections.ConfigDict, vocab_size: int) -> TransformerEncoder:
    """model_cfg: name="transformer", embed_dim, model_dim, num_layers, num_heads, ff_dim,
    dropout_rate, attention_dropout_rate, pooling ("mean" | "max")."""
    if model_cfg.pooling not in POOLINGS:
        raise ConfigError(f"model.pooling={model_cfg.pooling!r} is not one of {sorted(POOLINGS)}")
    if model_cfg.model_dim % model_cfg.num_heads:
        raise ConfigError(f"model.model_dim={model_cfg.model_dim} is not divisible by "
                          f"model.num_heads={model_cfg.num_heads}")
    return TransformerEncoder(
        vocab_size=vocab_size, embed_dim=model_cfg.embed_dim, model_dim=model_cfg.model_dim,
        num_layers=model_cfg.num_layers, num_heads=model_cfg.num_heads, ff_dim=model_cfg.ff_dim,
        dropout_rate=model_cfg.dropout_rate,
        attention_dropout_rate=model_cfg.attention_dropout_rate, pooling=model_cfg.pooling)

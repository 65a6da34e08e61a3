"""Plain multi-head Transformer encoder: the "Multi-head" model of PSAN's Table 5.

h^0 = Dropout(W_in e(w) + PE) (sinusoidal positions; W_in only when the embedding width differs
from d), h^l = EncoderBlock(h^{l-1}) (Vaswani et al. 2017: multi-head self-attention and a
position-wise FFN, each with a residual connection and post-LayerNorm), padding keys masked in
every layer. Sentence vector = mean (or max) of the last layer over real tokens; with d = 300
this is the 300-d sentence vector that Table 5 compares against PSAN and DiSAN.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax

from jaxenc.layers.attention import IMPLEMENTATIONS, ScoreBias
from jaxenc.layers.masks import PaddingMask, length_mask, masked_max, masked_mean
from jaxenc.layers.transformer import EncoderBlock, input_stage
from jaxenc.models.config import EncoderConfig, require
from jaxenc.models.registry import EncoderSpec, encoder_outputs

POOLINGS = {"mean": masked_mean, "max": masked_max}
LAYER_NORMS = ("post", "pre")


@dataclasses.dataclass(frozen=True)
class TransformerSizes(EncoderConfig):
    """The sizes of a Transformer encoder stack (shared by the Transformer and the
    PhraseTransformer): d 300, 2 layers, 6 heads, FFN 600 (PSAN Table 5, PhraseTransformer's POS
    tagger), dropout on sublayer outputs and on attention weights.

    Attributes:
      model_dim: width d of every layer (the embeddings are projected to it).
      num_layers: encoder layers (self-attention + feed-forward each).
      num_heads: attention heads per layer (d / num_heads dimensions each).
      ff_dim: hidden width of each layer's feed-forward network.
      dropout_rate: dropout on each sublayer's output, before its residual sum.
      attention_dropout_rate: dropout on the attention weights.
      attention: "auto" computes each self-attention with `jax.nn.dot_product_attention` (cuDNN's
        fused kernel on NVIDIA GPUs) where that is exact (no dropout on the weights), "einsum"
        always with explicit scores and weights, "fused" requires the former
        (`jaxenc.layers.attention`); all three compute the same function.
    """

    BEFORE_OPTION = {"attention": "einsum"}  # a saved config without it resumes exactly

    model_dim: int = 300
    num_layers: int = 2
    num_heads: int = 6
    ff_dim: int = 600
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.0
    attention: str = "auto"
    # Vaswani et al. multiply the embeddings by sqrt(model_dim). Off by default, the encoders'
    # papers say nothing of it; then small word vectors (U(-0.05, 0.05), 50-d GloVe projected to
    # 300) are dwarfed by the positions and every sentence starts out nearly the same vector.
    scale_embeddings: bool = False
    # "post": LayerNorm after each residual sum (Vaswani et al., the papers' Transformers);
    # "pre": before each sublayer, plus a final LayerNorm over the stack's output (Xiong et al.
    # 2020), which trains without warm-up at larger learning rates.
    layer_norm: str = "post"

    @property
    def embedding_scale(self) -> float:
        return float(self.model_dim) ** 0.5 if self.scale_embeddings else 1.0

    def validate(self) -> None:
        require(self.layer_norm in LAYER_NORMS, "layer_norm", self.layer_norm,
                f"is not one of {', '.join(LAYER_NORMS)}", "post")
        require(self.attention in IMPLEMENTATIONS, "attention", self.attention,
                f"is not one of {', '.join(IMPLEMENTATIONS)}", "auto")
        require(self.model_dim % self.num_heads == 0, "model_dim", self.model_dim,
                f"is not divisible by model.num_heads={self.num_heads}",
                self.num_heads * max(1, self.model_dim // self.num_heads))
        super().validate()


@dataclasses.dataclass(frozen=True)
class TransformerConfig(TransformerSizes):
    """PSAN Table 5's multi-head model: TransformerSizes' defaults, mean pooling.

    Attributes:
      pooling: how the token vectors become the sentence vector, one of POOLINGS.
    """

    pooling: str = "mean"

    def validate(self) -> None:
        require(self.pooling in POOLINGS, "pooling", self.pooling,
                f"is not one of {sorted(POOLINGS)}", "mean")
        super().validate()


LayerScoreBias = Callable[[int, jax.Array], ScoreBias | None]
"""(layer index, the layer's input [B, L, d]) -> that layer's attention score bias, or None."""


def encoder_stack(x: jax.Array, lengths: jax.Array, sizes: TransformerSizes, *, train: bool,
                  score_bias: LayerScoreBias | None = None) -> jax.Array:
    """`sizes.num_layers` EncoderBlocks ("layer_0", ...) over x [B, L, d] -> [B, L, d], padding
    keys masked and padding rows zeroed after every layer; with `sizes.layer_norm="pre"`, a final
    LayerNorm ("final_norm") over the last layer's output. Call it inside a module's compact
    `__call__` (the blocks belong to that module)."""
    mask = length_mask(lengths, x.shape[1])[..., None]
    attention_mask = PaddingMask(key_lengths=lengths, query_lengths=lengths)
    pre_norm = sizes.layer_norm == "pre"
    for layer in range(sizes.num_layers):
        x = EncoderBlock(sizes.num_heads, sizes.ff_dim, sizes.dropout_rate,
                         sizes.attention_dropout_rate, pre_norm=pre_norm,
                         attention_impl=sizes.attention,
                         dtype=sizes.compute_dtype, name=f"layer_{layer}")(
            x, attention_mask, train=train,
            score_bias=None if score_bias is None else score_bias(layer, x))
        x = x * mask.astype(x.dtype)
    if pre_norm:
        x = nn.LayerNorm(dtype=sizes.compute_dtype, name="final_norm")(x) * mask.astype(x.dtype)
    return x


class TransformerEncoder(nn.Module):
    """{tokens int32[B, L], lengths int32[B]} -> {"tokens": [B, L, d], "sentence": [B, d],
    "memory": [B, L, d], "memory_mask": bool[B, L]}."""

    vocab_size: int
    config: TransformerConfig = TransformerConfig()

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        cfg = self.config
        tokens, lengths = sentence["tokens"], sentence["lengths"]
        mask = length_mask(lengths, tokens.shape[1])
        x = input_stage(tokens, vocab_size=self.vocab_size, embed_dim=cfg.embed_dim,
                        model_dim=cfg.model_dim, dropout_rate=cfg.dropout_rate, train=train,
                        trainable_embeddings=not cfg.freeze_embeddings,
                        embedding_scale=cfg.embedding_scale, dtype=cfg.compute_dtype)
        x = encoder_stack(x, lengths, cfg, train=train)
        return encoder_outputs(tokens=x, sentence=POOLINGS[cfg.pooling](x, mask), memory=x,
                               memory_mask=mask)


SPEC = EncoderSpec(config=TransformerConfig, module=TransformerEncoder)

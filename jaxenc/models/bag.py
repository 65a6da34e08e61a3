"""Bag-of-words baseline: the sentence vector is the mean of its word embeddings.

u = (1 / n) sum_{i <= n} e(w_i) over the real tokens; token states are the embeddings themselves.
This is the "bag-of-embeddings" reference of the transfer tables (jaxenc.evaluation).
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax

from jaxenc.layers.embed import WordEmbed
from jaxenc.layers.masks import length_mask, masked_mean
from jaxenc.models.config import EncoderConfig
from jaxenc.models.registry import EncoderSpec, encoder_outputs


@dataclasses.dataclass(frozen=True)
class BagConfig(EncoderConfig):
    """Only the word table (EncoderConfig's fields). The bag has nothing to compute in a narrower
    `dtype`: the mean is a reduction, taken in float32 whatever the dtype."""


class BagOfWords(nn.Module):
    """{tokens int32[B, L], lengths int32[B]} -> {"tokens": [B, L, D], "sentence": [B, D],
    "memory": [B, L, D], "memory_mask": bool[B, L]}."""

    vocab_size: int
    config: BagConfig = BagConfig()

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        del train  # nothing stochastic
        tokens = sentence["tokens"]
        vectors = WordEmbed(self.vocab_size, self.config.embed_dim,
                            trainable=not self.config.freeze_embeddings, name="embed")(tokens)
        mask = length_mask(sentence["lengths"], tokens.shape[1])
        return encoder_outputs(tokens=vectors, sentence=masked_mean(vectors, mask),
                               memory=vectors, memory_mask=mask)


SPEC = EncoderSpec(config=BagConfig, module=BagOfWords)

"""Bag-of-words baseline: the sentence vector is the mean of its word embeddings.

u = (1 / n) sum_{i <= n} e(w_i) over the real tokens; token states are the embeddings themselves.
This is the "bag-of-embeddings" reference of the SentEval tables (heads_and_eval.md).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import ml_collections

from jaxenc.layers.embed import WordEmbed
from jaxenc.layers.masks import length_mask, masked_mean


class BagOfWords(nn.Module):
    """{tokens int32[B, L], lengths int32[B]} -> {"tokens": [B, L, D], "sentence": [B, D]}."""

    REQUIRED_FIELDS = ()

    vocab_size: int
    embed_dim: int

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        del train  # nothing stochastic
        tokens = sentence["tokens"]
        vectors = WordEmbed(self.vocab_size, self.embed_dim, name="embed")(tokens)
        mask = length_mask(sentence["lengths"], tokens.shape[1])
        return {"tokens": vectors, "sentence": masked_mean(vectors, mask)}


def from_config(model_cfg: ml_collections.ConfigDict, vocab_size: int) -> BagOfWords:
    """model_cfg: name="bag", embed_dim."""
    return BagOfWords(vocab_size=vocab_size, embed_dim=model_cfg.embed_dim)

"""Token tagging (POS): a classifier on every word-aligned token state."""

from __future__ import annotations

from collections.abc import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxenc.data.batching import sentence_fields
from jaxenc.data.vocab import UNK
from jaxenc.layers.masks import length_mask
from jaxenc.tasks import losses
from jaxenc.tasks.base import (
    Batch,
    Outputs,
    Task,
    token_eval_outputs,
    token_summary,
    weighted_mean,
)
from jaxenc.tasks.heads import ClassifierHead


class Tagger(nn.Module):
    """batch {sentence/...} -> {"logits": [B, L, K]}: a classifier on every word-aligned token
    state (the encoder output's "tokens"; hypernodes and pooled slots never get a tag)."""

    encoder: nn.Module
    head: nn.Module

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        encoded = self.encoder(sentence_fields(batch, "sentence"), train=train)
        return {"logits": self.head(encoded["tokens"], train=train)}


class TaggingTask(Task):
    """Token tagging (POS): cross-entropy over positions whose tag is >= 0 (prefix/padding: -1).

    Metrics: token accuracy, per-token loss and "unknown_word_accuracy", the accuracy on the
    tokens outside the training vocabulary (read as the unknown id, UNK), the usual tagger
    breakdown of where errors come from; absent when a split has no such token.
    """

    kind = "tagging"
    primary_metric = "accuracy"

    def __init__(self, num_tags: int, head_cfg: ml_collections.ConfigDict):
        self.num_tags, self.head_cfg = num_tags, head_cfg

    def build_model(self, encoder: nn.Module) -> nn.Module:
        return Tagger(encoder, ClassifierHead(self.num_tags, tuple(self.head_cfg.hidden_dims),
                                              self.head_cfg.activation,
                                              self.head_cfg.dropout_rate))

    @staticmethod
    def _valid(batch: Batch) -> jax.Array:
        tags = batch["tags"]
        lengths = batch["sentence/lengths"]
        return (tags >= 0) & length_mask(lengths, tags.shape[1]) & (batch["weight"][:, None] > 0)

    def _token_losses(self, outputs: Outputs, batch: Batch) -> jax.Array:
        return losses.classification_losses(outputs["logits"], jnp.maximum(batch["tags"], 0))

    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        valid = self._valid(batch).astype(jnp.float32)
        return weighted_mean(self._token_losses(outputs, batch), valid)

    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        """Per-example sums [B]: correct, count, loss over the tagged tokens, and
        unknown_correct, unknown_count over those whose word is the unknown id."""
        valid = self._valid(batch)
        correct = jnp.argmax(outputs["logits"], -1) == batch["tags"]
        sums = token_eval_outputs(correct, valid, self._token_losses(outputs, batch))
        unknown = (valid & (batch["sentence/tokens"] == UNK)).astype(jnp.float32)
        return {**sums, "unknown_correct": (correct * unknown).sum(-1),
                "unknown_count": unknown.sum(-1)}

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        summary = token_summary(collected)
        unknown = float(np.sum(collected["unknown_count"]))
        if unknown:
            summary["unknown_word_accuracy"] = float(np.sum(collected["unknown_correct"])) / unknown
        return summary

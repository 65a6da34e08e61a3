"""Sentence and sentence-pair classification, relatedness scores, and their heads alone over
sentence vectors (`VectorHead`, what an exported run predicts with)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxenc.data.batching import sentence_fields
from jaxenc.tasks import losses, metrics
from jaxenc.tasks.base import Batch, Outputs, Task, weighted_mean
from jaxenc.tasks.heads import (
    ClassifierHead,
    RelatednessHead,
    expected_score,
    pair_features,
    parse_pair_features,
)

# ----------------------------------------------------------------------------- heads alone


class VectorHead(nn.Module):
    """A classification or relatedness task's head over sentence vectors: u [B, D] (and v
    [B, D] of the second sentences of pairs) -> {"logits": [B, K]} or {"log_probs": [B, K]}, as
    the task model computes them from its encoder's vectors. Its one submodule is named "head",
    as in the task model, so a trained model's `params["head"]` apply as they are."""

    head: nn.Module
    kind: str  # "single", "pair" or "relatedness"
    features: Sequence[str] = ()

    def __call__(self, u: jax.Array, v: jax.Array | None = None) -> Outputs:
        if self.kind == "relatedness":
            return {"log_probs": self.head(u, v)}
        if self.kind == "pair":
            u = pair_features(u, v, self.features)
        return {"logits": self.head(u, train=False)}


# ----------------------------------------------------------------------------- classification


class SentenceClassifier(nn.Module):
    """batch {sentence/...} -> {"logits": [B, K]}: head(encoder(sentence)["sentence"])."""

    encoder: nn.Module
    head: nn.Module

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        encoded = self.encoder(sentence_fields(batch, "sentence"), train=train)
        return {"logits": self.head(encoded["sentence"], train=train)}


class PairClassifier(nn.Module):
    """batch {first/..., second/...} -> {"logits": [B, K]} over pair features of a TIED encoder."""

    encoder: nn.Module
    head: nn.Module
    features: Sequence[str]

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        u = self.encoder(sentence_fields(batch, "first"), train=train)["sentence"]
        v = self.encoder(sentence_fields(batch, "second"), train=train)["sentence"]
        return {"logits": self.head(pair_features(u, v, self.features), train=train)}


class ClassificationTask(Task):
    """Single-sentence ("single") or sentence-pair ("pair") classification, cross-entropy loss.

    Metrics: accuracy, loss, and F1 of class 1 for binary tasks (MRPC's second number).
    """

    primary_metric = "accuracy"

    def __init__(self, kind: str, num_classes: int, head_cfg: ml_collections.ConfigDict):
        self.kind, self.num_classes = kind, num_classes
        self.head_cfg = head_cfg
        self.features = parse_pair_features(head_cfg.pair_features) if kind == "pair" else ()

    def _head(self) -> nn.Module:
        return ClassifierHead(self.num_classes, tuple(self.head_cfg.hidden_dims),
                              self.head_cfg.activation, self.head_cfg.dropout_rate)

    def build_model(self, encoder: nn.Module) -> nn.Module:
        if self.kind == "pair":
            return PairClassifier(encoder, self._head(), self.features)
        return SentenceClassifier(encoder, self._head())

    def vector_head(self) -> VectorHead:
        return VectorHead(self._head(), self.kind, self.features)

    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        per_example = losses.classification_losses(outputs["logits"], batch["label"])
        return weighted_mean(per_example, batch["weight"])

    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        return {"prediction": jnp.argmax(outputs["logits"], -1), "label": batch["label"],
                "loss": losses.classification_losses(outputs["logits"], batch["label"])}

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        result = {"accuracy": metrics.accuracy(collected["prediction"], collected["label"]),
                  "loss": float(np.mean(collected["loss"]))}
        if self.num_classes == 2:
            result["f1"] = metrics.binary_f1(collected["prediction"], collected["label"])
        return result


# ----------------------------------------------------------------------------- relatedness


class PairRelatedness(nn.Module):
    """batch {first/..., second/...} -> {"log_probs": [B, K]} (Tai et al. head, tied encoder)."""

    encoder: nn.Module
    head: nn.Module

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        u = self.encoder(sentence_fields(batch, "first"), train=train)["sentence"]
        v = self.encoder(sentence_fields(batch, "second"), train=train)["sentence"]
        return {"log_probs": self.head(u, v)}


class RelatednessTask(Task):
    """Relatedness scores in [1, K] (SICK-R, STS-B): loss KL(sparse target || p); metrics
    Pearson, Spearman and MSE of the expected score."""

    kind = "relatedness"
    primary_metric = "pearson"

    def __init__(self, num_classes: int, min_score: float, head_cfg: ml_collections.ConfigDict):
        self.num_classes, self.min_score = num_classes, min_score
        self.hidden_dim = head_cfg.relatedness_hidden_dim

    def build_model(self, encoder: nn.Module) -> nn.Module:
        return PairRelatedness(encoder, RelatednessHead(self.num_classes, self.hidden_dim))

    def vector_head(self) -> VectorHead:
        return VectorHead(RelatednessHead(self.num_classes, self.hidden_dim), self.kind)

    def _losses(self, outputs: Outputs, batch: Batch) -> jax.Array:
        target = losses.relatedness_target(batch["score"], self.num_classes, self.min_score)
        return losses.kl_divergences(target, outputs["log_probs"])

    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        return weighted_mean(self._losses(outputs, batch), batch["weight"])

    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        return {"prediction": expected_score(outputs["log_probs"], self.min_score),
                "score": batch["score"],
                "loss": self._losses(outputs, batch)}

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        predicted, gold = collected["prediction"], collected["score"]
        return {"pearson": metrics.pearson(predicted, gold),
                "spearman": metrics.spearman(predicted, gold),
                "mse": metrics.mean_squared_error(predicted, gold),
                "loss": float(np.mean(collected["loss"]))}

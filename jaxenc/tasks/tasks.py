"""Tasks: an encoder composed with a head, plus the task's loss and metrics.

A `Task` reads a batch (flat dict, docs/ARCHITECTURE.md "Batches"):
- `build_model(encoder)` -> flax module `(batch, *, train) -> outputs` (the encoder is a submodule
  named "encoder", so its word table sits at params["encoder"]["embed"]["embedding"]);
- `loss(outputs, batch)` -> scalar, a mean weighted by `batch["weight"]` (filler rows count 0);
- `eval_outputs(outputs, batch)` -> per-example arrays [B] that the host concatenates over a split;
- `summarize(collected)` -> named metrics of the split (`primary_metric` among them, higher is
  better; the loop keeps the checkpoint that maximises it).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxenc.data.batching import sentence_fields
from jaxenc.errors import ConfigError
from jaxenc.layers.masks import length_mask
from jaxenc.layers.transformer import TransformerDecoder
from jaxenc.tasks import losses, metrics
from jaxenc.tasks.heads import (
    ClassifierHead,
    RelatednessHead,
    expected_score,
    pair_features,
    parse_pair_features,
)

Batch = Mapping[str, jax.Array]
Outputs = dict[str, jax.Array]


def weighted_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
    """sum(w * x) / max(sum(w), 1) over all elements (same shapes)."""
    return jnp.sum(values * weights) / jnp.maximum(jnp.sum(weights), 1.0)


class Task(abc.ABC):
    """One supervised objective over batches of a dataset kind (module docstring)."""

    kind: str  # the dataset kind (jaxenc.data.featurize.ROLES says which roles a batch has)
    primary_metric: str

    @abc.abstractmethod
    def build_model(self, encoder: nn.Module) -> nn.Module:
        """The trainable module: encoder + head."""

    @abc.abstractmethod
    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        """Scalar training loss of a batch."""

    @abc.abstractmethod
    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        """Per-example quantities [B] that `summarize` turns into metrics."""

    @abc.abstractmethod
    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        """Metrics of a split from the concatenated `eval_outputs` of its real examples."""


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

    def build_model(self, encoder: nn.Module) -> nn.Module:
        head = ClassifierHead(self.num_classes, tuple(self.head_cfg.hidden_dims),
                              self.head_cfg.activation, self.head_cfg.dropout_rate)
        if self.kind == "pair":
            return PairClassifier(encoder, head, self.features)
        return SentenceClassifier(encoder, head)

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


# ----------------------------------------------------------------------------- token level


def _token_summary(collected: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Token accuracy and per-token loss from per-example sums (correct, count, loss)."""
    count = max(float(np.sum(collected["count"])), 1.0)
    return {"accuracy": float(np.sum(collected["correct"])) / count,
            "loss": float(np.sum(collected["loss"])) / count}


def _token_eval_outputs(logits: jax.Array, targets: jax.Array, valid: jax.Array,
                        token_losses: jax.Array) -> dict[str, jax.Array]:
    """Per-example sums over valid positions: logits [B, T, V], targets/valid/losses [B, T]."""
    valid = valid.astype(jnp.float32)
    correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32) * valid
    return {"correct": correct.sum(-1), "count": valid.sum(-1),
            "loss": (token_losses * valid).sum(-1)}


class Tagger(nn.Module):
    """batch {sentence/...} -> {"logits": [B, L, K]}: a classifier on every word-aligned token
    state (the encoder output's "tokens"; hypernodes and pooled slots never get a tag)."""

    encoder: nn.Module
    head: nn.Module

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        encoded = self.encoder(sentence_fields(batch, "sentence"), train=train)
        return {"logits": self.head(encoded["tokens"], train=train)}


class TaggingTask(Task):
    """Token tagging (POS): cross-entropy over positions whose tag is >= 0 (prefix/padding: -1)."""

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
        return _token_eval_outputs(outputs["logits"], batch["tags"], self._valid(batch),
                                   self._token_losses(outputs, batch))

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        return _token_summary(collected)


# ----------------------------------------------------------------------------- seq2seq


def decoder_io(batch: Batch) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Teacher forcing from `target/tokens` = [BOS, w_1..w_n, EOS] (int32[B, T]).

    Returns decoder inputs [BOS, w_1..w_n] [B, T-1], their lengths n+1 [B], and the outputs to
    predict [w_1..w_n, EOS] [B, T-1].
    """
    tokens = batch["target/tokens"]
    return tokens[:, :-1], batch["target/lengths"] - 1, tokens[:, 1:]


class Seq2Seq(nn.Module):
    """batch {source/..., target/...} -> {"logits": [B, T-1, V]} (Transformer decoder over the
    encoder output's "memory" slots, those "memory_mask" marks real)."""

    encoder: nn.Module
    decoder: nn.Module

    def __call__(self, batch: Batch, *, train: bool) -> Outputs:
        encoded = self.encoder(sentence_fields(batch, "source"), train=train)
        inputs, input_lengths, _ = decoder_io(batch)
        logits = self.decoder(inputs, input_lengths, encoded["memory"], encoded["memory_mask"],
                              train=train)
        return {"logits": logits}


class Seq2SeqTask(Task):
    """Translation or autoencoding: token cross-entropy (label smoothing) incl. EOS, padding
    masked; metrics: token accuracy (teacher forcing), per-token loss and perplexity."""

    primary_metric = "accuracy"

    def __init__(self, kind: str, target_vocab_size: int, head_cfg: ml_collections.ConfigDict):
        self.kind, self.target_vocab_size = kind, target_vocab_size
        self.decoder_cfg = head_cfg.decoder

    def build_model(self, encoder: nn.Module) -> nn.Module:
        cfg = self.decoder_cfg
        decoder = TransformerDecoder(self.target_vocab_size, cfg.model_dim, cfg.num_layers,
                                     cfg.num_heads, cfg.ff_dim, cfg.dropout_rate)
        return Seq2Seq(encoder, decoder)

    @staticmethod
    def _valid(batch: Batch) -> jax.Array:
        _, lengths, targets = decoder_io(batch)
        return length_mask(lengths, targets.shape[1]) & (batch["weight"][:, None] > 0)

    def loss(self, outputs: Outputs, batch: Batch) -> jax.Array:
        targets = decoder_io(batch)[2]
        smoothed = losses.token_losses(outputs["logits"], targets,
                                       self.decoder_cfg.label_smoothing)
        return weighted_mean(smoothed, self._valid(batch).astype(jnp.float32))

    def eval_outputs(self, outputs: Outputs, batch: Batch) -> dict[str, jax.Array]:
        targets = decoder_io(batch)[2]
        return _token_eval_outputs(outputs["logits"], targets, self._valid(batch),
                                   losses.token_losses(outputs["logits"], targets))

    def summarize(self, collected: Mapping[str, np.ndarray]) -> dict[str, float]:
        summary = _token_summary(collected)
        summary["perplexity"] = float(np.exp(summary["loss"]))
        return summary


# ----------------------------------------------------------------------------- factory


def build_task(kind: str, task_cfg: ml_collections.ConfigDict, *, num_classes: int | None = None,
               min_score: float = 1.0, num_tags: int | None = None,
               target_vocab_size: int | None = None) -> Task:
    """The task for a dataset of `kind` (DatasetInfo.kind); head options from `task_cfg.head`.

    num_classes: classes (classification) or score classes K (relatedness, from min_score on).
    """
    head = task_cfg.head
    if kind in ("single", "pair"):
        return ClassificationTask(kind, num_classes, head)
    if kind == "relatedness":
        if num_classes is None:
            raise ConfigError(f"dataset {task_cfg.dataset!r} has no fixed score classes for the "
                              "relatedness head (fix: train on sick_r or stsb)")
        return RelatednessTask(num_classes, min_score, head)
    if kind == "tagging":
        return TaggingTask(num_tags, head)
    if kind in ("translation", "unlabelled"):
        return Seq2SeqTask(kind, target_vocab_size, head)
    raise ConfigError(f"dataset {task_cfg.dataset!r} has kind {kind!r}, which no task handles "
                      "(fix: use a dataset of another kind)")

"""The task interface: an encoder composed with a head, plus the task's loss and metrics.

A `Task` reads a batch (flat dict, docs/ARCHITECTURE.md "Batches"):
- `build_model(encoder)` -> flax module `(batch, *, train) -> outputs` (the encoder is a submodule
  named "encoder", so its word table sits at params["encoder"]["embed"]["embedding"]);
- `loss(outputs, batch)` -> scalar, a mean weighted by `batch["weight"]` (filler rows count 0);
- `eval_outputs(outputs, batch)` -> per-example arrays [B] that the host concatenates over a split;
- `summarize(collected)` -> named metrics of the split (`primary_metric` among them, higher is
  better; the loop keeps the checkpoint that maximises it);
- classification and relatedness tasks also give `vector_head()`: their head alone, over
  sentence vectors (what a trained run's export predicts with, `jaxenc.prediction`);
- generating tasks (`generates`, e.g. translation) also give `test_outputs(model, params,
  batch)` (jittable per-example outputs such as decoded tokens, computed once on the test split
  with the best parameters) and `test_metrics(collected, examples)` (e.g. sacrebleu's BLEU, with
  lines for results.md).

The kinds: jaxenc.tasks.classification (classification, relatedness), jaxenc.tasks.tagging,
jaxenc.tasks.seq2seq; `jaxenc.tasks.factory.build_task` picks one by dataset kind.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.records import Example

Batch = Mapping[str, jax.Array]
Outputs = dict[str, jax.Array]


def weighted_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
    """sum(w * x) / max(sum(w), 1) over all elements (same shapes)."""
    return jnp.sum(values * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def token_summary(collected: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Token accuracy and per-token loss from per-example sums (correct, count, loss)."""
    count = max(float(np.sum(collected["count"])), 1.0)
    return {"accuracy": float(np.sum(collected["correct"])) / count,
            "loss": float(np.sum(collected["loss"])) / count}


def token_eval_outputs(correct: jax.Array, valid: jax.Array,
                       token_losses: jax.Array) -> dict[str, jax.Array]:
    """Per-example sums over valid positions: correct/valid bool [B, T], losses [B, T]."""
    valid = valid.astype(jnp.float32)
    correct = correct.astype(jnp.float32) * valid
    return {"correct": correct.sum(-1), "count": valid.sum(-1),
            "loss": (token_losses * valid).sum(-1)}


class Task(abc.ABC):
    """One supervised objective over batches of a dataset kind (module docstring)."""

    kind: str  # the dataset kind (jaxenc.data.featurize.ROLES says which roles a batch has)
    primary_metric: str
    generates: bool = False  # whether test_outputs / test_metrics add test metrics

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

    def test_outputs(self, model: nn.Module, params: dict, batch: Batch) -> dict[str, jax.Array]:
        """Per-example outputs [B, ...] for `test_metrics` (generating tasks only; jittable)."""
        raise NotImplementedError(f"{type(self).__name__} generates nothing")

    def test_metrics(self, collected: Mapping[str, np.ndarray],
                     examples: Sequence[Example]) -> tuple[dict[str, float], list[str]]:
        """(metrics, lines for results.md) from the concatenated `test_outputs` of the real test
        examples; `collected["index"]` is each row's position in `examples`."""
        raise NotImplementedError(f"{type(self).__name__} generates nothing")

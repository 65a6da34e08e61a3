"""A trained run's task head over sentence vectors: what `Encoder.predict` applies.

A classification or relatedness run keeps its head beside its encoder: `Encoder.from_workdir`
reads it from the best checkpoint, and an export holds it (format.json "head", its parameters
in head.npz). `jaxenc.load(dir).predict(sentences)` (or sentence pairs) encodes as `encode`
does, then applies the head: class names and probabilities for classification, for relatedness
the expected score of the Tai et al. head (eq. 13's p over the integer score points) and those
probabilities.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxenc.tasks.classification import VectorHead
from jaxenc.tasks.factory import build_task

KINDS = ("single", "pair", "relatedness")  # the dataset kinds whose runs have a head to predict


@dataclasses.dataclass(frozen=True)
class Predictions:
    """What `Encoder.predict` returns, row i for input i.

    Attributes:
      probabilities: float32[N, K] over the classes (classification) or the integer score
        points (relatedness).
      labels: the most probable class's name per input (classification), else None.
      scores: float32[N] expected scores (relatedness), else None.
    """

    probabilities: np.ndarray
    labels: list[str] | None = None
    scores: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class Head:
    """A run's task head (format.json "head").

    Attributes:
      kind: "single", "pair" or "relatedness".
      head_config: the run's task.head section (sizes, activation, pair features).
      num_classes: K, classes or score points.
      label_names: the class names (classification), else None.
      min_score: the lowest score point (relatedness: the scores are min_score + 0..K-1).
      params: {"head": ...}, the trained head's parameters (numpy or jax arrays).
    """

    kind: str
    head_config: Mapping[str, Any]
    num_classes: int
    label_names: tuple[str, ...] | None
    min_score: float
    params: dict

    def description(self, file: str) -> dict[str, Any]:
        """format.json's "head" section, its parameters in `file`."""
        return {"file": file, "kind": self.kind, "task_head": dict(self.head_config),
                "num_classes": self.num_classes,
                "label_names": list(self.label_names) if self.label_names else None,
                "min_score": self.min_score}

    @classmethod
    def from_description(cls, description: Mapping[str, Any], params: dict) -> Head:
        labels = description["label_names"]
        return cls(description["kind"], description["task_head"], description["num_classes"],
                   tuple(labels) if labels is not None else None, description["min_score"],
                   params)

    @property
    def module(self) -> VectorHead:
        task = build_task(self.kind, ml_collections.ConfigDict({"head": dict(self.head_config)}),
                          num_classes=self.num_classes, min_score=self.min_score)
        return task.vector_head()

    def apply(self, params: dict, u: jax.Array, v: jax.Array | None = None) -> jax.Array:
        """Pure: float32[B, K] probabilities of sentence vectors u [B, D] (and v [B, D], the
        second sentences of pairs) under `params` (the layout of `self.params`)."""
        outputs = self.module.apply({"params": params}, u, v)
        if "log_probs" in outputs:
            return jnp.exp(outputs["log_probs"])
        return jax.nn.softmax(outputs["logits"].astype(jnp.float32), axis=-1)

    def predictions(self, probabilities: np.ndarray) -> Predictions:
        """Class names (classification) or expected scores (relatedness) of `probabilities`."""
        probabilities = np.asarray(probabilities, np.float32)
        if self.kind == "relatedness":
            points = self.min_score + np.arange(probabilities.shape[-1], dtype=np.float32)
            return Predictions(probabilities, scores=probabilities @ points)
        return Predictions(probabilities,
                           labels=[self.label_names[i] for i in probabilities.argmax(-1)])


def head_of_run(config: ml_collections.ConfigDict, dataset: Mapping[str, Any] | None,
                params: dict) -> Head | None:
    """The head of a run (its config, the dataset record of its config.json, its best
    parameters with "encoder" and "head"), or None for a task without one (tagging, seq2seq).
    A run that predates the dataset record is described by the registry."""
    from jaxenc.data import registry

    if dataset is None:
        info = registry.DATASETS[config.task.dataset]
        dataset = {"kind": info.kind, "num_classes": info.num_classes,
                   "label_names": info.label_names, "score_range": info.score_range}
    kind, num_classes = dataset["kind"], dataset["num_classes"]
    if kind not in KINDS or "head" not in params:
        return None
    labels, score_range = dataset["label_names"], dataset["score_range"]
    if kind != "relatedness" and not labels:  # a dataset without class names: their indices
        labels = [str(index) for index in range(num_classes)]
    return Head(kind, config.task.head.to_dict(), num_classes,
                tuple(labels) if labels else None,
                float(score_range[0]) if score_range else 1.0, {"head": params["head"]})

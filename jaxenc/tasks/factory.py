"""`build_task`: the task of a dataset kind."""

from __future__ import annotations

import ml_collections

from jaxenc.data.vocab import Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.tasks.base import Task
from jaxenc.tasks.classification import ClassificationTask, RelatednessTask
from jaxenc.tasks.seq2seq import Seq2SeqTask
from jaxenc.tasks.tagging import TaggingTask


def build_task(kind: str, task_cfg: ml_collections.ConfigDict, *, num_classes: int | None = None,
               min_score: float = 1.0, num_tags: int | None = None,
               target_vocab_size: int | None = None,
               target_vocab: Vocabulary | None = None) -> Task:
    """The task for a dataset of `kind` (DatasetInfo.kind); head options from `task_cfg.head`.

    num_classes: classes (classification) or score classes K (relatedness, from min_score on).
    target_vocab: seq2seq only; given, the test split is also decoded and scored with BLEU.
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
        return Seq2SeqTask(kind, target_vocab_size, head, target_vocab)
    raise ConfigError(f"dataset {task_cfg.dataset!r} has kind {kind!r}, which no task handles "
                      "(fix: use a dataset of another kind)")

"""The training config outside its model sections, each key written once: a field of a frozen
dataclass (`Task`, `Data`, `Optim`, `Train`, `Checkpoint`, `Showcase`) with its default, its
one-line meaning, its check and whether a resumed run may change it (`key`).

`jaxenc.configs.get_config` builds the config's sections from these defaults; `--help`
(`jaxenc.training.usage`), the value checks (`jaxenc.training.validation`) and the resume rule
(`jaxenc.training.run_files`) read `MEANINGS`, `RULES`, `RESUMABLE_KEYS`, `EXTENSIBLE_KEYS`
and `ADDED_KEY_DEFAULTS`, all derived from the fields. A run makes its `Sections` once, and each
component takes its typed section (`build_optimizer(sections.optim, ...)`). Model sections are the
model config classes (jaxenc.models).

Adding a key is one field, e.g. in `Train`:

    warmup_epochs: float = key(0.0, "epochs of learning-rate warm-up", NON_NEGATIVE_REAL,
                               added=0.0)

`added`: the value that computes what a run saved before the key existed computed (it resumes
with that value); leave it out for a key every saved run has.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from jaxenc.data.paths import DATA_DIR_ENV
from jaxenc.training.compilation import default_cache_dir


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a config value must be: `accepts(value)`, worded as `requirement`."""

    accepts: Callable[[Any], bool]
    requirement: str


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


POSITIVE_INT = Rule(lambda v: _is_int(v) and v >= 1, "must be a positive integer")
POSITIVE_REAL = Rule(lambda v: _is_real(v) and v > 0, "must be a number > 0")
NON_NEGATIVE_REAL = Rule(lambda v: _is_real(v) and v >= 0, "must be a number >= 0")
NON_NEGATIVE_INT = Rule(lambda v: _is_int(v) and v >= 0, "must be an integer >= 0")
RATE = Rule(lambda v: _is_real(v) and 0 <= v < 1, "must be in [0, 1)")
WIDTHS = Rule(lambda v: isinstance(v, (tuple, list)) and all(_is_int(w) and w >= 1 for w in v),
              "must be a list of positive integers, e.g. '(300,)' (empty: no hidden layer)")


def count(zero_means: str) -> Rule:
    """An integer >= 0 whose 0 means `zero_means`."""
    return Rule(lambda v: _is_int(v) and v >= 0, f"must be an integer >= 0 (0: {zero_means})")


FIXED, RESUMABLE, EXTENSIBLE = "fixed", "resumable", "extensible"  # what a resumed run may do
_NOT_ADDED = object()


def key(default: Any, meaning: str, check: Rule | None = None, *, resume: str = FIXED,
        added: Any = _NOT_ADDED, factory: Callable[[], Any] | None = None) -> Any:
    """A config key: its default (or `factory()`, read when a config is made), its meaning (one
    line of --help), its check (None: its type, which the config keeps), what a resumed run may
    do with it (FIXED: nothing, it changes results; RESUMABLE: change it; EXTENSIBLE: raise it)
    and `added` (module docstring)."""
    metadata = dict(meaning=meaning, check=check, resume=resume, added=added)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def section(kind: type, meaning: str) -> Any:
    """A nested section of keys (e.g. task.head)."""
    return dataclasses.field(default_factory=kind, metadata=dict(meaning=meaning, section=True))


SectionT = TypeVar("SectionT", bound="Section")


class Section(Mapping):
    """What every section class has: `of(values)`, its typed value from a config section, and
    read-only access by key (`data["text_columns"]`), so that the layers below training, which
    read a section as a mapping, take a typed section as they take a config section."""

    def __getitem__(self, name: str) -> Any:
        if name not in self._names():
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def of(cls: type[SectionT], values: Mapping[str, Any]) -> SectionT:
        """The typed section of `values` (a config section or a dict); nested sections too,
        missing keys at their defaults, unknown keys ignored."""
        given = {}
        for field in dataclasses.fields(cls):
            if field.name not in values:
                continue
            value = values[field.name]
            if field.metadata.get("section"):
                value = field.default_factory.of(value)
            elif isinstance(value, list):
                value = tuple(value)
            given[field.name] = value
        return cls(**given)


@dataclasses.dataclass(frozen=True)
class Decoder(Section):
    name: str = key("transformer", '"transformer": the generic decoder below; "model": the '
                    "model's own (set for models that have one)")
    model_dim: int = key(256, "width of the generic decoder", POSITIVE_INT)
    num_layers: int = key(1, "layers of the generic decoder", POSITIVE_INT)
    num_heads: int = key(4, "attention heads of the generic decoder", POSITIVE_INT)
    ff_dim: int = key(512, "feed-forward width of the generic decoder", POSITIVE_INT)
    dropout_rate: float = key(0.1, "dropout in the generic decoder", RATE)
    label_smoothing: float = key(0.1, "label smoothing of the decoder's cross-entropy", RATE)
    beam_size: int = key(4, "beam width of test-split decoding (1: greedy)", POSITIVE_INT)
    length_penalty: float = key(0.6, "length penalty of beam search", NON_NEGATIVE_REAL)
    max_decode_length: int = key(64, "longest decoded output, in tokens", POSITIVE_INT)


@dataclasses.dataclass(frozen=True)
class Head(Section):
    hidden_dims: tuple[int, ...] = key((300,), "hidden layer widths of the classifier head "
                                       "(empty: linear)", WIDTHS)
    activation: str = key("elu", "activation of the head's hidden layers")
    dropout_rate: float = key(0.0, "dropout before each of the head's layers", RATE)
    pair_features: str = key("u,v,|u-v|,u*v", "pair tasks: the head's features of vectors u, v "
                             "(InferSent's; SentEval uses |u-v|,u*v)")
    relatedness_hidden_dim: int = key(50, "hidden width of the relatedness head (Tai et al. "
                                      "2015)", POSITIVE_INT)
    decoder: Decoder = section(Decoder, "the decoder of generating tasks")


@dataclasses.dataclass(frozen=True)
class Task(Section):
    dataset: str = key("trec", "the dataset: one of the datasets above")
    dev_fraction: float = key(0.1, "share of train made dev when the dataset has no dev split",
                              RATE)
    test_fraction: float = key(0.1, "share of train made test when the dataset has none", RATE)
    split_seed: int = key(-1, "seed of the carved dev / test splits (-1: train.seed)",
                          Rule(lambda v: _is_int(v) and v >= -1,
                               "must be an integer >= -1 (-1: train.seed)"), added=-1)
    head: Head = section(Head, "the task's head on the sentence vectors")


@dataclasses.dataclass(frozen=True)
class Data(Section):
    data_dir: str = key("", f"the data folder (default: ${DATA_DIR_ENV})", resume=RESUMABLE,
                        factory=lambda: os.environ.get(DATA_DIR_ENV, ""))
    tfds_dir: str = key("", "non-empty: read the dataset through TFDS, built there",
                        resume=RESUMABLE)
    batch_size: int = key(64, "training examples per step", POSITIVE_INT)
    eval_batch_size: int = key(128, "examples per dev / test batch", POSITIVE_INT,
                               resume=RESUMABLE)
    bucket_step: int = key(8, "width of the length buckets batches are padded to", POSITIVE_INT)
    max_length: int = key(64, "longest training sentence in tokens (longer: dropped)",
                          POSITIVE_INT)
    min_count: int = key(1, "rarer words of train are left out of the vocabulary", POSITIVE_INT)
    max_vocab: int = key(0, "most words in the vocabulary (0: no limit)", count("no limit"))
    lowercase: bool = key(False, "lower-case every token")
    embeddings: str = key("", "GloVe files or named sources (glove-6b-50d), comma-separated, "
                          "the first wins (empty: random init)")
    oov: str = key("random", 'words without a vector: "random", "hashed" or "drop"')
    lowercase_fallback: bool = key(True, "a word without a vector takes its lower-cased form's "
                                   "vector")
    freeze_embeddings: bool = key(False, "keep the word table fixed (sets "
                                  "model.freeze_embeddings)")
    phrase_repeats: int = key(1, "sst5_phrases: repeats of non-neutral phrases and sentences per "
                              "epoch (DiSAN's code: 3)", POSITIVE_INT)
    corpus_files: str = key("", 'task.dataset="corpus": the text files, one sentence a line')
    corpus_oov: str = key("drop_sentences", 'task.dataset="corpus": a sentence with an unknown '
                          'word: "drop_sentences", "drop_words" or "unk"')
    train_file: str = key("", 'task.dataset="files": your training file (.tsv, .csv or .jsonl)',
                          resume=RESUMABLE, added="")
    dev_file: str = key("", 'task.dataset="files": your dev file ("": carved from train)',
                        resume=RESUMABLE, added="")
    test_file: str = key("", 'task.dataset="files": your test file ("": carved from train)',
                         resume=RESUMABLE, added="")
    text_columns: str = key("", 'task.dataset="files": the text column, or two for pairs ("": '
                            "text, else text_a,text_b)", added="")
    label_column: str = key("label", 'task.dataset="files": the column of the class labels',
                            added="label")
    score_column: str = key("score", 'task.dataset="files": the column of relatedness scores '
                            "(pairs)", added="score")
    expand_vocabulary: bool = key(False, "as an encoder: any word with a vector in "
                                  "data.embeddings", resume=RESUMABLE)
    vector_vocabulary: int = key(0, "also the first N words of data.embeddings in the "
                                 "vocabulary, after the training words",
                                 count("training words only"), added=0)


@dataclasses.dataclass(frozen=True)
class Optim(Section):
    name: str = key("adadelta", "the optimiser: one of the optimisers above")
    learning_rate: float = key(0.5, "the learning rate (reached after warmup_steps)",
                               POSITIVE_REAL)
    warmup_steps: int = key(0, "steps of linear learning-rate warm-up from 0 (0: none)",
                            count("no warm-up"))
    weight_decay: float = key(5e-5, "L2 penalty on weight matrices only", NON_NEGATIVE_REAL)
    clip_norm: float = key(0.0, "clip the gradients' global norm to this (0: off)",
                           NON_NEGATIVE_REAL)
    rho: float = key(0.95, "adadelta's decay rate", RATE)
    eps: float = key(1e-6, "adadelta's, adam's and adagrad's epsilon", POSITIVE_REAL)
    b1: float = key(0.9, "adam's first-moment decay", RATE)
    b2: float = key(0.999, "adam's second-moment decay", RATE)
    initial_accumulator: float = key(0.1, "adagrad's initial accumulator value",
                                     NON_NEGATIVE_REAL)
    momentum: float = key(0.0, "sgd's momentum (0: none)", RATE)
    flatten: bool = key(True, "clip and update one vector of all trainable parameters (fewer "
                        "kernels)", added=False)


@dataclasses.dataclass(frozen=True)
class Train(Section):
    num_steps: int = key(0, "training steps (0: epochs x batches per epoch)",
                         count("epochs x batches per epoch"), resume=EXTENSIBLE)
    epochs: int = key(10, "training epochs, when num_steps is 0",
                      count("only with train.num_steps > 0"), resume=EXTENSIBLE)
    eval_every: int = key(0, "steps between dev evaluations (0: once per epoch)",
                          count("once per epoch"), resume=RESUMABLE)
    log_every: int = key(50, "steps between train-loss records in metrics.jsonl", POSITIVE_INT,
                         resume=RESUMABLE)
    seed: int = key(0, "seed of initialisation, shuffling and carved splits", NON_NEGATIVE_INT)
    seeds: int = key(1, "train each model with this many seeds from train.seed (mean ± std), "
                     "in workdir/seeds/<seed>", POSITIVE_INT, added=1)
    patience: int = key(0, "stop after this many evaluations without gain (0: never)",
                        count("no early stopping"))
    patience_min_epochs: float = key(0.0, "with patience, wait this many epochs after the best "
                                     "(0: off)", NON_NEGATIVE_REAL, added=0.0)
    progress_bar: bool = key(True, "show a progress bar (on a terminal only)", resume=RESUMABLE)
    distributed: bool = key(False, "call jax.distributed.initialize() (multi-host runs)",
                            resume=RESUMABLE)
    nonfinite: str = key("stop", '"stop" or "skip" a step whose loss or gradient is nan/inf or '
                         "diverged", resume=RESUMABLE)
    # every task's loss is a mean cross-entropy or KL in nats, below 15 at initialisation: no
    # converging run reaches 1e4, a diverging one passes it on its way to inf
    divergence_bound: float = key(1e4, "a training loss above it has diverged (0: no bound)",
                                  Rule(lambda v: _is_real(v) and v >= 0,
                                       "must be a number >= 0 (0: no bound)"), resume=RESUMABLE)
    samples: int = key(3, "seq2seq: dev examples decoded at each evaluation",
                       count("no samples"), resume=RESUMABLE)
    compilation_cache: str = key("", 'JAX\'s persistent compilation cache folder ("": off)',
                                 resume=RESUMABLE, factory=default_cache_dir)


@dataclasses.dataclass(frozen=True)
class Checkpoint(Section):
    every: int = key(0, "steps between saved checkpoints (0: at every evaluation)",
                     count("at every evaluation"), resume=RESUMABLE)
    keep: int = key(2, "periodic checkpoints kept", POSITIVE_INT, resume=RESUMABLE)
    best_k: int = key(1, "best-by-dev parameter sets kept", POSITIVE_INT, resume=RESUMABLE)


@dataclasses.dataclass(frozen=True)
class Showcase(Section):
    export_best: bool = key(False, "after training, export the best model to workdir/export")
    sentences: tuple[str, ...] = key((), "sentences encoded by it and every other model, "
                                     "compared")


SECTIONS: dict[str, type[Section]] = {"task": Task, "data": Data, "optim": Optim, "train": Train,
                                      "checkpoint": Checkpoint, "showcase": Showcase}


@dataclasses.dataclass(frozen=True)
class Sections:
    """The typed sections of a training config (all but its model section): what a run's
    components receive, each its own."""

    task: Task
    data: Data
    optim: Optim
    train: Train
    checkpoint: Checkpoint
    showcase: Showcase

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Sections:
        """The typed sections of `config` (missing sections and keys at their defaults)."""
        return cls(**{name: kind.of(config.get(name, {})) for name, kind in SECTIONS.items()})

    @property
    def split_seed(self) -> int:
        """The seed that carves the dev / test splits a dataset lacks: task.split_seed, or
        train.seed when it is -1 (the default), so seeds can differ in the held-out examples
        or, with split_seed fixed, only in initialisation and order."""
        return self.train.seed if self.task.split_seed < 0 else self.task.split_seed


def defaults(kind: type[Section]) -> dict[str, Any]:
    """The section's default values as a nested dict (a config section)."""
    return dataclasses.asdict(kind())


def keys(kind: type[Section] | None = None, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(flat key, its dataclasses.Field) of every key of `kind` (every section when None)."""
    if kind is None:
        for name, each in SECTIONS.items():
            yield from keys(each, f"{name}.")
        return
    for field in dataclasses.fields(kind):
        if field.metadata.get("section"):
            yield from keys(field.default_factory, f"{prefix}{field.name}.")
        else:
            yield f"{prefix}{field.name}", field


def _derived(what: str) -> dict[str, Any]:
    return {flat: field.metadata[what] for flat, field in keys()}


MEANINGS: dict[str, str] = _derived("meaning")
RULES: dict[str, Rule] = {flat: rule for flat, rule in _derived("check").items() if rule}
RESUMABLE_KEYS = frozenset(flat for flat, resume in _derived("resume").items()
                           if resume == RESUMABLE)
EXTENSIBLE_KEYS = tuple(flat for flat, resume in _derived("resume").items()
                        if resume == EXTENSIBLE)
ADDED_KEY_DEFAULTS: dict[str, Any] = {flat: value for flat, value in _derived("added").items()
                                      if value is not _NOT_ADDED}

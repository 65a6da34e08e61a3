"""Input preparation of a training run: examples -> splits -> vocabularies -> batchers.

`load_splits(config)` reads the configured dataset's train / dev / test examples (carving a
split the dataset lacks from train, deterministically), `build_vocabularies` makes (or reloads)
the input and target vocabularies, and `make_batchers` the shuffled training batches and the
ordered evaluation batches over the featurized examples (as flax's wmt example keeps its
input_pipeline.py beside train.py).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxenc.data import corpus, labelled_files, registry, sst
from jaxenc.data.batching import Batcher, bucket_lengths
from jaxenc.data.embeddings import vector_words
from jaxenc.data.packing import PackingConfig
from jaxenc.data.vocab import Vocabulary
from jaxenc.errors import ConfigError, DataError
from jaxenc.records import Example
from jaxenc.training.sections import Data, Sections, Train

log = logging.getLogger(__name__)

# Datasets whose train split is SST phrases (`sst.expand_phrases`): data.phrase_repeats applies.
PHRASE_DATASETS = ("sst5_phrases",)

EVAL_SPLITS = ("dev", "test")
DECODE = "test_decoding"  # make_batchers(decode=True): the test split as a task decodes it


def _carve(examples: list[Example], fraction: float, seed: int,
           split: str) -> tuple[list[Example], list[Example]]:
    """(rest, carved): a seeded random `fraction` of `examples` (at least one, when two or more
    are left) split off as `split`."""
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"the dataset has no {split} split and task.{split}_fraction={fraction} "
                          f"(fix: --config.task.{split}_fraction=0.1)")
    order = np.random.default_rng(seed).permutation(len(examples))
    cut = max(int(round(fraction * len(examples))), int(len(examples) > 1))
    return [examples[i] for i in order[cut:]], [examples[i] for i in order[:cut]]


def _has_target(example: Example, kind: str) -> bool:
    if kind in ("single", "pair"):
        return example.label is not None
    return example.score is not None if kind == "relatedness" else True


def corpus_options(sections: Sections) -> corpus.CorpusOptions:
    """How the "corpus" dataset of a run is read: its data section's files, vectors and
    vocabulary rules, task.dev_fraction / test_fraction held out with the run's split seed."""
    return corpus.CorpusOptions.of(sections.data, dev_fraction=sections.task.dev_fraction,
                                   test_fraction=sections.task.test_fraction,
                                   seed=sections.split_seed)


def load_splits(config: Sections | Mapping[str, Any]) -> dict[str, list[Example]]:
    """train / dev / test examples with a target, from a training config or its `Sections`. A
    split the dataset lacks is carved from train (from the only split, e.g. "all", when there is
    no train) with task.dev_fraction / test_fraction, deterministically given the split seed
    (`Sections.split_seed`: task.split_seed, or train.seed)."""
    sections = config if isinstance(config, Sections) else Sections.of(config)
    task, data, seed = sections.task, sections.data, sections.split_seed
    info = registry.DATASETS[task.dataset]
    if info.name == corpus.NAME:  # data.corpus_files, streamed; the reader makes the splits
        return corpus.load_splits(corpus_options(sections))
    if info.name == labelled_files.NAME:  # data.train_file, dev_file, test_file
        described, given = labelled_files.load_splits(data)
        info = dataclasses.replace(registry.files_info(described), splits=tuple(given))
        load = given.__getitem__
    elif data.tfds_dir:  # through the TFDS builder (built once, downloads if it can)
        from jaxenc.data import tfds_builders

        load = lambda split: tfds_builders.load_split(
            info.name, split, data.tfds_dir, manual_dir=data.data_dir or None)
    else:
        load = lambda split: registry.load(info.name, split, data.data_dir or None)
    train = load("train" if "train" in info.splits else info.splits[0])
    splits = {}
    for split in ("test", "dev"):
        if split in info.splits:
            splits[split] = load(split)
        else:
            fraction = getattr(task, f"{split}_fraction")
            train, splits[split] = _carve(train, fraction, seed, split)
            log.info("%s: %d examples carved from train (task.%s_fraction=%g, split seed %d)",
                     split, len(splits[split]), split, fraction, seed)
    splits["train"] = _repeat_phrases(train, data.phrase_repeats)
    for name, examples in splits.items():
        kept = [e for e in examples if _has_target(e, info.kind)]
        if len(kept) < len(examples):
            log.info("%s: dropped %d examples without a target", name, len(examples) - len(kept))
        if not kept:
            raise DataError(f"dataset {info.name!r} has no {name} examples with a target",
                            fix=f"a split carved from train needs more train examples or a "
                                f"larger --config.task.{name}_fraction")
        splits[name] = kept
    return splits


def _repeat_phrases(train: list[Example], repeats: int) -> list[Example]:
    """data.phrase_repeats (at least 1, more for `PHRASE_DATASETS` only: checked by `validate`):
    SST phrase training's oversampling (sst.repeat_emphasised)."""
    return train if repeats == 1 else sst.repeat_emphasised(train, repeats)


def build_vocabularies(workdir: Path, kind: str, train: Sequence[Example],
                       data: Data | Mapping[str, Any], *,
                       filtered: bool = False) -> dict[str, Vocabulary]:
    """"vocab" (inputs) and, for seq2seq, "target_vocab": loaded from workdir when a previous run
    saved them (resuming), else built from the training examples, "vocab" then extended by the
    first data.vector_vocabulary words of data.embeddings (`with_vector_words`); `filtered`: every
    word of theirs is kept (the corpus dataset applied data.min_count / max_vocab to its whole
    text)."""
    data = data if isinstance(data, Data) else Data.of(data)
    min_count, max_size = (1, None) if filtered else (data.min_count, data.max_vocab)
    sources = {"vocab": lambda: (s.tokens for e in train for s in e.sentences)}
    if kind == "translation":
        sources["target_vocab"] = lambda: (e.target.tokens for e in train)
    vocabularies = {}
    for name, token_lists in sources.items():
        saved = workdir / f"{name}.txt"
        if saved.is_file():
            vocabularies[name] = Vocabulary.load(saved, lowercase=data.lowercase)
            continue
        vocabularies[name] = Vocabulary.build(token_lists(), min_count=min_count,
                                              max_size=max_size or None,
                                              lowercase=data.lowercase)
        if name == "vocab" and data.vector_vocabulary:
            vocabularies[name] = with_vector_words(vocabularies[name], data.embeddings,
                                                   data.vector_vocabulary)
    if kind == "unlabelled":  # autoencoding: the target is the input
        vocabularies["target_vocab"] = vocabularies["vocab"]
    return vocabularies


def with_vector_words(vocab: Vocabulary, embeddings: str, limit: int) -> Vocabulary:
    """`vocab` with the first `limit` words of the vectors `embeddings` that it lacks appended
    (its own ids unchanged); ConfigError without vectors."""
    if not embeddings:
        raise ConfigError("--config.data.vector_vocabulary adds words of data.embeddings, which "
                          "is empty (fix: --config.data.vector_vocabulary=0, the default, or set "
                          "--config.data.embeddings)")
    words = (word.lower() if vocab.lowercase else word for word in vector_words(embeddings, limit))
    known = set(vocab.tokens)
    extra = [word for word in dict.fromkeys(words) if word not in known]
    return Vocabulary(tuple(vocab.tokens) + tuple(extra), lowercase=vocab.lowercase,
                      counts=vocab.counts)


def decode_batch_size(examples: int, batch_size: int, multiple: int = 1) -> int:
    """Rows per batch that hold `examples` in as few batches of at most `batch_size` rows as
    possible, evened out and rounded up to a multiple of `multiple` (the data shards; batch_size
    is one): the fewest filler rows for that number of batches."""
    batches = -(-examples // batch_size)
    rows = -(-examples // batches)
    return -(-rows // multiple) * multiple


def make_batchers(features: dict[str, list[dict]], data: Data | Mapping[str, Any],
                  seed: int, *, packing: PackingConfig | None = None, groups: int = 1,
                  train: Train | Mapping[str, Any] | None = None,
                  decode: bool = False) -> dict[str, Batcher]:
    """Shuffled training batches up to data.max_length; dev/test batches in order, with buckets
    extended so that no evaluation example is dropped. ConfigError when data.max_length leaves
    no training example.

    packing: the encoder's phrase packing plan (StructureNeeds.packing), planned over the epochs
    the run will take (from `train`) with `groups` = the number of data shards.
    decode: also `DECODE`, the test split in batches of one shape (its longest example's bucket)
    and the fewest rows (`decode_batch_size`, at most data.eval_batch_size), for a generating
    task's test decoding: a decoding batch costs its rows times the decoded steps, whatever its
    source length, so the dev/test batches' per-bucket filler rows (most of the rows of a small
    split) and per-bucket programs (a beam search compiles once per shape) would cost more than
    the few real rows.
    """
    data = data if isinstance(data, Data) else Data.of(data)
    train_args = dict(batch_size=data.batch_size, shuffle=True, seed=seed,
                      buckets=bucket_lengths(data.max_length, data.bucket_step),
                      max_length=data.max_length)
    batchers = {"train": Batcher(features["train"], **train_args)}
    if batchers["train"].num_batches == 0:
        shortest = min(map(_length, features["train"]))
        raise ConfigError(f"data.max_length={data.max_length} is below every training "
                          f"example (the shortest has {shortest} tokens) (fix: set "
                          f"--config.data.max_length to {shortest} or more; longer examples are "
                          "dropped)")
    eval_packing = None
    if packing is not None:
        train = train if isinstance(train, Train) else Train.of(train)
        epochs = train.epochs
        if train.num_steps:
            epochs = -(-train.num_steps // batchers["train"].num_batches)
        batchers["train"] = Batcher(features["train"], **train_args, packing=dataclasses.replace(
            packing, groups=groups, epochs=max(epochs, 1)))
        eval_packing = dataclasses.replace(packing, groups=groups, epochs=1)
    for split in EVAL_SPLITS:
        longest = max(map(_length, features[split]))
        buckets = bucket_lengths(max(longest, data.max_length), data.bucket_step)
        batchers[split] = Batcher(features[split], batch_size=data.eval_batch_size,
                                  buckets=buckets, shuffle=False, packing=eval_packing)
    if decode:
        test = features["test"]
        rows = decode_batch_size(len(test), data.eval_batch_size, groups)
        longest = max(map(_length, test))
        batchers[DECODE] = Batcher(test, batch_size=rows, shuffle=False, packing=eval_packing,
                                   buckets=bucket_lengths(longest, data.bucket_step)[-1:])
    return batchers


def _length(features: dict[str, np.ndarray]) -> int:
    """The token count of an example's longest sentence (special tokens included)."""
    return max(len(value) for key, value in features.items() if key.endswith("/tokens"))

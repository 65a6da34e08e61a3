"""Frozen sentence encoders for the transfer evaluation, and a disk cache of their vectors.

Every encoder implements `SentenceEncoder`: a stable `name` (the cache key) and
`encode(sentences) -> float32[N, D]`. Two are provided:

- `BagOfEmbeddings`: the mean of the word vectors of a sentence's in-vocabulary words (one or
  several GloVe / word2vec text files, merged: the first file that has a word wins).
- `CheckpointEncoder`: the encoder of a `python -m train.main` run directory (its best
  checkpoint), batched by length buckets with a progress bar.

`load_encoder("bag:FILE[,FILE...]" | WORKDIR)` builds either from a command-line string.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from jaxenc.data.records import Example, Sentence
from jaxenc.errors import ConfigError, DataError

BAG_PREFIX = "bag:"


@runtime_checkable
class SentenceEncoder(Protocol):
    """A frozen encoder: list of sentences -> one vector per sentence."""

    @property
    def name(self) -> str:
        """Identifies the encoder and its weights; used as the cache key, safe as a folder name."""

    def encode(self, sentences: Sequence[Sentence]) -> np.ndarray:
        """float32[N, D], row i encoding sentences[i]."""


def _digest(*parts: object) -> str:
    return hashlib.sha1("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:12]


def _file_identity(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


class BagOfEmbeddings:
    """Sentence vector = mean of the vectors of its words that have one (zeros if none).

    Tokens are looked up verbatim, then lower-cased (GloVe 6B is lower-case). Only the words of
    the sentences asked for are read from the files, and remembered across calls.

    Args:
      vector_paths: GloVe / word2vec text files of one dimension; earlier files take precedence.
    """

    def __init__(self, vector_paths: Sequence[str | os.PathLike]):
        if not vector_paths:
            raise ConfigError("BagOfEmbeddings needs at least one word vectors file")
        self.paths = tuple(Path(p) for p in vector_paths)
        for path in self.paths:
            if not path.is_file():
                raise DataError("word vectors file not found", path=path,
                                fix="pass an existing GloVe .txt file (bag:FILE[,FILE...])")
        self._name = "bag-" + _digest(*(_file_identity(p) for p in self.paths))
        self._vectors: dict[str, np.ndarray | None] = {}  # None: in no file
        self._dim: int | None = None

    @property
    def name(self) -> str:
        return self._name

    def _look_up(self, words: set[str]) -> None:
        """Reads the vectors of `words` not looked up before from every file."""
        from jaxenc.data.embeddings import load_vectors
        from jaxenc.data.vocab import Vocabulary

        new = sorted(words - self._vectors.keys())
        if not new:
            return
        vocab = Vocabulary.build([new])
        for path in self.paths:
            vectors = load_vectors(path, vocab, oov="random", lowercase_fallback=True,
                                   expected_dim=self._dim)
            self._dim = vectors.matrix.shape[1]
            for i in np.flatnonzero(vectors.found):
                self._vectors.setdefault(vocab.tokens[i], vectors.matrix[i])
        for word in new:  # absent from every file (or a special-token string such as "<s>")
            self._vectors.setdefault(word, None)

    def encode(self, sentences: Sequence[Sentence]) -> np.ndarray:
        """float32[N, d]: the mean vector of each sentence's words that have one."""
        self._look_up({token for sentence in sentences for token in sentence.tokens})
        encoded = np.zeros((len(sentences), self._dim or 0), np.float32)
        for row, sentence in zip(encoded, sentences, strict=True):
            known = [self._vectors[t] for t in sentence.tokens if self._vectors[t] is not None]
            if known:
                row[:] = np.mean(known, axis=0)
        return encoded


class CheckpointEncoder:
    """The encoder of a training run directory: `sentence` output of its best checkpoint.

    Sentences are featurized as the run's config says (vocabulary, structure fields such as PSAN
    segments), batched by length buckets (`jaxenc.data.batching.Batcher`, no shuffling) and
    encoded by one jitted function (one compile per bucket length). With the run's
    data.expand_vocabulary, words outside the training vocabulary are encoded with their vector
    (`jaxenc.data.expansion`); words without a vector are dropped under data.oov="drop" (a
    sentence left without words encodes to zeros).

    Args:
      workdir: a `python -m train.main --workdir` folder with a best checkpoint.
      batch_size: sentences per batch.
      bucket_step: bucket lengths are multiples of this.
      progress: show a progress bar per `encode` call.
    """

    def __init__(self, workdir: str | os.PathLike, *, batch_size: int = 128, bucket_step: int = 8,
                 progress: bool = True):
        from jaxenc.data.embeddings import load_vectors
        from jaxenc.data.expansion import ExpandedVocabulary
        from jaxenc.data.featurize import RELATIONS_FILE, Featurizer
        from jaxenc.models.registry import structure_spec
        from jaxenc.structures.relations import RelationVocabulary
        from jaxenc.training.checkpointing import load_trained_encoder

        self.workdir = Path(workdir)
        _, self._params, vocab, config = load_trained_encoder(self.workdir)
        found = None
        if config.data.embeddings and config.data.oov == "drop":  # words without a vector go
            found = load_vectors(config.data.embeddings, vocab, oov="drop",
                                 lowercase_fallback=config.data.lowercase_fallback).found
        relations = self.workdir / RELATIONS_FILE  # the run's relation ids, if its model has any
        needs = structure_spec(config.model)
        self._featurizer = Featurizer(
            kind="single", vocab=vocab, model_cfg=config.model,
            structure_fields=needs.fields, prefix=needs.prefix_tokens, found=found,
            lowercase_fallback=config.data.lowercase_fallback,
            relation_vocab=RelationVocabulary.load(relations) if relations.is_file() else None,
            parse_cache_dir=self.workdir / "parse_cache", keep_empty=found is not None)
        self._packing = needs.packing  # one device, one group; planned over this call's batches
        self._model_cfg, self._applies = config.model, {}
        self._expansion = None
        if config.data.get("expand_vocabulary"):
            self._expansion = ExpandedVocabulary(
                vocab, self._params["embed"]["embedding"], config.data.embeddings, found,
                lowercase_fallback=config.data.lowercase_fallback)
        self.batch_size, self.bucket_step, self.progress = batch_size, bucket_step, progress
        best = sorted(p.name for p in (self.workdir / "best").iterdir()) if (
            self.workdir / "best").is_dir() else []
        self._name = f"ckpt-{self.workdir.resolve().name}-{_digest(self.workdir.resolve(), *best)}"

    @property
    def name(self) -> str:
        return self._name

    def encode(self, sentences: Sequence[Sentence]) -> np.ndarray:
        """float32[N, D] sentence vectors, in input order."""
        from tqdm import tqdm

        from jaxenc.data.batching import Batcher, bucket_lengths, sentence_fields

        featurizer, params = self._featurizer, self._params
        if self._expansion is not None:
            featurizer, params = self._expanded(sentences)
        apply = self._apply(len(params["embed"]["embedding"]))
        # The label is required by the "single" featurizer and unused here.
        features = featurizer.many([Example(sentences=(s,), label=0, uid=f"sentence {i}")
                                    for i, s in enumerate(sentences)])
        lengths = np.array([len(f["sentence/tokens"]) for f in features])
        buckets = bucket_lengths(max(int(lengths.max()), 1), self.bucket_step)  # all empty: 1
        batcher = Batcher(features, batch_size=self.batch_size, buckets=buckets, shuffle=False,
                          packing=self._packing)
        encoded = None
        for batch in tqdm(batcher.epoch(0), total=batcher.num_batches, disable=not self.progress,
                          desc=f"encoding {len(sentences)} sentences", unit="batch"):
            vectors = np.asarray(apply(params, sentence_fields(batch, "sentence")))
            if encoded is None:
                encoded = np.empty((len(sentences), vectors.shape[1]), np.float32)
            real = batch["index"] >= 0
            encoded[batch["index"][real]] = vectors[real]
        return encoded

    def _apply(self, vocab_size: int) -> Callable[[dict, dict], Any]:
        """The jitted encoder (params, sentence fields) -> sentence vectors, for a word table of
        `vocab_size` rows (built once per size)."""
        import jax

        from jaxenc.models.registry import build_encoder

        if vocab_size not in self._applies:
            module = build_encoder(self._model_cfg, vocab_size)
            self._applies[vocab_size] = jax.jit(lambda params, fields: module.apply(
                {"params": params}, fields, train=False)["sentence"])
        return self._applies[vocab_size]

    def _expanded(self, sentences: Sequence[Sentence]) -> tuple[Any, dict]:
        """(featurizer, encoder params) of the vocabulary expanded by the sentences' words."""
        expansion = self._expansion
        expansion.add(token for sentence in sentences for token in sentence.tokens)
        featurizer = dataclasses.replace(self._featurizer, vocab=expansion.vocab,
                                         found=expansion.found)
        return featurizer, {**self._params,
                            "embed": {**self._params["embed"], "embedding": expansion.table}}


def load_encoder(spec: str) -> SentenceEncoder:
    """`bag:FILE[,FILE...]` -> BagOfEmbeddings; a run directory -> CheckpointEncoder."""
    if spec.startswith(BAG_PREFIX):
        return BagOfEmbeddings([p for p in spec[len(BAG_PREFIX):].split(",") if p])
    if not Path(spec).is_dir():
        raise ConfigError(f"--encoder {spec!r} is neither bag:GLOVE_FILE[,FILE...] nor an existing "
                          "training run directory (fix: pass bag:path/to/glove.txt or the "
                          "--workdir of a python -m train.main run)")
    return CheckpointEncoder(spec)


class EmbeddingCache:
    """Sentence vectors on disk, one file per (encoder, task, split).

    `root/<encoder.name>/<task>.<split>.npz` holds the vectors and a fingerprint of the sentences;
    a file whose fingerprint differs (the data changed) is recomputed. Sentences that occur more
    than once in a split are encoded once.
    """

    def __init__(self, root: str | os.PathLike | None):
        self.root = None if root is None else Path(root)

    def encode(self, encoder: SentenceEncoder, sentences: Sequence[Sentence], task: str,
               split: str) -> np.ndarray:
        """float32[N, D]: encoder.encode(sentences), from the cache when it holds them."""
        fingerprint = _digest(*map(repr, sentences))
        path = None if self.root is None else self.root / encoder.name / f"{task}.{split}.npz"
        if path is not None and path.is_file():
            with np.load(path) as cached:
                if str(cached["fingerprint"]) == fingerprint:
                    return cached["vectors"]
        distinct: dict[Sentence, int] = {}
        index = np.array([distinct.setdefault(s, len(distinct)) for s in sentences], np.int64)
        vectors = np.asarray(encoder.encode(list(distinct)), np.float32)[index]
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, vectors=vectors, fingerprint=np.str_(fingerprint))
        return vectors

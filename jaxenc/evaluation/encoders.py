"""Frozen sentence encoders for the transfer evaluation, and a disk cache of their vectors.

Every encoder implements `SentenceEncoder`: a stable `name` (the cache key) and
`encode(sentences) -> float32[N, D]`:

- `BagOfEmbeddings`: the mean of the word vectors of a sentence's in-vocabulary words (one or
  several GloVe / word2vec text files or named sources such as glove-6b-50d, merged: the first
  source that has a word wins);
- `CheckpointEncoder`: the encoder of a `python -m train.main` run directory (its best
  checkpoint), batched by length buckets and a token budget with a progress bar;
- an export's `jaxenc.encoding.Encoder` (`jaxenc.load`). It and CheckpointEncoder are the one
  encode path of jaxenc.encoding.

`load_encoder("bag:SOURCE[,SOURCE...]" | WORKDIR | EXPORT_DIR, long_sentences="truncate")` builds
one from a command-line string. The model encoders take sentences of at most
`jaxenc.encoding.DEFAULT_MAX_LENGTH` tokens and cut ("truncate", with a warning) or refuse
("error") longer ones (`long_sentences`, eval.transfer's --long_sentences); the bag of embeddings
has no limit (its memory is linear in the sentence).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from jaxenc.data.named_vectors import NAMED_VECTORS, is_named, open_named
from jaxenc.encoding import Encoder, SentenceLike, short_digest, workdir_arguments
from jaxenc.errors import ConfigError, DataError
from jaxenc.records import Sentence

BAG_PREFIX = "bag:"


@runtime_checkable
class SentenceEncoder(Protocol):
    """A frozen encoder: list of sentences -> one vector per sentence."""

    @property
    def name(self) -> str:
        """Identifies the encoder and its weights; used as the cache key, safe as a folder name."""

    def encode(self, sentences: Sequence[Sentence]) -> np.ndarray:
        """float32[N, D], row i encoding sentences[i]."""


def _file_identity(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


class BagOfEmbeddings:
    """Sentence vector = mean of the vectors of its words that have one (zeros if none).

    Tokens are looked up verbatim, then lower-cased (GloVe 6B is lower-case). Only the words of
    the sentences asked for are read from the sources, and remembered across calls.

    Args:
      vector_paths: GloVe / word2vec text files or registered names (NAMED_VECTORS, e.g.
        "glove-6b-50d") of one dimension; earlier ones take precedence.
    """

    def __init__(self, vector_paths: Sequence[str | os.PathLike]):
        if not vector_paths:
            raise ConfigError("BagOfEmbeddings needs at least one word vectors file")
        self.sources = tuple(p if is_named(p) else Path(p) for p in vector_paths)
        identities = []
        for source in self.sources:
            if isinstance(source, str):
                identities.append(open_named(source).identity)
            elif source.is_file():
                identities.append(_file_identity(source))
            else:
                raise DataError("word vectors file not found", path=source,
                                fix="pass an existing GloVe .txt file or one of "
                                f"{', '.join(NAMED_VECTORS)} (bag:SOURCE[,SOURCE...])")
        self._name = "bag-" + short_digest(*identities)
        self._vectors: dict[str, np.ndarray | None] = {}  # None: in no source
        self._dim: int | None = None

    @property
    def name(self) -> str:
        return self._name

    def _look_up(self, words: set[str]) -> None:
        """Reads the vectors of `words` not looked up before from every source."""
        from jaxenc.data.embeddings import load_vectors
        from jaxenc.data.vocab import Vocabulary

        new = sorted(words - self._vectors.keys())
        if not new:
            return
        vocab = Vocabulary.build([new])
        for source in self.sources:
            vectors = load_vectors(source, vocab, oov="random", lowercase_fallback=True,
                                   expected_dim=self._dim)
            self._dim = vectors.matrix.shape[1]
            for i in np.flatnonzero(vectors.found):
                self._vectors.setdefault(vocab.tokens[i], vectors.matrix[i])
        for word in new:  # absent from every source (or a special-token string such as "<s>")
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


class CheckpointEncoder(Encoder):
    """The encoder of a training run directory (its best checkpoint), through the one encode path
    (`jaxenc.encoding.Encoder`): the run's featurizer (vocabulary and lower-case fallback,
    structure fields such as PSAN segments, data.oov="drop", vocabulary expansion with
    data.expand_vocabulary), its buckets, one jitted function (one compile per batch shape:
    `jaxenc.encoding`'s token budget). A sentence left without words encodes to zeros.

    Args:
      workdir: a `python -m train.main --workdir` folder with a best checkpoint.
      batch_size: the most sentences of a batch.
      progress: show a progress bar per `encode` call.
      long_sentences: "truncate" or "error" for a sentence over `max_length` tokens
        (`jaxenc.encoding.Encoder`).
    """

    def __init__(self, workdir: str | os.PathLike, *, batch_size: int = 128,
                 progress: bool = True, long_sentences: str = "truncate"):
        super().__init__(**workdir_arguments(workdir), long_sentences=long_sentences)
        self.workdir, self.batch_size, self.progress = Path(workdir), batch_size, progress

    def encode(self, sentences: Sequence[SentenceLike], batch_size: int | None = None,
               show_progress_bar: bool | None = None,
               normalize_embeddings: bool = False) -> np.ndarray:
        """float32[N, D] sentence vectors, in input order (batch size and progress bar default
        to the attributes)."""
        return super().encode(
            sentences, batch_size=batch_size or self.batch_size,
            show_progress_bar=self.progress if show_progress_bar is None else show_progress_bar,
            normalize_embeddings=normalize_embeddings)


def load_encoder(spec: str, long_sentences: str = "truncate") -> SentenceEncoder:
    """`bag:SOURCE[,SOURCE...]` (GloVe text files, registered names) -> BagOfEmbeddings; an
    export folder (`python -m jaxenc export`) -> its Encoder; a training run directory ->
    CheckpointEncoder. `long_sentences` ("truncate" or "error") is the model encoders' policy
    for a sentence over their max_length (module doc)."""
    from jaxenc import exporting, loading

    if spec.startswith(BAG_PREFIX):
        return BagOfEmbeddings([p for p in spec[len(BAG_PREFIX):].split(",") if p])
    if not Path(spec).is_dir():
        raise ConfigError(f"--encoder {spec!r} is neither bag:SOURCE[,SOURCE...], an export "
                          "folder nor an existing training run directory (fix: pass "
                          "bag:path/to/glove.txt or bag:glove-6b-50d, the OUT of python -m "
                          "jaxenc export, or the --workdir of a python -m train.main run)")
    if exporting.is_export(spec):
        return loading.load(spec, long_sentences=long_sentences)
    return CheckpointEncoder(spec, long_sentences=long_sentences)


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
        fingerprint = short_digest(*map(repr, sentences))
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

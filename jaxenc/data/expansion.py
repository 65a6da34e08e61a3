"""Vocabulary expansion: a trained encoder whose word table is fixed pretrained vectors encodes any
word that has a vector (Mean-Max AAE section 4.2, after skip-thoughts).

The table was never trained, so the vector of a word outside the training vocabulary is as good
an input as a trained word's. `ExpandedVocabulary` grows the training vocabulary and table by the
words of the text to encode that the vectors file has (looked up once each, one pass over the file
per batch of new words, as `jaxenc.evaluation.encoders.BagOfEmbeddings` does), which encodes that
text exactly as expanding to every word of the file would, without holding millions of rows.
Words without a vector stay out of it; under data.oov="drop" (the authors' rule) they are dropped
from the input.
The table's rows are padded to a power of two (`capacity`), so an encoder jitted on it recompiles
only when the capacity doubles.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from jaxenc.data.embeddings import load_vectors
from jaxenc.data.vocab import SPECIAL_TOKENS, Vocabulary
from jaxenc.errors import ConfigError


class ExpandedVocabulary:
    """A training vocabulary and its fixed table, grown by `add`.

    Args:
      vocab: the training vocabulary (its `lowercase` is kept).
      table: its word table float[len(vocab), d] (the trained encoder's, i.e. the vectors).
      vectors: the vectors file(s) or named sources the table came from (data.embeddings).
      found: bool[len(vocab)] the training words that have a vector when words without one are
        dropped (data.oov="drop"), else None.
      lowercase_fallback: a word absent from the file takes its lower-cased form's vector.
    """

    def __init__(self, vocab: Vocabulary, table: np.ndarray, vectors: str,
                 found: np.ndarray | None, *, lowercase_fallback: bool):
        if not vectors:
            raise ConfigError("data.expand_vocabulary reads the run's data.embeddings, which is "
                              "empty (fix: train with word vectors, or leave "
                              "data.expand_vocabulary False)")
        self._tokens = list(vocab.tokens)
        self._rows = [np.asarray(table, np.float32)]
        self._found = found
        self._lowercase, self._fallback = vocab.lowercase, lowercase_fallback
        self._vectors = vectors
        self._missing: set[str] = set()  # looked up, without a vector
        self.vocab = vocab

    def add(self, words: Iterable[str]) -> None:
        """Adds the words (as the vocabulary normalises them) that it lacks and the vectors file
        has; the file is read only when some word was never looked up."""
        known = self.vocab
        new = {word.lower() if self._lowercase else word for word in words}
        new = sorted(word for word in new - self._missing - set(SPECIAL_TOKENS)
                     if word not in known and not (self._fallback and word.lower() in known))
        if not new:
            return
        lookup = Vocabulary(SPECIAL_TOKENS + tuple(new))
        vectors = load_vectors(self._vectors, lookup, oov="drop",
                               lowercase_fallback=self._fallback,
                               expected_dim=self._rows[0].shape[1])
        rows = np.flatnonzero(vectors.found)
        self._missing.update(word for word, has in zip(new, vectors.found[len(SPECIAL_TOKENS):],
                                                       strict=True) if not has)
        if not rows.size:
            return
        self._tokens += [lookup.tokens[row] for row in rows]
        self._rows.append(vectors.matrix[rows])
        if self._found is not None:
            self._found = np.concatenate([self._found, np.ones(rows.size, bool)])
        self.vocab = Vocabulary(self._tokens, lowercase=self._lowercase)

    @property
    def found(self) -> np.ndarray | None:
        """bool[len(vocab)]: the words that have a vector (under the "drop" policy), else None."""
        return self._found

    @property
    def capacity(self) -> int:
        """The table's rows: the smallest power of two holding the vocabulary."""
        return 1 << (len(self.vocab) - 1).bit_length()

    @property
    def table(self) -> np.ndarray:
        """float32[capacity, d]: the rows of the vocabulary's words, then zero rows."""
        rows = np.concatenate(self._rows)
        return np.pad(rows, ((0, self.capacity - len(rows)), (0, 0)))

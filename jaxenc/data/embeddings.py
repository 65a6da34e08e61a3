"""Pretrained word vectors for a vocabulary, streamed from GloVe or word2vec text files or read
from a named source (a registered name such as "glove-6b-50d": vectors shipped as a pip package,
see `jaxenc.data.named_vectors`).

Only the vocabulary's rows are kept, so a 5 GB GloVe 840B file costs one pass and O(V d) memory;
a named source is memory-mapped and only the rows the vocabulary needs are copied.
Words without a vector are handled by one of three policies from the papers:

- "random" (DiSAN): each gets its own U(-0.05, 0.05) vector.
- "hashed" (PSAN): each gets one of 128 shared U(-0.05, 0.05) vectors, chosen by a stable hash
  of the word (blake2b, not Python's salted `hash`), so the choice is the same in every run.
- "drop" (Mean-Max AAE): they are removed from the input; see `drop_oov`. Their rows stay zero.

The padding row is always zero; the other special tokens are treated as words without a vector.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from jaxenc.data.named_vectors import NAMED_VECTORS, PackagedVectors, is_named, open_named
from jaxenc.data.vocab import NUM_SPECIAL, PAD, ROOT, Vocabulary
from jaxenc.errors import ConfigError, DataError

OOV_POLICIES = ("random", "hashed", "drop")
OOV_LIMIT = 0.05  # OOV vectors are drawn from U(-OOV_LIMIT, OOV_LIMIT)
NUM_HASH_BUCKETS = 128


@dataclasses.dataclass(frozen=True)
class Coverage:
    """How much of a vocabulary (and of the data's tokens) vector sources cover.

    Attributes:
      path: the vector sources, comma-separated (file paths and names).
      dim: vector size.
      lines_read: vector lines in the files (invalid ones included, a word2vec header excluded)
        plus the rows of the named sources.
      invalid_lines: lines skipped because they are not valid UTF-8.
      num_types: regular words in the vocabulary (special tokens excluded).
      types_exact: of those, found verbatim in the file.
      types_lowercase: of those, found only through their lower-cased form.
      num_tokens: tokens counted in the data, None when no counts were available.
      tokens_found: of those, tokens whose word has a vector, None when no counts were available.
    """

    path: str
    dim: int
    lines_read: int
    invalid_lines: int
    num_types: int
    types_exact: int
    types_lowercase: int
    num_tokens: int | None = None
    tokens_found: int | None = None

    @property
    def types_found(self) -> int:
        return self.types_exact + self.types_lowercase

    @property
    def type_rate(self) -> float:
        return self.types_found / max(self.num_types, 1)

    @property
    def token_rate(self) -> float | None:
        return None if self.num_tokens is None else self.tokens_found / max(self.num_tokens, 1)

    def __str__(self) -> str:
        lines = [
            f"{Path(self.path).name} ({self.dim}-d): {self.lines_read} lines read, "
            f"{self.invalid_lines} skipped (invalid UTF-8)",
            f"  types:  {self.types_found:>11,} of {self.num_types:>11,} found "
            f"({self.type_rate:6.1%}), {self.types_lowercase:,} through the lower-cased word",
        ]
        if self.num_tokens is not None:
            lines.append(f"  tokens: {self.tokens_found:>11,} of {self.num_tokens:>11,} found "
                         f"({self.token_rate:6.1%})")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Vectors:
    """Embedding matrix for a vocabulary.

    Attributes:
      matrix: float32[V, d], row i for vocabulary id i; the PAD row is zero.
      found: bool[V], True where the row came from a source (verbatim or lower-cased word).
      coverage: counts for the report (`print(vectors.coverage)`).
    """

    matrix: np.ndarray
    found: np.ndarray
    coverage: Coverage


def hash_bucket(word: str, num_buckets: int = NUM_HASH_BUCKETS) -> int:
    """Stable bucket of `word` in [0, num_buckets): the same in every process and platform."""
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % num_buckets


def drop_oov(ids: np.ndarray, found: np.ndarray) -> np.ndarray:
    """ids int32[n] without the words that have no vector (the "drop" policy).

    UNK, PAD and words whose `found` is False are removed; ROOT, CLS, BOS and EOS are kept.
    """
    ids = np.asarray(ids)
    keep = found[ids] | ((ids >= ROOT) & (ids < NUM_SPECIAL))
    return ids[keep]


def _numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes) of a text file, gzip-compressed when it ends in .gz."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as file:
        yield from enumerate(file, start=1)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _word2vec_header(line: str) -> tuple[int, int] | None:
    """(count, dim) when `line` is a word2vec text header "count dim", else None."""
    fields = line.split()
    if len(fields) == 2 and all(f.isdigit() for f in fields):
        return int(fields[0]), int(fields[1])
    return None


def _split_vector_line(line: str, dim: int, path: Path, number: int) -> tuple[str, str | list]:
    """(word, its numbers as one string or a list of strings) of a `word v_1 ... v_dim` line.

    The fast path needs single spaces; otherwise the line is re-split on any whitespace and the
    word may contain spaces (GloVe 840B has such words), as long as no part of it is a number.
    """
    word, _, numbers = line.partition(" ")
    if numbers.count(" ") == dim - 1:
        return word, numbers
    fields = line.split()
    extra = fields[1:-dim] if len(fields) > dim else []
    if len(fields) < dim + 1 or any(_is_number(f) for f in extra):
        raise DataError(f"line has {len(fields) - 1} numbers, the file's vectors are {dim}-d",
                        path=path, line=number,
                        fix="the file is corrupt or mixes files of different sizes")
    return " ".join(fields[:-dim]), fields[-dim:]


def _parse_numbers(numbers: str | list, path: Path, number: int) -> np.ndarray:
    """float32[d] of a line's numbers; DataError for text or for values that are not finite
    (nan, inf, or beyond float32), which would turn every loss they touch into nan."""
    texts = numbers.split(" ") if isinstance(numbers, str) else numbers
    try:
        with np.errstate(over="ignore"):  # a value beyond float32 becomes inf, refused below
            vector = np.array(texts, dtype=np.float32)
    except ValueError as error:
        raise DataError(f"not a number in the vector ({error})", path=path, line=number,
                        fix="the file is corrupt; re-download it") from None
    bad = np.flatnonzero(~np.isfinite(vector))
    if bad.size:
        raise DataError(f"vector value {bad[0] + 1} ({texts[bad[0]]!r}) is not finite",
                        path=path, line=number,
                        fix="the file is corrupt; re-download it or fix that line")
    return vector


def _fallback_index(vocab: Vocabulary) -> dict[str, list[int]]:
    """lower-cased form -> ids of the regular words that differ from it."""
    index: dict[str, list[int]] = {}
    for i, token in enumerate(vocab.tokens[NUM_SPECIAL:], start=NUM_SPECIAL):
        if token.lower() != token:
            index.setdefault(token.lower(), []).append(i)
    return index


def vector_sources(path: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path | str]:
    """The vector sources given by `path` (one entry, "A,B" or a sequence), in order: the strings
    that are registered names (NAMED_VECTORS) as they are, the others as existing files.

    A name wins over a file of that name in the working directory (write ./NAME for the file)."""
    if isinstance(path, str):
        entries = [part for part in path.split(",") if part]
    elif isinstance(path, os.PathLike):
        entries = [path]
    else:
        entries = list(path)
    sources = [entry if is_named(entry) else Path(entry) for entry in entries]
    for candidate in sources or [Path(str(path))]:
        if isinstance(candidate, Path) and not candidate.is_file():
            raise DataError("word vectors file not found", path=candidate,
                            fix="download GloVe (https://nlp.stanford.edu/projects/glove/) and "
                            "point the embeddings path at the .txt file(s), comma-separated, or "
                            f"name a packaged source ({', '.join(NAMED_VECTORS)})")
    return sources


@dataclasses.dataclass
class _Reading:
    """What `_vector_lines` learnt so far: the vector size, the lines read and skipped."""

    dim: int | None = None
    lines_read: int = 0
    invalid: int = 0


def _vector_lines(paths: Sequence[Path], reading: _Reading, expected_dim: int | None = None
                  ) -> Iterator[tuple[Path, int, str, str | list]]:
    """(file, line number, word, its numbers unparsed) of every vector line of `paths`, in order.

    Lines that are not valid UTF-8 are counted in `reading` and skipped; `reading.dim` is the
    word2vec header's size, else the first line's. DataError for a first line without numbers, a
    size other than `expected_dim`, or a word2vec header whose count the file does not have."""
    checked = False
    for path in paths:
        header, file_lines = None, 0
        for number, raw in _numbered_lines(path):
            try:
                line = raw.decode("utf-8").rstrip()
            except UnicodeDecodeError:
                reading.lines_read, reading.invalid = reading.lines_read + 1, reading.invalid + 1
                file_lines += 1
                continue
            if number == 1 and (header := _word2vec_header(line)) is not None:
                reading.dim = header[1] if reading.dim is None else reading.dim
                continue
            if not line:
                continue
            reading.lines_read, file_lines = reading.lines_read + 1, file_lines + 1
            if reading.dim is None:
                reading.dim = len(line.split()) - 1
            if not checked:
                _check_dim(reading.dim, expected_dim, path, number)
                checked = True
            yield path, number, *_split_vector_line(line, reading.dim, path, number)
        if header is not None and header[0] != file_lines:
            raise DataError(f"the word2vec header announces {header[0]} vectors, the file has "
                            f"{file_lines}", path=path, line=1, fix="the file is truncated; "
                            "re-download it")


def _check_dim(dim: int, expected_dim: int | None, path: Path | str, number: int | None
               ) -> None:
    """DataError for vectors without numbers or of another size than `expected_dim`."""
    if dim < 1:
        raise DataError("the first vector line has no numbers", path=path, line=number,
                        fix="give GloVe lines 'word v1 ... vd'")
    if expected_dim is not None and dim != expected_dim:
        raise DataError(f"the vectors are {dim}-d, {expected_dim}-d expected", path=path,
                        line=number, fix="use a file of that size or change the embedding size "
                        "in the config")


def vector_words(path: str | os.PathLike | Sequence[str | os.PathLike],
                 limit: int | None = None) -> list[str]:
    """The distinct words of vector sources (as `load_vectors` reads them), in source and file
    (row) order; at most `limit` of them (GloVe lists the most frequent words first)."""
    words: dict[str, None] = {}
    reading = _Reading()
    for source in vector_sources(path):
        if isinstance(source, str):
            source_words = open_named(source).words
        else:
            source_words = (word for _, _, word, _ in _vector_lines([source], reading))
        for word in source_words:
            if limit is not None and len(words) >= limit:
                return list(words)
            words.setdefault(word)
    return list(words)


def _copy_named_rows(named: PackagedVectors, ids: Mapping[str, int],
                     fallback: Mapping[str, Sequence[int]], matrix: np.ndarray,
                     exact: np.ndarray, lower: np.ndarray) -> None:
    """Copies the rows of a named source into `matrix` float32[V, d], in place: a word not yet
    found verbatim takes its own row, then a word found neither way its lower-cased form's row
    (`fallback`: lower-cased form -> ids). Updates `exact` and `lower` (bool[V])."""
    targets, rows = [], []
    for word, i in ids.items():
        row = named.rows.get(word)
        if row is not None and not exact[i]:
            targets.append(i)
            rows.append(row)
    matrix[targets], exact[targets] = named.take(rows), True
    targets, rows = [], []
    for form, candidates in fallback.items():
        row = named.rows.get(form)
        if row is None:
            continue
        for i in candidates:
            if not exact[i] and not lower[i]:
                targets.append(i)
                rows.append(row)
    matrix[targets], lower[targets] = named.take(rows), True


def load_vectors(path: str | os.PathLike | Sequence[str | os.PathLike], vocab: Vocabulary, *,
                 oov: str = "random", seed: int = 0, lowercase_fallback: bool = True,
                 expected_dim: int | None = None,
                 token_counts: Mapping[str, int] | None = None) -> Vectors:
    """Reads the rows of `vocab`'s words from GloVe (`word v1 ... vd`) or word2vec text files
    and named sources.

    Args:
      path: the vectors file (optionally .gz; a first line "count dim" marks word2vec format) or
        registered name (NAMED_VECTORS, e.g. "glove-6b-50d"), or several of one dimension (a
        comma-separated string or a sequence), read in order.
      vocab: the vocabulary whose rows are wanted (special tokens are never looked up).
      oov: "random" | "hashed" | "drop", the policy for words without a vector (module doc).
      seed: seed of the OOV vectors.
      lowercase_fallback: a word absent from the files takes the vector of its lower-cased form.
      expected_dim: raise DataError unless the vectors have this size.
      token_counts: word counts of the data for the token coverage (default: `vocab.counts`).

    Returns:
      Vectors(matrix float32[len(vocab), d], found bool[len(vocab)], coverage). Lines that are not
      valid UTF-8 are skipped and counted. A word's own vector wins over its lower-cased form's;
      among sources, the first (in source and file order) that has the word wins.
    """
    if oov not in OOV_POLICIES:
        raise ConfigError(f"unknown OOV policy {oov!r}; choose one of {OOV_POLICIES}")
    sources = vector_sources(path)
    ids = {token: i for i, token in enumerate(vocab.tokens) if i >= NUM_SPECIAL}
    fallback = _fallback_index(vocab) if lowercase_fallback else {}
    exact = np.zeros(len(vocab), dtype=bool)
    lower = np.zeros(len(vocab), dtype=bool)
    matrix, reading = None, _Reading()
    for source in sources:
        if isinstance(source, str):
            named = open_named(source)
            _check_dim(named.dim, reading.dim or expected_dim, source, None)
            reading.dim, reading.lines_read = named.dim, reading.lines_read + len(named.words)
            if matrix is None:
                matrix = np.zeros((len(vocab), reading.dim), dtype=np.float32)
            _copy_named_rows(named, ids, fallback, matrix, exact, lower)
            continue
        for path, number, word, numbers in _vector_lines([source], reading, expected_dim):
            if matrix is None:
                matrix = np.zeros((len(vocab), reading.dim), dtype=np.float32)
            target, lower_targets = ids.get(word), fallback.get(word, ())
            if (target is None or exact[target]) and not lower_targets:
                continue
            vector = _parse_numbers(numbers, path, number)
            if target is not None and not exact[target]:
                matrix[target], exact[target] = vector, True
            for i in lower_targets:
                if not exact[i] and not lower[i]:
                    matrix[i], lower[i] = vector, True
    if matrix is None:
        raise DataError("no word vectors in the file", path=",".join(map(str, sources)),
                        fix="check that it is a GloVe or word2vec text file")
    lower &= ~exact
    found = exact | lower
    _fill_missing(matrix, found, vocab, oov, seed)
    counts = vocab.counts if token_counts is None else token_counts
    coverage = Coverage(
        path=",".join(map(str, sources)), dim=reading.dim, lines_read=reading.lines_read,
        invalid_lines=reading.invalid,
        num_types=len(vocab) - NUM_SPECIAL, types_exact=int(exact.sum()),
        types_lowercase=int(lower.sum()),
        num_tokens=sum(counts.values()) if counts else None,
        tokens_found=sum(c for w, c in counts.items() if found[vocab.id(w)]) if counts else None)
    return Vectors(matrix=matrix, found=found, coverage=coverage)


def _fill_missing(matrix: np.ndarray, found: np.ndarray, vocab: Vocabulary, oov: str,
                  seed: int) -> None:
    """Writes the rows of words without a vector in place, following the `oov` policy."""
    rng = np.random.default_rng(seed)
    missing = np.flatnonzero(~found)
    missing = missing[missing != PAD]
    if oov == "drop":  # only the special tokens are ever embedded
        missing = missing[missing < NUM_SPECIAL]
    dim = matrix.shape[1]
    if oov == "hashed":
        shared = rng.uniform(-OOV_LIMIT, OOV_LIMIT, size=(NUM_HASH_BUCKETS, dim))
        buckets = [hash_bucket(vocab.tokens[i]) for i in missing]
        matrix[missing] = shared[np.asarray(buckets, dtype=np.int64)]
    else:
        matrix[missing] = rng.uniform(-OOV_LIMIT, OOV_LIMIT, size=(len(missing), dim))
    matrix[PAD] = 0.0

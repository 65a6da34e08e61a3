"""Word vocabulary: fixed special ids, a deterministic build from data, save/load as text.

The first ids are reserved, in this order, and every vocabulary (built or loaded) has them:

  PAD=0 "<pad>", UNK=1 "<unk>", ROOT=2 "[root]", CLS=3 "[cls]", BOS=4 "<s>", EOS=5 "</s>".

Regular words follow, most frequent first, ties broken by the token string, so the same data
always gives the same ids. The file format is one token per line, line k holding id k - 1.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from jaxenc.errors import DataError
from jaxenc.files import write_text_atomic

PAD, UNK, ROOT, CLS, BOS, EOS = range(6)
SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<unk>", "[root]", "[cls]", "<s>", "</s>")
NUM_SPECIAL = len(SPECIAL_TOKENS)


class Vocabulary:
    """A bijection between tokens and int ids, the special tokens at their fixed ids.

    Attributes:
      lowercase: tokens are lower-cased before look-up (the vocabulary itself is lower-case).
      counts: training-data count of each regular word when the vocabulary was built, else empty.
    """

    def __init__(self, tokens: Sequence[str], *, lowercase: bool = False,
                 counts: Mapping[str, int] | None = None):
        """Wraps an id-ordered token list that starts with SPECIAL_TOKENS (see `build`/`load`)."""
        if tuple(tokens[:NUM_SPECIAL]) != SPECIAL_TOKENS:
            raise ValueError(f"a vocabulary must start with {SPECIAL_TOKENS}, got "
                             f"{tuple(tokens[:NUM_SPECIAL])}")
        self._tokens = tuple(tokens)
        self._ids = {token: i for i, token in enumerate(self._tokens)}
        if len(self._ids) != len(self._tokens):
            raise ValueError("a vocabulary cannot hold the same token twice")
        self.lowercase = lowercase
        self.counts = dict(counts or {})

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_count: int = 1,
              max_size: int | None = None, lowercase: bool = False) -> Vocabulary:
        """Vocabulary of the tokens seen at least `min_count` times.

        Args:
          token_lists: the tokenised training sentences.
          min_count: rarer tokens are left out (they encode to UNK).
          max_size: keep at most this many regular words (special tokens not counted).
          lowercase: lower-case every token, here and at `encode` time.
        """
        counter: collections.Counter[str] = collections.Counter()
        for tokens in token_lists:
            counter.update(map(str.lower, tokens) if lowercase else tokens)
        for special in SPECIAL_TOKENS:
            counter.pop(special, None)
        words = sorted((w for w, c in counter.items() if c >= min_count),
                       key=lambda w: (-counter[w], w))
        if max_size is not None:
            words = words[:max_size]
        return cls(SPECIAL_TOKENS + tuple(words), lowercase=lowercase,
                   counts={w: counter[w] for w in words})

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: str) -> bool:
        return self._normalise(token) in self._ids

    @property
    def tokens(self) -> tuple[str, ...]:
        """All tokens in id order (special tokens first)."""
        return self._tokens

    def _normalise(self, token: str) -> str:
        return token.lower() if self.lowercase else token

    def id(self, token: str, lowercase_fallback: bool = False) -> int:
        """The id of `token`; UNK when absent (after trying `token.lower()` if asked)."""
        token = self._normalise(token)
        found = self._ids.get(token)
        if found is None and lowercase_fallback:
            found = self._ids.get(token.lower())
        return UNK if found is None else found

    def encode(self, tokens: Sequence[str], lowercase_fallback: bool = False) -> np.ndarray:
        """int32[len(tokens)] ids; unknown tokens are UNK (optionally retried lower-cased)."""
        return np.fromiter((self.id(t, lowercase_fallback) for t in tokens), dtype=np.int32,
                           count=len(tokens))

    def decode(self, ids: Iterable[int]) -> list[str]:
        """The tokens of `ids` (int sequence or array)."""
        return [self._tokens[i] for i in np.asarray(ids, dtype=np.int64).reshape(-1)]

    def save(self, path: str | os.PathLike) -> None:
        """Writes one token per line (UTF-8); line k holds id k - 1. Atomically: the other
        processes of a multi-host run may read it meanwhile."""
        bad = [t for t in self._tokens if not t or t != t.strip() or "\n" in t or "\r" in t]
        if bad:
            raise DataError(f"token {bad[0]!r} cannot be written one per line", path=path,
                            fix="strip whitespace from tokens before building the vocabulary")
        write_text_atomic(path, "".join(t + "\n" for t in self._tokens))

    @classmethod
    def load(cls, path: str | os.PathLike, lowercase: bool = False) -> Vocabulary:
        """Reads a file written by `save`; `lowercase` must match how it was built."""
        path = Path(path)
        if not path.is_file():
            raise DataError("vocabulary file not found", path=path,
                            fix="build it with Vocabulary.build(...).save(path) or fix the path")
        try:
            lines = path.read_bytes().decode("utf-8").split("\n")
        except UnicodeDecodeError as error:
            raise DataError(f"vocabulary file is not UTF-8 ({error.reason})", path=path,
                            fix="rewrite it with Vocabulary.save") from None
        if lines and lines[-1] == "":
            lines.pop()
        seen: dict[str, int] = {}
        for number, token in enumerate(lines, start=1):
            if number <= NUM_SPECIAL and token != SPECIAL_TOKENS[number - 1]:
                raise DataError(f"expected special token {SPECIAL_TOKENS[number - 1]!r}, "
                                f"found {token!r}", path=path, line=number,
                                fix="the first lines must be " + " ".join(SPECIAL_TOKENS))
            if not token or token != token.strip():
                raise DataError(f"blank or padded token {token!r}", path=path, line=number,
                                fix="one token per line without surrounding whitespace")
            if token in seen:
                raise DataError(f"token {token!r} repeats line {seen[token]}", path=path,
                                line=number, fix="each token may appear only once")
            seen[token] = number
        if len(lines) < NUM_SPECIAL:
            raise DataError(f"only {len(lines)} lines, fewer than the {NUM_SPECIAL} special "
                            "tokens", path=path, fix="rewrite it with Vocabulary.save")
        return cls(lines, lowercase=lowercase)

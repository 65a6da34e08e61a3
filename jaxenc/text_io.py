"""The one line reader every dataset reader uses: encodings, BOM, CRLF, line numbers, errors.

Files are decoded whole, split on "\\n" only (never `str.splitlines()`, which also breaks on
U+0085, U+2028, ... and so miscounts latin-1 files such as MR), and each line loses one trailing
"\\r" (CRLF files) and, on line 1, a UTF-8 byte-order mark. Every line knows its file and 1-based
number, so a reader reports bad input as `file:line: problem (fix: ...)` through `Line.error`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from jaxenc.errors import DataError

logger = logging.getLogger(__name__)

_BOM = "\ufeff"

# cp1252 decoded the way browsers do (WHATWG "windows-1252"): bytes 0x80-0x9F become the cp1252
# characters ("…", "—", curly quotes) and the five bytes cp1252 leaves undefined stay latin-1, so
# decoding never fails and no C1 control character (U+0085 is a line break) reaches the tokens.
_CP1252_C1 = {
    byte: bytes([byte]).decode("cp1252")
    for byte in range(0x80, 0xA0)
    if byte not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
}

# Word-level tokenizer for untokenised text (SICK, MRPC, STS, raw Multi30k), close to the PTB
# convention GloVe was built with: punctuation split off, "n't" and clitics ("'s", "'re", ...) are
# tokens of their own, numbers keep their inner separators (2.5, 1,000, 10:30), and hyphenated
# words and dotted abbreviations (U.S.) stay whole. Control characters are never tokens (MRPC train
# line 1765 has a stray U+0012 where an apostrophe belongs).
_TOKEN = re.compile(
    r"""
    \w+(?=n't\b)                 # the stem of a negated auxiliary: "is" in "isn't", "ca" in "can't"
    | n't\b
    | '(?:s|re|ve|ll|d|m)\b      # clitics
    | \d+(?:[.,:]\d+)+           # numbers with separators
    | (?:[^\W\d_]\.){2,}         # dotted abbreviations
    | \w+(?:[-&]\w+)*            # words, hyphenated words
    | [^\s\x00-\x1f\x7f-\x9f]     # any other character on its own, except control characters
    """,
    re.VERBOSE | re.IGNORECASE,
)


def tokenize(text: str) -> tuple[str, ...]:
    """Splits untokenised English/German text into PTB-like word tokens.

    >>> tokenize("The dog isn't the man's, it's 2.5 m away.")
    ('The', 'dog', 'is', "n't", 'the', 'man', "'s", ',', 'it', "'s", '2.5', 'm', 'away', '.')
    """
    return tuple(_TOKEN.findall(text))


def split_whitespace(text: str) -> tuple[str, ...]:
    """The tokens of already tokenised text: `text` split on whitespace."""
    return tuple(text.split())


# How a reader turns a line into tokens (jaxenc.data.registry.DatasetInfo.tokenizer).
TOKENIZERS = {"whitespace": split_whitespace, "text": tokenize}


@dataclasses.dataclass(frozen=True)
class Line:
    """One line of a text file, without its line break.

    Attributes:
      path: the file it comes from.
      number: 1-based line number.
      text: the decoded line, without "\\n", a trailing "\\r" or a leading BOM.
    """

    path: Path
    number: int
    text: str

    @property
    def uid(self) -> str:
        """"file:line", the `Example.uid` of a record read from this line."""
        return f"{self.path.name}:{self.number}"

    def error(self, problem: str, fix: str) -> DataError:
        """A DataError that names this file and line (raise it)."""
        return DataError(problem, path=self.path, line=self.number, fix=fix)

    def fields(self, count: int, *, sep: str = "\t", at_least: bool = False) -> list[str]:
        """The line split on `sep`; exactly `count` fields (or >= `count` when `at_least`)."""
        fields = self.text.split(sep)
        if len(fields) < count or (len(fields) > count and not at_least):
            expected = f"at least {count}" if at_least else str(count)
            raise self.error(f"expected {expected} {sep!r}-separated fields, found {len(fields)}",
                             fix=f"each line must hold {expected} fields separated by {sep!r}")
        return fields

    def number_field(self, value: str, name: str, *, low: float, high: float) -> float:
        """`value` parsed as a float in [low, high]; `name` is the column's name for the message."""
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not low <= number <= high:  # also rejects nan and inf
            raise self.error(f"{name} {value!r} is not a number in [{low:g}, {high:g}]",
                             fix=f"write {name} as a decimal number between {low:g} and {high:g}")
        return number

    def label_field(self, value: str, labels: Mapping[str, int], name: str) -> int:
        """The class index of `value` in `labels` (file spelling -> index)."""
        if value not in labels:
            raise self.error(f"unknown {name} {value!r}",
                             fix=f"use one of {', '.join(map(repr, labels))}")
        return labels[value]

    def nonempty(self, value: str, name: str) -> str:
        """`value` stripped; an error when nothing is left."""
        value = value.strip()
        if not value:
            raise self.error(f"empty {name}", fix=f"give every record a non-empty {name}")
        return value


def read_lines(path: str | os.PathLike, *, encoding: str = "utf-8") -> list[Line]:
    """All lines of a text file (a final line break does not start another line).

    Args:
      path: the file.
      encoding: any Python codec name; "cp1252" is decoded as browsers do (see `_CP1252_C1`) and
        never fails, which is what the SentEval files with stray Windows bytes (MR, SUBJ) need.

    Raises:
      DataError: the file is missing or empty, or a byte cannot be decoded (naming its line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError("file not found", path=path,
                        fix="check the data folder holds this file "
                            "(dataset layouts: docs/data.md)")
    data = path.read_bytes()
    if not data:
        raise DataError("the file is empty", path=path,
                        fix="a data file holds at least one record; copy the complete file")
    text = _decode(data, encoding, path)
    chunks = text.removeprefix(_BOM).split("\n")
    if chunks[-1] == "":
        chunks.pop()
    return [Line(path, number, chunk.removesuffix("\r"))
            for number, chunk in enumerate(chunks, start=1)]


def report_skipped(path: str | os.PathLike, count: int, reason: str) -> None:
    """Logs (INFO) how many records of `path` a reader skipped on purpose, when there were any."""
    if count:
        logger.info("%s: skipped %d records (%s)", path, count, reason)


def _decode(data: bytes, encoding: str, path: Path) -> str:
    if encoding.lower().replace("-", "") in ("cp1252", "windows1252"):
        return data.decode("latin-1").translate(_CP1252_C1)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise DataError(f"byte 0x{data[err.start]:02x} is not valid {encoding}", path=path,
                        line=line, fix="convert the file to UTF-8 (or read it as latin-1 / cp1252)"
                        ) from None

"""SICK (SemEval-2014 task 1): sentence pairs with a relatedness score and an entailment label.

Two layouts, told apart by the header row (columns are found by name, not position):
- SentEval's per-split files `SICK_{train,trial,test_annotated}.txt`: `pair_ID sentence_A
  sentence_B relatedness_score entailment_judgment` (the test file has CRLF line ends);
- the full release `SICK_full_12col.txt`: 12 columns incl. `entailment_label` and the split column
  `SemEval_set` (TRAIN / TRIAL / TEST), read one split at a time.

Every record carries both targets: `label` (index into ENTAILMENT_LABELS, the same order as SNLI so
NLI classifiers transfer) and `score` (relatedness in [1, 5]).
"""

from __future__ import annotations

import os

from jaxenc.errors import DataError
from jaxenc.records import Example, Sentence
from jaxenc.text_io import Line, read_lines, tokenize

ENTAILMENT_LABELS = ("entailment", "neutral", "contradiction")
RELATEDNESS_RANGE = (1.0, 5.0)
SPLIT_COLUMN_VALUES = {"train": "TRAIN", "dev": "TRIAL", "test": "TEST"}

_LABEL_IDS = {name.upper(): index for index, name in enumerate(ENTAILMENT_LABELS)}
_LABEL_COLUMNS = ("entailment_judgment", "entailment_label")
_REQUIRED_COLUMNS = ("sentence_A", "sentence_B", "relatedness_score")
_SPLIT_COLUMN = "SemEval_set"


def read_sick(path: str | os.PathLike, *, split: str | None = None) -> list[Example]:
    """Reads a SICK file of either layout.

    Args:
      path: `SICK_train.txt`-style file, or the 12-column full release.
      split: "train", "dev" (= TRIAL) or "test"; required for the full release (which holds all
        three), not allowed for a per-split file.

    Returns:
      One Example per pair: sentences (A, B), label (entailment), score (relatedness), uid.
    """
    lines = read_lines(path)
    if not lines:
        raise DataError("empty SICK file (no header row)", path=path,
                        fix="use an unmodified SICK release file")
    header, *rows = lines
    columns = _columns(header)
    wanted = _split_value(header, columns, split)
    examples = []
    for line in rows:
        fields = line.fields(len(columns))
        if wanted is not None and fields[columns[_SPLIT_COLUMN]].strip() != wanted:
            continue
        examples.append(_example(line, fields, columns))
    return examples


def _example(line: Line, fields: list[str], columns: dict[str, int]) -> Example:
    pair = tuple(_sentence(line.nonempty(fields[columns[name]], name))
                 for name in ("sentence_A", "sentence_B"))
    label_column = next(name for name in _LABEL_COLUMNS if name in columns)
    low, high = RELATEDNESS_RANGE
    return Example(
        sentences=pair,
        label=line.label_field(fields[columns[label_column]].strip(), _LABEL_IDS, label_column),
        score=line.number_field(fields[columns["relatedness_score"]], "relatedness_score",
                                low=low, high=high),
        uid=line.uid,
    )


def _sentence(text: str) -> Sentence:
    return Sentence(tokens=tokenize(text), text=text)


def _columns(header: Line) -> dict[str, int]:
    columns = {name.strip(): index for index, name in enumerate(header.text.split("\t"))}
    missing = [name for name in _REQUIRED_COLUMNS if name not in columns]
    if not any(name in columns for name in _LABEL_COLUMNS):
        missing.append(" or ".join(_LABEL_COLUMNS))
    if missing:
        raise header.error(f"SICK header lacks column(s) {', '.join(missing)}",
                           fix="keep the release's tab-separated header row as line 1")
    return columns


def _split_value(header: Line, columns: dict[str, int], split: str | None) -> str | None:
    """The SemEval_set value to keep, or None to keep every row of a per-split file."""
    if _SPLIT_COLUMN not in columns:
        if split is not None:
            raise header.error(f"split={split!r} given but the file has no {_SPLIT_COLUMN} column",
                               fix="read a per-split SICK file without split=")
        return None
    if split not in SPLIT_COLUMN_VALUES:
        raise header.error(f"the full SICK release needs split= one of {tuple(SPLIT_COLUMN_VALUES)}"
                           f", got {split!r}", fix="pass split='train', 'dev' or 'test'")
    return SPLIT_COLUMN_VALUES[split]

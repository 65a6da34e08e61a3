"""A user's own labelled files as the dataset "files": TSV, CSV or JSON Lines, by extension.

`data.train_file` is required; `data.dev_file` and `data.test_file` are optional (a split without
a file is carved from train with task.dev_fraction / test_fraction and the split seed, as for the
built-in datasets that ship no such split). Files are UTF-8 (a byte-order mark and CRLF line ends
are accepted).

Layouts:
- `.tsv`: a first row naming the columns, or no header at all: every row `label<TAB>text` (the
  layout of many public labelled sets). A first row is a header when it names the text
  column(s).
- `.csv`: a first row naming the columns; fields quoted as spreadsheets write them.
- `.jsonl`: one JSON object per line; its keys are the columns (labels may be numbers).

Columns (`data.text_columns`, `data.label_column`, `data.score_column`) decide the task:
- one text column (by default `text`) and a label: sentence classification ("single");
- two text columns (by default `text_a,text_b`) and a label: sentence-pair classification, e.g.
  entailment ("pair");
- two text columns and a score: relatedness ("relatedness"; the Tai et al. head spreads each
  score over the integer points of the train scores' range).
A file holding both a label and a score column is read by its label.

Labels are the distinct labels of the train file, sorted (as numbers when every label is an
integer, else as text); a dev or test label that train lacks is an error. Text is tokenised as
`jaxenc.load(...).encode` tokenises a string (`text_io.tokenize`), and encoders that read trees
parse it as they parse any untokenised dataset. Every bad row (a missing column, empty text, an
unknown label, a score that is not a number) is one error naming file:line; no row is dropped.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxenc.errors import DataError
from jaxenc.records import Example, Sentence
from jaxenc.text_io import read_lines, tokenize

log = logging.getLogger(__name__)

NAME = "files"
FORMATS = (".tsv", ".csv", ".jsonl")
SPLIT_FILES = {"train": "train_file", "dev": "dev_file", "test": "test_file"}  # data.<key>
PAIR_COLUMNS = ("text_a", "text_b")  # the two text columns when data.text_columns is ""
SINGLE_COLUMN = "text"
COLUMN_KEYS = ("text_columns", "label_column", "score_column")  # data.<key>


@dataclasses.dataclass(frozen=True)
class Columns:
    """Which columns a file's examples are read from.

    Attributes:
      text: one column (single sentences) or two (sentence pairs).
      target: the label or score column.
      kind: "single", "pair" or "relatedness" (jaxenc.data.registry.KINDS).
    """

    text: tuple[str, ...]
    target: str
    kind: str


@dataclasses.dataclass(frozen=True)
class Description:
    """What the train file makes of the dataset: its columns, label names (classification) or
    score range (relatedness: the train scores' floor and ceiling)."""

    columns: Columns
    label_names: tuple[str, ...] | None
    score_range: tuple[float, float] | None


@dataclasses.dataclass(frozen=True)
class _Row:
    path: Path
    line: int
    values: Mapping[str, Any]

    def error(self, problem: str, fix: str) -> DataError:
        return DataError(problem, path=self.path, line=self.line, fix=fix)


def _format(path: Path, flag: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"{flag}: cannot tell the format of {path.name!r} from its extension",
                        path=path, fix=f"name the file *.tsv, *.csv or *.jsonl (one of "
                                       f"{', '.join(FORMATS)})")
    if not path.is_file():
        raise DataError(f"{flag}: file not found", path=path,
                        fix=f"set {flag} to an existing file")
    return suffix


def _requested_text(text_columns: str) -> tuple[str, ...] | None:
    """data.text_columns as a tuple, None when "" (found from the header)."""
    names = tuple(name.strip() for name in text_columns.split(",") if name.strip())
    return names or None


def _is_header(fields: Sequence[str], text_columns: str) -> bool:
    """Whether a TSV's first row names its columns: it holds every requested text column, or
    (data.text_columns "") `text` or both of `text_a`, `text_b`."""
    requested = _requested_text(text_columns)
    if requested:
        return set(requested) <= set(fields)
    return SINGLE_COLUMN in fields or set(PAIR_COLUMNS) <= set(fields)


def _table_rows(path: Path, suffix: str, text_columns: str,
                label_column: str) -> tuple[tuple[str, ...], list[_Row]]:
    """(column names, rows) of a file, each row {column: value} with its 1-based line."""
    if suffix == ".jsonl":
        return _jsonl_rows(path)
    lines = read_lines(path)
    if suffix == ".csv":
        return _csv_rows(path, "\n".join(line.text for line in lines))
    first = lines[0].text.split("\t")
    if _is_header(first, text_columns):
        header, body = tuple(name.strip() for name in first), lines[1:]
    else:  # label<TAB>text
        requested = _requested_text(text_columns) or (SINGLE_COLUMN,)
        if len(requested) != 1:
            raise lines[0].error(
                f"the first row names no column of --config.data.text_columns="
                f"{text_columns!r}", fix="give the file a header row naming its columns")
        header, body = (label_column, requested[0]), lines
    rows = []
    for line in body:
        fields = line.text.split("\t")
        if len(fields) != len(header):
            layout = "<TAB>".join(header)
            raise line.error(f"expected {len(header)} tab-separated fields ({layout}), found "
                             f"{len(fields)}", fix=f"write each row as {layout}, with no tab "
                                                   "inside a field")
        rows.append(_Row(path, line.number, dict(zip(header, fields, strict=True))))
    return header, rows


def _csv_rows(path: Path, text: str) -> tuple[tuple[str, ...], list[_Row]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = tuple(name.strip() for name in next(reader))
        rows, start = [], reader.line_num + 1
        for fields in reader:
            if fields:  # a blank line
                if len(fields) != len(header):
                    raise DataError(f"expected {len(header)} comma-separated fields "
                                    f"({','.join(header)}), found {len(fields)}", path=path,
                                    line=start, fix="quote a field that holds a comma, e.g. "
                                                    '"Paris, France"')
                rows.append(_Row(path, start, dict(zip(header, fields, strict=True))))
            start = reader.line_num + 1
    except csv.Error as error:
        raise DataError(f"not a valid CSV row: {error}", path=path, line=reader.line_num,
                        fix="close every opening quote; write a quote inside a quoted field "
                            'as ""') from None
    return header, rows


def _jsonl_rows(path: Path) -> tuple[tuple[str, ...], list[_Row]]:
    rows, names = [], {}
    for line in read_lines(path):
        if not line.text.strip():
            continue
        try:
            record = json.loads(line.text)
        except json.JSONDecodeError as error:
            raise line.error(f"not a JSON object: {error.msg}",
                             fix='write one object per line, e.g. {"text": "...", "label": '
                                 '"positive"}') from None
        if not isinstance(record, dict):
            raise line.error(f"not a JSON object but a {type(record).__name__}",
                             fix='write one object per line, e.g. {"text": "...", "label": '
                                 '"positive"}')
        names.update(dict.fromkeys(record))
        rows.append(_Row(path, line.number, record))
    if not rows:
        raise DataError("the file holds no JSON object", path=path,
                        fix="write one JSON object per line")
    return tuple(names), rows


def resolve_columns(names: Sequence[str], path: Path, data_cfg: Mapping[str, Any]) -> Columns:
    """The text and target columns of a file whose columns are `names`."""
    requested = _requested_text(data_cfg["text_columns"])
    listed = ", ".join(map(repr, names))
    if requested is None:
        if SINGLE_COLUMN in names:
            requested = (SINGLE_COLUMN,)
        elif set(PAIR_COLUMNS) <= set(names):
            requested = PAIR_COLUMNS
        else:
            raise DataError(f"no text column among the columns {listed}", path=path,
                            fix="name the text column 'text' (or the two of a sentence pair "
                                "'text_a' and 'text_b'), or set --config.data.text_columns")
    missing = [name for name in requested if name not in names]
    if missing or len(requested) > 2:
        problem = (f"--config.data.text_columns={data_cfg['text_columns']!r} names "
                   f"{len(requested)} columns" if not missing else
                   f"no column {missing[0]!r} (--config.data.text_columns) among {listed}")
        raise DataError(problem, path=path, fix="set --config.data.text_columns to one column, "
                                                "or two for sentence pairs, of the file")
    label, score = data_cfg["label_column"], data_cfg["score_column"]
    if label in names:
        return Columns(requested, label, "single" if len(requested) == 1 else "pair")
    if score in names:
        if len(requested) != 2:
            raise DataError(f"a score column ({score!r}) needs two text columns: relatedness is "
                            "scored for sentence pairs", path=path,
                            fix="give the pair's sentences two columns (text_a, text_b), or "
                                "give each sentence a label column instead")
        return Columns(requested, score, "relatedness")
    raise DataError(f"no label column {label!r} and no score column {score!r} among {listed}",
                    path=path, fix="set --config.data.label_column (or, for relatedness, "
                                   "--config.data.score_column) to the file's target column")


def _read(path: Path, flag: str, data_cfg: Mapping[str, Any]) -> tuple[Columns, list[_Row]]:
    suffix = _format(path, flag)
    names, rows = _table_rows(path, suffix, data_cfg["text_columns"], data_cfg["label_column"])
    if not rows:
        raise DataError("the file holds a header and no example", path=path,
                        fix="add one example per row after the header")
    return resolve_columns(names, path, data_cfg), rows


def _sentence(row: _Row, column: str) -> Sentence:
    value = row.values.get(column)
    if value is None:
        raise row.error(f"no {column!r} value", fix=f"give every row its {column!r} column")
    if not isinstance(value, str):
        raise row.error(f"{column!r} is a {type(value).__name__}, not text",
                        fix=f"write {column!r} as a string")
    text = value.strip()
    tokens = tokenize(text)
    if not tokens:
        raise row.error(f"empty {column!r}", fix=f"give every row a non-empty {column!r}, or "
                                                 "delete the row")
    return Sentence(tokens=tokens, text=text)


def _label_text(row: _Row, column: str) -> str:
    value = row.values.get(column)
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        raise row.error(f"no label in column {column!r}" if value is None else
                        f"label {value!r} is not a string or an integer",
                        fix=f"give every row its label in column {column!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise row.error(f"label {value!r} is not a class name or an integer",
                            fix="write labels as names or integers; a real-valued target is a "
                                "score (--config.data.score_column)")
        value = int(value)
    label = str(value).strip()
    if not label:
        raise row.error(f"empty label in column {column!r}",
                        fix="give every row a label, or delete the row")
    return label


def _score(row: _Row, column: str) -> float:
    value = row.values.get(column)
    try:
        score = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        score = math.nan
    if not math.isfinite(score):
        raise row.error(f"score {value!r} is not a number", fix=f"write {column!r} as a decimal "
                                                               "number, e.g. 3.5")
    return score


def _sorted_labels(labels: set[str]) -> tuple[str, ...]:
    def as_int(label: str) -> int | None:
        try:
            return int(label)
        except ValueError:
            return None

    if all(as_int(label) is not None for label in labels):
        return tuple(sorted(labels, key=int))
    return tuple(sorted(labels))


def _examples(rows: Sequence[_Row], columns: Columns,
              labels: Mapping[str, int] | None) -> Iterator[Example]:
    for row in rows:
        sentences = tuple(_sentence(row, column) for column in columns.text)
        uid = f"{row.path.name}:{row.line}"
        if columns.kind == "relatedness":
            yield Example(sentences=sentences, score=_score(row, columns.target), uid=uid)
            continue
        label = _label_text(row, columns.target)
        if label not in labels:
            raise row.error(f"label {label!r} does not occur in the training file",
                            fix=f"use one of the training labels {', '.join(map(repr, labels))}"
                                ", or add training examples with this label")
        yield Example(sentences=sentences, label=labels[label], uid=uid)


def _path(data_cfg: Mapping[str, Any], split: str) -> Path | None:
    value = data_cfg.get(SPLIT_FILES[split], "")
    return Path(value).expanduser() if value else None


def check_files(data_cfg: Mapping[str, Any]) -> None:
    """DataError unless data.train_file is set and every file set is an existing .tsv, .csv or
    .jsonl file (checked before anything is read)."""
    if _path(data_cfg, "train") is None:
        raise DataError("task.dataset='files' reads your own files and --config.data.train_file "
                        "is not set", fix="--config.data.train_file=train.tsv (also .csv or "
                                          ".jsonl; dev_file and test_file are optional)")
    for split, key in SPLIT_FILES.items():
        path = _path(data_cfg, split)
        if path is not None:
            _format(path, f"--config.data.{key}")


def describe(data_cfg: Mapping[str, Any]) -> Description:
    """What data.train_file makes of the dataset (columns, task kind, label names or score
    range); DataError naming the file and line of the first bad row."""
    return _read_train(data_cfg)[0]


def _read_train(data_cfg: Mapping[str, Any]) -> tuple[Description, tuple[_Row, ...]]:
    """The description and rows of data.train_file, read once per process for its current
    bytes (a run's `describe` and `load_splits` both need them)."""
    check_files(data_cfg)
    path = _path(data_cfg, "train").resolve()
    stat = path.stat()
    return _read_train_file(path, stat.st_size, stat.st_mtime_ns,
                            *(data_cfg[key] for key in COLUMN_KEYS))


@functools.lru_cache(maxsize=1)
def _read_train_file(path: Path, size: int, mtime_ns: int,
                     *column_flags: str) -> tuple[Description, tuple[_Row, ...]]:
    del size, mtime_ns  # the cache key: the file as it is now
    data_cfg = dict(zip(COLUMN_KEYS, column_flags, strict=True))
    columns, rows = _read(path, "--config.data.train_file", data_cfg)
    rows = tuple(rows)
    if columns.kind == "relatedness":
        scores = [_score(row, columns.target) for row in rows]
        low, high = math.floor(min(scores)), math.ceil(max(scores))
        return Description(columns, None, (float(low), float(max(high, low + 1)))), rows
    labels = _sorted_labels({_label_text(row, columns.target) for row in rows})
    return Description(columns, labels, None), rows


def load_splits(data_cfg: Mapping[str, Any]) -> tuple[Description, dict[str, list[Example]]]:
    """(description, {split: examples}) of the files of data.train_file / dev_file /
    test_file; a split without a file is absent (the caller carves it from train). Every file
    has the train file's columns; a count of the rows read is logged per split."""
    description, train_rows = _read_train(data_cfg)
    columns = description.columns
    labels = ({name: index for index, name in enumerate(description.label_names)}
              if description.label_names is not None else None)
    splits = {"train": list(_examples(train_rows, columns, labels))}
    for split in ("dev", "test"):
        path = _path(data_cfg, split)
        if path is None:
            continue
        flag = f"--config.data.{SPLIT_FILES[split]}"
        other, rows = _read(path, flag, data_cfg)
        if other != columns:
            raise DataError(f"{flag} is read as {other.kind} examples of columns "
                            f"{', '.join(other.text + (other.target,))}, the train file as "
                            f"{columns.kind} of {', '.join(columns.text + (columns.target,))}",
                            path=path, fix="give every file the train file's columns")
        splits[split] = list(_examples(rows, columns, labels))
    for split, examples in splits.items():
        log.info("files: %d %s examples read from %s", len(examples), split,
                 _path(data_cfg, split))
    return description, splits

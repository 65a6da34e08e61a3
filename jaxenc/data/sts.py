"""STS12-16 and the STS Benchmark in SentEval's folder layouts.

- STS12-16: `STS/STS1{2..6}-en-test/STS.input.<subset>.txt` (sentence1 TAB sentence2; further
  columns are ignored) with `STS.gs.<subset>.txt` (one gold score in [0, 5] per line). An empty gold
  line means the pair is not scored: it is skipped and the count logged.
- STS-B: `STS/STSBenchmark/sts-{train,dev,test}.csv`: genre TAB source TAB year TAB id TAB score TAB
  sentence1 TAB sentence2 (some lines carry further columns, ignored).

Sentences are untokenised; tokens come from `text_io.tokenize`. `Example.score` is the gold score.
"""

from __future__ import annotations

import os
from pathlib import Path

from jaxenc.errors import DataError
from jaxenc.records import Example, Sentence
from jaxenc.text_io import Line, read_lines, report_skipped, tokenize

SCORE_RANGE = (0.0, 5.0)
YEAR_FOLDERS = {year: f"STS/STS{year % 100}-en-test" for year in range(2012, 2017)}
STSB_FOLDER = "STS/STSBenchmark"
# SentEval's subsets per year, as its sts.py and data script name them (STS13's licensed SMT
# subset is not distributed; licensed files such as STS12 MSRvid are often absent).
SUBSETS = {
    2012: ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    2013: ("FNWN", "headlines", "OnWN"),
    2014: ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    2015: ("answers-forums", "answers-students", "belief", "headlines", "images"),
    2016: ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
STSB_SPLITS = ("train", "dev", "test")

_STSB_SCORE, _STSB_FIRST, _STSB_SECOND = 4, 5, 6


def subset_files(folder: str | os.PathLike, subset: str) -> tuple[Path, Path]:
    """(input file, gold file) of an STS12-16 subset in its year's folder."""
    folder = Path(folder)
    return folder / f"STS.input.{subset}.txt", folder / f"STS.gs.{subset}.txt"


def read_sts_subset(folder: str | os.PathLike, subset: str) -> list[Example]:
    """One STS12-16 subset: pairs of `STS.input.<subset>.txt` scored by `STS.gs.<subset>.txt`."""
    return read_sts_pairs(*subset_files(folder, subset))


def read_sts_pairs(input_path: str | os.PathLike,
                   gold_path: str | os.PathLike) -> list[Example]:
    """Aligned input/gold files -> scored pairs; pairs with an empty gold line are skipped."""
    pairs, golds = read_lines(input_path), read_lines(gold_path)
    if len(pairs) != len(golds):
        raise DataError(f"{len(pairs)} sentence pairs but {len(golds)} gold lines in "
                        f"{Path(gold_path).name}", path=input_path,
                        fix="give the gold file exactly one (possibly empty) line per pair")
    examples, unscored = [], 0
    for pair, gold in zip(pairs, golds, strict=True):
        if not gold.text.strip():
            unscored += 1
            continue
        first, second = pair.fields(2, at_least=True)[:2]
        examples.append(_example(pair, first, second, gold, gold.text.strip()))
    report_skipped(gold_path, unscored, "empty gold score: pair not scored")
    return examples


def read_stsb(path: str | os.PathLike) -> list[Example]:
    """One STS Benchmark split file (`sts-train.csv`, ...); lines without a score are skipped."""
    examples, unscored = [], 0
    for line in read_lines(path):
        fields = line.fields(_STSB_SECOND + 1, at_least=True)
        if not fields[_STSB_SCORE].strip():
            unscored += 1
            continue
        examples.append(_example(line, fields[_STSB_FIRST], fields[_STSB_SECOND], line,
                                 fields[_STSB_SCORE]))
    report_skipped(path, unscored, "empty gold score: pair not scored")
    return examples


def _example(pair: Line, first: str, second: str, gold: Line, score: str) -> Example:
    low, high = SCORE_RANGE
    sentences = tuple(Sentence(tokens=tokenize(text), text=text)
                      for text in (pair.nonempty(first, "sentence1"),
                                   pair.nonempty(second, "sentence2")))
    return Example(sentences=sentences,
                   score=gold.number_field(score, "gold score", low=low, high=high),
                   uid=pair.uid)

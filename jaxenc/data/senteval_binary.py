"""SentEval's binary sentence classification corpora: MR, CR, SUBJ, MPQA.

Each is two files of one tokenised sentence a line, one file per class, with no official split (the
registry exposes a single split "all"; SentEval cross-validates). Class order and file names follow
SentEval (SUBJ: objective = 1). MR and SUBJ hold Windows-1252 bytes (0x85 "…", 0x97 "—") in an
otherwise latin-1 file; they are decoded as cp1252 and split on "\\n" only (see text_io).
CR and MPQA contain a few blank lines; like SentEval we keep them as empty sentences, so the counts
(CR 2407 + 1368, MPQA 3312 + 7294) and hence the cross-validation folds are SentEval's.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from jaxenc.errors import DataError
from jaxenc.records import Example, Sentence
from jaxenc.text_io import read_lines


@dataclasses.dataclass(frozen=True)
class BinaryCorpus:
    """Where one corpus lives: `files[i]` holds the sentences of class `label_names[i]`."""

    files: tuple[str, str]
    label_names: tuple[str, str]
    encoding: str


CORPORA = {
    "mr": BinaryCorpus(("rt-polarity.neg", "rt-polarity.pos"), ("negative", "positive"), "cp1252"),
    "cr": BinaryCorpus(("custrev.neg", "custrev.pos"), ("negative", "positive"), "utf-8"),
    "subj": BinaryCorpus(("subj.subjective", "subj.objective"), ("subjective", "objective"),
                         "cp1252"),
    "mpqa": BinaryCorpus(("mpqa.neg", "mpqa.pos"), ("negative", "positive"), "utf-8"),
}


def read_binary_corpus(folder: str | os.PathLike, name: str) -> list[Example]:
    """All sentences of corpus `name` (a key of CORPORA) in `folder`, class 0 first."""
    if name not in CORPORA:
        raise DataError(f"unknown binary corpus {name!r}", fix=f"use one of {sorted(CORPORA)}")
    corpus = CORPORA[name]
    examples = []
    for label, file_name in enumerate(corpus.files):
        for line in read_lines(Path(folder) / file_name, encoding=corpus.encoding):
            tokens = tuple(line.text.split())
            examples.append(Example(sentences=(Sentence(tokens=tokens, text=" ".join(tokens)),),
                                    label=label, uid=line.uid))
    return examples

"""TREC question classification (Li & Roth 2002): `TREC.train` (train_5500) and `TREC.test`.

One question a line, `COARSE:fine question tokens ...`, tokenised, ISO-8859-1. `label` indexes
COARSE_LABELS (6 classes, SentEval's order) and `fine_label` indexes FINE_LABELS (the 50 classes as
"COARSE:fine", sorted); `read_trec(..., fine=True)` puts the fine class in `label` too.
"""

from __future__ import annotations

import os

from jaxenc.records import Example, Sentence
from jaxenc.text_io import Line, read_lines

COARSE_LABELS = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
FINE_LABELS = (
    "ABBR:abb", "ABBR:exp",
    "DESC:def", "DESC:desc", "DESC:manner", "DESC:reason",
    "ENTY:animal", "ENTY:body", "ENTY:color", "ENTY:cremat", "ENTY:currency", "ENTY:dismed",
    "ENTY:event", "ENTY:food", "ENTY:instru", "ENTY:lang", "ENTY:letter", "ENTY:other",
    "ENTY:plant", "ENTY:product", "ENTY:religion", "ENTY:sport", "ENTY:substance", "ENTY:symbol",
    "ENTY:techmeth", "ENTY:termeq", "ENTY:veh", "ENTY:word",
    "HUM:desc", "HUM:gr", "HUM:ind", "HUM:title",
    "LOC:city", "LOC:country", "LOC:mount", "LOC:other", "LOC:state",
    "NUM:code", "NUM:count", "NUM:date", "NUM:dist", "NUM:money", "NUM:ord", "NUM:other",
    "NUM:perc", "NUM:period", "NUM:speed", "NUM:temp", "NUM:volsize", "NUM:weight",
)
ENCODING = "latin-1"

_COARSE_IDS = {name: index for index, name in enumerate(COARSE_LABELS)}
_FINE_IDS = {name: index for index, name in enumerate(FINE_LABELS)}


def read_trec(path: str | os.PathLike, *, fine: bool = False) -> list[Example]:
    """Reads a TREC file; `label` is the coarse class, or the fine one when `fine`."""
    examples = []
    for line in read_lines(path, encoding=ENCODING):
        coarse, fine_class, sentence = _parse(line)
        examples.append(Example(sentences=(sentence,), label=fine_class if fine else coarse,
                                fine_label=fine_class, uid=line.uid))
    return examples


def _parse(line: Line) -> tuple[int, int, Sentence]:
    """(coarse id, fine id, question) of one `COARSE:fine question` line."""
    tag, _, question = line.text.partition(" ")
    if ":" not in tag:
        raise line.error(f"no 'COARSE:fine' label at the start of the line (found {tag!r})",
                         fix="start every line with a label such as 'DESC:manner' and a space")
    coarse = line.label_field(tag.partition(":")[0], _COARSE_IDS, "coarse class")
    fine = line.label_field(tag, _FINE_IDS, "fine class")
    tokens = tuple(line.nonempty(question, "question").split())
    return coarse, fine, Sentence(tokens=tokens, text=" ".join(tokens))

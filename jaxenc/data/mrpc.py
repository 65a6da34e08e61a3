"""Microsoft Research Paraphrase Corpus: `msr_paraphrase_{train,test}.txt`.

Tab-separated `Quality #1ID #2ID #1String #2String`, UTF-8 with a byte-order mark (and CRLF in
some copies); the release's header row is skipped when present. `label` indexes PARAPHRASE_LABELS
(Quality 0 / 1); sentences are untokenised, tokens come from `text_io.tokenize`.
"""

from __future__ import annotations

import os

from jaxenc.records import Example, Sentence
from jaxenc.text_io import read_lines, tokenize

PARAPHRASE_LABELS = ("not_paraphrase", "paraphrase")

_QUALITY_IDS = {"0": 0, "1": 1}
_HEADER_START = "Quality\t"


def read_mrpc(path: str | os.PathLike) -> list[Example]:
    """Reads one MRPC split: one Example per pair, sentences (#1String, #2String)."""
    lines = read_lines(path)
    if lines and lines[0].text.startswith(_HEADER_START):
        lines = lines[1:]
    examples = []
    for line in lines:
        quality, _, _, first, second = line.fields(5)
        sentences = tuple(Sentence(tokens=tokenize(text), text=text)
                          for text in (line.nonempty(first, "#1String"),
                                       line.nonempty(second, "#2String")))
        examples.append(Example(sentences=sentences,
                                label=line.label_field(quality, _QUALITY_IDS, "Quality"),
                                uid=line.uid))
    return examples

"""SNLI 1.0 jsonl (`snli_1.0_{train,dev,test}.jsonl`): premise/hypothesis pairs with parses.

`label` indexes NLI_LABELS. Pairs whose gold label is "-" (no annotator majority) are dropped, as
in every SNLI paper, and their count is logged. Each sentence keeps `sentence{1,2}_parse` (Stanford
PTB brackets) in `Sentence.tree` and `*_binary_parse` in `Sentence.binary_tree`; its tokens are the
leaves of the binary parse, the tokenisation both parses share.
"""

from __future__ import annotations

import json
import os

from jaxenc.records import Example, Sentence
from jaxenc.text_io import Line, read_lines, report_skipped

NLI_LABELS = ("entailment", "neutral", "contradiction")
NO_CONSENSUS = "-"

_LABEL_IDS = {name: index for index, name in enumerate(NLI_LABELS)}
_FIX = "keep one JSON object per line as in the SNLI 1.0 release"


def read_snli(path: str | os.PathLike) -> list[Example]:
    """Reads an SNLI jsonl file, dropping (and logging the count of) '-' labelled pairs."""
    examples, dropped = [], 0
    for line in read_lines(path):
        record = _record(line)
        if record["gold_label"] == NO_CONSENSUS:
            dropped += 1
            continue
        examples.append(Example(
            sentences=(_sentence(line, record, "sentence1"), _sentence(line, record, "sentence2")),
            label=line.label_field(record["gold_label"], _LABEL_IDS, "gold_label"),
            uid=line.uid,
        ))
    report_skipped(path, dropped, f"gold_label {NO_CONSENSUS!r}: no annotator consensus")
    return examples


def binary_parse_leaves(binary_parse: str) -> tuple[str, ...]:
    """The tokens of an SNLI binary parse, e.g. "( ( Two women ) ( are here ) )" -> 4 tokens."""
    return tuple(token for token in binary_parse.split() if token not in ("(", ")"))


def _record(line: Line) -> dict:
    try:
        record = json.loads(line.text)
    except json.JSONDecodeError as err:
        raise line.error(f"invalid JSON ({err.msg} at column {err.colno})", fix=_FIX) from None
    fields = ("gold_label", "sentence1", "sentence2", "sentence1_parse", "sentence2_parse",
              "sentence1_binary_parse", "sentence2_binary_parse")
    missing = [field for field in fields
               if not isinstance(record, dict) or not isinstance(record.get(field), str)]
    if missing:
        raise line.error(f"record lacks string field(s) {', '.join(missing)}", fix=_FIX)
    return record


def _sentence(line: Line, record: dict, key: str) -> Sentence:
    binary = record[f"{key}_binary_parse"]
    tokens = binary_parse_leaves(binary)
    if not tokens:
        raise line.error(f"{key}_binary_parse has no tokens", fix=_FIX)
    return Sentence(tokens=tokens, text=record[key], tree=record[f"{key}_parse"],
                    binary_tree=binary)

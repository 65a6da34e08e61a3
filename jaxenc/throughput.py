"""The encode rate a user of a trained run gets: sentences per second of
`Encoder.encode(list_of_str)` end to end (tokenise, parse, bucket, run), for the results table
of `python -m train.main` and `train.compare`."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from jaxenc.encoding import Encoder
from jaxenc.records import Example
from jaxenc.training import run_report

MAX_SENTENCES = 1000  # timed sentences per run: enough for a stable rate, seconds to parse


def texts(examples: Iterable[Example], limit: int = MAX_SENTENCES) -> list[str]:
    """The text of every sentence of `examples` (both of a pair), the first `limit` of them."""
    found = [sentence.text or " ".join(sentence.tokens)
             for example in examples for sentence in example.sentences]
    return found[:limit]


def encode_rate(workdir: str | os.PathLike, sentences: Sequence[str]) -> float:
    """Sentences per second of the run's `Encoder.from_workdir(workdir).encode(sentences)`:
    one untimed call compiles each bucket's program, the timed second call tokenises, parses
    (no parse cache) and runs them again (nan for no sentences)."""
    if not sentences:
        return float("nan")
    encoder = Encoder.from_workdir(workdir, parse_cache_dir=None)
    encoder.encode(list(sentences), show_progress_bar=False)
    start = time.perf_counter()
    encoder.encode(list(sentences), show_progress_bar=False)
    return len(sentences) / (time.perf_counter() - start)


def record_encode_rate(workdir: str | os.PathLike, step: int, sentences: Sequence[str]) -> float:
    """`encode_rate` of the run in `workdir`, also appended to its metrics.jsonl as a cost
    record at `step` (its best step), where `train.compare` reads it."""
    rate = encode_rate(workdir, sentences)
    run_report.MetricsLog(Path(workdir) / run_report.METRICS_FILE).write(
        step, run_report.COST, {run_report.ENCODE_RATE: round(rate, 1)})
    return rate

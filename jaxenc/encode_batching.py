"""The batches `jaxenc.encoding.Encoder.encode` runs, bounded in memory whatever the input.

Batches: the training buckets (`buckets`: data.max_length, data.bucket_step), extended by further
multiples of the step for longer sentences, as the evaluation batches are. A batch holds at most
`batch_size` rows and `token_budget` tokens (rows x bucket length; default: `batch_size` x the
largest training bucket; a batch of one row may be longer, up to `max_length`): a bucket of
length L has `rows_per_batch(L, batch_size)` rows, `batch_size` where batch_size x L fits the
budget, else the largest power of two <= budget // L (at least 1). So every training bucket has
`batch_size` rows (the shapes of an export's functions and of training's evaluation batches) and
a longer bucket fewer. The last batch of a bucket longer than the training buckets has the
smallest power of two rows that holds its sentences, so a lone long sentence runs alone: one
shape per training bucket, at most log2(rows) + 1 per longer bucket, each compiled once. Rows are
independent, so a sentence's vector does not depend on its batch.

Long sentences: a sentence longer than `max_length` tokens (the model's prefix tokens included;
default `jaxenc.encoding.DEFAULT_MAX_LENGTH` = 512) follows `long_sentences`: "truncate"
(default) keeps its first `max_length` tokens, with one warning per call counting the sentences
cut; "error" raises a one-line DataError naming the longest one and the fix. No model has a hard
length limit of its own (positions past a learned position table reuse its last row; `encode`
compiles buckets longer than an export's functions), but the attention scores and relation
arrays of most encoders are [L, L] per row: `max_length` bounds a batch's memory whatever the
input, with the token budget. 512 tokens leaves the sentences of the evaluation datasets whole
(the longest have about 120 words). A cut sentence keeps its first words and loses its gold trees
(they span the whole sentence): a model with structure fields parses the kept words
(`text_parser` for a model trained on gold trees).

PSAN's phrase packing plan uses the "worst" capacities (jaxenc.data.packing): its shapes depend on
the batch shape only, so each shape compiles once and matches the exported functions.
"""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Iterator, Sequence

import numpy as np

from jaxenc.data import batching
from jaxenc.data.packing import PackingConfig
from jaxenc.errors import DataError
from jaxenc.records import Sentence

Batch = dict[str, np.ndarray]

INDEX = "index"  # a batch's int32[B]: each row's position in the input, -1 for filler rows
ROLE = "sentence"  # the featurizer's role of a single sentence

log = logging.getLogger(__name__)


def within_max_length(sentences: Sequence[Sentence], max_length: int, prefix: int,
                      long_sentences: str) -> list[Sentence]:
    """`sentences`, those over `max_length` tokens (`prefix` tokens included) cut to their first
    words (without their gold trees) under long_sentences="truncate", with one warning counting
    them; DataError naming the longest under "error"."""
    words = max_length - prefix
    over = [index for index, sentence in enumerate(sentences) if len(sentence.tokens) > words]
    if not over:
        return list(sentences)
    longest = max(over, key=lambda index: len(sentences[index].tokens))
    text = textwrap.shorten(" ".join(sentences[longest].tokens), width=50, placeholder=" ...")
    what = f"sentence {longest} ({text!r}, {prefix + len(sentences[longest].tokens)} tokens)"
    if long_sentences == "error":
        raise DataError(
            f"{what} is longer than max_length {max_length}; {len(over)} of "
            f"{len(sentences)} sentences are", fix=f"pass long_sentences='truncate' "
            f"(eval.transfer: --long_sentences truncate) to keep their first "
            f"{max_length} tokens, a larger max_length, or shorter sentences")
    log.warning("truncated %d of %d sentences to their first max_length=%d tokens, the "
                "longest being %s (long_sentences='error' refuses them instead)",
                len(over), len(sentences), max_length, what)
    cut = set(over)
    return [Sentence(tokens=sentence.tokens[:words], text=" ".join(sentence.tokens[:words]))
            if index in cut else sentence for index, sentence in enumerate(sentences)]


def rows_per_batch(length: int, batch_size: int, budget: int) -> int:
    """The rows of a full batch of bucket `length`: `batch_size` where batch_size x length fits
    the token `budget`, else the largest power of two <= budget // length, at least 1."""
    fitting = budget // length
    return batch_size if fitting >= batch_size else 1 << max(fitting.bit_length() - 1, 0)


def bucket_lengths(buckets: tuple[int, ...], step: int, longest: int) -> tuple[int, ...]:
    """The training `buckets`, then multiples of `step` up to one holding `longest`."""
    extra = batching.bucket_lengths(max(longest, 1), step)
    return buckets + tuple(length for length in extra if length > buckets[-1])


def batches(features: Sequence[dict[str, np.ndarray] | None], batch_size: int,
            buckets: tuple[int, ...], step: int, budget: int, packing: PackingConfig | None
            ) -> tuple[int, Iterator[Batch]]:
    """(number of batches, the batches) of the features that are not None, bucket by bucket in
    input order (training `buckets`, then multiples of `step`), `rows_per_batch` rows each under
    the token `budget`; the last batch of a bucket longer than the training buckets has the
    smallest power of two rows holding what is left (module doc)."""
    kept = np.array([i for i, fields in enumerate(features) if fields is not None], np.int64)
    if not kept.size:
        return 0, iter(())
    lengths = np.array([len(features[i]["tokens"]) for i in kept])
    all_buckets = bucket_lengths(buckets, step, int(lengths.max()))
    bucket = batching.bucket_of(lengths, all_buckets)
    groups = []  # (bucket length, rows, positions in `kept`)
    for index in np.unique(bucket):
        length, members = all_buckets[index], np.flatnonzero(bucket == index)
        rows = rows_per_batch(length, batch_size, budget)
        full = len(members) - len(members) % rows
        if length > buckets[-1] and full < len(members):
            left = len(members) - full
            groups += [(length, rows, members[:full]),
                       (length, min(rows, 1 << (left - 1).bit_length()), members[full:])]
        else:
            groups.append((length, rows, members))
    groups = [group for group in groups if group[2].size]

    def assembled() -> Iterator[Batch]:
        for length, rows, members in groups:
            yield from assemble([features[i] for i in kept[members]], kept[members], length, rows,
                                packing)

    return sum(-(-len(members) // rows) for _, rows, members in groups), assembled()


def assemble(features: Sequence[dict[str, np.ndarray]], positions: np.ndarray, length: int,
             rows: int, packing: PackingConfig | None) -> Iterator[Batch]:
    """Batches [rows, length] of `features` (all at most `length` tokens), in order, with the
    `packing` plan (None: none); `index` holds `positions` (int64[n], each feature's position in
    the input), -1 for filler."""
    batcher = batching.Batcher([{f"{ROLE}/{key}": value for key, value in fields.items()}
                                for fields in features], batch_size=rows, buckets=(length,),
                               shuffle=False, packing=packing)
    for batch in batcher.epoch(0):
        fields = batching.sentence_fields(batch, ROLE)
        real = batch["index"] >= 0
        fields[INDEX] = np.where(real, positions[np.where(real, batch["index"], 0)],
                                 -1).astype(np.int32)
        yield fields

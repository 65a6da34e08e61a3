"""`Encoder.encode`'s batches (jaxenc/encode_batching.py, docs/ARCHITECTURE.md "Encoding"): a token
budget sets each bucket's rows, a lone long sentence runs alone, a sentence over max_length is cut
(with a warning counting them) or refused (one line naming it), and a sentence's vector does not
depend on the sentences encoded with it. Every registered encoder at its test widths (TINY).
"""

import functools
import logging

import numpy as np
import pytest
from test_encoder_contract import TINY

from jaxenc.data.synthetic import generate
from jaxenc.encode_batching import INDEX
from jaxenc.encoding import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH, Encoder
from jaxenc.errors import ConfigError, DataError
from train.configs import base

MEMORY_BOUND = 64 * 2**20  # bytes: temp + arguments + output of the compiled encode function
LONG_WORDS = 5000


@functools.cache
def encoder(name: str, **options) -> Encoder:
    """An untrained encoder `name` at its test widths, the synthetic sentences' words as
    vocabulary; buckets (64,) (the Encoder's default), so the token budget of the default batch
    size is 64 x 64 = 4096."""
    sentences = [example.sentences[0] for example in generate(20, seed=3)]
    return Encoder.initialised(base.model_config(name, **TINY[name]), sentences, **options)


def words(count: int, start: int = 0) -> str:
    """`count` words of the encoders' vocabulary, cycling from word `start`."""
    vocab = [word for word in encoder("bag").vocab.tokens if word.isalpha()]
    return " ".join(vocab[(start + i) % len(vocab)] for i in range(count))


def compiled_bytes(enc: Encoder, batch: dict) -> int:
    """XLA's temp + argument + output bytes of `enc.apply` compiled for the batch's shapes."""
    fields = {key: value for key, value in batch.items() if key != INDEX}
    memory = enc.apply.jitted.lower(enc.params, fields).compile().memory_analysis()
    return (memory.temp_size_in_bytes + memory.argument_size_in_bytes
            + memory.output_size_in_bytes)


@pytest.mark.parametrize("name", sorted(TINY))
def test_a_5000_word_sentence_runs_alone_cut_to_max_length_in_bounded_memory(name):
    enc = encoder(name)
    long = words(LONG_WORDS)
    (batch,) = enc.featurize([long])
    assert batch["tokens"].shape == (1, DEFAULT_MAX_LENGTH)  # one row, not batch_size rows
    assert batch["lengths"].tolist() == [DEFAULT_MAX_LENGTH]
    assert compiled_bytes(enc, batch) < MEMORY_BOUND
    vector = enc.encode(long)
    assert np.isfinite(vector).all() and np.abs(vector).sum() > 0
    kept = words(DEFAULT_MAX_LENGTH - len(enc.prefix_tokens))  # what "truncate" encodes
    np.testing.assert_allclose(vector, enc.encode(kept), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(TINY))
def test_short_and_long_sentences_together_equal_each_alone(name):
    enc = encoder(name)
    items = ["the film is good .", words(LONG_WORDS, 3), words(100, 1), "", words(70, 2),
             words(100, 5), words(600, 4), "good"]
    together = enc.encode(items, show_progress_bar=False)
    alone = np.stack([enc.encode([item], show_progress_bar=False)[0] for item in items])
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(together[3], 0.0)
    assert np.abs(np.delete(together, 3, axis=0)).sum(axis=1).min() > 0


def test_rows_follow_the_token_budget_and_keep_the_input_order():
    enc = encoder("bag")
    assert [enc.rows_per_batch(length, DEFAULT_BATCH_SIZE) for length in (8, 64, 72, 104, 512,
                                                                          4096, 5000)] == [
        64, 64, 32, 32, 8, 1, 1]  # budget 64 x 64: batch_size, else a power of two <= 4096 // L
    assert enc.token_budget is None  # default: batch_size x the largest training bucket
    assert enc.rows_per_batch(64, 16) == 16 and enc.rows_per_batch(72, 16) == 8  # budget 1024
    assert enc.rows_per_batch(64, 128) == 128 and enc.rows_per_batch(72, 128) == 64
    items = [words(n, n) for n in (3, 100, 1, 100, 700, 30, 100, 70)] * 5
    batches = enc.featurize(items)
    shapes = [batch["tokens"].shape for batch in batches]
    # The training bucket 64 (15 sentences) has batch_size rows; in the longer ones, fewer
    # sentences than a full batch get the smallest power of two rows holding them: bucket 72
    # (5 of 32 rows) 8, bucket 104 (15 of 32) 16, bucket 512 (the 700-word ones, cut; 5 of 8) 8.
    assert shapes == [(64, 64), (8, 72), (16, 104), (8, 512)]
    for (rows, length), batch in zip(shapes, batches, strict=True):
        assert rows * length <= 64 * 64 and rows <= DEFAULT_BATCH_SIZE
        assert (batch["lengths"] <= length).all()
    index = np.concatenate([batch[INDEX] for batch in batches])
    assert sorted(index[index >= 0].tolist()) == list(range(len(items)))
    many = enc.featurize([words(100, i) for i in range(40)])  # 32-row batches, then 8 left
    assert [batch["tokens"].shape for batch in many] == [(32, 104), (8, 104)]
    small = Encoder(enc.model_config, enc.params, enc.vocab, lowercase_fallback=True,
                    token_budget=512)
    assert [batch["tokens"].shape for batch in small.featurize(items[:4])] == [(8, 64),
                                                                                (2, 104)]


def test_long_sentences_are_cut_with_one_warning_or_refused_in_one_line(caplog):
    items = ["the film is good .", words(600), words(LONG_WORDS, 1), words(512)]
    enc = encoder("bag")
    with caplog.at_level(logging.WARNING, logger="jaxenc.encode_batching"):
        vectors = enc.encode(items, show_progress_bar=False)
    (record,) = caplog.records
    message = record.getMessage()
    assert len(message.splitlines()) == 1
    assert message.startswith("truncated 2 of 4 sentences to their first max_length=512 tokens")
    assert "sentence 2 (" in message and f"{LONG_WORDS} tokens" in message
    np.testing.assert_allclose(vectors[1], enc.encode(words(512)), rtol=1e-5, atol=1e-6)

    refusing = encoder("bag", long_sentences="error")
    np.testing.assert_allclose(refusing.encode(items[::3]), vectors[::3], rtol=1e-6)  # <= 512
    with pytest.raises(DataError) as error:
        refusing.encode(items)
    message = str(error.value)
    assert len(message.splitlines()) == 1
    assert message.startswith("sentence 2 (") and f"{LONG_WORDS} tokens) is longer than " \
        "max_length 512; 2 of 4 sentences are" in message
    assert "long_sentences='truncate'" in message and "--long_sentences truncate" in message

    with pytest.raises(ConfigError, match="long_sentences='cut' .*fix: one of truncate, error"):
        Encoder(enc.model_config, enc.params, enc.vocab, lowercase_fallback=True,
                long_sentences="cut")
    with pytest.raises(ConfigError, match="token_budget=0"):
        Encoder(enc.model_config, enc.params, enc.vocab, lowercase_fallback=True,
                token_budget=0)


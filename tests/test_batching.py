"""Batcher: padding against a slow reference, coverage of every example, determinism, resume."""

import logging

import chex
import numpy as np
import pytest

from jaxenc.data.batching import (
    PAD_RULES,
    Batcher,
    bucket_lengths,
    pad_rule,
    padding_waste,
    sentence_fields,
)
from jaxenc.errors import ConfigError, DataError

BUCKETS = (4, 8, 12)
BATCH = 4


def single_features(count, seed=0, max_length=12):
    """Single-sentence examples with PSAN structure fields; `label` is the example's index."""
    rng = np.random.default_rng(seed)
    features = []
    for index in range(count):
        n = int(rng.integers(1, max_length + 1))
        phrases = int(rng.integers(1, n + 1))
        features.append({
            "sentence/tokens": rng.integers(6, 50, n).astype(np.int32),
            "sentence/tags": rng.integers(1, 9, n).astype(np.int32),
            "sentence/segments": rng.integers(0, phrases, (3, n)).astype(np.int32),
            "sentence/blocks": rng.integers(0, n, (3, phrases, 2)).astype(np.int32),
            "label": np.int32(index),
        })
    return features


def pair_features(count, seed=1):
    """Pair examples: dependency fields on `first`, hypernodes on `second`, a float score."""
    rng = np.random.default_rng(seed)
    features = []
    for index in range(count):
        n1, n2 = (int(x) for x in rng.integers(1, 13, 2))
        features.append({
            "first/tokens": rng.integers(6, 50, n1).astype(np.int32),
            "first/relations": rng.integers(0, 7, (n1, n1)).astype(np.int32),
            "first/levels": rng.integers(0, 5, n1).astype(np.int32),
            "second/tokens": rng.integers(6, 50, n2).astype(np.int32),
            "second/members": rng.integers(0, n2, (max(n2 - 1, 0), 2)).astype(np.int32),
            "label": index,
            "score": float(rng.uniform(1, 5)),
        })
    return features


def reference_pad(value, shape, pad):
    """`value` written element by element into the corner of a `shape` array of `pad`."""
    out = np.full(shape, pad, dtype=np.float64)
    for position in np.ndindex(*np.shape(value)):
        out[position] = np.asarray(value)[position]
    return out


def padded_shape(key, natural_shape, length):
    return tuple(length if kind == "L" else natural_shape[axis] if kind is None else kind
                 for axis, kind in enumerate(pad_rule(key)[1]))


def smallest_bucket(length):
    for bucket in BUCKETS:
        if length <= bucket:
            return bucket
    return None


def example_length(example):
    return max(len(v) for k, v in example.items() if k.endswith("/tokens"))


def check_epoch(features, batches):
    """Every row equals the reference padding of its example (or is all padding with weight 0),
    and every kept example appears exactly once. Returns the example order."""
    order = []
    roles = sorted({k.split("/")[0] for k in features[0] if "/" in k})
    for batch in batches:
        length = batch[f"{roles[0]}/tokens"].shape[1]
        assert length in BUCKETS
        assert set(batch) == (set(features[0]) | {f"{r}/lengths" for r in roles}
                              | {"weight", "index"})
        chex.assert_type(batch["index"], np.int32)
        chex.assert_type(batch["weight"], np.float32)
        for role in roles:
            chex.assert_shape(batch[f"{role}/lengths"], (BATCH,))
            chex.assert_type(batch[f"{role}/lengths"], np.int32)
        for row in range(BATCH):
            real = batch["weight"][row] == 1.0
            assert real or batch["weight"][row] == 0.0
            example = features[int(batch["label"][row])] if real else None
            assert batch["index"][row] == (int(batch["label"][row]) if real else -1)
            if real:
                order.append(int(batch["label"][row]))
                assert smallest_bucket(example_length(example)) == length
            for key in features[0]:
                pad = pad_rule(key)[0]
                got = batch[key]
                chex.assert_type(got, np.float32 if isinstance(pad, float) else np.int32)
                natural = features[0][key] if example is None else example[key]
                shape = padded_shape(key, np.shape(natural), length)
                assert got.shape == (BATCH, *shape), key
                want = (reference_pad(example[key], shape, pad) if real
                        else np.full(shape, pad))
                np.testing.assert_allclose(got[row], want, rtol=1e-6, err_msg=key)
            for role in roles:
                want_length = len(example[f"{role}/tokens"]) if real else 0
                assert batch[f"{role}/lengths"][row] == want_length
    kept = [i for i, f in enumerate(features) if example_length(f) <= BUCKETS[-1]]
    assert sorted(order) == kept
    assert sum(float(b["weight"].sum()) for b in batches) == len(kept)
    return order


@pytest.mark.parametrize("make", [single_features, pair_features])
def test_batches_equal_reference_padding(make):
    features = make(37)
    batcher = Batcher(features, batch_size=BATCH, buckets=BUCKETS, shuffle=True, seed=0)
    batches = list(batcher.epoch(0))
    assert len(batches) == batcher.num_batches
    check_epoch(features, batches)


def test_unshuffled_batches_follow_bucket_and_example_order():
    features = single_features(21)
    batcher = Batcher(features, batch_size=BATCH, buckets=BUCKETS, shuffle=False)
    order = check_epoch(features, list(batcher.epoch(0)))
    expected = sorted(range(21), key=lambda i: (smallest_bucket(example_length(features[i])), i))
    assert order == expected
    assert [b["label"][0] for b in batcher.epoch(0)] == [b["label"][0] for b in batcher.epoch(5)]


def epoch_labels(batcher, epoch, start_batch=0):
    return [b["label"].tolist() for b in batcher.epoch(epoch, start_batch=start_batch)]


def test_determinism_resume_and_seeds():
    features = single_features(40)
    make = lambda seed: Batcher(features, batch_size=BATCH, buckets=BUCKETS, shuffle=True,
                                seed=seed)
    batcher = make(0)
    full = list(batcher.epoch(2))
    again = list(make(0).epoch(2))
    for a, b in zip(full, again, strict=True):
        chex.assert_trees_all_equal(a, b)
    for start in (1, 5, batcher.num_batches - 1, batcher.num_batches):
        tail = list(batcher.epoch(2, start_batch=start))
        assert len(tail) == batcher.num_batches - start
        for a, b in zip(full[start:], tail, strict=True):
            chex.assert_trees_all_equal(a, b)
    assert epoch_labels(batcher, 2) != epoch_labels(make(1), 2)
    assert epoch_labels(batcher, 2) != epoch_labels(batcher, 3)
    with pytest.raises(ConfigError, match="start_batch"):
        batcher.epoch(0, start_batch=batcher.num_batches + 1)


def test_over_long_examples_are_dropped_and_reported(caplog):
    features = single_features(30, max_length=16)
    too_long = sum(example_length(f) > BUCKETS[-1] for f in features)
    assert too_long > 0
    with caplog.at_level(logging.WARNING, logger="jaxenc.data.batching"):
        batcher = Batcher(features, batch_size=BATCH, buckets=BUCKETS, shuffle=True, seed=0)
    assert f"dropping {too_long} of 30 examples" in caplog.text
    check_epoch(features, list(batcher.epoch(0)))
    report = batcher.report()
    assert report.num_examples == 30 and report.num_too_long == too_long
    lengths = [example_length(f) for f in features if example_length(f) <= BUCKETS[-1]]
    assert sum(report.bucket_examples) == len(lengths)
    real, slots = sum(lengths), sum(smallest_bucket(n) for n in lengths)
    assert report.waste == pytest.approx((slots - real) / real)
    all_slots = sum(b * BATCH * n for b, n in zip(report.bucket_batches, BUCKETS, strict=True))
    assert report.waste_with_filler == pytest.approx((all_slots - real) / real)
    assert report.filler_rows == report.num_batches * BATCH - len(lengths)
    assert f"{too_long} longer than 12 dropped" in str(report)


def test_max_length_below_largest_bucket():
    features = single_features(30)
    batcher = Batcher(features, batch_size=BATCH, buckets=BUCKETS, shuffle=False, max_length=6)
    assert batcher.report().num_too_long == sum(example_length(f) > 6 for f in features)
    with pytest.raises(ConfigError, match="exceeds the largest bucket"):
        Batcher(features, batch_size=BATCH, buckets=BUCKETS, shuffle=False, max_length=13)


def test_padding_waste_matches_loop():
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 30, (50, 2))
    buckets = (8, 16, 32)
    real = slots = 0
    for first, second in lengths:
        bucket = min(b for b in buckets if b >= max(first, second))
        real += first + second
        slots += 2 * bucket
    assert padding_waste(lengths, buckets) == pytest.approx((slots - real) / real)
    assert padding_waste(lengths[:, 0], buckets) == pytest.approx(
        sum(min(b for b in buckets if b >= n) - n for n in lengths[:, 0]) / lengths[:, 0].sum())


def test_pad_rules_cover_the_contract_fields():
    contract = {"tokens": 0, "tags": -1, "segments": -1, "blocks": -1, "relations": -1,
                "levels": 0, "heads": -1, "members": -1, "label": 0, "score": 0.0, "weight": 0.0}
    assert {name: PAD_RULES[name][0] for name in contract} == contract
    assert pad_rule("first/relations") == pad_rule("relations") == (-1, ("L", "L"))
    assert pad_rule("second/blocks") == (-1, (None, "L", None))
    for key in ("sentence/spans", "sentence/blocks_3"):  # no level-index suffixes
        with pytest.raises(DataError, match=f"'{key}' has no padding rule"):
            pad_rule(key)


def test_bucket_lengths():
    assert bucket_lengths(64) == (8, 16, 24, 32, 40, 48, 56, 64)
    assert bucket_lengths(60, step=16) == (16, 32, 48, 64)
    assert bucket_lengths(3, step=4) == (4,)
    with pytest.raises(ConfigError):
        bucket_lengths(0)


def test_sentence_fields():
    batcher = Batcher(pair_features(6), batch_size=BATCH, buckets=BUCKETS, shuffle=False)
    batch = next(batcher.epoch(0))
    first = sentence_fields(batch, "first")
    assert set(first) == {"tokens", "relations", "levels", "lengths"}
    assert first["tokens"] is batch["first/tokens"]
    with pytest.raises(ConfigError, match="no role 'sentence'"):
        sentence_fields(batch, "sentence")


def test_given_weights_are_kept_and_filler_is_zero():
    features = single_features(5)
    for index, example in enumerate(features):
        example["weight"] = np.float32(0.5 + index)
    batches = list(Batcher(features, batch_size=8, buckets=(12,), shuffle=False).epoch(0))
    assert len(batches) == 1
    np.testing.assert_array_equal(batches[0]["weight"], [0.5, 1.5, 2.5, 3.5, 4.5, 0, 0, 0])


@pytest.mark.parametrize("mutate, message", [
    (lambda f: f[3].update({"sentence/spans": np.zeros(3, np.int32)}), "fields"),
    (lambda f: [e.update({"sentence/spans": np.zeros(3, np.int32)}) for e in f],
     "'sentence/spans' has no padding rule"),
    (lambda f: [e.update({"sentence/lengths": np.int32(1)}) for e in f], "the batcher adds"),
    (lambda f: [e.update({"other/levels": np.zeros(2, np.int32)}) for e in f],
     "role 'other' has no 'other/tokens'"),
    (lambda f: f[2].update({"sentence/segments": np.zeros((2, len(f[2]["sentence/tokens"])),
                                                          np.int32)}), "differs from the others"),
    (lambda f: f[4].update({"sentence/tags": np.zeros((2, 2), np.int32)}), "example 4"),
    (lambda f: f[1].update({"label": np.float32(1.5)}), "example 1: 'label' is float32"),
    (lambda f: f[0].update({"sentence/blocks": np.zeros((3, 13, 2), np.int32)}),
     "axis 1 of 'sentence/blocks' has size 13, which exceeds the bucket length"),
    (lambda f: f[5].update({"sentence/blocks": np.zeros((2, 1, 2), np.int32)}),
     "axis 0 of 'sentence/blocks' has size 2, which differs from the others' 3"),
])
def test_bad_features_raise_data_error(mutate, message):
    features = single_features(8)
    mutate(features)
    with pytest.raises(DataError, match=message):
        Batcher(features, batch_size=BATCH, buckets=BUCKETS, shuffle=True)


def test_bad_settings_raise_config_error():
    features = single_features(4)
    for buckets in [(), (8, 4), (0, 4), (4, 4)]:
        with pytest.raises(ConfigError, match="buckets"):
            Batcher(features, batch_size=BATCH, buckets=buckets, shuffle=True)
    with pytest.raises(ConfigError, match="batch_size"):
        Batcher(features, batch_size=0, buckets=BUCKETS, shuffle=True)
    with pytest.raises(DataError, match="no examples"):
        Batcher([], batch_size=BATCH, buckets=BUCKETS, shuffle=True)

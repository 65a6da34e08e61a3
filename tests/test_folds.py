"""Stratified folds: a partition, balanced, stratified within one example, deterministic."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenc.evaluation.folds import held_out_masks, stratified_fold_ids


@st.composite
def labels_and_folds(draw):
    num_classes = draw(st.integers(1, 6))
    labels = draw(st.lists(st.integers(0, num_classes - 1), min_size=2, max_size=300))
    num_folds = draw(st.integers(2, min(12, len(labels))))
    return np.array(labels), num_folds


@settings(max_examples=200, deadline=None)
@given(labels_and_folds(), st.integers(0, 2**31 - 1))
def test_folds_partition_and_stratify(case, seed):
    labels, num_folds = case
    fold_ids = stratified_fold_ids(labels, num_folds, seed)
    assert fold_ids.dtype == np.int32 and fold_ids.shape == labels.shape
    assert set(fold_ids.tolist()) <= set(range(num_folds))
    sizes = [int(np.sum(fold_ids == f)) for f in range(num_folds)]
    assert max(sizes) - min(sizes) <= 1
    for fold in range(num_folds):
        for label in np.unique(labels):
            in_fold = sum(1 for y, f in zip(labels, fold_ids, strict=True)
                          if f == fold and y == label)
            expected = np.mean(labels == label) * sizes[fold]
            assert abs(in_fold - expected) < 1, (fold, label, in_fold, expected)


def test_folds_are_deterministic_and_depend_on_seed():
    labels = np.random.default_rng(0).integers(0, 3, size=500)
    first = stratified_fold_ids(labels, 10, seed=1111)
    np.testing.assert_array_equal(first, stratified_fold_ids(labels, 10, seed=1111))
    assert not np.array_equal(first, stratified_fold_ids(labels, 10, seed=1112))


def test_held_out_masks_are_one_hot_rows():
    fold_ids = stratified_fold_ids(np.arange(23) % 2, 5, seed=0)
    masks = held_out_masks(fold_ids, 5)
    assert masks.shape == (5, 23) and masks.dtype == bool
    for i, fold in enumerate(fold_ids):
        assert masks[:, i].tolist() == [f == fold for f in range(5)]


def test_too_many_folds_is_an_error():
    with pytest.raises(ValueError, match="num_folds"):
        stratified_fold_ids(np.zeros(3, int), 4, seed=0)

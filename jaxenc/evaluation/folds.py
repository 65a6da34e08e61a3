"""Deterministic stratified k-fold splits (the role of sklearn's StratifiedKFold in SentEval)."""

from __future__ import annotations

import numpy as np


def _apportion(counts: np.ndarray, total: int) -> np.ndarray:
    """int[C] proportional to counts, summing to total, each the floor or ceil of its exact share
    counts * total / sum(counts) (largest remainders get the ceiling; ties in class order)."""
    quotas, remainders = np.divmod(counts * total, counts.sum())
    quotas[np.argsort(-remainders, kind="stable")[: total - quotas.sum()]] += 1
    return quotas


def _deal(groups: list[np.ndarray], num_folds: int) -> np.ndarray:
    """Fold ids 0..num_folds-1 dealt round-robin along the concatenated groups."""
    return np.arange(sum(len(g) for g in groups)) % num_folds


def stratified_fold_ids(labels: np.ndarray, num_folds: int, seed: int) -> np.ndarray:
    """int32[N]: the fold (0..num_folds-1) of every example, stratified by label.

    Folds have sizes s + 1 (the first N mod k, "large") and s = N // k. Every class first sends
    its share of the large folds' total there (rounded to a neighbouring integer, shares summing
    exactly), then each of the two groups deals its examples, class by class, round-robin over its
    folds. So a class with n_c of N examples has floor or ceil of n_c * |fold| / N examples in
    every fold: within one example of the global ratio. Examples are shuffled within their class
    by a numpy Generator seeded with `seed`; the same arguments always give the same folds.

    Args:
      labels: int[N] class of every example.
      num_folds: number of folds k, 2 <= k <= N.
      seed: shuffling seed (SentEval uses 1111).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if not 2 <= num_folds <= len(labels):
        raise ValueError(f"need 2 <= num_folds <= {len(labels)} examples, got {num_folds}")
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    members = [rng.permutation(np.flatnonzero(labels == c)) for c in classes]
    num_large = len(labels) % num_folds
    to_large = _apportion(counts, num_large * (len(labels) // num_folds + 1))
    large = [m[:t] for m, t in zip(members, to_large, strict=True)]
    small = [m[t:] for m, t in zip(members, to_large, strict=True)]
    fold_ids = np.empty(len(labels), np.int32)
    if num_large:
        fold_ids[np.concatenate(large)] = _deal(large, num_large)
    fold_ids[np.concatenate(small)] = num_large + _deal(small, num_folds - num_large)
    return fold_ids


def held_out_masks(fold_ids: np.ndarray, num_folds: int) -> np.ndarray:
    """bool[num_folds, N]: row f is True on the examples of fold f (its test part)."""
    return np.asarray(fold_ids)[None, :] == np.arange(num_folds)[:, None]

"""Host-side metrics over a whole evaluation split (numpy float64, returned as Python floats)."""

from __future__ import annotations

import numpy as np


def accuracy(predictions: np.ndarray, gold: np.ndarray) -> float:
    """Fraction of predictions equal to gold."""
    return float(np.mean(np.asarray(predictions) == np.asarray(gold)))


def binary_f1(predictions: np.ndarray, gold: np.ndarray, positive: int = 1) -> float:
    """F1 of the `positive` class (MRPC reports it beside accuracy); 0 when it is never hit."""
    predicted, actual = np.asarray(predictions) == positive, np.asarray(gold) == positive
    true_positives = np.sum(predicted & actual)
    denominator = np.sum(predicted) + np.sum(actual)
    return float(2 * true_positives / denominator) if denominator else 0.0


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation; 0 when either side is constant."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    norm = np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))
    return float(np.sum(dx * dy) / norm) if norm > 0 else 0.0


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of `values` [N]; tied values share the mean of their ranks."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(values[order]) != 0])
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2, ends - starts)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation: Pearson of the ranks (ties get their average rank)."""
    return pearson(average_ranks(x), average_ranks(y))


def mean_squared_error(predictions: np.ndarray, gold: np.ndarray) -> float:
    """Mean of (prediction - gold)^2."""
    diff = np.asarray(predictions, np.float64) - np.asarray(gold, np.float64)
    return float(np.mean(diff * diff))

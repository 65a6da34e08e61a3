"""Host-side metrics over a whole evaluation split (numpy float64 / scipy.stats, returned as
Python floats)."""

from __future__ import annotations

import numpy as np
import scipy.stats


def accuracy(predictions: np.ndarray, gold: np.ndarray) -> float:
    """Fraction of predictions equal to gold."""
    return float(np.mean(np.asarray(predictions) == np.asarray(gold)))


def binary_f1(predictions: np.ndarray, gold: np.ndarray, positive: int = 1) -> float:
    """F1 of the `positive` class (MRPC reports it beside accuracy); 0 when it is never hit."""
    predicted, actual = np.asarray(predictions) == positive, np.asarray(gold) == positive
    true_positives = np.sum(predicted & actual)
    denominator = np.sum(predicted) + np.sum(actual)
    return float(2 * true_positives / denominator) if denominator else 0.0


def _varies(x: np.ndarray) -> bool:
    return len(x) >= 2 and bool(np.ptp(x) > 0)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation (scipy.stats.pearsonr); 0 when either side is constant (scipy: NaN)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return float(scipy.stats.pearsonr(x, y).statistic) if _varies(x) and _varies(y) else 0.0


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (scipy.stats.spearmanr; ties get their average rank); 0 when
    either side is constant."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return float(scipy.stats.spearmanr(x, y).statistic) if _varies(x) and _varies(y) else 0.0


def mean_squared_error(predictions: np.ndarray, gold: np.ndarray) -> float:
    """Mean of (prediction - gold)^2."""
    diff = np.asarray(predictions, np.float64) - np.asarray(gold, np.float64)
    return float(np.mean(diff * diff))

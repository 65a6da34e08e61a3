"""STS12-16 without training: cosine similarity of the two sentence vectors against the gold score.

Per subset: Pearson and Spearman correlation over its scored pairs (the reader drops pairs whose
gold line is empty). Per year: their plain mean and their mean weighted by subset size; the
weighted one is SentEval's "all" and the headline number. A year whose folder lacks some subsets
(licensed files are often absent) is summarised over the others and marked partial.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from jaxenc.tasks.metrics import pearson, spearman


@dataclasses.dataclass(frozen=True)
class SubsetScore:
    """Correlations of one STS subset; `size` scored pairs."""

    pearson: float
    spearman: float
    size: int


def cosine_similarity(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """float64[N] cosine of the rows of u, v [N, D]; 0 where either row is zero."""
    u, v = np.asarray(u, np.float64), np.asarray(v, np.float64)
    norms = np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)
    return np.sum(u * v, axis=1) / np.where(norms > 0, norms, 1.0)


def score_subset(u: np.ndarray, v: np.ndarray, gold: np.ndarray) -> SubsetScore:
    """Pearson / Spearman of cos(u_i, v_i) against gold float[N]."""
    similarity = cosine_similarity(u, v)
    return SubsetScore(pearson(similarity, gold), spearman(similarity, gold), len(gold))


def summarize(subsets: Mapping[str, SubsetScore], missing: Sequence[str] = ()) -> dict:
    """The result of one STS year: weighted ("all") and plain means, plus every subset.

    Returns {"pearson", "spearman" (size-weighted means), "pearson_mean", "spearman_mean",
    "num_test" (scored pairs), "subsets": {name: {"pearson", "spearman", "size"}}}, and
    "missing": the names of the year's subsets not evaluated, when there are any.
    """
    scores = list(subsets.values())
    sizes = np.array([s.size for s in scores], np.float64)
    result = {"num_test": int(sizes.sum())}
    for metric in ("pearson", "spearman"):
        values = np.array([getattr(s, metric) for s in scores])
        result[metric] = float(values @ sizes / sizes.sum())
        result[f"{metric}_mean"] = float(values.mean())
    result["subsets"] = {name: dataclasses.asdict(s) for name, s in subsets.items()}
    if missing:
        result["missing"] = list(missing)
    return result


def partial_note(metrics: Mapping) -> str:
    """"partial (k of n subsets)" for a year summarised without some subsets, else ""."""
    missing = metrics.get("missing", ())
    if not missing:
        return ""
    evaluated = len(metrics["subsets"])
    return f"partial ({evaluated} of {evaluated + len(missing)} subsets)"

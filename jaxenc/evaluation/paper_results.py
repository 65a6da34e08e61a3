"""Transfer (SentEval) results the papers report, printed beside ours.

Metric names and units are those of our results: "accuracy" and "f1" in percent, "pearson" and
"spearman" as correlations. SST is SentEval's binary SST-2; STS14 is the size-weighted "all".

Sources:
- PSAN: Wu et al. (2018) Table 3.
- Mean-Max AAE: Zhang et al. (2018) Table 1.
- DiSAN: its own paper reports supervised results only; its transfer row
  is the re-implementation in Wu et al. (2018) Table 3.
- GloVe BOW: mean of 300-d GloVe vectors (Conneau et al., 2017, via Zhang et al. Table 1), the
  reference for our bag-of-embeddings baseline.
"""

from __future__ import annotations

Metrics = dict[str, float]


def _row(mr: float, cr: float, subj: float, mpqa: float, sst2: float, trec: float,
         mrpc: tuple[float, float], sick_r: float, sick_e: float,
         sts14: tuple[float, float]) -> dict[str, Metrics]:
    """One model's row in the column order of the papers' tables."""
    return {
        "MR": {"accuracy": mr}, "CR": {"accuracy": cr}, "SUBJ": {"accuracy": subj},
        "MPQA": {"accuracy": mpqa}, "SST2": {"accuracy": sst2}, "TREC": {"accuracy": trec},
        "MRPC": {"accuracy": mrpc[0], "f1": mrpc[1]}, "SICKR": {"pearson": sick_r},
        "SICKE": {"accuracy": sick_e}, "STS14": {"pearson": sts14[0], "spearman": sts14[1]},
    }


PAPER_RESULTS: dict[str, dict[str, Metrics]] = {
    "PSAN": _row(80.0, 84.2, 91.9, 89.9, 83.8, 89.1, (74.9, 82.1), 0.891, 86.9, (0.69, 0.67)),
    "Mean-Max AAE": _row(78.7, 82.3, 93.4, 88.8, 83.8, 91.4, (75.5, 82.6), 0.854, 83.5,
                         (0.58, 0.56)),
    "DiSAN": _row(79.7, 84.1, 92.2, 89.5, 82.9, 88.3, (75.1, 81.8), 0.860, 85.1, (0.66, 0.64)),
    "GloVe BOW": _row(78.7, 78.5, 91.6, 87.6, 79.8, 83.6, (72.1, 80.9), 0.800, 78.6,
                      (0.54, 0.56)),
}

# Test-set sizes SentEval uses (whole corpus for the cross-validated ones): the weights of the
# papers' micro averages.
SENTEVAL_TEST_SIZES: dict[str, int] = {
    "MR": 10662, "CR": 3775, "SUBJ": 10000, "MPQA": 10606, "SST2": 1821, "TREC": 500,
    "MRPC": 1725, "SICKE": 4927,
}

# Average accuracies over task sets (Zhang et al. 2018, Table 2: macro = plain mean, micro =
# weighted by test size); the sets are the tasks every compared model reports.
AVERAGE_SETS: dict[str, tuple[str, ...]] = {
    "8 tasks": ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "SICKE"),
    "7 tasks": ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "SICKE"),
    "6 tasks": ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC"),
}

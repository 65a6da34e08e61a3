"""The tables of results/psan/README.md: Table 4's ablations on TREC, test accuracy per seed and
mean ± std beside the paper's SNLI numbers (`psan_table4`, from
results/psan/runs/psan_<ablation>_trec_s<seed>.md; the full model: psan_trec_s*.md); PSAN's
other seeded runs (`psan_seeds`: SICK-E, SICK-R with `memory_norm=layer`, SST-5, from
results/psan/runs/ and results/encoders/runs/psan_sst5_s<seed>.md); the psan_snli smoke runs
(`psan_snli`, results/psan/runs/psan_snli_smoke*.md); Table 5's models at 300-d sentence
vectors on TREC (`psan_table5`, results/encoders/runs/)."""

from __future__ import annotations

import statistics

from reports import encoder_tables
from reports.markdown import DASH, bold_best, markdown, mean_std, per_seed, percent
from reports.run_files import ENCODER_RUNS, RESULTS, row, seeded, value

PSAN_RUNS = RESULTS / "psan" / "runs"
# run-file prefix -> (row label, the paper's SNLI test accuracy in Table 4)
PSAN_ABLATIONS = {
    "psan_level1_trec": ("(1) PSA on the first level only", "84.9"),
    "psan_level2_trec": ("(2) PSA on the second level only", "85.3"),
    "psan_level3_trec": ("(3) PSA on the third level only", "84.6"),
    "psan_no_psa_trec": ("(4) w/o PSA (sentence-level attention + gated memory)", "85.3"),
    "psan_equal_trec": ("(5) w/o syntactic division (equal blocks)", "85.5"),
    "psan_concat_trec": ("(6) w/o gated memory (concat + feed-forward)", "85.2"),
    "psan_no_both_trec": ("(7) w/o both", "84.7"),
    "psan_trec": ("(8) full model", "86.1"),
}


def psan_table4_table() -> str:
    """Table 4's ablations: TREC test accuracy per seed, mean ± std (the best in bold), and
    the paper's SNLI accuracy."""
    rows, means, papers = [], [], []
    for prefix, (label, paper) in PSAN_ABLATIONS.items():
        found = seeded(PSAN_RUNS, prefix)
        tests = [value(row(path)["test accuracy"]) for path in found.values()]
        rows.append([label, ", ".join(map(str, found)) or DASH, per_seed(tests),
                     mean_std(tests)])
        means.append(statistics.mean(tests) if tests else None)
        papers.append(float(paper))
    mean_cells = bold_best([r[3] for r in rows], means)
    paper_cells = bold_best([paper for _, paper in PSAN_ABLATIONS.values()], papers)
    for r, mean_cell, paper_cell in zip(rows, mean_cells, paper_cells, strict=True):
        r[3] = mean_cell
        r.append(paper_cell)
    return markdown(["model", "seeds", "TREC test acc per seed", "mean ± std",
                     "paper (SNLI, Table 4)"], rows)


# (task, metric column, row label, setting, run files' folder, prefix)
PSAN_SEEDS = (
    ("SICK-E", "accuracy", "SICK-E (acc)", "keep 1.0, 15 epochs", PSAN_RUNS, "psan_sick_e"),
    ("SICK-R", "pearson", "SICK-R (Pearson)", "`memory_norm=layer`, keep 1.0, 10 epochs",
     PSAN_RUNS, "psan_norm_sick_r"),
    ("SICK-R", "mse", "SICK-R (MSE)", "the same runs", PSAN_RUNS, "psan_norm_sick_r"),
    ("SICK-R", "pearson", "SICK-R (Pearson)", "`glove-6b-50d`, the paper's setting (Adadelta "
     "0.75, batch 16, keep 0.5, fixed vectors) with `memory_norm=layer`, `memory=highway`",
     PSAN_RUNS, "psan_paper_setting_sick_r"),
    ("SICK-R", "pearson", "SICK-R (Pearson)", "`glove-6b-50d`, `psan_sick_r.py` as it is (the "
     "same flags, Adam 1e-3, batch 64, keep 1.0, fixed vectors)", PSAN_RUNS,
     "psan_pair_config_sick_r"),
    ("SST-5", "accuracy", "SST-5 (acc)", "gold SST trees, keep 1.0, 8,000 steps",
     ENCODER_RUNS, "psan_sst5"),
)


def _three(number: float) -> str:
    return f"{number:.3f}"


def psan_seeds_table() -> str:
    """PSAN's other seeded runs (PSAN_SEEDS): dev and test per seed, test mean ± std."""
    rows = []
    for _, metric, label, setting, folder, prefix in PSAN_SEEDS:
        found = seeded(folder, prefix)
        form = percent if metric == "accuracy" else _three
        tests = [value(row(path)[f"test {metric}"]) for path in found.values()]
        devs = [value(row(path)[f"dev {metric}"]) for path in found.values()
                if f"dev {metric}" in row(path)]
        rows.append([label, setting, ", ".join(map(str, found)) or DASH,
                     per_seed(devs, form), per_seed(tests, form), mean_std(tests, form)])
    return markdown(["task (metric)", "setting", "seeds", "dev per seed", "test per seed",
                     "test mean ± std"], rows)


# run file -> label
PSAN_SNLI = {
    "psan_snli_smoke": "`psan_snli.py` as it is (fixed random 300-d vectors: no GloVe 840B here; "
                       "Adadelta 0.75, keep 0.5)",
    "psan_snli_smoke_adam": "+ 50-d GloVe subsets fine-tuned, Adam 1e-3, clip 5, keep 0.5",
    "psan_snli_smoke_adam_keep1": "same, keep 1.0 (no dropout)",
}


def psan_snli_table() -> str:
    """The psan_snli smoke runs (PSAN_SNLI): size, steps, best dev and its test accuracy."""
    rows, devs, tests = [], [], []
    for name, label in PSAN_SNLI.items():
        r = row(PSAN_RUNS / f"{name}.md")
        devs.append(value(r["dev accuracy"]))
        tests.append(value(r["test accuracy"]))
        rows.append([label, r["params w/o embeddings"], r["steps"], r["best step"],
                     percent(devs[-1]), percent(tests[-1])])
    for column, scores in ((4, devs), (5, tests)):
        for r, cell in zip(rows, bold_best([r[column] for r in rows], scores), strict=True):
            r[column] = cell
    return markdown(["run", "parameters outside embeddings", "steps", "best step",
                     "best dev acc", "test acc at best dev"], rows)


# (results/encoders model key, label, the paper's accuracy and memory) of PSAN's Table 5
PSAN_TABLE5 = (
    ("transformer", "multi-head (Transformer, d 300, 6 heads)", "87.1", "1508"),
    ("disan_300", "DiSAN, d_h 150 x 2 directions", "87.7", "2943"),
    ("psan", "PSAN", "89.1", "1192"),
)


def psan_table5_table() -> str:
    """Table 5's models at 300-d sentence vectors on TREC: test accuracy over the committed seeds
    of each model's recipe (results/encoders/runs), beside the paper's accuracy and memory."""
    rows = []
    for model, label, accuracy, memory in PSAN_TABLE5:
        tests = [run["test"]["accuracy"] for run in encoder_tables.seed_runs(model, "trec")]
        rows.append([label, mean_std(tests), str(len(tests)), accuracy, memory])
    return markdown(["model (300-d sentence vectors)", "TREC test acc", "seeds",
                     "acc (paper)", "memory MB (paper)"], rows)

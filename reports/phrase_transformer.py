"""The tables of results/phrase_transformer/README.md:
  pt_pos       POS tagging (UD-EWT, GloVe 6B 50-d words, trained until dev stops improving),
               test accuracy per seed and mean ± std beside the paper's Table 2; from
               results/phrase_transformer/runs/pos_<variant>_s<seed>.md
  pt_pos_random300  the same with randomly initialised 300-d words and 10 epochs; from
               results/phrase_transformer/runs/pos_random300_<variant>_s<seed>.md
  pt_pos_recipe  the POS recipes compared on dev (seed 0, k=2 and its twin): dev and test
               accuracy, where each run stopped, and the accuracy on the words outside the
               training vocabulary; from results/phrase_transformer/runs/ and
               results/phrase_transformer/unknown_words/<run>.json (reports.pos_unknown_words)
  pt_multi30k  Multi30k de->en, test BLEU (sacrebleu's line) per seed and mean ± std,
               perplexity; from results/phrase_transformer/runs/multi30k_*.md
  pt_cost      train-step peak memory, train seconds and encode rate of the same runs
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence

from reports.markdown import DASH, bold_best, markdown, mean_std, percent
from reports.run_files import RESULTS, bleu, row, seeded, value

PT_RUNS = RESULTS / "phrase_transformer" / "runs"
# (run variant of results/phrase_transformer/run.sh, model row in its run file, label, paper
# number or DASH); a variant with no committed run has no row
PT_POS_SPEC = (
    ("k2", "transformer", "Transformer (the twin)", "96.36"),
    ("k2", "phrase_transformer", "PhraseTransformer k=2", "96.87"),
    ("k3", "phrase_transformer", "PhraseTransformer k=3", "96.80"),
    ("linear", "phrase_transformer", "linear PhraseTransformer k=2", "96.54"),
    ("k3linear", "phrase_transformer", "linear PhraseTransformer k=3", "96.52"),
    ("semantic", "phrase_transformer", "semantic PhraseTransformer (gold UD arcs)", "96.35"),
    ("semantic_spacy", "phrase_transformer", "semantic PhraseTransformer (spaCy parses)",
     "96.35"),
    ("hadamard", "phrase_transformer", "PhraseTransformer k=2, `phrase_mask=hadamard`", DASH),
    ("bare", "phrase_transformer", "PhraseTransformer k=2, no residual / FFN", DASH),
)
PT_MULTI30K_SPEC = (
    ("k2", "transformer", "Transformer (the twin)", "20.90"),
    ("k2", "phrase_transformer", "PhraseTransformer k=2, decoder memory words + hypernodes",
     "34.61"),
    ("linear", "phrase_transformer",
     "linear PhraseTransformer k=2, decoder memory words + hypernodes", "21.60"),
    ("k2words", "phrase_transformer", "PhraseTransformer k=2, decoder memory words", "34.61"),
    ("k3", "phrase_transformer", "PhraseTransformer k=3, decoder memory words", "34.03"),
    ("k3linear", "phrase_transformer", "linear PhraseTransformer k=3, decoder memory words",
     "20.95"),
)


def _committed(spec: Sequence[tuple[str, str, str, str]], task: str) -> tuple:
    """The rows of `spec` whose variant has a committed run of `task`."""
    return tuple(entry for entry in spec if seeded(PT_RUNS, f"{task}_{entry[0]}"))


PT_POS = _committed(PT_POS_SPEC, "pos")
PT_POS_RANDOM300 = _committed(PT_POS_SPEC, "pos_random300")
PT_MULTI30K = _committed(PT_MULTI30K_SPEC, "multi30k")


def _seed_columns(spec: Sequence[tuple[str, str, str, str]], task: str) -> list[int]:
    return sorted({seed for variant, *_ in spec for seed in seeded(PT_RUNS, f"{task}_{variant}")})


def _paper_scores(papers: list[str]) -> list[float | None]:
    return [None if paper == DASH else float(paper) for paper in papers]


def pt_pos_table(spec: Sequence[tuple[str, str, str, str]] = PT_POS, task: str = "pos") -> str:
    """Test accuracy per seed of the POS runs `<task>_<variant>_s<seed>.md` of `spec`."""
    seeds = _seed_columns(spec, task)
    rows, means = [], []
    for variant, model, label, _ in spec:
        found = seeded(PT_RUNS, f"{task}_{variant}")
        tests = {seed: value(row(path, model)["test accuracy"]) for seed, path in found.items()}
        rows.append([label, *(percent(tests[s]) if s in tests else DASH for s in seeds),
                     mean_std(list(tests.values()))])
        means.append(statistics.mean(tests.values()) if tests else None)
    papers = [paper for *_, paper in spec]
    for r, mean_cell, paper_cell, gap in zip(rows, bold_best([r[-1] for r in rows], means),
                                             bold_best(papers, _paper_scores(papers)),
                                             _gaps(means, 100), strict=True):
        r[-1:] = [mean_cell, gap, paper_cell]
    return markdown(["model", *(f"seed {s}" for s in seeds), "mean ± std", "mean - twin's",
                     "paper (PTB, Table 2)"], rows)


PT_UNKNOWN = RESULTS / "phrase_transformer" / "unknown_words"
# (run file, recipe label) of the POS recipe comparison, seed 0
PT_POS_RECIPES = (
    ("pos_random300_k2_s0", "random 300-d words, 10 epochs"),
    ("pos_trainvocab_k2_s0", "GloVe 6B 50-d, training words only, until dev stops"),
    ("pos_k2_s0", "GloVe 6B 50-d + its 100,000 first words, until dev stops"),
)


def _unknown_accuracy(sums: dict[str, int] | None) -> str:
    """Accuracy (%) on the tokens read as the unknown id, and their share of the tokens."""
    if not sums or not sums["unknown_count"]:
        return DASH
    return (f"{percent(sums['unknown_correct'] / sums['unknown_count'])} "
            f"({percent(sums['unknown_count'] / sums['count'])}% of tokens)")


def pt_pos_recipe_table() -> str:
    """Per recipe and model: dev / test accuracy at the best dev checkpoint, best step / steps
    (and what stopped the run), accuracy on the words read as the unknown id."""
    rows = []
    for name, recipe in PT_POS_RECIPES:
        path = PT_RUNS / f"{name}.md"
        if not path.is_file():
            continue
        unknown_file = PT_UNKNOWN / f"{name}.json"
        unknown = (json.loads(unknown_file.read_text(encoding="utf-8"))
                   if unknown_file.is_file() else {})
        for model, label in (("transformer", "Transformer (the twin)"),
                             ("phrase_transformer", "PhraseTransformer k=2")):
            cells = row(path, model)
            sums = unknown.get(model, {})
            rows.append([recipe, label, percent(value(cells["dev accuracy"])),
                         percent(value(cells["test accuracy"])),
                         f"{cells['best step']} / {cells['steps']} "
                         f"({cells.get('stopped by', 'cap')})",
                         _unknown_accuracy(sums.get("dev")), _unknown_accuracy(sums.get("test"))])
    return markdown(["recipe", "model", "dev acc", "test acc", "best step / steps (stopped by)",
                     "dev acc, unknown words", "test acc, unknown words"], rows)


def _gaps(means: list[float | None], scale: float) -> list[str]:
    """Each mean minus the first row's (the twin's), signed, 2 decimals; the twin's own: —."""
    if not means:
        return []
    twin = means[0]
    # + 0.0 turns a difference that rounds to -0.00 into +0.00
    return [DASH] + [DASH if twin is None or m is None
                     else f"{round(scale * (m - twin), 2) + 0.0:+.2f}" for m in means[1:]]


def pt_multi30k_table() -> str:
    """Multi30k test BLEU per seed, mean ± std, the gap to the twin, test perplexity, and
    the paper's BLEU."""
    seeds = _seed_columns(PT_MULTI30K, "multi30k")
    rows, means = [], []
    for variant, model, label, _ in PT_MULTI30K:
        found = seeded(PT_RUNS, f"multi30k_{variant}")
        scores = {seed: bleu(path)[model] for seed, path in found.items()}
        perplexity = [row(path, model)["test perplexity"] for path in found.values()]
        rows.append([label, *(f"{scores[s]:.2f}" if s in scores else DASH for s in seeds),
                     mean_std(list(scores.values()), lambda x: f"{x:.2f}"),
                     " / ".join(perplexity) or DASH])
        means.append(statistics.mean(scores.values()) if scores else None)
    papers = [paper for *_, paper in PT_MULTI30K]
    mean_cells = bold_best([r[-2] for r in rows], means)
    paper_cells = bold_best(papers, _paper_scores(papers))
    for r, mean_cell, paper_cell, gap in zip(rows, mean_cells, paper_cells, _gaps(means, 1),
                                             strict=True):
        r[-2:] = [mean_cell, gap, r[-1], paper_cell]
    first, *others = seeds
    return markdown(["model", f"test BLEU seed {first}", *(f"seed {s}" for s in others),
                     "mean ± std", "mean - twin's",
                     f"test perplexity (seed {' / '.join(map(str, seeds))})",
                     "paper (d 512, 6 layers)"], rows)


# Runs trained with the same run.sh command on one NVIDIA H200 (JAX 0.11.2) instead of the 2-core
# CPU machine of the others. XLA's compiled peak differs by backend, seconds and encode rates by
# machine, so the cost table marks their cells.
PT_H200_RUNS = frozenset({"pos_bare_s0", "pos_bare_s1", "pos_k3_s1", "pos_k3linear_s1",
                          "pos_linear_s1"})


def pt_cost_table() -> str:
    """Cost columns of the same run files: compiled train-step peak, train seconds and test
    encode rate per seed (the machine's load varies, the peak does not), each cell of a run of
    `PT_H200_RUNS` marked "(H200)"."""
    rows = []
    tasks = {"pos": ("POS", PT_POS), "pos_random300": ("POS, random 300-d words", PT_POS_RANDOM300),
             "multi30k": ("Multi30k", PT_MULTI30K)}
    for task, (task_label, spec) in tasks.items():
        for variant, model, label, _ in spec:
            found = [(row(path, model), " (H200)" if path.stem in PT_H200_RUNS else "")
                     for path in seeded(PT_RUNS, f"{task}_{variant}").values()]
            peaks = sorted({r["train peak MiB"] + mark for r, mark in found},
                           key=lambda cell: value(cell.split()[0]))
            rows.append([task_label, label,
                         " / ".join(peaks) or DASH,
                         " / ".join(r["train s"] + mark for r, mark in found) or DASH,
                         " / ".join(r["encode sent/s"] + mark for r, mark in found) or DASH])
    return markdown(["task", "model", "train peak MiB", "train s per seed",
                     "encode sent/s per seed"], rows)

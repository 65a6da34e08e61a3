"""The tables of docs/results.md built from what the main job (README.md, "Two commands")
printed, results/main_job/results.md (a copy of its workdir's results.md): its results, best
dev first (`main_job`), and the cosine similarity of its minimal pairs under each model's
encoder (`main_job_pairs`)."""

from __future__ import annotations

from reports.markdown import bold, markdown
from reports.run_files import RESULTS, read_rows, value

MAIN_JOB = RESULTS / "main_job" / "results.md"
# model -> (label in the table of results, label in the table of pairs)
MAIN_JOB_MODELS = {
    "tree_lstm": ("Tree-LSTM (gold dependency trees)", "Tree-LSTM"),
    "dependency_transformer": ("Dependency-Transformer (gold)", "Dep.-Transformer"),
    "disan": ("DiSAN", "DiSAN"),
    "psan": ("PSAN (gold phrases)", "PSAN"),
    "meanmax_aae": ("Mean-Max AAE encoder (supervised here)", "AAE"),
    "transformer": ("Transformer", "Transformer"),
    "phrase_transformer": ("PhraseTransformer (2-grams)", "PhraseTr."),
    "bag": ("bag of embeddings", "bag"),
}
EXPORT = " (export)"


def main_job_rows() -> list[dict[str, str]]:
    """The main job's rows, best dev accuracy first (test accuracy breaks a tie)."""
    return sorted(read_rows(MAIN_JOB), key=lambda r: (-value(r["dev accuracy"]),
                                                      -value(r["test accuracy"])))


def main_job_table() -> str:
    """The main job's models, best dev first: size, steps, dev and test accuracy (the best
    in bold), time, encode rate and memory."""
    rows = main_job_rows()
    columns = ("dev accuracy", "test accuracy")
    best = {c: max(value(r[c]) for r in rows) for c in columns}
    return markdown(
        ["model", "params w/o embeddings", "steps (best step)", *columns, "train s",
         "encode sent/s", "train peak MiB"],
        [[MAIN_JOB_MODELS[r["model"]][0], r["params w/o embeddings"],
          f"{r['steps']} ({r['best step']})",
          *((bold if value(r[c]) == best[c] else str)(f"{value(r[c]):.3f}") for c in columns),
          r["train s"], r["encode sent/s"], f"{value(r['train peak MiB']):.0f}"] for r in rows])


def main_job_pairs_table() -> str:
    """One row per sentence pair: the exported best model's cosine first, then every other
    model's in the order of the results table."""
    pairs = read_rows(MAIN_JOB, index=1)
    exported = next(c[len("cos "):-len(EXPORT)] for c in pairs[0] if c.endswith(EXPORT))
    order = [exported] + [r["model"] for r in main_job_rows() if r["model"] != exported]
    columns = [f"cos {m}{EXPORT}" if m == exported else f"cos {m}" for m in order]
    return markdown(
        ["pair", *(MAIN_JOB_MODELS[m][1] + (EXPORT if m == exported else "") for m in order)],
        [[f"{p['sentence A']} / {p['sentence B']}", *(f"{value(p[c]):.2f}" for c in columns)]
         for p in pairs])

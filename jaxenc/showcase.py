"""After training: export the best model of a run and encode a few sentences with it.

`showcase(rows, workdir, sentences)` (the main job's epilogue, `config.showcase`, run by
`jaxenc.training.main`) picks the row with the best dev score, writes its encoder to
`workdir/export` (`jaxenc.export`, which prints the model, dataset, checkpoint step and folder it
exported; results.md names them too), loads it back (`jaxenc.load`) and encodes `sentences`
(strings, tokenised as the training data was). Sentences are read in pairs: the cosine similarity
of each pair's vectors is tabulated under the exported model and under every other model of the
run, so a minimal pair ("the film that was not good is good ." / "the film that was good is not
good .") shows which encoders tell the two apart (a bag of words gives exactly 1). It uses the
encoding layer (`jaxenc.encoding`, `jaxenc.exporting`, `jaxenc.loading`), which reads training
runs, so it sits above both (docs/ARCHITECTURE.md, "Layers").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxenc.errors import ConfigError
from jaxenc.training import run_report

EXPORT_DIR = "export"


def best_row(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The row with the highest finite dev score (the rows' one "dev <metric>" column)."""
    metric = next(key for key in rows[0] if key.startswith("dev "))
    finite = [row for row in rows if math.isfinite(row[metric])]
    if not finite:
        raise ConfigError(f"no run has a finite {metric}, so none can be exported (fix: check "
                          "the training curves; rerun with a lower learning rate)")
    return max(finite, key=lambda row: row[metric])


def pair_cosines(vectors: np.ndarray) -> np.ndarray:
    """float32[2P, D] -> float[P]: the cosine similarity of rows (0, 1), (2, 3), ...; 0 where a
    vector is zero (a sentence without known words)."""
    first, second = vectors[0::2], vectors[1::2]
    norms = np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)
    dots = np.sum(first * second, axis=1)
    return np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)


def showcase(rows: Sequence[Mapping[str, Any]], workdir: str | Path,
             sentences: Sequence[str]) -> str:
    """Exports the best row's encoder to workdir/export, encodes `sentences` (an even number:
    pairs) with it and with every other row's encoder; returns markdown (also appended to
    workdir/results.md). Process 0 of a multi-host run does it; the others return ""."""
    import jax

    from jaxenc.encoding import Encoder
    from jaxenc.exporting import export
    from jaxenc.loading import load, read_description

    if jax.process_index() != 0:
        return ""

    if len(sentences) % 2:
        raise ConfigError(f"showcase.sentences has {len(sentences)} sentences (fix: give pairs: "
                          "an even number, each pair compared by cosine similarity)")
    workdir = Path(workdir)
    best = best_row(rows)
    out = export(best["workdir"], workdir / EXPORT_DIR, overwrite=True)  # prints which model
    exported = load(out)
    source = read_description(out)["source"]
    vectors = exported.encode(list(sentences), show_progress_bar=False)
    metric = next(key for key in best if key.startswith("dev "))
    checkpoint = _within(source["checkpoint"], workdir)
    lines = ["## The best model, exported and used",
             f"{best['model']} has the best {metric} ({best[metric]:.4f}); its encoder (the "
             f"checkpoint of step {source['step']}, `{checkpoint}`) is exported to "
             f"`{_within(out, workdir)}` (paths relative to this results file's folder; "
             f"`jaxenc.load` reads the export; `jaxenc.standalone.load` needs jax and numpy "
             f"alone; format.json's \"source\" names the run and checkpoint). `encode` of "
             f"{len(sentences)} sentences -> {vectors.dtype}{list(vectors.shape)}."]
    if sentences:
        cosines = {f"{best['model']} (export)": pair_cosines(vectors)}
        for row in rows:
            if row is not best:
                other = Encoder.from_workdir(row["workdir"])
                cosines[row["model"]] = pair_cosines(
                    other.encode(list(sentences), show_progress_bar=False))
        table = [{"sentence A": sentences[2 * i], "sentence B": sentences[2 * i + 1],
                  **{f"cos {name}": float(values[i]) for name, values in cosines.items()}}
                 for i in range(len(sentences) // 2)]
        lines += ["Cosine similarity of each pair's sentence vectors (1 = the encoder cannot "
                  "tell them apart):", run_report.markdown_table(table)]
    text = "\n\n".join(lines) + "\n"
    results = workdir / run_report.RESULTS_FILE
    results.write_text(results.read_text() + "\n" + text)
    return text


def _within(path: str | Path, folder: Path) -> str:
    """`path` relative to `folder` when inside it (so a results file names no machine's
    folders and stays true when its folder moves), else as given."""
    try:
        return Path(path).resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return str(path)

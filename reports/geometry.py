"""Where the sentence vectors of trained runs point: a diagnosis of encoders that learn a pair
task slowly or not at all.

For each run (a workdir under $RUNS, default ../runs), the best checkpoint encodes the distinct
test sentences of the run's dataset (at most `--sentences`, in file order) and the script
reports: the mean vector norm, the mean cosine between the vectors of two different sentences
(random pairs, fixed seed; 1 means every sentence points the same way, so a pair head's |u - v|
and u * v features carry little besides the common direction), the share of the vectors'
second moment along their mean direction, and, for pair tasks, the Pearson correlation of the
cosine of a pair's two vectors with its gold score or label (what the geometry alone says about
relatedness, no head). Writes results/encoders/geometry.md.

  python -m reports.geometry sweep_psan_sick_r_lr1e-3 sweep_disan_sick_r_lr1e-3 ...
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from jaxenc.data import registry
from jaxenc.encoding import Encoder
from jaxenc.training.run_files import load_config
from reports.run_files import REPO, RESULTS

OUT = RESULTS / "encoders" / "geometry.md"
PAIRS = 4000


def runs_root() -> Path:
    return Path(os.environ.get("RUNS", REPO.parent / "runs"))


def geometry(vectors: np.ndarray, seed: int = 0) -> dict[str, float]:
    """float32[N, D] vectors -> mean norm, mean cosine of random pairs of different rows, and
    the share of the second moment along the mean direction."""
    norms = np.linalg.norm(vectors, axis=1)
    unit = vectors / np.maximum(norms, 1e-12)[:, None]
    rng = np.random.default_rng(seed)
    first = rng.integers(0, len(vectors), PAIRS)
    second = (first + rng.integers(1, len(vectors), PAIRS)) % len(vectors)  # never the same row
    mean = vectors.mean(axis=0)
    direction = mean / max(np.linalg.norm(mean), 1e-12)
    return {"norm": float(norms.mean()),
            "cosine": float(np.mean(np.sum(unit[first] * unit[second], axis=1))),
            "along_mean": float(np.sum((vectors @ direction) ** 2) / np.sum(vectors ** 2))}


def run_row(name: str, limit: int) -> list[str]:
    workdir = runs_root() / name
    config = load_config(workdir)
    dataset = config.task.dataset
    examples = registry.load(dataset, "test", config.data.data_dir or None)
    encoder = Encoder.from_workdir(workdir)
    texts = list(dict.fromkeys(sentence for example in examples
                               for sentence in example.sentences))[:limit]
    stats = geometry(encoder.encode(texts, show_progress_bar=False))
    pair_cell = "—"
    if len(examples[0].sentences) == 2:
        kept = set(texts)
        scored = [example for example in examples
                  if all(sentence in kept for sentence in example.sentences)]
        first = encoder.encode([example.sentences[0] for example in scored],
                               normalize_embeddings=True, show_progress_bar=False)
        second = encoder.encode([example.sentences[1] for example in scored],
                                normalize_embeddings=True, show_progress_bar=False)
        gold = np.array([example.score if example.score is not None else example.label
                         for example in scored], dtype=np.float64)
        pair_cell = f"{np.corrcoef(np.sum(first * second, axis=1), gold)[0, 1]:.3f}"
    return [name, config.model.name, dataset, str(len(texts)), f"{stats['norm']:.2f}",
            f"{stats['cosine']:.3f}", f"{stats['along_mean']:.3f}", pair_cell]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run names under $RUNS")
    parser.add_argument("--sentences", type=int, default=2000, help="test sentences per run")
    args = parser.parse_args()
    header = ["run", "model", "dataset", "sentences", "mean norm", "mean cosine (different)",
              "second moment along the mean", "pair cosine vs gold (Pearson)"]
    rows = [run_row(name, args.sentences) for name in args.runs]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    OUT.write_text("Sentence-vector geometry of trained runs (best dev checkpoint, test "
                   "sentences), written by `python -m reports.geometry "
                   + " ".join(args.runs) + "`.\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

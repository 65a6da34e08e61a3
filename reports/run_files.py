"""The run files committed in results/: where they are, and reading their markdown tables.

A run file is a copy of a run's results.md (one table row per model trained by the run: dev and
test metrics at the best dev checkpoint, steps, parameters, time, memory; a translation run adds
sacrebleu's line per model) or a report a benchmark or evaluation script wrote.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
ENCODER_RUNS = RESULTS / "encoders" / "runs"
BLEU = re.compile(r"^(\w+): sacrebleu .*?BLEU = ([\d.]+)", re.MULTILINE)
SEED = re.compile(r"_s(\d+)$")


def read_rows(path: Path, index: int = 0) -> list[dict[str, str]]:
    """The rows of a run file's markdown table number `index` (0: the first), as
    {column: cell}."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    starts = [i for i, line in enumerate(lines) if line.startswith("| ")
              and (i == 0 or not lines[i - 1].startswith("|"))]
    start = starts[index]
    header = _cells(lines[start])
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, _cells(line), strict=True)))
    return rows


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def row(path: Path, model: str | None = None) -> dict[str, str]:
    """The row of `model` in a run file (the first row when None)."""
    rows = read_rows(path)
    if model is None:
        return rows[0]
    found = [r for r in rows if r["model"] == model]
    if len(found) != 1:
        raise ValueError(f"{path}: {len(found)} rows of model {model!r}")
    return found[0]


def value(cell: str) -> float:
    """A cell's number ("1,234.5" -> 1234.5)."""
    return float(cell.replace(",", ""))


def bleu(path: Path) -> dict[str, float]:
    """model -> corpus BLEU of sacrebleu's line in a translation run's file."""
    return {model: float(score) for model, score in BLEU.findall(path.read_text(encoding="utf-8"))}


def seeded(folder: Path, prefix: str, suffix: str = ".md") -> dict[int, Path]:
    """seed -> run file `<prefix>_s<seed><suffix>` of `folder`."""
    found = {}
    for path in folder.glob(f"{prefix}_s*{suffix}"):
        match = SEED.search(path.stem)
        if match and path.stem == f"{prefix}_s{match[1]}":
            found[int(match[1])] = path
    return dict(sorted(found.items()))

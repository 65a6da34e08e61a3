"""Markdown of the reports: number formats, tables, and the tables kept in documents between
`<!-- SCRIPT: NAME -->` and `<!-- /SCRIPT -->` markers (SCRIPT `tables.py`: the per-model pages'
tables, `table.py`: the encoder tables; reports.pages says which builds each) and rewritten
there from their rebuild."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

DASH = "—"


def percent(fraction: float) -> str:
    """A fraction in %, 2 decimals."""
    return f"{100 * fraction:.2f}"


def mean_std(values: Sequence[float], form: Callable[[float], str] = percent) -> str:
    """"mean ± sample std" of `values` in `form`; the value alone for one, — for none."""
    if not values:
        return DASH
    if len(values) == 1:
        return form(values[0])
    return f"{form(statistics.mean(values))} ± {form(statistics.stdev(values))}"


def per_seed(values: Sequence[float], form: Callable[[float], str] = percent) -> str:
    """`values` in `form`, joined by " / "; — for none."""
    return " / ".join(form(v) for v in values) if values else DASH


def bold(cell: str) -> str:
    """`cell` in bold (— stays plain)."""
    return f"**{cell}**" if cell != DASH else cell


def bold_best(cells: list[str], scores: list[float | None]) -> list[str]:
    """`cells` with the one of the highest score in bold."""
    known = [s for s in scores if s is not None]
    if not known:
        return cells
    best = max(known)
    return [bold(c) if s == best else c for c, s in zip(cells, scores, strict=True)]


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table of `header` and `rows`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def copied(rows: Sequence[dict[str, str]]) -> str:
    """Rows read from a report, as a markdown table with the report's own columns."""
    return markdown(list(rows[0]), [list(r.values()) for r in rows])


def marker(script: str) -> re.Pattern:
    """The pattern of one table marked for `script`: group 1 its name, group 2 its body."""
    name = re.escape(script)
    return re.compile(rf"<!-- {name}: (\w+) -->\n(.*?)<!-- /{name} -->", re.DOTALL)


def rewritten(text: str, script: str, render: Callable[[str], str]) -> str:
    """`text` with every table marked for `script` replaced by `render(its name)`."""
    return marker(script).sub(
        lambda match: f"<!-- {script}: {match[1]} -->\n{render(match[1])}\n<!-- /{script} -->",
        text)


def stale_documents(documents: Sequence[Path], rewrite: Callable[[str, Path], str],
                    write: bool = False) -> list[Path]:
    """The documents that `rewrite(text, document)` changes (rewritten in place when `write`)."""
    stale = []
    for document in documents:
        text = document.read_text(encoding="utf-8")
        new = rewrite(text, document)
        if new != text:
            stale.append(document)
            if write:
                document.write_text(new, encoding="utf-8")
    return stale

"""Tables kept in markdown documents between `<!-- SCRIPT: NAME -->` and `<!-- /SCRIPT -->`
markers, rebuilt by the script SCRIPT (results/encoders/table.py: `table.py`,
results/tables.py: `tables.py`) from committed run files: the rewriting and the command line
both scripts share.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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


def main(description: str, tables: Mapping[str, Callable[[], str]], documents: Sequence[Path],
         rewrite: Callable[[str, Path], str], argv: Sequence[str] | None = None) -> int:
    """Prints the named tables, or with --write / --check rewrites / checks every document's
    marked tables; exit 1 when --check finds one out of date."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("tables", nargs="*", default=list(tables), help=", ".join(tables))
    parser.add_argument("--write", action="store_true", help="rewrite the tables in place")
    parser.add_argument("--check", action="store_true", help="exit 1 when a table differs")
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        for name in args.tables:
            print(f"{name}:\n{tables[name]()}\n")
        return 0
    stale = stale_documents(documents, rewrite, write=args.write)
    if stale:
        names = ", ".join(str(path.relative_to(REPO)) for path in stale)
        print(f"{'rewrote' if args.write else 'out of date'}: {names}")
    return 1 if stale and args.check else 0

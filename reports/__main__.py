"""Every generated table of README.md, docs/ and results/, rebuilt from the run files committed
in results/ (reports.pages says which table goes where).

  python -m reports [NAME ...]     # print
  python -m reports --write        # rewrite the marked tables of every page
  python -m reports --check        # exit 1 when a page's table differs from its rebuild
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from reports import pages
from reports.run_files import REPO


def main(argv: Sequence[str] | None = None) -> int:
    """Prints the named tables, or with --write / --check rewrites / checks every document's
    marked tables; exit 1 when --check finds one out of date."""
    names = [*pages.TABLES, *pages.ENCODER_TABLES]
    parser = argparse.ArgumentParser(prog="python -m reports",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="*", default=names, metavar="NAME", help=", ".join(names))
    parser.add_argument("--write", action="store_true", help="rewrite the tables in place")
    parser.add_argument("--check", action="store_true", help="exit 1 when a table differs")
    args = parser.parse_args(argv)
    unknown = [name for name in args.tables if name not in names]
    if unknown:
        parser.error(f"unknown table {', '.join(unknown)} (known: {', '.join(names)})")
    if not (args.write or args.check):
        for name in args.tables:
            print(f"{name}:\n{pages.build(name)}\n")
        return 0
    stale = pages.stale_documents(write=args.write)
    if stale:
        listed = ", ".join(str(path.relative_to(REPO)) for path in stale)
        print(f"{'rewrote' if args.write else 'out of date'}: {listed}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())

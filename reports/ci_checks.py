"""The table of results/ci/README.md: one row per fresh-clone `.ci/run` check, from its record
in results/ci (`<date>T<HHMM>_<commit>.txt`, named by when it started: what the check printed
from the end of the main job on, and `time`'s `real`)."""

from __future__ import annotations

import re
from pathlib import Path

from reports.markdown import markdown
from reports.run_files import RESULTS

CI_DIR = RESULTS / "ci"
CI_PAGE = CI_DIR / "README.md"
GOAL_S = 20 * 60  # a check within 20 minutes
_RECORD = re.compile(r"^(\d{4}-\d\d-\d\d)T\d{4}_([0-9a-f]{7,40})\.txt$")
_FOUND = {
    "main job s": r"^== main job took (\d+) s$",
    "tests s": r"^== tests took (\d+) s$",
    "passed": r"^(?:\d+ failed, )?(\d+) passed",
    "failed": r"^(\d+) failed, \d+ passed",
    "real": r"^real\s+(\d+)m([\d.]+)s$",
    "exit": r"^exit (\d+)$",
}


def read_record(path: Path) -> dict[str, str]:
    """A check's date, commit and figures (`_FOUND`; "failed" is 0 when no line names it)."""
    date, commit = _RECORD.match(path.name).groups()
    text = path.read_text()
    found = {"date": date, "commit": commit, "failed": "0"}
    for name, pattern in _FOUND.items():
        match = re.search(pattern, text, re.MULTILINE)
        if match and name == "real":
            found[name] = str(round(int(match.group(1)) * 60 + float(match.group(2))))
        elif match:
            found[name] = match.group(1)
    missing = sorted(set(_FOUND) - set(found))
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)} line (a .ci/run record names them)")
    return found


def records() -> list[dict[str, str]]:
    """Every record of results/ci, oldest first."""
    return [read_record(p) for p in sorted(CI_DIR.iterdir()) if _RECORD.match(p.name)]


def ci_checks_table() -> str:
    """Commit, date, install + main job s, tests s (tools' install included), tests passed and
    failed, the whole check's minutes and whether it met the goal and passed."""
    rows = records()
    return markdown(
        ["commit", "date", "install + main job s", "tests s", "passed", "failed", "check min",
         "within 20 min", "green"],
        [[r["commit"], r["date"], r["main job s"], r["tests s"], r["passed"], r["failed"],
          f"{int(r['real']) / 60:.1f}", "yes" if int(r["real"]) <= GOAL_S else "no",
          "yes" if r["exit"] == "0" else "no"] for r in rows])


def record_text(log: str, commit: str, date: str, machine: str) -> str:
    """A check's record from its whole log (`time .ci/run` of a fresh clone on `machine`, e.g.
    "2 CPU cores, Intel Xeon"): a first line saying what it is, then the log's lines from the
    end of the main job on, without pip's warnings, the tests' progress dots and pytest's skip
    summary."""
    lines = log.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("== main job took")), None)
    if start is None:
        raise ValueError("the log has no '== main job took' line: not a .ci/run log")
    kept = [line for line in lines[start:] if line.strip()
            and not re.fullmatch(r"[.sFEx]+\s*(\[\s*\d+%\])?", line)
            and not line.startswith(("SKIPPED ", "WARNING: "))
            and "short test summary info" not in line]
    head = (f"A fresh-clone `.ci/run` of commit {commit} ({date}, {machine}) "
            "under `time`: the lines it printed from the end of the main job on, pip's warnings "
            "and the tests' progress dots left out; `real` is the whole check, install included.")
    return "\n".join([head, "", *kept]) + "\n"


def main(argv: list[str] | None = None) -> None:
    """`python -m reports.ci_checks LOG --commit C --started 2026-12-07T0717`: writes the
    check's record into results/ci (then `python -m reports --write` rebuilds the table)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("log", type=Path, help="the whole output of `time .ci/run`")
    parser.add_argument("--commit", required=True, help="the commit the fresh clone checked out")
    parser.add_argument("--started", required=True, help="when the check started, "
                        "YYYY-MM-DDTHHMM (UTC)")
    parser.add_argument("--machine", help="what ran the check (default: this machine's cores "
                        "and CPU model, as bench.machine reads them)")
    args = parser.parse_args(argv)
    if args.machine is None:
        from bench.machine import machine

        host = machine()
        args.machine = f"{host['nproc']} CPU cores, {host['cpu_model']}"
    name = f"{args.started}_{args.commit}.txt"
    if not _RECORD.match(name):
        parser.error(f"--started {args.started!r} / --commit {args.commit!r} make no record "
                     "name <YYYY-MM-DD>T<HHMM>_<commit>.txt")
    path = CI_DIR / name
    path.write_text(record_text(args.log.read_text(), args.commit, args.started[:10],
                                args.machine))
    read_record(path)  # every figure of the table is there
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

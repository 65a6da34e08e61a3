"""The repository speaks of itself only: no tracked text file names a numbered work period or a
numbered ticket ("<period> 12", "<ticket> 13", "as <filed>", ...). A change is described by what
it does and, where its history matters, by a date or a commit; a benchmark variant by what it
is. Checked on every file `git ls-files` lists, except binary files, stored benchmark results
(results/**/*.json, whose variant labels and goal texts are data written by older code) and
tests/data/."""

import fnmatch
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SKIPPED = ("results/*.json", "results/**/*.json", "tests/data/*")

# Built from pieces so that this file does not match its own patterns.
_PERIOD, _TICKET = "sess" + "ion", "iss" + "ue"
PATTERNS = tuple(re.compile(pattern, re.IGNORECASE) for pattern in (
    rf"\b{_PERIOD}s? \d",
    rf"\b{_PERIOD}-\d",
    rf"\b{_TICKET}s? \d",
    r"\bas " + "filed" + r"\b",
    rf"\bthe {_TICKET} found\b",
    rf"\bas the {_TICKET} found\b",
    rf"\b{_TICKET}[- ]time\b",
))


def tracked_files() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                                check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [name for name in listed.decode("utf-8").split("\0") if name]


def skipped(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in SKIPPED)


def offending_lines(names: list[str]) -> list[str]:
    """`file:line: text` of every line of the text files `names` that matches a pattern."""
    found = []
    for name in names:
        path = REPO / name
        if skipped(name) or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if any(pattern.search(line) for pattern in PATTERNS):
                found.append(f"{name}:{number}: {line.strip()[:160]}")
    return found


def test_patterns_catch_project_process_language():
    lines = [f"measured in {_PERIOD} 10's check", f"the {_PERIOD}-6 table",
             f"{_PERIOD.title()}s 5-6", f"as {_TICKET} 13 found it", f"{_TICKET.upper()} 14",
             "as " + "filed", f"the blocked step as the {_TICKET} found it", f"the {_TICKET}-time"
             " reference"]
    assert all(any(pattern.search(line) for pattern in PATTERNS) for line in lines)
    fine = ["@pytest.fixture(scope='session')", "start_new_session=True",
            "the issuer of 3 tokens", "profiled at 2 cores"]
    assert not any(pattern.search(line) for pattern in PATTERNS for line in fine)


def test_no_tracked_file_speaks_of_work_periods_or_tickets():
    found = offending_lines(tracked_files())
    assert not found, ("project-process language (say what the change does, with a date or a "
                       "commit where history matters):\n" + "\n".join(found))

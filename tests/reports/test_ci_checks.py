"""A CI record keeps what the check printed from the end of the main job on and nothing of the
install's noise or the progress dots, and the table reads every figure from it."""

import pytest

from reports import ci_checks

LOG = """== main job: python3 -m venv .venv && pip install -q -r requirements.txt
WARNING: Location 'file:///opt/x' is ignored: it is neither a file nor a directory.
== main job took 301 s
== tests: python -m pytest -q -n 2 --durations=20
bringing up nodes...
........................................................................ [ 50%]
....................................s...............F................... [100%]
============================= slowest 20 durations =============================
30.10s call     tests/test_a.py::test_slow
=========================== short test summary info ============================
SKIPPED [1] tests/test_b.py:9: benepar not installed
FAILED tests/test_c.py::test_broken
1 failed, 140 passed, 1 skipped in 700.00s (0:11:40)
== tests took 712 s
== lint
All checks passed!

real\t17m41.500s
user\t28m1.000s
sys\t2m2.000s
exit 1
"""


def test_a_record_keeps_the_summary_and_the_table_reads_it(tmp_path, monkeypatch):
    text = ci_checks.record_text(LOG, "abc1234", "2026-12-07", "2 CPU cores, a test CPU")
    assert text.startswith("A fresh-clone `.ci/run` of commit abc1234 (2026-12-07, 2 CPU cores, a "
                           "test CPU)")
    assert "WARNING" not in text and "...." not in text and "SKIPPED" not in text
    for kept in ("== main job took 301 s", "30.10s call     tests/test_a.py::test_slow",
                 "FAILED tests/test_c.py::test_broken", "== tests took 712 s", "exit 1"):
        assert kept in text.splitlines()
    monkeypatch.setattr(ci_checks, "CI_DIR", tmp_path)
    (tmp_path / "2026-12-07T0900_abc1234.txt").write_text(text)
    green = (LOG.replace("1 failed, 140", "141").replace("exit 1", "exit 0")
             .replace("17m41.500s", "21m0.000s"))
    (tmp_path / "2026-12-07T0800_0000000.txt").write_text(
        ci_checks.record_text(green, "0000000", "2026-12-07", "2 CPU cores"))
    (tmp_path / "README.md").write_text("not a record")
    assert [r["commit"] for r in ci_checks.records()] == ["0000000", "abc1234"]  # by start
    rows = ci_checks.ci_checks_table().splitlines()[2:]
    assert rows == ["| 0000000 | 2026-12-07 | 301 | 712 | 141 | 0 | 21.0 | no | yes |",
                    "| abc1234 | 2026-12-07 | 301 | 712 | 140 | 1 | 17.7 | yes | no |"]


def test_a_log_without_the_main_job_is_not_a_record():
    with pytest.raises(ValueError, match="not a .ci/run log"):
        ci_checks.record_text("pytest output only\n", "abc1234", "2026-12-07", "a machine")

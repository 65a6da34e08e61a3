"""The commands of reports/: `python -m reports` rebuilds or checks every generated table from the
repository root, each `python -m reports.<name>` command has its entry point, and results/ holds
run files, reports and pages only, no code."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from reports import pages
from reports.__main__ import main

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("encoder_runs", "cut_vectors", "corpus_report", "pos_unknown_words", "psan_table1",
            "geometry", "mrpc_baselines", "sst_breakdown")


def test_check_from_the_repository_root_finds_every_table_current():
    done = subprocess.run([sys.executable, "-m", "reports", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_one_table_prints_by_name(capsys):
    assert main(["dt_epoch", "transfer"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dt_epoch:\nOne sick_e epoch") and "\ntransfer:\n| task |" in out


def test_an_unknown_table_is_one_clear_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["no_such_table"])
    assert exit_info.value.code == 2
    assert "unknown table no_such_table (known: sst2_by_length," in capsys.readouterr().err


def test_the_two_kinds_of_tables_have_distinct_names():
    assert not set(pages.TABLES) & set(pages.ENCODER_TABLES)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_its_entry_point(name):
    assert callable(importlib.import_module(f"reports.{name}").main)


def test_results_holds_no_code():
    assert sorted((REPO / "results").rglob("*.py")) == []

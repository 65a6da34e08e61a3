"""The "Against the papers" table of docs/results.md: rebuilt unchanged from the committed files,
and every paper number in it recorded in code with the paper's table."""

import os
import re
from pathlib import Path

import pytest

from reports import pages, papers
from reports.markdown import DASH

START, END = "<!-- table.py: papers -->", "<!-- /table.py -->"
# where the papers' texts are, when present: reports.papers source prefix -> file
PAPERS_DIR = Path(os.environ.get("JAXENC_PAPERS_DIR", "/work/shared/papers"))
PAPER_FILES = {papers.SHEN: "disan_shen2018.txt", papers.WU: "psan_wu2018.txt",
               papers.MA: "dependency_transformer_ma2022.txt",
               papers.ZHANG: "meanmax_aae_zhang2018.txt",
               papers.PT_PAPER: "phrase_transformer_iclr2020_submission.txt"}


def _page_table() -> str:
    text = pages.DOCS_RESULTS.read_text(encoding="utf-8")
    assert text.count(START) == 1, f"docs/results.md needs one {START} marker"
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def _page_rows() -> list[list[str]]:
    lines = _page_table().splitlines()[2:]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]


def test_papers_is_registered_and_placed_under_against_the_papers():
    assert pages.ENCODER_TABLES["papers"] is papers.papers_table
    text = pages.DOCS_RESULTS.read_text(encoding="utf-8")
    section = text.split("## Against the papers", 1)[1].split("\n## ", 1)[0]
    assert START in section


def test_table_is_rebuilt_unchanged_from_the_committed_files():
    assert _page_table() == pages.encoder_table("papers", pages.DOCS_RESULTS).strip(), (
        "docs/results.md's papers table differs from its rebuild (fix: python -m reports "
        "--write)")


def test_every_paper_number_has_a_recorded_source():
    recorded = papers.recorded_sources()
    rows = _page_rows()
    assert rows and all(len(row) == len(papers.HEADER) for row in rows)
    for row in rows:
        number, source = row[2], row[3]
        if number == papers.NOT_REPORTED:
            assert source == DASH, row
            continue
        assert (number, source) in recorded, f"paper number {number} ({source}) not recorded"
        assert re.search(r"Table \d", source), f"{source}: no table named"


def test_every_encoder_has_rows_and_ours_has_seeds():
    rows = _page_rows()
    names = {row[0] for row in rows}
    assert {*papers.ENCODERS, "PhraseTransformer k=2", "Mean-Max AAE"} <= names
    for row in rows:
        assert int(row[5]) >= 2, f"{row[:2]}: fewer than two seeds"
        assert row[4] != DASH


@pytest.mark.skipif(not PAPERS_DIR.is_dir(), reason="the papers' texts are not here")
def test_recorded_numbers_are_printed_in_their_papers():
    for number, source in papers.recorded_sources():
        prefix = next((key for key in PAPER_FILES if source.startswith(key)), None)
        assert prefix is not None, source
        path = PAPERS_DIR / PAPER_FILES[prefix]
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        for part in number.split("/"):
            assert part in text, f"{part} ({source}) is not in {path.name}"

"""reports.corpus_report: results/meanmax_aae/corpus.md against a fresh build of the shared
data."""

import re

from reports import corpus_report


def test_committed_corpus_report_is_a_fresh_build_of_shared_data(data_root):
    """results/meanmax_aae/corpus.md (the counts results/meanmax_aae/README.md quotes) is what
    building and reading the small config's corpus from shared/data reports today."""
    fresh = corpus_report.measure(str(data_root))
    assert corpus_report.STORED.read_text(encoding="utf-8") == fresh, (
        "results/meanmax_aae/corpus.md is stale (fix: python -m reports.corpus_report)")
    kept = re.search(r"([\d,]+) of ([\d,]+) lines kept", fresh)
    assert int(kept[1].replace(",", "")) >= 0.9 * int(kept[2].replace(",", ""))

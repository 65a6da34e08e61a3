"""The decoding benchmark (python -m bench.bench_decoding): one tiny run of both decoders, greedy
and beam, checked for its rows and table, never for its timings."""

import math

import pytest

from bench import bench_decoding


def test_both_decoders_and_searches_give_a_row_each_and_a_table(capsys, tmp_path):
    out = tmp_path / "decoding.md"
    rows = bench_decoding.main(["--lengths", "3", "--batch", "2", "--beam", "2", "--source", "4",
                                "--model-dim", "8", "--ff-dim", "16", "--heads", "2",
                                "--layers", "1", "--vocab", "20", "--repeats", "1",
                                "--out", str(out)])
    assert [(row["decoder"], row["search"]) for row in rows] == [
        ("transformer", "greedy"), ("transformer", "beam"), ("meanmax", "greedy"),
        ("meanmax", "beam")]
    for row in rows:
        assert row["same"] and row["recompiles"] == 0 and row["calls"] == 1
        assert all(math.isfinite(row[key]) and row[key] > 0
                   for key in ("uncached", "cached", "ratio"))
    table = capsys.readouterr().out.rstrip().split("\n\n")[-1].splitlines()
    assert table[0].startswith("| decoder | search | length | uncached tokens/s | cached")
    assert len(table) == 2 + len(rows) and all("| yes |" in line for line in table[2:])
    written = out.read_text()  # --out: the same table, after the line naming the machine
    assert written.rstrip().endswith("\n".join(table)) and " cores, load average " in written


def test_unknown_decoders_are_refused():
    with pytest.raises(SystemExit):
        bench_decoding.main(["--decoders", "transformer,lstm"])

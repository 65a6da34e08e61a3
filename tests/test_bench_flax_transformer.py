"""The Transformer vs plain flax benchmark (python -m bench.bench_flax_transformer): the two
encoders have the same parameters to the last count, and one tiny run gives a row per length
and its table; never its timings."""

import math

from bench import bench_flax_transformer as bench


def test_the_two_encoders_are_the_same_size():
    plain = bench.parameter_count(bench.PlainEncoder())
    assert plain == bench.parameter_count(bench.JaxencClassifier())
    layer = 4 * (300 * 300 + 300) + 2 * 2 * 300 + 300 * 600 + 600 + 600 * 300 + 300
    assert plain == 10_000 * 300 + 2 * layer + 300 * 6 + 6  # table, layers, classifier


def test_one_row_per_length_and_a_table(capsys, tmp_path):
    out = tmp_path / "report.md"
    rows = bench.main(["--lengths", "3,5", "--batch", "2", "--repeats", "1", "--out", str(out)])
    assert [row["length"] for row in rows] == [3, 5]
    for row in rows:
        assert all(math.isfinite(row[key]) and row[key] > 0
                   for key in ("jaxenc_ms", "plain_ms", "ratio"))
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert table[0] == "| L | jaxenc ms | plain flax ms | plain / jaxenc |"
    assert len(table) == 2 + len(rows)
    assert out.read_text().rstrip().endswith("\n".join(table))

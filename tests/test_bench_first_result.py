"""The time-to-first-result benchmark's report (python -m bench.bench_first_result): --update
replaces one encoder's rows in place and keeps the others, also in a report written before the
settings and loads were kept in results.json; never its timings."""

import argparse
import json

from bench import bench_first_result

NUMBERS = {"total": 9.0, "start": 2.0, "data": 0.5, "trace": 1.0, "lower": 0.5, "compile": 3.0,
           "run": 2.0, "compiles": 3, "hits": 0, "train shapes": 2}


def row(model: str, cache: str, **extra) -> dict:
    return {"model": model, "dataset": bench_first_result.DATASETS[model], "cache": cache,
            **NUMBERS, **extra}


def test_update_replaces_one_encoders_rows_in_place_and_keeps_the_others(tmp_path):
    old = [row(model, cache) for model in ("bag", "meanmax_aae", "psan") for cache in
           ("cold", "warm")]
    (tmp_path / "results.json").write_text(json.dumps(old))
    (tmp_path / "report.md").write_text("Time to first result: 6 steps, dev every 3, then test "
                                        "(seconds; 2 CPU cores, load average 1.9 at the end)\n")
    previous, settings = bench_first_result._previous(tmp_path)
    assert settings == {"steps": 6, "eval_every": 3}
    assert all(r["load"] == 1.9 and r["load_at_end_of_all"] for r in previous)
    measured = [row("meanmax_aae", cache, run=1.0, load=5.5) for cache in ("cold", "warm")]
    merged = bench_first_result._merged(previous, measured + [row("disan", "cold", load=5.0)])
    assert [(r["model"], r["cache"]) for r in merged] == [
        ("bag", "cold"), ("bag", "warm"), ("meanmax_aae", "cold"), ("meanmax_aae", "warm"),
        ("psan", "cold"), ("psan", "warm"), ("disan", "cold")]
    assert merged[2:4] == measured and merged[:2] == previous[:2]
    args = argparse.Namespace(steps=6, eval_every=3, out=str(tmp_path))
    report = bench_first_result._write(merged, args)
    lines = report.splitlines()
    assert "*: when the run of every encoder ended" in lines[0]
    assert lines[2].endswith("| train shapes | load |")
    assert lines[4].endswith("| 1.9* |") and lines[6].endswith("| 5.5 |")
    assert (tmp_path / "report.md").read_text() == report
    assert bench_first_result._previous(tmp_path) == (merged, settings)  # the new format

"""Smoke test of the side-by-side benchmark runner (python -m bench.run): the smallest run that
still goes through two models, both dtypes, a same-width reference
(the bag's is the Transformer itself), two lengths and the report, checked for its schema and
sanity, never for its timings."""

import json
import math

from bench import run

MODELS = ("bag", "transformer")


def _positive(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def test_bench_run_writes_results_report_and_plots(tmp_path):
    run.main(["--tiny", "--models", ",".join(MODELS), "--lengths", "8,16", "--batch", "4",
              "--repeats", "1", "--batches", "1", "--dtype", "both", "--host", "off",
              "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["schema"] == run.SCHEMA
    assert {"settings", "machine", "matmul_peak_flops", "variants", "lines", "references",
            "rows", "ratios", "goals", "host", "wall_s"} <= set(results)
    assert _positive(results["matmul_peak_flops"]["peak"])
    assert {"nproc", "cpu_model", "load_start", "load_end", "jax"} <= set(results["machine"])
    assert set(results["lines"]) == set(MODELS)
    rows = {(row["variant"], row["length"]): row for row in results["rows"]}
    for model in MODELS:
        for length in (8, 16):
            row = rows[results["lines"][model][str(length)], length]
            assert row["status"] == "ok", row
            for kind in ("train", "encode"):
                step = row[kind]
                for key in ("compile_s", "wall_s", "sentences_per_s", "tokens_per_s",
                            "peak_mib", "flops", "flops_per_s", "of_peak"):
                    assert _positive(step[key]), (model, length, kind, key, step[key])
                assert step["recompiles"] == 0
            reference = rows[results["references"][model], length]
            assert reference["status"] == "ok" and reference["train"]["recompiles"] == 0
    assert rows["bag bf16", 8]["status"] == "ok"  # every model runs in bfloat16
    assert results["references"]["bag"] == "transformer"
    assert rows["transformer bf16", 16]["train"]["recompiles"] == 0
    assert {goal["verdict"] for goal in results["goals"]} <= {"met", "not met", "not measured"}
    report = (tmp_path / "report.md").read_text()
    assert "## Goals" in report and "transformer bf16" in report
    for plot in ("throughput.png", "memory.png"):
        assert (tmp_path / plot).stat().st_size > 1000

"""Smoke test of the side-by-side benchmark runner (python -m bench.run): the smallest run that
still goes through two models, both dtypes, a same-width reference
(the bag's is the Transformer itself), two lengths and the report, checked for its schema and
sanity, never for its timings."""

import json
import math

import jax
import jax.numpy as jnp
import pytest

from bench import kernels, run
from bench.goals import MET, NOT_MET, goals
from bench.host_rates import packing_plan_rate
from bench.plan import Variant, loop_settings, plan_variants, with_loop_settings
from bench.rows import DISAN_BLOCKED_32BIT, axis_label
from jaxenc.layers import multidim_attention
from jaxenc.layers.multidim_attention import resolve_impl
from jaxenc.models.registry import build_encoder

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
                for key in ("compile_s", "cached_compile_s", "wall_s", "sentences_per_s",
                            "tokens_per_s", "peak_mib", "flops", "flops_per_s", "of_peak"):
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
    assert "compile time with the persistent compilation cache" in report
    for plot in ("throughput.png", "memory.png"):
        assert (tmp_path / plot).stat().st_size > 1000


def test_the_attention_loops_are_set_for_the_backend():
    """One example / phrase per loop step on a CPU, the whole batch / class on accelerators;
    a width preset's own value wins, and every variant's config carries them."""
    assert loop_settings("cpu") == {"disan": {"examples_per_step": 1},
                                    "psan": {"packed_chunk": 1, "examples_per_step": 1}}
    assert loop_settings("gpu") == {"disan": {"examples_per_step": 0},
                                    "psan": {"packed_chunk": 0, "examples_per_step": 0}}
    widths = with_loop_settings({"psan": {"model_dim": 8, "packed_chunk": 4}}, "tpu")
    assert widths["psan"] == {"model_dim": 8, "packed_chunk": 4, "examples_per_step": 0}
    assert widths["disan"] == {"examples_per_step": 0}
    plan = plan_variants(["disan", "psan"], ("float32",), with_loop_settings({}, "gpu"))
    for variant in plan.variants:
        config = variant.config(with_loop_settings({}, "gpu"))
        if variant.model == "psan":
            assert config.packed_chunk == config.examples_per_step == 0
        if variant.model == "disan":
            assert config.examples_per_step == 0


@pytest.mark.parametrize("length", [8, 16, 64])
def test_disan_preset_line_is_the_kernel_the_model_computes(length, monkeypatch):
    """The report's DiSAN row (and its encode timing) is the variant `auto` really picks:
    recorded while tracing the model itself, directional masks and scaled tanh included."""
    picked = []

    def recording(*args, **kwargs):
        picked.append(resolve_impl(*args, **kwargs))
        return picked[-1]

    monkeypatch.setattr(multidim_attention, "resolve_impl", recording)
    widths = {"disan": dict(embed_dim=6, hidden=4)}
    model = build_encoder(Variant("disan", "disan").config(widths), 11)
    batch = {"tokens": jnp.ones((2, length), jnp.int32), "lengths": jnp.full((2,), length)}
    jax.eval_shape(lambda: model.init(jax.random.key(0), batch, train=False))
    plan = plan_variants(["disan"], ("float32",), widths)
    assert set(picked) == {"dense" if length < 16 else "directional"}
    assert plan.lines["disan"](length) == axis_label("disan", "attention_impl", picked[0])


def _speed_results(times_ms: dict[str, float]) -> dict:
    """A results dict with DiSAN rows at L=64 and 128: `times_ms` maps an attention_impl label
    (or DISAN_BLOCKED_32BIT) to its train step time, the same at both lengths."""
    rows = [dict(variant=label, length=length,
                 train=dict(wall_s=ms / 1e3, peak_mib=100.0, temp_mib=50.0, recompiles=0))
            for label, ms in times_ms.items() for length in (64, 128)]
    return dict(axes={"disan": dict(choices=["dense", "blocked", "directional"])},
                settings=dict(lengths=[64, 128]), rows=rows, ratios=dict(psan_vs_disan=[]),
                host={})


def _speed_goal(results: dict) -> dict:
    [goal] = [goal for goal in goals(results)
              if goal["goal"].startswith("DiSAN directional: train step")]
    return goal


def test_disan_speed_goal_compares_with_blocked_at_32bit_dropout():
    """The plan times DiSAN's blocked step with 32-bit dropout beside the axis; the goal row
    takes it as the reference, and falls back to blocked at the default dropout without it."""
    plan = plan_variants(["disan"], ("float32",), {})
    [found] = [variant for variant in plan.variants if variant.label == DISAN_BLOCKED_32BIT]
    config = found.config({})
    assert (config.attention_impl, config.dropout_bits) == ("blocked", 32)
    label = lambda impl: axis_label("disan", "attention_impl", impl)
    times = {label("dense"): 2000.0, label("blocked"): 900.0, label("directional"): 500.0}
    goal = _speed_goal(_speed_results({**times, DISAN_BLOCKED_32BIT: 1000.0}))
    assert "with 32-bit dropout masks" in goal["goal"]
    assert goal["measured"] == "L=64: 2.00x; L=128: 2.00x" and goal["verdict"] == MET
    goal = _speed_goal(_speed_results(times))
    assert "with 32-bit dropout masks" not in goal["goal"]
    assert goal["measured"] == "L=64: 1.80x; L=128: 1.80x" and goal["verdict"] == MET
    goal = _speed_goal(_speed_results({**times, DISAN_BLOCKED_32BIT: 800.0}))
    assert goal["verdict"] == NOT_MET


def test_the_host_section_measures_psans_packing_plan(data_root):
    """The packing-plan rate of the host section on real SST phrase blocks: packed attention
    elements between the data's own bound and dense."""
    from bench import bench_packing

    packing = packing_plan_rate(bench_packing.sst_features(data_root)[:512])
    assert _positive(packing["sentences_per_s"])
    assert 0 < packing["bound"] <= packing["packed"] < 1


def test_kernels_only_writes_the_counts_without_timing(tmp_path, capsys):
    """--kernels-only compiles each variant's train step with the GPU loop settings and writes
    its kernel count and H100 bound (the largest of its three terms), nothing timed."""
    run.main(["--tiny", "--kernels-only", "--models", "bag,disan", "--lengths", "8",
              "--batch", "2", "--dtype", "float32", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["settings"]["kernels_only"] and "host" not in results
    rows = {row["variant"]: row for row in results["rows"]}
    assert set(rows) == {variant["label"] for variant in results["variants"]}
    for variant in results["variants"]:
        if variant["model"] == "disan":
            assert variant["config"]["examples_per_step"] == 0
    for label, row in rows.items():
        step = row["train"]
        assert row["encode"] is None and "wall_s" not in step, label
        assert isinstance(step["kernels"], int) and step["kernels"] > 0, label
        assert step["kernels_exact"] and _positive(step["bytes_accessed"]), label
        terms = {"FLOPs": step["flops"] / kernels.H100_PEAK_FLOPS["float32"],
                 "bytes": step["bytes_accessed"] / kernels.H100_BANDWIDTH,
                 "launches": step["kernels"] * kernels.LAUNCH_S}
        assert step["h100_bound_s"] == pytest.approx(max(terms.values())), label
        assert terms[step["h100_bound_by"]] == max(terms.values()), label
    assert rows["bag"]["train"]["kernels"] < rows["disan attention_impl=dense"]["train"]["kernels"]
    report_text = (tmp_path / "report.md").read_text()
    printed = capsys.readouterr().out
    for label, row in rows.items():
        line = f"| {label} | 8 | {row['train']['kernels']:,} |"
        assert line in report_text and line in printed
    assert not (tmp_path / "throughput.png").exists()

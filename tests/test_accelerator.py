"""The GPU run's CPU check (bench/accelerator.py --smoke) and the list of wheels it carries
(bench/device_wheels.py): every stage reports, the folder stays within what comes back from the
GPU machine, and nothing a stage imports is missing from the wheels or the image."""

import json

import jax
import pytest

from bench import accelerator, bench_flax_transformer, bench_torch_transformer, device_wheels

MAX_FILES = 8  # what the GPU machine sends back from one command


def test_carried_wheels_are_requirements_minus_the_image_and_what_no_stage_imports():
    pins = device_wheels.requirement_pins()
    carried = device_wheels.carried_requirements(pins)
    assert set(carried) == set(pins) - device_wheels.IMAGE - set(device_wheels.NOT_IMPORTED)
    assert all(carried[name] == pins[name] for name in carried)
    # every exclusion names a requirement the image lacks, so that it is a decision, not a typo
    assert set(device_wheels.NOT_IMPORTED) <= set(pins) - device_wheels.IMAGE
    assert {"grain", "ml-collections"} <= set(carried)  # imported by jaxenc and bench.run
    assert not {"jax", "flax", "optax", "spacy"} & set(carried)


def test_carried_dependencies_are_the_ones_the_image_lacks():
    pins = device_wheels.wheel_pins()
    assert "portpicker" in pins  # grain's, not in the image
    assert not set(pins) & device_wheels.IMAGE


def test_torch_bench_has_the_flax_bench_sizes():
    names = ("VOCAB", "WIDTH", "LAYERS", "HEADS", "FFN", "CLASSES")
    assert [getattr(bench_torch_transformer, name) for name in names] == \
        [getattr(bench_flax_transformer, name) for name in names]


def test_bad_stage_is_one_line_naming_the_flag(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        accelerator.main(["--smoke", "--stages", "devices,warp", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert "--stages" in error and "warp" in error and len(error.splitlines()) == 1


@pytest.mark.slow
def test_smoke_run_reports_every_stage(tmp_path):
    out = tmp_path / "gpu"
    # a generous limit: the stages end when done; a loaded machine must not cut them here
    state = accelerator.main(["--smoke", "--out", str(out), "--time_limit_s", "400"])
    files = sorted(path.name for path in out.iterdir())
    assert {"report.md", "results.json"} <= set(files) and len(files) <= MAX_FILES
    assert all((out / name).is_file() for name in files)
    saved = json.loads((out / "results.json").read_text())
    stages = saved["stages"]
    assert list(stages) == list(accelerator.STAGES) == list(state["stages"])
    for name, result in stages.items():
        expected = {"ok", "skipped"} if name == "torch" else {"ok"}
        assert result["status"] in expected, (name, result)
    assert stages["devices"]["matmul_peak_flops"]["bfloat16"] > 0
    rows = stages["bench_b64"]["bench"]["rows"]
    assert {(row["variant"], row["length"]) for row in rows if row["status"] == "ok"} >= {
        ("bag", 8), ("bag", 16), ("bag bf16", 8), ("transformer", 16)}
    assert stages["bench_b512"]["bench"]["settings"]["batch"] == 8
    assert all(row["jaxenc_ms"] > 0 and row["plain_ms"] > 0 for row in stages["flax"]["rows"])
    if stages["torch"]["status"] == "skipped":
        assert stages["torch"]["skipped"]
    job = stages["main_job"]
    assert job["exit_code"] == 0 and 0 < job["first_result_s"] < job["seconds"]
    assert "| bag | synthetic |" in job["results_md"]
    wheels = set(device_wheels.wheel_pins())
    for name, result in stages.items():
        assert set(result.get("imported_beyond_image", [])) <= wheels, name
    report = (out / "report.md").read_text()
    for name in stages:
        assert f"| {name} | {stages[name]['status']} |" in report
    assert "## The main job" in report and "## Encoders, batch 4" in report
    assert (out / "throughput_b64.png").stat().st_size > 0


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="this machine has a GPU")
def test_a_run_without_gpu_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        accelerator.main(["--stages", "devices", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert "no GPU" in error and "--smoke" in error and len(error.splitlines()) == 1
    # the refused run still leaves its report
    assert json.loads((tmp_path / "results.json").read_text())["stages"]["devices"]["status"] \
        == "ok"

"""train.compare: grouping of runs by config and mean ± std over seeds, on run directories
written here in train.main's format (config.json + metrics.jsonl)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jaxenc.errors import DataError
from jaxenc.training import compare, run_files
from jaxenc.training.run_report import MetricsLog
from train.configs import base


def _write_run(workdir, model, seed, dev_by_step, best_step, test_accuracy, **overrides):
    config = base.get_config(f"{model},sick_e")
    config.train.seed = seed
    for key, value in overrides.items():
        section, name = key.split(".")
        config[section][name] = value
    workdir.mkdir(parents=True)
    (workdir / run_files.CONFIG_FILE).write_text(json.dumps(config.to_dict()))
    log = MetricsLog(workdir / "metrics.jsonl")
    for step, accuracy in dev_by_step.items():
        log.write(step, "train", {"loss": 1.0 / step})
        log.write(step, "dev", {"accuracy": accuracy, "loss": 0.5})
    log.write(best_step, "test", {"accuracy": test_accuracy, "loss": 0.6})
    return workdir


def test_groups_by_config_and_averages_the_best_dev_step(tmp_path):
    rng = np.random.default_rng(0)
    tests = rng.uniform(0.7, 0.9, size=3)
    devs = rng.uniform(0.7, 0.9, size=(3, 2))
    runs = [_write_run(tmp_path / f"disan_s{seed}", "disan", seed, {10: devs[seed, 0],
                                                                  20: devs[seed, 1]},
                       best_step=10 + 10 * (seed % 2), test_accuracy=tests[seed])
            for seed in range(3)]
    runs.append(_write_run(tmp_path / "disan_k09", "disan", 0, {10: 0.8}, 10, 0.81,
                           **{"model.keep_prob": 0.9}))
    runs.append(_write_run(tmp_path / "bag", "bag", 0, {10: 0.7}, 10, 0.75))
    rows = compare.summary_rows([compare.read_run(run) for run in runs])

    assert [row["runs"] for row in rows] == [
        "disan sick_e model.keep_prob=0.75", "disan sick_e model.keep_prob=0.9", "bag sick_e"]
    assert [row["seeds"] for row in rows] == ["0,1,2", "0", "0"]
    best_devs = [devs[0, 0], devs[1, 1], devs[2, 0]]  # best steps 10, 20, 10
    assert rows[0]["test accuracy"] == (
        f"{np.mean(tests):.4f} ± {np.std(tests, ddof=1):.4f}")
    assert rows[0]["dev accuracy"] == (
        f"{np.mean(best_devs):.4f} ± {np.std(best_devs, ddof=1):.4f}")
    assert rows[1]["test accuracy"] == "0.8100" and rows[2]["dev accuracy"] == "0.7000"


def test_a_run_with_a_baseline_twin_groups_with_the_same_run_without_one(tmp_path):
    twin = _write_run(tmp_path / "twin", "disan", 0, {10: 0.80}, 10, 0.82)
    config = json.loads((twin / run_files.CONFIG_FILE).read_text())
    config["baselines"] = {"transformer": base.get_config("transformer,sick_e").model.to_dict()}
    (twin / run_files.CONFIG_FILE).write_text(json.dumps(config))
    solo = _write_run(tmp_path / "solo", "disan", 1, {10: 0.78}, 10, 0.80)
    other = _write_run(tmp_path / "other", "disan", 0, {10: 0.7}, 10, 0.7,
                       **{"model.keep_prob": 0.9})
    rows = compare.summary_rows([compare.read_run(run) for run in (twin, solo, other)])

    assert [(row["runs"], row["seeds"]) for row in rows] == [
        ("disan sick_e model.keep_prob=0.75", "0,1"), ("disan sick_e model.keep_prob=0.9", "0")]
    assert rows[0]["test accuracy"] == f"0.8100 ± {np.std([0.82, 0.80], ddof=1):.4f}"


def test_unfinished_and_foreign_directories_are_named(tmp_path, capsys):
    run = _write_run(tmp_path / "run", "bag", 0, {10: 0.7}, 10, 0.75)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # no test record yet
    with pytest.raises(DataError, match=r"run/metrics.jsonl: no test result.*let the run finish"):
        compare.read_run(run)
    with pytest.raises(DataError, match=r"elsewhere/config.json: file not found"):
        compare.read_run(tmp_path / "elsewhere")
    with pytest.raises(SystemExit, match="2"):
        compare.main([str(tmp_path / "elsewhere")])
    assert "error: " in capsys.readouterr().err
    finished = _write_run(tmp_path / "finished", "bag", 1, {10: 0.7}, 10, 0.75)
    table = compare.main([str(finished), "--output", str(tmp_path / "table.md")])
    assert (tmp_path / "table.md").read_text() == table + "\n"
    assert "| bag sick_e | 1 | 0.7000 | 0.7500 |" in capsys.readouterr().out


@pytest.mark.parametrize("saved, missing", [
    ({}, "model.name and task.dataset"),
    ({"model": {"name": "bag"}, "train": {"seed": 0}}, "task.dataset"),
])
def test_a_config_without_model_or_dataset_is_named_in_one_line(tmp_path, capsys, saved, missing):
    run = _write_run(tmp_path / "run", "bag", 0, {10: 0.7}, 10, 0.75)
    (run / run_files.CONFIG_FILE).write_text(json.dumps(saved))
    with pytest.raises(SystemExit, match="2"):
        compare.main([str(run)])
    assert capsys.readouterr().err == (
        f"error: {run / run_files.CONFIG_FILE}: lacks {missing}, which every train.main "
        "config has (fix: give run directories written by python -m train.main)\n")


def test_a_config_naming_an_unknown_model_names_the_file(tmp_path):
    run = _write_run(tmp_path / "run", "bag", 0, {10: 0.7}, 10, 0.75)
    (run / run_files.CONFIG_FILE).write_text(json.dumps(
        {"model": {"name": "lstm"}, "task": {"dataset": "sick_e"}}))
    with pytest.raises(DataError, match=r"run/config.json: unknown model 'lstm'"):
        compare.read_run(run)


def test_a_run_named_twice_is_counted_once(tmp_path, capsys):
    runs = [_write_run(tmp_path / f"s{seed}", "bag", seed, {10: 0.7 + seed / 10}, 10,
                       0.75 + seed / 10) for seed in range(2)]
    (tmp_path / "link").symlink_to(runs[0])
    table = compare.main([str(runs[0]), str(runs[1]), f"{runs[0]}/", str(tmp_path / "link")])
    assert table == compare.main([str(run) for run in runs])
    assert "| bag sick_e | 0,1 |" in table
    notes = capsys.readouterr().err.splitlines()
    assert notes == [f"note: {runs[0]}/ is the run {runs[0]} again; counted once",
                     f"note: {tmp_path / 'link'} is the run {runs[0]} again; counted once"]


def _write_main_job(root, baselines):
    """A train.main workdir as experiment.run leaves it: the top-level run (DiSAN) whose config.json
    names its baselines, and each baseline's run in baselines/<name> (finished unless its dev
    results are None)."""
    top = _write_run(root, "disan", 0, {10: 0.8}, 10, 0.81)
    config = json.loads((top / run_files.CONFIG_FILE).read_text())
    config["baselines"] = {name: base.get_config(f"{model},sick_e").model.to_dict()
                           for name, (model, _) in baselines.items()}
    (top / run_files.CONFIG_FILE).write_text(json.dumps(config))
    for name, (model, dev) in baselines.items():
        run = _write_run(top / "baselines" / name, model, 0, {10: dev or 0.5}, 10, 0.6)
        if dev is None:  # still training: no test record yet
            lines = (run / "metrics.jsonl").read_text().splitlines()
            (run / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    return top


def test_the_main_jobs_workdir_shows_every_model(tmp_path, capsys):
    top = _write_main_job(tmp_path / "default", {"transformer": ("transformer", 0.7),
                                                 "bag": ("bag", 0.55),
                                                 "psan": ("psan", 0.75)})
    (top / "baselines" / "not_a_run").mkdir()  # no config.json: not a run, not listed
    table = compare.main([str(top)])
    rows = [line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:]]
    assert rows == ["disan sick_e", "transformer sick_e", "bag sick_e", "psan sick_e"]
    assert "| disan sick_e | 0 | 0.8000 |" in table and "| bag sick_e | 0 | 0.5500 |" in table
    assert capsys.readouterr().err == ""
    # a baseline also named on the command line is counted once, where it was named
    assert compare.main([str(top / "baselines" / "bag"), str(top)]).splitlines()[2].startswith(
        "| bag sick_e | 0 |")


def test_a_baseline_still_training_is_left_out_with_a_note(tmp_path, capsys):
    top = _write_main_job(tmp_path / "default", {"bag": ("bag", 0.55),
                                                 "transformer": ("transformer", None)})
    table = compare.main([str(top)])
    assert "| bag sick_e |" in table and "transformer" not in table
    assert capsys.readouterr().err == (
        f"note: {top / 'baselines' / 'transformer'} has not finished; left out\n")
    (top / "baselines" / "transformer" / "metrics.jsonl").unlink()  # just started
    assert "| bag sick_e |" in compare.main([str(top)])
    with pytest.raises(DataError, match=r"transformer/metrics.jsonl: file not found"):
        compare.read_runs([str(top), str(top / "baselines" / "transformer")])  # named: an error

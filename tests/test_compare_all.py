"""Which encoder for my data: train/configs/compare.py trains the chosen encoders at their
families' recipes over several seeds, and the table it prints (and `train.compare` prints again)
holds each model's mean ± std, checked against the runs' own metrics files."""

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from jaxenc.errors import ConfigError
from jaxenc.training import experiment, run_files, run_report
from train.configs import base, compare

REPO = Path(__file__).resolve().parents[1]
SENTENCES = ["the team won the final .", "the team lost the final .", "a great , fast game .",
             "a slow and dull game .", "fans cheered all night .", "fans left early .",
             "what a goal !", "what a miss !"]


def test_a_dataset_kind_picks_the_recipes_and_the_argument_picks_the_encoders():
    single, pair = compare.get_config("trec"), compare.get_config("sick_r")
    assert single.model.name == "disan" and single.model.keep_prob == 0.75
    assert pair.model.keep_prob == 1.0
    assert list(single.baselines) == sorted(compare.MODELS[1:])
    # the Transformer's learning rate is its recipe's, the bag's its own, DiSAN's the common one
    assert single.optim.learning_rate == compare.COMMON["optim"]["learning_rate"]
    assert single.recipes.transformer.optim.learning_rate == 3e-4
    assert single.recipes.bag.optim.learning_rate == 3e-3
    assert single.baselines.transformer.layer_norm == "post"
    assert pair.baselines.transformer.layer_norm == "pre"
    assert pair.baselines.dependency_transformer.sentence_vector == "mean"
    assert pair.baselines.psan.freeze_embeddings and not single.baselines.psan.freeze_embeddings
    # files: single sentences unless told; the first model named is the top-level run
    chosen = compare.get_config("files,pair,transformer,bag")
    assert chosen.model.name == "transformer" and chosen.model.layer_norm == "pre"
    assert chosen.optim.learning_rate == 3e-4 and list(chosen.baselines) == ["bag"]
    for wrong in ("files,nope", "files,single,pair", "nodata"):
        with pytest.raises(ConfigError, match="expected DATASET\\[,single\\|pair\\]"):
            compare.get_config(wrong)


def test_planned_runs_lay_out_seeds_and_apply_each_baselines_recipe(tmp_path):
    config = base.get_config("bag,synthetic")
    config.optim.learning_rate = 0.5
    config.baselines.transformer = base.model_config("transformer")
    config.recipes.transformer = {"optim": {"learning_rate": 3e-4}, "train": {"patience": 2}}
    config.train.update(seed=4, seeds=3)
    runs = experiment.planned_runs(config, tmp_path)
    assert [path.relative_to(tmp_path).as_posix() for _, path in runs] == [
        ".", "baselines/transformer", "seeds/5", "seeds/5/baselines/transformer",
        "seeds/6", "seeds/6/baselines/transformer"]
    assert [(c.model.name, c.train.seed, c.train.seeds, c.optim.learning_rate, c.train.patience)
            for c, _ in runs[:2]] == [("bag", 4, 1, 0.5, 0), ("transformer", 4, 1, 3e-4, 2)]
    assert [c.train.seed for c, _ in runs] == [4, 4, 5, 5, 6, 6]
    assert not runs[1][0].baselines and not runs[1][0].recipes  # a baseline's run is one run
    assert config.optim.learning_rate == 0.5  # the config itself is left as it was

    config.recipes.transformer = {"optim": {"learnig_rate": 1e-3}}
    with pytest.raises(ConfigError, match="recipes.transformer.optim.learnig_rate: no such key"):
        experiment.planned_runs(config, tmp_path)
    config.recipes.transformer = {"model": {"num_layers": 1}}
    with pytest.raises(ConfigError, match="recipes.transformer.model.num_layers: no such key"):
        experiment.planned_runs(config, tmp_path)
    config.recipes = {"disan": {}}
    with pytest.raises(ConfigError, match="recipes.disan: no baseline 'disan'"):
        experiment.planned_runs(config, tmp_path)


def test_the_seed_summary_is_each_models_mean_and_sample_std():
    runs_of_seed = [[("a", 10, "cap", 0.5, 0.25), ("b", 8, "patience", 0.0, 1.0)],
                    [("a", 20, "patience", 0.7, 0.75), ("b", 8, "patience", 0.1, 0.5)]]
    rows = [{"model": model, "dataset": "d", "seed": seed, "params": 10, "steps": steps,
             "stopped by": stopped, "dev accuracy": dev, "test accuracy": test,
             "train s": 2 * seed, "train peak MiB": 1.0 + seed}
            for seed, runs in enumerate(runs_of_seed)
            for model, steps, stopped, dev, test in runs]
    summary = run_report.seed_summary(rows, seeds=2)
    assert [row["model"] for row in summary] == ["a", "b"]
    a, b = summary
    assert a["seeds"] == "0,1" and a["steps"] == 15 and a["train s"] == 1
    assert a["stopped by"] == "cap 1/2, patience 1/2" and b["stopped by"] == "patience 2/2"
    assert a["train peak MiB"] == 2.0
    assert a["dev accuracy"] == f"{0.6:.4f} ± {statistics.stdev([0.5, 0.7]):.4f}"
    assert b["test accuracy"] == f"{0.75:.4f} ± {statistics.stdev([1.0, 0.5]):.4f}"


def _table(text: str) -> list[dict[str, str]]:
    """The first markdown table of `text` as rows of {column: cell}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[start:end]]
    return [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]


def test_compare_trains_two_encoders_over_two_seeds_on_a_users_file(tmp_path):
    train = tmp_path / "mine.tsv"
    train.write_text("".join(f"{['win', 'loss'][i % 2]}\t{text}\n"
                             for i, text in enumerate(SENTENCES * 3)), encoding="utf-8")
    workdir = tmp_path / "runs"
    tiny = ["--config.model.embed_dim=16", "--config.task.head.hidden_dims=(16,)",
            "--config.data.embeddings=", "--config.data.batch_size=8",
            "--config.data.eval_batch_size=8", "--config.data.max_length=16",
            "--config.data.bucket_step=16", "--config.train.num_steps=3",
            "--config.train.eval_every=1", "--config.train.seeds=2",
            "--config.task.dev_fraction=0.25", "--config.task.test_fraction=0.25",
            *(f"--config.baselines.transformer.{key}={value}" for key, value in dict(
                embed_dim=16, model_dim=16, num_heads=2, ff_dim=16, num_layers=1).items())]
    done = subprocess.run(
        [sys.executable, "-m", "train.main", "--config=train/configs/compare.py:files,bag,"
         "transformer", f"--config.data.train_file={train}", f"--workdir={workdir}", *tiny],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "JAXENC_DATA_DIR": ""},
        timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = _table(done.stdout)
    assert [(row["model"], row["seeds"]) for row in printed] == [("bag", "0,1"),
                                                                 ("transformer", "0,1")]
    runs = {"bag": [workdir, workdir / "seeds/1"],
            "transformer": [workdir / "baselines/transformer",
                            workdir / "seeds/1/baselines/transformer"]}
    for row in printed:
        folders = runs[row["model"]]
        configs = [run_files.saved_config(folder) for folder in folders]
        assert [c["train"]["seed"] for c in configs] == [0, 1]
        assert {c["optim"]["learning_rate"] for c in configs} == {
            {"bag": 3e-3, "transformer": 3e-4}[row["model"]]}  # each family's recipe
        tests = [run_report.read_metrics(folder / run_report.METRICS_FILE, "test")[-1]["accuracy"]
                 for folder in folders]
        assert row["test accuracy"] == run_report.mean_std(tests)
        assert re.fullmatch(r"\d[\d,]*", row["encode sent/s"]) and int(
            row["encode sent/s"].replace(",", "")) > 0

    shown = subprocess.run([sys.executable, "-m", "train.compare", str(workdir)], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr[-3000:]
    again = _table(shown.stdout)
    assert [row["seeds"] for row in again] == ["0,1", "0,1"]
    for before, after in zip(printed, again, strict=True):
        assert after["runs"].startswith(f"{before['model']} files")
        assert after["test accuracy"] == before["test accuracy"]
        assert after["encode sent/s"] and after["train s"]
    record = json.loads((workdir / run_files.CONFIG_FILE).read_text())
    assert record["recipes"]["transformer"]["optim"]["learning_rate"] == 3e-4

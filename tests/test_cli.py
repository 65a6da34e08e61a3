"""Every command-line entry point reports bad input (a JaxencError) in one line, exit status 2."""

import subprocess
import sys
from pathlib import Path

import pytest

from jaxenc import cli
from jaxenc.errors import DataError, JaxencError

REPO = Path(__file__).resolve().parents[1]


def test_reports_errors_prints_one_line_and_exits_2(capsys):
    @cli.reports_errors
    def main(value: int) -> int:
        if value < 0:
            raise DataError("negative value", path="f.txt", line=3, fix="use 1")
        if value == 0:
            raise JaxencError("a message\n  of two lines")
        return value

    assert main(4) == 4
    for value, message in [(-1, "f.txt:3: negative value (fix: use 1)"),
                           (0, "a message of two lines")]:
        with pytest.raises(SystemExit) as exit_info:
            main(value)
        assert exit_info.value.code == 2
        assert capsys.readouterr().err == f"error: {message}\n"


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180, env=env)


def _broken_run(tmp_path: Path) -> Path:
    """A run directory whose metrics.jsonl ends in a line cut short (a killed writer)."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "config.json").write_text('{"model": {"name": "bag"}, "task": {"dataset": "trec"},'
                                         ' "train": {"seed": 0}}\n')
    (workdir / "metrics.jsonl").write_text('{"step": 1, "split": "dev", "accuracy": 0.5}\n'
                                           '{"step": 1, "split": "te')
    return workdir


@pytest.mark.parametrize("command, expected", [
    (["-m", "eval.transfer", "--encoder", "bag:{tmp}/missing.txt", "--tasks", "MR", "--out",
      "{tmp}/out", "--data_dir", "{tmp}", "--skip_missing"],
     "missing.txt: word vectors file not found"),
    (["-m", "eval.transfer", "--encoder", "bag:{tmp}/missing.txt", "--tasks", "MR", "--out",
      "{tmp}/out", "--data_dir", "{tmp}"], "mr: data folder of MR not found"),
    (["-m", "jaxenc.structures.stats", "--trees", "{tmp}/missing.txt"],
     "missing.txt: file not found"),
    (["-m", "train.compare", "{run}"], "metrics.jsonl:2: not a JSON record"),
    (["-m", "bench.bench_structures", "--data-dir", "{tmp}/nowhere"],
     "nowhere: data folder does not exist"),
    (["-m", "bench.bench_parse", "--data_dir", "{tmp}"], "stsa.fine.train: file not found"),
])
def test_entry_points_report_data_errors_in_one_line(tmp_path, command, expected):
    args = [part.format(tmp=tmp_path, run=_broken_run(tmp_path) if "{run}" in part else "")
            for part in command]
    result = _run(*args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0]


def test_a_data_error_is_one_line_whatever_its_parts_hold():
    error = DataError("name 'a\nb\u2028c' is odd", path="dir\r/f.txt", line=2, fix="x\x85y")
    assert str(error) == "dir\\r/f.txt:2: name 'a\\nb\\u2028c' is odd (fix: x\\x85y)"
    assert len(str(error).splitlines()) == 1


def test_train_help_lists_usage_models_datasets_and_config_keys():
    from jaxenc.data.registry import DATASETS
    from jaxenc.models.registry import ENCODERS

    result = _run("-m", "train.main", "--help")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "--config=train/configs/base.py:MODEL,DATASET" in out and "--helpfull" in out
    for key in ("data.batch_size=64", "optim.learning_rate=0.5", "train.patience=0",
                "checkpoint.best_k=1", "model.embed_dim=300", "model.keep_prob=0.75"):
        assert f"\n  {key} " in out or f"\n    {key} " in out, key
    assert "training examples per step" in out  # a key's meaning
    assert "d_h, the width of each direction" in out  # a model field's, from DiSANConfig
    assert all(name in out for name in [*ENCODERS, *DATASETS])


def test_train_help_shows_the_values_of_the_config_given():
    result = _run("-m", "train.main", "--config=train/configs/disan_sst5.py", "--help")
    assert result.returncode == 0, result.stderr
    assert "task.dataset='sst5_phrases'" in result.stdout
    assert "model.keep_prob=0.7 " in result.stdout and "model.memory_dim" not in result.stdout


def test_train_helpfull_lists_absl_flags():
    result = _run("-m", "train.main", "--helpfull")
    assert result.returncode == 0, result.stderr
    assert "--workdir" in result.stdout and "--verbosity" in result.stdout


@pytest.mark.parametrize("flag, message", [
    ("--config.data.batch_size=-4",
     "--config.data.batch_size=-4: must be a positive integer (fix: --config.data.batch_size=64, "
     "the config file's value)"),
    ("--config.train.num_steps=-5", "--config.train.num_steps=-5: must be an integer >= 0"),
    ("--config.data.eval_batch_size=0", "--config.data.eval_batch_size=0: must be a positive"),
    ("--config.optim.learning_rate=0", "--config.optim.learning_rate=0.0: must be a number > 0"),
    ("--config.model.dropout_rate=1.0", "--config.model.dropout_rate=1.0: must be in [0, 1)"),
    ("--config.optim.lr=0.1",
     "unknown key --config.optim.lr (did you mean --config.optim.learning_rate?)"),
    ("--config.traine.patience=3",
     "unknown key --config.traine.patience (did you mean --config.train.patience?)"),
])
def test_train_refuses_a_bad_flag_before_making_the_workdir(tmp_path, flag, message):
    workdir = tmp_path / "run"
    result = _run("-m", "train.main", "--config=train/configs/base.py:transformer,synthetic",
                  f"--workdir={workdir}", flag)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), result.stderr
    assert not workdir.exists()


def test_a_bad_flag_is_offered_the_config_files_own_value(tmp_path):
    """The main job's config sets Adam's 3e-3; the fix quotes it, not get_config's 0.5."""
    result = _run("-m", "train.main", "--config=train/configs/default.py",
                  f"--workdir={tmp_path / 'run'}", "--config.optim.learning_rate=-1")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: --config.optim.learning_rate=-1.0: must be a number > 0 (fix: "
        "--config.optim.learning_rate=0.003, the config file's value)")

"""Kill -9 in the middle of training, restart: the run continues exactly as if never killed. A
resumed run may change only what cannot change its results (recorded in config.json), must train
on the data it was trained on, and its metrics.jsonl holds one record per step. A write the
system refuses (read-only, full disk) is one line and leaves the previous checkpoints intact."""

import dataclasses
import errno
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import ml_collections
import numpy as np
import pytest

from jaxenc.errors import ConfigError, DataError, WriteError
from jaxenc.training import checkpointing, experiment, input_pipeline, loop, run_files, run_report
from train.configs import base

REPO = Path(__file__).resolve().parents[1]
NUM_STEPS, CHECKPOINT_EVERY, KILL_AFTER = 200, 20, 60
TINY = [  # dropout in the head: the resumed run must restore the RNG too
    "--config=train/configs/base.py:bag,synthetic", "--config.model.embed_dim=16",
    "--config.task.head.hidden_dims=(16,)", "--config.task.head.dropout_rate=0.3",
    "--config.data.batch_size=16", "--config.data.max_length=32", "--config.data.bucket_step=16",
    "--config.optim.name=adam", "--config.optim.learning_rate=0.003",
    f"--config.train.num_steps={NUM_STEPS}", "--config.train.eval_every=100",
    "--config.train.log_every=1", "--config.train.progress_bar=False",
    f"--config.checkpoint.every={CHECKPOINT_EVERY}",
]


def _start(workdir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "train.main", f"--workdir={workdir}", *TINY],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _checkpointed_steps(workdir: Path) -> list[int]:
    """Steps of the complete periodic checkpoints (orbax renames a checkpoint when done)."""
    folder = workdir / "checkpoints"
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() \
        else []


def _train_records(workdir: Path) -> dict[int, tuple[float, float]]:
    return {r["step"]: (r["loss"], r["grad_norm"])
            for r in run_report.read_metrics(workdir / run_report.METRICS_FILE, "train")}


def _finish(process: subprocess.Popen) -> None:
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr


def test_sigkill_then_resume_gives_the_uninterrupted_losses(tmp_path):
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    _finish(_start(reference))

    process = _start(killed)
    deadline = time.monotonic() + 240
    while not any(step >= KILL_AFTER for step in _checkpointed_steps(killed)):
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert not (killed / run_report.RESULTS_FILE).exists()  # it really died mid-run
    resumed_from = max(_checkpointed_steps(killed))
    assert KILL_AFTER <= resumed_from < NUM_STEPS

    _finish(_start(killed))
    once = [r["step"] for r in run_report.read_metrics(killed / run_report.METRICS_FILE, "train",
                                                   latest=False)]
    assert once == list(range(1, NUM_STEPS + 1))  # the records after the checkpoint: dropped
    expected, got = _train_records(reference), _train_records(killed)
    assert sorted(got) == sorted(expected) == list(range(1, NUM_STEPS + 1))
    np.testing.assert_allclose([got[s] for s in sorted(got)],
                               [expected[s] for s in sorted(expected)], rtol=1e-6)
    test_metrics = [run_report.read_metrics(w / run_report.METRICS_FILE, "test")[-1]
                    for w in (killed, reference)]
    assert test_metrics[0] == test_metrics[1]


# ----------------------------------------------------------------------------- in-process resumes


def _tiny_config(**train) -> ml_collections.ConfigDict:
    """A few-second bag-of-words run on the synthetic data, a checkpoint every 10 steps."""
    config = base.get_config("bag,synthetic")
    config.model.embed_dim = 16
    config.task.head.hidden_dims = (16,)
    config.data.update(dict(batch_size=16, max_length=32, bucket_step=16))
    config.optim.update(dict(name="adam", learning_rate=3e-3))
    config.train.update(dict(num_steps=30, eval_every=10, log_every=1, progress_bar=False))
    config.train.update(train)
    config.checkpoint.update(dict(every=10, keep=3))
    return config


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 30-step run with checkpoints at steps 10, 20 and 30; tests copy it."""
    workdir = tmp_path_factory.mktemp("finished") / "run"
    experiment.run(_tiny_config(), workdir)
    return workdir


def _copy(finished: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished, tmp_path / "run"))


def test_a_longer_resumed_run_records_its_changes_and_one_record_per_step(finished, tmp_path):
    workdir = _copy(finished, tmp_path)
    shutil.rmtree(workdir / "checkpoints" / "30")  # killed after logging step 30, before saving
    experiment.run(_tiny_config(num_steps=40, eval_every=5), workdir)
    records = run_report.read_metrics(workdir / run_report.METRICS_FILE, latest=False)
    steps = lambda split: [r["step"] for r in records if r["split"] == split]
    assert steps("train") == list(range(1, 41))
    assert steps("dev") == [10, 20, 25, 30, 35, 40] and len(steps("test")) == 1
    saved = json.loads((workdir / run_files.CONFIG_FILE).read_text())
    assert saved["train"]["num_steps"] == 40 and saved["train"]["eval_every"] == 5
    (entry,) = saved[run_files.HISTORY_KEY]
    assert entry["changed"] == {"train.eval_every": [10, 5], "train.num_steps": [30, 40]}
    assert run_files.load_config(workdir).train.num_steps == 40


def test_a_resumed_run_with_another_learning_rate_or_seed_is_refused(finished, tmp_path):
    workdir = _copy(finished, tmp_path)
    config = _tiny_config(seed=1)
    config.optim.learning_rate = 0.1
    before = (workdir / run_files.CONFIG_FILE).read_text()
    with pytest.raises(Exception, match=r"optim.learning_rate=0.003 \(config says 0.1\), "
                                        r"train.seed=0 \(config says 1\)"):
        experiment.run(config, workdir)
    assert (workdir / run_files.CONFIG_FILE).read_text() == before


# ------------------------------------------------------------------------ corrupted checkpoints


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _largest_array_file(step_folder: Path) -> Path:
    return max((step_folder / "state").rglob("ocdbt.process_0/d/*"), key=lambda p: p.stat().st_size)


@pytest.mark.parametrize("damage", ["array file", "_METADATA", "position JSON, not sealed"])
def test_a_corrupted_latest_checkpoint_falls_back_to_the_newest_intact_one(
        finished, tmp_path, caplog, damage):
    workdir = _copy(finished, tmp_path)
    latest = workdir / "checkpoints" / "30"
    if damage == "array file":
        _truncate(_largest_array_file(latest))
    elif damage == "_METADATA":
        _truncate(latest / "state" / "_METADATA")
    else:  # a run killed before sealing: restoring is the check
        (latest / "jaxenc_manifest.json").unlink()
        _truncate(latest / "position" / "metadata")
    caplog.set_level(logging.INFO, logger="jaxenc")
    experiment.run(_tiny_config(), workdir)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"
                and "corrupted" in r.getMessage()]
    assert len(warnings) == 1 and f"checkpoint {latest} is corrupted" in warnings[0]
    assert "\n" not in warnings[0] and "resuming from step 20" in caplog.text
    assert (workdir / "checkpoints" / "30.corrupted").is_dir()
    assert (workdir / "checkpoints" / "30" / "jaxenc_manifest.json").is_file()  # retrained
    records = run_report.read_metrics(workdir / run_report.METRICS_FILE, "train", latest=False)
    expected = run_report.read_metrics(finished / run_report.METRICS_FILE, "train")
    assert [r["step"] for r in records] == list(range(1, 31))
    np.testing.assert_allclose([r["loss"] for r in records], [r["loss"] for r in expected],
                               rtol=1e-6)


def test_no_intact_checkpoint_is_one_line_with_the_fix(finished, tmp_path):
    workdir = _copy(finished, tmp_path)
    for step in (10, 20, 30):
        _truncate(_largest_array_file(workdir / "checkpoints" / str(step)))
    with pytest.raises(ConfigError, match=r"checkpoints: no intact checkpoint \(steps 30, 20, "
                                          r"10 are corrupted.*\(fix: use a new --workdir"):
        experiment.run(_tiny_config(), workdir)


def test_a_corrupted_best_checkpoint_is_one_line_naming_the_file(finished, tmp_path):
    workdir = _copy(finished, tmp_path)
    (best,) = (workdir / "best").iterdir()
    damaged = max(best.rglob("ocdbt.process_0/d/*"), key=lambda p: p.stat().st_size)
    _truncate(damaged)
    with pytest.raises(DataError) as error:
        checkpointing.load_trained_encoder(workdir)
    message = str(error.value)
    assert message.startswith(f"{damaged}: checkpoint file is corrupted") and "\n" not in message
    assert best.is_dir()  # reading a run renames nothing


@pytest.mark.parametrize("best_k", [1, 2])
def test_a_damaged_best_checkpoint_stops_a_rerun_with_the_readers_line(tmp_path, best_k):
    workdir = tmp_path / "run"
    experiment.run(_best_k(best_k), workdir)
    steps = sorted((workdir / "best").iterdir(), key=lambda path: int(path.name))
    assert len(steps) == best_k
    damaged = max(steps[-1].rglob("ocdbt.process_0/d/*"), key=lambda p: p.stat().st_size)
    _truncate(damaged)  # with best_k 2: the other best checkpoint is intact, and not used
    before = (workdir / run_report.RESULTS_FILE).read_text()
    with pytest.raises(DataError) as error:
        experiment.run(_best_k(best_k), workdir)
    message = str(error.value)
    assert message.startswith(f"{damaged}: checkpoint file is corrupted") and "\n" not in message
    assert (workdir / run_report.RESULTS_FILE).read_text() == before and steps[-1].is_dir()


def _best_k(best_k: int) -> ml_collections.ConfigDict:
    config = _tiny_config()
    config.checkpoint.best_k = best_k
    return config


def test_equal_dev_scores_keep_the_first_best_whatever_best_k(tmp_path, monkeypatch):
    # Every dev evaluation during training scores the same: the first (step 10) is the best,
    # and the test split is evaluated with its parameters whether one or two are kept.
    real_evaluate, state = loop.evaluate, {"final": False}

    def tied_dev(eval_step, params, batcher, task, mesh):
        metrics = real_evaluate(eval_step, params, batcher, task, mesh)
        if not state["final"]:
            metrics[task.primary_metric] = 0.5
        return metrics

    real_restore = checkpointing.Checkpoints.restore_best_params

    def restore(self, target=None, step=None):
        state["final"] = True  # the evaluations after training are the real ones
        return real_restore(self, target, step)

    monkeypatch.setattr(loop, "evaluate", tied_dev)
    monkeypatch.setattr(checkpointing.Checkpoints, "restore_best_params", restore)
    rows = {}
    for best_k in (1, 2):
        state["final"] = False
        (rows[best_k],) = experiment.run(_best_k(best_k), tmp_path / f"best_k{best_k}")
        best = sorted(int(path.name) for path in (tmp_path / f"best_k{best_k}" / "best").iterdir())
        assert best == [10, 20][:best_k]
    timing = {"train s", "train peak MiB", "workdir"}
    same = lambda row: {key: value for key, value in row.items() if key not in timing}
    assert rows[1]["best step"] == 10 and same(rows[1]) == same(rows[2])
    for best_k in (1, 2):  # the exporter's choice is the same checkpoint
        checkpoints = checkpointing.Checkpoints(tmp_path / f"best_k{best_k}", keep=3,
                                                best_k=best_k, repair=False)
        assert checkpoints.best_step() == 10
        checkpoints.close()


UNRETRIEVED = """
import asyncio, gc, sys
from jaxenc.training import main
if sys.argv[1] == "quiet":
    main._quiet_logging()

async def write():
    raise ValueError("RESOURCE_EXHAUSTED: Error writing in OCDBT database: No space left on "
                     "device [os_error_code='28']")

loop = asyncio.new_event_loop()
task = loop.create_task(write())
loop.run_until_complete(asyncio.sleep(0.01))
del task
gc.collect()
"""


def test_orbax_writes_refused_by_a_full_disk_print_nothing_after_the_one_line():
    # A pending write's exception that nobody retrieved is logged by asyncio when the task is
    # collected, at exit, after the job's one-line error: the train command drops it.
    printed = {mode: subprocess.run([sys.executable, "-c", UNRETRIEVED, mode], cwd=REPO,
                                    capture_output=True, text=True, check=True).stderr
               for mode in ("plain", "quiet")}
    assert "Task exception was never retrieved" in printed["plain"]
    assert printed["quiet"] == ""


def test_a_metrics_line_cut_by_a_full_disk_is_dropped_on_resume_with_a_note(finished, tmp_path,
                                                                            caplog):
    workdir = _copy(finished, tmp_path)
    shutil.rmtree(workdir / "checkpoints" / "30")
    metrics = workdir / run_report.METRICS_FILE
    metrics.write_text(metrics.read_text() + '{"step": 31, "split": "tra')
    caplog.set_level(logging.INFO, logger="jaxenc")
    experiment.run(_tiny_config(), workdir)
    notes = [r.getMessage() for r in caplog.records if "cut short" in r.getMessage()]
    assert notes == [f"{metrics}: dropped its last line, 26 characters cut short by a write "
                     "that did not finish"]
    records = run_report.read_metrics(metrics, "train", latest=False)
    assert [r["step"] for r in records] == list(range(1, 31))


# --------------------------------------------------------------------- config.json not trusted


@pytest.mark.parametrize(("content", "expected"), [
    (None, r"config.json: missing, while .*checkpoints/30 holds a checkpoint of the run"),
    ("null", r"config.json: holds a JSON NoneType, not a config object"),
    ("[]", r"config.json: holds a JSON list, not a config object"),
    ('{"model": 5}', r"config.json: 'model' is a JSON int, not an object"),
    ('{"history": {}}', r"config.json: 'history' is a JSON dict, not a list"),
])
def test_a_missing_or_malformed_config_json_is_one_line(finished, tmp_path, content, expected):
    workdir = _copy(finished, tmp_path)
    path = workdir / run_files.CONFIG_FILE
    path.unlink() if content is None else path.write_text(content)
    with pytest.raises(ConfigError, match=expected + r".*\(fix: ") as error:
        experiment.run(_tiny_config(), workdir)
    assert "\n" not in str(error.value)


def test_a_hand_edited_config_json_is_refused_by_the_checkpoint(finished, tmp_path):
    workdir = _copy(finished, tmp_path)
    path = workdir / run_files.CONFIG_FILE
    saved = json.loads(path.read_text())
    saved["optim"]["learning_rate"] = 0.1  # and the command line agrees with the edit
    path.write_text(json.dumps(saved))
    config = _tiny_config(num_steps=40)
    config.optim.learning_rate = 0.1
    with pytest.raises(ConfigError, match=r"checkpoints/30 was saved by a run with a different "
                                          r"config: optim.learning_rate=0.003 \(config says "
                                          r"0.1\)") as error:
        experiment.run(config, workdir)
    assert "\n" not in str(error.value)
    config.optim.learning_rate = 0.003  # what the checkpoint trained with: config.json differs
    with pytest.raises(ConfigError, match=r"holds a run trained with a different config"):
        experiment.run(config, workdir)


@pytest.mark.parametrize("manifest", ["[]", '{"a": 3}', '{"../../x": [1, "00"]}'])
def test_a_malformed_checkpoint_manifest_is_named_and_the_checkpoint_set_aside(
        finished, tmp_path, manifest):
    workdir = _copy(finished, tmp_path)
    latest = workdir / "checkpoints" / "30"
    (latest / "jaxenc_manifest.json").write_text(manifest)
    path, what = checkpointing.integrity.problem(latest)
    assert path == latest / "jaxenc_manifest.json" and ("manifest" in what or "outside" in what)
    experiment.run(_tiny_config(), workdir)
    assert (workdir / "checkpoints" / "30.corrupted").is_dir()


# ----------------------------------------------------------------------------- data identity


def _moved(splits: dict, root: str) -> dict:
    """The same examples as if read from another folder (their uids name it)."""
    return {name: [dataclasses.replace(e, uid=f"{root}/{e.uid}") for e in examples]
            for name, examples in splits.items()}


def test_the_same_data_at_another_path_resumes(finished, tmp_path, caplog):
    workdir = _copy(finished, tmp_path)
    recorded = json.loads((workdir / run_files.CONFIG_FILE).read_text())
    assert set(recorded[run_files.DATA_KEY]) == {"train", "dev", "test"}
    config = _tiny_config()
    config.data.data_dir = "/elsewhere"
    splits = _moved(input_pipeline.load_splits(config), "/elsewhere")
    caplog.set_level(logging.INFO, logger="jaxenc")
    loop.train_and_evaluate(config, workdir, splits=splits)
    assert "resuming from step 30" in caplog.text
    saved = json.loads((workdir / run_files.CONFIG_FILE).read_text())
    assert saved[run_files.DATA_KEY] == recorded[run_files.DATA_KEY]
    assert saved[run_files.HISTORY_KEY][0]["changed"] == {
        "data.data_dir": [_tiny_config().data.data_dir, "/elsewhere"]}


def test_other_data_is_refused_in_one_line_naming_the_split(finished, tmp_path):
    workdir = _copy(finished, tmp_path)
    before = (workdir / run_files.CONFIG_FILE).read_text()
    splits = input_pipeline.load_splits(_tiny_config())
    recorded = json.loads(before)[run_files.DATA_KEY]["train"]
    splits["train"] = splits["train"][:-1]
    with pytest.raises(ConfigError) as error:
        loop.train_and_evaluate(_tiny_config(), workdir, splits=splits)
    message = str(error.value)
    now = run_files.split_identity(splits["train"])
    assert message.startswith(
        f"--workdir {workdir} was trained on other train data ({recorded['examples']} examples, "
        f"sha256 {recorded['sha256'][:12]}; now {now['examples']} examples, "
        f"sha256 {now['sha256'][:12]}) (fix: use a new --workdir, or point "
        "--config.data.data_dir at the data it was trained on)")
    assert "\n" not in message and "dev data" not in message
    assert (workdir / run_files.CONFIG_FILE).read_text() == before


def test_a_run_without_a_data_record_resumes_and_records_it(finished, tmp_path, caplog):
    workdir = _copy(finished, tmp_path)
    path = workdir / run_files.CONFIG_FILE
    saved = json.loads(path.read_text())
    recorded = saved.pop(run_files.DATA_KEY)
    path.write_text(json.dumps(saved))
    caplog.set_level(logging.INFO, logger="jaxenc")
    experiment.run(_tiny_config(), workdir)
    assert "has no record of the data it was trained on" in caplog.text
    assert "resuming from step 30" in caplog.text
    assert json.loads(path.read_text())[run_files.DATA_KEY] == recorded


# ----------------------------------------------------------------------------- refused writes


def test_a_read_only_workdir_is_one_line_naming_the_file(finished, tmp_path, monkeypatch):
    workdir = _copy(finished, tmp_path)  # root ignores file modes: the refusal is simulated
    real_open = os.open

    def refuse(path, *args, **kwargs):
        if str(path).endswith(".lock"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(WriteError) as error:
        experiment.run(_tiny_config(num_steps=40), workdir)
    assert str(error.value) == (f"cannot write {workdir.absolute() / '.lock'}: Permission denied "
                                "(fix: make it writable, or pass a writable --workdir)")


@pytest.mark.parametrize("name", ["metrics.jsonl", "results.md", "config.json"])
def test_a_refused_write_of_a_run_file_is_one_line_naming_it(tmp_path, monkeypatch, name):
    workdir = tmp_path / "run"
    real_open = io.open

    def full(file, *args, **kwargs):
        if Path(str(file)).name in (name, f".{name}.tmp-{os.getpid()}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", full)
    with pytest.raises(WriteError) as error:
        experiment.run(_tiny_config(), workdir)
    assert str(error.value) == (f"cannot write {workdir / name}: No space left on device (fix: "
                                "free disk space there, or pass a --workdir on a disk with room)")


@pytest.mark.parametrize("raised", ["tensorstore", "OSError"])
def test_a_full_disk_during_a_checkpoint_keeps_the_previous_ones(finished, tmp_path, monkeypatch,
                                                                 caplog, raised):
    workdir = tmp_path / "run"
    real_save = checkpointing._CheckpointManager.save

    def full(self, step, *args, **kwargs):
        folder = Path(str(self.directory))
        if folder.name == "checkpoints" and step == 20:  # as orbax leaves it: a temporary folder
            (folder / "20.orbax-checkpoint-tmp-1" / "state").mkdir(parents=True)
            if raised == "OSError":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            raise ValueError("RESOURCE_EXHAUSTED: Error writing \"params/0\" in OCDBT database: "
                             "Failed to write 27429 bytes to file 15: No space left on device "
                             "[os_error_code='28']")
        return real_save(self, step, *args, **kwargs)

    monkeypatch.setattr(checkpointing._CheckpointManager, "save", full)
    with pytest.raises(WriteError) as error:
        experiment.run(_tiny_config(), workdir)
    assert str(error.value) == (
        f"cannot write {workdir.absolute() / 'checkpoints' / '20'}: No space left on device; "
        "checkpoint 20 not saved, newest complete checkpoint there: step 10 (fix: free disk "
        "space there, or pass a --workdir on a disk with room)")
    assert _checkpointed_steps(workdir) == [10]
    monkeypatch.undo()

    caplog.set_level(logging.INFO, logger="jaxenc")
    experiment.run(_tiny_config(), workdir)  # space freed: resumes from the intact checkpoint
    assert "resuming from step 10" in caplog.text
    assert not any(".orbax-checkpoint-tmp" in p.name for p in (workdir / "checkpoints").iterdir())
    assert _checkpointed_steps(workdir) == [10, 20, 30]
    got, expected = _train_records(workdir), _train_records(finished)
    np.testing.assert_allclose([got[s] for s in sorted(got)],
                               [expected[s] for s in sorted(expected)], rtol=1e-6)

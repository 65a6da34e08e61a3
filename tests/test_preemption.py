"""Interrupted runs: SIGTERM / SIGINT save the step in progress and stop (exit 143 / 130), one
writer per workdir, and a chaos run killed (SIGKILL, SIGTERM) at random points and resumed each
time ends with the metrics.jsonl and results.md of an uninterrupted run."""

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import ml_collections
import pytest
from test_training import tiny_config

from jaxenc.errors import Preempted, WorkdirInUseError
from jaxenc.training import experiment, locking, loop, run_files, run_report
from jaxenc.training.preemption import PreemptionWatch

REPO = Path(__file__).resolve().parents[1]
# Measured (wall-clock time, throughput) or counted for this process only (the XLA compilations
# the persistent cache did or did not serve depend on how many processes the run took): they
# differ between two runs of the same config. "train peak MiB" and "compiled shapes" are
# results of the run and are compared.
UNCOMPARED_COLUMNS = ("train s", "encode sent/s", "compiles", "cache hits")
UNCOMPARED_FIELDS = ("examples_per_second",)  # of "train" records: measured


def _config() -> ml_collections.ConfigDict:
    """test_training's tiny run (40 steps, a "train" record every 10), evaluated every 10 steps
    and saved every 5, so that checkpoints fall between records."""
    config = tiny_config()
    config.train.eval_every = 10
    config.checkpoint.update(dict(every=5, keep=10))
    return config


# The same run from the command line.
FLAGS = ["--config=train/configs/base.py:bag,synthetic", "--config.model.embed_dim=16",
         "--config.task.head.hidden_dims=(16,)", "--config.data.batch_size=16",
         "--config.data.eval_batch_size=128", "--config.data.max_length=32",
         "--config.data.bucket_step=16", "--config.optim.name=adam",
         "--config.optim.learning_rate=0.003", "--config.optim.weight_decay=0.0001",
         "--config.optim.clip_norm=5.0", "--config.train.num_steps=40",
         "--config.train.eval_every=10", "--config.train.log_every=10",
         "--config.train.progress_bar=False", "--config.checkpoint.every=5",
         "--config.checkpoint.keep=10"]


def _results(workdir: Path) -> tuple[list[dict], list[str]]:
    """(metrics.jsonl records in file order, results.md lines), without what is measured."""
    records = [{key: value for key, value in record.items() if key not in UNCOMPARED_FIELDS}
               for record in run_report.read_metrics(workdir / run_report.METRICS_FILE,
                                                     latest=False)
               if record["split"] != run_report.COST]  # measured: times and rates
    lines = (workdir / run_report.RESULTS_FILE).read_text().splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("|"))
    columns = [cell.strip() for cell in lines[header].strip("|").split("|")]
    kept = [index for index, column in enumerate(columns) if column not in UNCOMPARED_COLUMNS]
    table = [line for line in lines if line.startswith("|")]
    lines = [line for line in lines if not line.startswith("|")] + [
        "|".join(cells[index] for index in kept)
        for cells in (line.strip("|").split("|") for line in table)]
    return records, lines


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run."""
    workdir = tmp_path_factory.mktemp("reference") / "run"
    experiment.run(_config(), workdir)
    return workdir


# ----------------------------------------------------------------------------- SIGTERM / SIGINT


def _signal_at(monkeypatch, steps: dict[int, signal.Signals]) -> None:
    """Sends this process `steps[step]` while the loop adds that step's statistics."""
    add = loop._TrainLog.add

    def add_and_signal(self, step, stats, examples):
        add(self, step, stats, examples)
        if step in steps:
            signal.raise_signal(steps[step])

    monkeypatch.setattr(loop._TrainLog, "add", add_and_signal)


def test_sigterm_and_sigint_save_the_step_and_resume_like_an_uninterrupted_run(
        reference, tmp_path, monkeypatch):
    workdir = tmp_path / "run"
    handlers = [signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)]
    _signal_at(monkeypatch, {13: signal.SIGTERM, 27: signal.SIGINT})
    for step, signum in ((13, signal.SIGTERM), (27, signal.SIGINT)):
        with pytest.raises(Preempted) as stopped:
            experiment.run(_config(), workdir)
        message = str(stopped.value)
        assert message == (f"preempted by {signum.name} at step {step}: checkpoint saved in "
                           f"{workdir.absolute()}/checkpoints/{step} (fix: rerun the same "
                           "command to resume)")
        assert stopped.value.step == step and stopped.value.exit_status == 128 + signum
        assert (workdir / run_files.LATEST_DIR / str(step)).is_dir()
        assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)] == handlers
        records = run_report.read_metrics(workdir / run_report.METRICS_FILE, "train")
        assert [r["step"] for r in records] == list(range(10, step, 10))
    experiment.run(_config(), workdir)
    assert _results(workdir) == _results(reference)


def test_a_resume_between_records_or_at_the_end_reports_what_the_uninterrupted_run_did(
        reference, tmp_path):
    # as if killed before its checkpoint of step 20: resumed from step 15, it must write the
    # "train" record of step 20 over steps 11-20, as the uninterrupted run did
    between = Path(shutil.copytree(reference, tmp_path / "between"))
    for step in (20, 25, 30, 35, 40):
        shutil.rmtree(between / run_files.LATEST_DIR / str(step))
    ended = Path(shutil.copytree(reference, tmp_path / "ended"))  # nothing left to train
    for workdir in (between, ended):
        experiment.run(_config(), workdir)
        assert _results(workdir) == _results(reference)
    assert "nan" not in (ended / run_report.RESULTS_FILE).read_text()  # train peak MiB


def test_preemption_watch_handles_the_block_only_and_a_second_signal_stops_at_once():
    received = []
    sigint_before = signal.getsignal(signal.SIGINT)  # SIG_IGN in a job started with `&`
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        with pytest.raises(Preempted), PreemptionWatch() as watch:
            assert signal.getsignal(signal.SIGINT) == watch._on_signal
            assert not watch.reached(1)
            signal.raise_signal(signal.SIGTERM)
            assert watch.reached(2) and watch.signum == signal.SIGTERM and not received
            signal.raise_signal(signal.SIGTERM)  # the second meets the previous handler
            assert received == [signal.SIGTERM]
            raise watch.preempted(2, "DIR")
        assert signal.getsignal(signal.SIGINT) is sigint_before

        with PreemptionWatch() as watch:  # received after the loop's last check
            signal.raise_signal(signal.SIGTERM)
        assert received == [signal.SIGTERM] * 2  # delivered again on leaving the block
        assert watch.preempted(7, "DIR").exit_status == 143
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_preemption_watch_outside_the_main_thread_installs_nothing():
    found = []

    def train() -> None:
        with PreemptionWatch() as watch:
            found.extend([signal.getsignal(signal.SIGTERM), watch.reached(1)])

    thread = threading.Thread(target=train)
    thread.start()
    thread.join()
    assert found == [signal.getsignal(signal.SIGTERM), False]


# ----------------------------------------------------------------------------- one writer


def test_a_held_lock_is_refused_and_taken_over_once_its_process_is_killed(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from jaxenc.training import locking\n"
         f"with locking.hold({str(tmp_path)!r}):\n print('held', flush=True); time.sleep(600)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(WorkdirInUseError, match=rf"^--workdir {tmp_path} is in use by "
                                                    rf"process {holder.pid} on "):
            with locking.hold(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    with locking.hold(tmp_path), locking.hold(tmp_path):  # the OS released it; reentrant
        assert locking.lock_path(tmp_path).read_text().split()[0] == str(os.getpid())


def _start(workdir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "train.main", f"--workdir={workdir}", *FLAGS],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_second_run_on_the_same_workdir_fails_at_once_naming_the_first(tmp_path):
    workdir = tmp_path / "run"
    first = _start(workdir)
    try:
        deadline = time.monotonic() + 120
        while not (workdir / locking.LOCK_FILE).is_file() or \
                (workdir / locking.LOCK_FILE).read_text().split()[:1] != [str(first.pid)]:
            assert first.poll() is None, first.communicate()[1]
            assert time.monotonic() < deadline, "the first run took no lock"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGSTOP)  # holding the lock until the second has failed
        second = subprocess.run([sys.executable, "-m", "train.main", f"--workdir={workdir}",
                                 *FLAGS], cwd=REPO, capture_output=True, text=True, timeout=120)
        os.kill(first.pid, signal.SIGCONT)
        assert second.returncode == 2, second.stderr
        (line,) = second.stderr.splitlines()
        assert line.startswith(f"error: --workdir {workdir} is in use by process {first.pid} on ")
        assert line.endswith("(fix: wait for that run to finish or stop it, or pass another "
                             "--workdir)")
        _, stderr = first.communicate(timeout=120)
        assert first.returncode == 0, stderr
        assert (workdir / run_report.RESULTS_FILE).is_file()
    finally:
        _stop(first)


# ----------------------------------------------------------------------------- chaos


KILLS = (signal.SIGKILL, signal.SIGTERM, signal.SIGKILL, signal.SIGTERM)


def _checkpointed(workdir: Path) -> int:
    folder = workdir / run_files.LATEST_DIR
    steps = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
    return max(steps, default=0)


def test_runs_killed_at_random_points_end_like_an_uninterrupted_run(reference, tmp_path):
    """Each run is killed a random time (seeded) after it has saved its first checkpoint: in a
    step, an evaluation, a save, or (a run that resumed near the end) the final evaluation."""
    rng, workdir = random.Random(0), tmp_path / "run"
    outcomes = []
    for kill in KILLS:
        resumed_from, process = _checkpointed(workdir), _start(workdir)
        try:
            deadline = time.monotonic() + 120
            while _checkpointed(workdir) <= resumed_from and process.poll() is None:
                assert time.monotonic() < deadline, "no checkpoint appeared"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.2))
            if process.poll() is None:
                os.kill(process.pid, kill)
            _, stderr = process.communicate(timeout=120)
        finally:
            _stop(process)
        outcomes.append((kill.name, resumed_from, _checkpointed(workdir), process.returncode))
        if process.returncode == 143:  # stopped itself, the checkpoint saved
            (line,) = [line for line in stderr.splitlines() if line.startswith("error:")]
            assert line.startswith(f"error: preempted by SIGTERM at step {_checkpointed(workdir)}")
        else:  # killed by the signal (outside training, SIGTERM's default) or finished
            assert process.returncode in (-kill, 0), (kill, process.returncode, stderr)
    final = _start(workdir)
    _, stderr = final.communicate(timeout=120)
    assert any(code == 143 for *_, code in outcomes), f"no SIGTERM met training: {outcomes}"
    assert final.returncode == 0, (outcomes, stderr)
    assert _results(workdir) == _results(reference), outcomes

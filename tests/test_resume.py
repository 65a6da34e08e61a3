"""Kill -9 in the middle of training, restart: the run continues exactly as if never killed."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from jaxenc.training import report

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
            for r in report.read_metrics(workdir / report.METRICS_FILE, "train")}


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
    assert not (killed / report.RESULTS_FILE).exists()  # it really died mid-run
    resumed_from = max(_checkpointed_steps(killed))
    assert KILL_AFTER <= resumed_from < NUM_STEPS

    _finish(_start(killed))
    expected, got = _train_records(reference), _train_records(killed)
    assert sorted(got) == sorted(expected) == list(range(1, NUM_STEPS + 1))
    np.testing.assert_allclose([got[s] for s in sorted(got)],
                               [expected[s] for s in sorted(expected)], rtol=1e-6)
    test_metrics = [report.read_metrics(w / report.METRICS_FILE, "test")[-1]
                    for w in (killed, reference)]
    assert test_metrics[0] == test_metrics[1]

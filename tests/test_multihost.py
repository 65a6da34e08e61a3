"""Multi-host data parallelism: two processes on this machine, 4 CPU devices each, joined by
jax.distributed (gloo collectives), train through the real command (`python -m train.main
--config.train.distributed=True`) exactly as one process on 8 devices does: the same losses,
dev and test metrics and parameters, one set of files written (by process 0), checkpoints that
one process restores. SIGTERM to one process stops both at the same step, saved.

The subprocesses are killed if they outlive TIMEOUT (a coordinator that waits for a process that
died would otherwise hang the suite).
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import ml_collections
import numpy as np
import pytest

from jaxenc.training import checkpointing, experiment, integrity, run_files, run_report
from jaxenc.training.sharding import NUM_PROCESSES_ENV, PROCESS_ID_ENV
from train.configs import base

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 240  # seconds for the two processes (about 30 s on 2 idle cores)
CONFIG = "train/configs/base.py:transformer,synthetic"
# A few-second run: 6 steps of 16 sentences of up to 16 tokens (one bucket), dropout on (its
# masks must not depend on how the batch is split), evaluation and checkpoints every 3 steps.
# SGD, not Adam: Adam divides by the gradient's own scale, so a parameter whose gradient is zero
# up to rounding (the attention's key bias) moves by that rounding noise, which the order of the
# cross-process sum changes; SGD moves every parameter by lr x its gradient.
OVERRIDES = {
    "model.embed_dim": 16, "model.model_dim": 16, "model.num_layers": 1, "model.num_heads": 2,
    "model.ff_dim": 16, "model.dropout_rate": 0.1, "task.head.hidden_dims": (16,),
    "data.batch_size": 16, "data.eval_batch_size": 256, "data.max_length": 16,
    "data.bucket_step": 16, "optim.name": "sgd", "optim.learning_rate": 0.1,
    "train.num_steps": 6, "train.eval_every": 3, "train.log_every": 1,
    "train.progress_bar": False, "checkpoint.every": 3,
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def launch(workdir: Path, port: int, process_id: int, log: Path,
           **overrides: object) -> subprocess.Popen:
    """Process `process_id` of 2 of the multi-host run, in its own process group; `overrides`
    replace values of OVERRIDES."""
    flags = [f"--config.{key}={value}" for key, value in {**OVERRIDES, **overrides}.items()]
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
           "JAX_PLATFORMS": "cpu", "JAX_COORDINATOR_ADDRESS": f"localhost:{port}",
           NUM_PROCESSES_ENV: "2", PROCESS_ID_ENV: str(process_id)}
    with log.open("w") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "train.main", f"--config={CONFIG}", *flags,
             "--config.train.distributed=True", f"--workdir={workdir}"],
            cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)


def finish(processes: list[subprocess.Popen], logs: list[Path], status: int = 0) -> None:
    """Waits for the processes (TIMEOUT in all), kills every one still running, and fails
    with their output unless all exited with `status`."""
    try:
        for process in processes:
            process.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pass
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    if any(process.returncode != status for process in processes):
        pytest.fail("\n".join(f"process {i} exited {process.returncode}:\n"
                              f"{log.read_text()[-3000:]}"
                              for i, (process, log) in enumerate(zip(processes, logs,
                                                                     strict=True))))


def records(workdir: Path) -> list[dict]:
    """Every metrics.jsonl record, duplicates kept, without the throughput and the cost records
    (times and rates: not results)."""
    return [{key: value for key, value in record.items() if key != "examples_per_second"}
            for record in run_report.read_metrics(workdir / run_report.METRICS_FILE, latest=False)
            if record["split"] != run_report.COST]


def test_two_processes_of_four_devices_train_as_one_of_eight(tmp_path):
    assert jax.device_count() == 8, "tests/conftest.py should give 8 CPU devices"
    port, two = free_port(), tmp_path / "two_processes"
    logs = [tmp_path / f"process_{i}.log" for i in range(2)]
    processes = [launch(two, port, i, log) for i, log in enumerate(logs)]
    try:
        config = base.get_config(CONFIG.split(":")[1])
        config.update_from_flattened_dict(OVERRIDES)
        one = tmp_path / "one_process"
        experiment.run(ml_collections.ConfigDict(config), one)  # meanwhile, here on 8 devices
    finally:
        finish(processes, logs)

    expected, got = records(one), records(two)
    assert [(r["split"], r["step"]) for r in got] == [(r["split"], r["step"]) for r in expected]
    assert len(got) == 6 + 2 + 1, "one train record per step, two dev records, one test record"
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.keys() == theirs.keys()
        np.testing.assert_allclose([mine[key] for key in sorted(mine) if key != "split"],
                                   [theirs[key] for key in sorted(theirs) if key != "split"],
                                   rtol=1e-5, err_msg=str(mine))
    # the best parameters, restored here from both runs (the gradients are summed in another
    # order across processes: equal up to float rounding)
    params = [checkpointing.load_trained_encoder(workdir)[1] for workdir in (one, two)]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), *params)

    for step in (3, 6):  # orbax wrote them from both processes; process 0 sealed them
        folder = two / run_files.LATEST_DIR / str(step)
        assert (folder / integrity.MANIFEST_FILE).is_file() and integrity.problem(folder) is None
    assert (two / run_report.RESULTS_FILE).is_file() and (two / "config.json").is_file()
    outputs = [log.read_text() for log in logs]
    assert "| transformer | synthetic |" in outputs[0]
    assert "| transformer |" not in outputs[1], "only process 0 prints the results"
    assert "process 1 of 2: 4 local of 8 devices" in outputs[1]


def test_sigterm_to_one_process_stops_both_at_the_same_saved_step(tmp_path):
    port, workdir = free_port(), tmp_path / "run"
    logs = [tmp_path / f"process_{i}.log" for i in range(2)]
    # long enough that JAX's preemption notice (polled every second) arrives in training, and
    # no evaluation or periodic checkpoint on the way: the agreed step is saved for itself
    long = {"train.num_steps": 3000, "train.eval_every": 3000, "checkpoint.every": 3000}
    processes = [launch(workdir, port, i, log, **long) for i, log in enumerate(logs)]
    try:
        metrics = workdir / run_report.METRICS_FILE
        while (not metrics.is_file() or len(metrics.read_text().splitlines()) < 3) and \
                all(process.poll() is None for process in processes):
            time.sleep(0.05)
        os.kill(processes[1].pid, signal.SIGTERM)  # after step 3
    finally:
        finish(processes, logs, status=143)  # 128 + SIGTERM: stopped, checkpoint saved
    stopped = [re.findall(r"error: preempted by SIGTERM to a process of this multi-process run "
                          r"at step (\d+): checkpoint saved in (\S+) \(fix: rerun the same "
                          r"command to resume\)", log.read_text()) for log in logs]
    assert len(stopped[0]) == 1 and stopped[0] == stopped[1], stopped
    step, folder = int(stopped[0][0][0]), Path(stopped[0][0][1])
    assert 3 <= step < 3000 and folder == workdir.absolute() / run_files.LATEST_DIR / str(step)
    assert integrity.problem(folder) is None and (folder / integrity.MANIFEST_FILE).is_file()

"""Stopping training cleanly on SIGTERM (how preemptible TPU / GPU VMs, SLURM and Kubernetes stop
a job) or SIGINT (Ctrl-C): the step in progress ends, a checkpoint is saved at it and the run
raises `jaxenc.errors.Preempted`, so that rerunning the same command resumes it.

    with PreemptionWatch() as watch:
        for step in ...:
            ...  # one training step
            if watch.reached(step):
                ...  # save a checkpoint at `step`, then raise watch.preempted(step, where)

The handlers are installed for the `with` block only, and only from the main thread (Python
delivers signals there); the previous handlers come back after it. A second signal of the same
kind meets the previous handler (SIGTERM's default ends the process, SIGINT's raises
KeyboardInterrupt), so it stops a run whose checkpoint takes too long; orbax's atomic saves leave
the newest complete checkpoint to resume from.

One process: the handler sets a flag and `reached` returns it (a bool check per step, no host
sync). Several processes (`jax.distributed` initialised): every process must save the same step,
or the checkpoint is torn. JAX's preemption service does that: `jax.distributed.initialize`
installs a SIGTERM notifier (C++, outside Python's signal module), a notice on any process
reaches every other through the coordination service, and
`multihost_utils.reached_preemption_sync_point(step)` (a local check per step) becomes True on
every process at the same step, the one after the furthest process's. Python's SIGTERM handler
is therefore left to JAX there (replacing it would hide the notice), and SIGINT is passed on to
that notifier as a SIGTERM to this process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType
from typing import Any

import jax
from jax.experimental import multihost_utils

from jaxenc.errors import Preempted

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class PreemptionWatch:
    """Watches for SIGTERM / SIGINT during training (module doc); a context manager.

    `signum`: the signal this process received (None: none, or in a multi-process run a notice
    that reached this process from another one)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.agreed = jax.distributed.is_initialized()  # processes agree through JAX's service
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> PreemptionWatch:
        if threading.current_thread() is not threading.main_thread():
            log.info("training outside the main thread: SIGTERM and SIGINT are not handled")
            return self
        if self.agreed and not jax.config.jax_enable_preemption_service:
            log.warning("JAX's preemption service is off (jax_enable_preemption_service): "
                        "SIGTERM and SIGINT stop this multi-process run without a checkpoint")
            self.agreed = False
            return self
        for signum in (signal.SIGINT,) if self.agreed else SIGNALS:
            previous = signal.getsignal(signum)
            if previous is None:  # set outside Python: it could not be put back
                continue
            self._previous[signum] = previous
            signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc_info: object) -> None:
        pending = None
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._on_signal:
                signal.signal(signum, previous)
            elif signum == self.signum and not self.agreed:
                pending = signum
        self._previous.clear()
        if pending is not None and exc_info[0] is None:
            # received after the loop's last check: delivered to the handler it would have met
            signal.raise_signal(pending)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Notes the signal; the next one of its kind meets the previous handler."""
        self.signum = signum
        signal.signal(signum, self._previous[signum])
        if self.agreed:
            os.kill(os.getpid(), signal.SIGTERM)  # to JAX's notifier (module doc)

    def reached(self, step: int) -> bool:
        """Whether training must stop after `step` (it just ended) and save it: called after
        every step, with steps that never decrease; every process of a run gets True at the
        same step."""
        if self.agreed:
            return multihost_utils.reached_preemption_sync_point(step)
        return self.signum is not None

    def preempted(self, step: int, checkpoint: str) -> Preempted:
        """The error to raise once `checkpoint`, the state at `step`, is on disk."""
        signum = self.signum or signal.SIGTERM
        cause = (signal.Signals(signum).name if self.signum is not None
                 else "SIGTERM to a process of this multi-process run")
        return Preempted(f"preempted by {cause} at step {step}: checkpoint saved in {checkpoint} "
                         "(fix: rerun the same command to resume)", step=step, signum=signum)

"""This machine in a bench report: its cores, CPU, load, available memory and JAX."""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path
from typing import Any

import jax


def available_mib() -> float:
    """MemAvailable from /proc/meminfo (MiB); infinity where there is none."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.inf


def machine() -> dict[str, Any]:
    """Its cores, CPU, load average and available memory at the start, JAX and its device."""
    cpu_model = "unknown"
    try:
        cpu_model = next(line.split(":", 1)[1].strip()
                         for line in Path("/proc/cpuinfo").read_text().splitlines()
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return dict(nproc=cores, cpu_count=os.cpu_count(), cpu_model=cpu_model,
                load_start=os.getloadavg(), memory_available_mib=available_mib(),
                jax=jax.__version__, jaxlib=jax.lib.__version__, backend=jax.default_backend(),
                device=jax.devices()[0].device_kind, python=platform.python_version(),
                platform=platform.platform())


def machine_words(load: tuple[float, float]) -> str:
    """'cpu (CPU model, N cores, load average a at the start, b at the end; jax X)': the machine
    of a report's first line, with the load average at the start and at the end of its run."""
    host = machine()
    return (f"{host['backend']} ({host['cpu_model']}, {host['nproc']} cores, load average "
            f"{load[0]:.1f} at the start, {load[1]:.1f} at the end; jax {host['jax']})")

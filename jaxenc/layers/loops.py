"""Loop settings that depend on where a program runs: how many items one loop step takes.

DiSAN's blocked and directional attention (`examples_per_step`) and PSAN's packed phrase
attention (`packed_chunk`) loop over examples or phrases. One item per step (1) is fastest on a
single CPU device: each step's working set stays in cache. Everything in one step (0) is right on
accelerators, where each loop step costs kernel launches, and on several devices, where a loop
over the batch axis that the devices split makes XLA gather the whole batch on every device.

"auto", the default of both, lets the platform decide at lowering time
(`jax.lax.platform_dependent`): 1 on a CPU, 0 elsewhere. A function exported for several
platforms (`jaxenc export --platforms cpu,cuda`) therefore carries the right loop for each, and
config.json records "auto", not the setting of the machine that trained. A data-parallel run
over several CPU devices needs 0 (jaxenc.training.sharding.check_loop_settings warns).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from jaxenc.errors import ConfigError

AUTO = "auto"
CPU_SETTING = 1  # one item per step
ACCELERATOR_SETTING = 0  # every item in one step


def loop_setting(value: Any, field: str) -> int | str:
    """`value` as a loop setting: "auto" or an integer >= 0 ("0" from a command line counts);
    otherwise a one-line ConfigError naming `model.<field>`."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if value == AUTO or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ConfigError(f"model.{field}={value!r} is not 'auto' or an integer >= 0 (fix: "
                      f"--config.model.{field}=auto, the platform's setting)")


def with_loop_setting(setting: int | str, run: Callable[[int], Any]) -> Any:
    """run(setting) for an explicit setting; for "auto", run(1) on a CPU and run(0) on any other
    platform, chosen at lowering time."""
    if setting != AUTO:
        return run(setting)
    return jax.lax.platform_dependent(cpu=lambda: run(CPU_SETTING),
                                      default=lambda: run(ACCELERATOR_SETTING))


def steps_per_item(setting: int | str, devices: int, backend: str) -> bool:
    """Whether the loop takes items one batch at a time where that is slow: on an accelerator
    (`backend` not "cpu"), or on several devices, whose batch axis the loop would walk."""
    per_step = (CPU_SETTING if backend == "cpu" else ACCELERATOR_SETTING) if setting == AUTO \
        else setting
    return per_step != ACCELERATOR_SETTING and (devices > 1 or backend != "cpu")

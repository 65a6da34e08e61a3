"""Data parallelism: a 1-D device mesh with axis "data", params replicated, batches split.

On several hosts (processes) call `initialize_distributed()` first; the mesh then spans the
devices of every process. Every process reads the whole dataset and builds the same global batch
(the batcher is deterministic given seed and epoch); `shard_batch` puts on each of this process's
devices the rows the mesh assigns it, so the global array is the same as on one host.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxenc.errors import ConfigError
from jaxenc.layers.loops import AUTO, steps_per_item

log = logging.getLogger(__name__)

DATA_AXIS = "data"
# Read by `initialize_distributed` where no cluster manager says it (jax.distributed reads
# JAX_COORDINATOR_ADDRESS itself): how many processes take part and which one this is.
NUM_PROCESSES_ENV, PROCESS_ID_ENV = "JAXENC_NUM_PROCESSES", "JAXENC_PROCESS_ID"


def initialize_distributed() -> None:
    """jax.distributed.initialize() for a multi-process (multi-host) run, once per process.

    Under SLURM, Open MPI, a Cloud TPU pod or Kubernetes JAX finds the coordinator, the process
    count and this process's id by itself. Elsewhere set $JAX_COORDINATOR_ADDRESS (host:port of
    process 0), $JAXENC_NUM_PROCESSES and $JAXENC_PROCESS_ID on every process (docs/
    ARCHITECTURE.md, "Multi-host"). CPU processes exchange gradients through gloo (JAX's
    default CPU collectives).
    """
    if jax.distributed.is_initialized():
        return
    kwargs = {}
    if os.environ.get(NUM_PROCESSES_ENV) or os.environ.get(PROCESS_ID_ENV):
        try:
            kwargs = {"num_processes": int(os.environ[NUM_PROCESSES_ENV]),
                      "process_id": int(os.environ[PROCESS_ID_ENV])}
        except (KeyError, ValueError):
            raise ConfigError(f"${NUM_PROCESSES_ENV}={os.environ.get(NUM_PROCESSES_ENV)!r} and "
                              f"${PROCESS_ID_ENV}={os.environ.get(PROCESS_ID_ENV)!r} (fix: set "
                              "both, to integers, on every process, or neither under a cluster "
                              "manager)") from None
    jax.distributed.initialize(**kwargs)
    log.info("process %d of %d: %d local of %d devices", jax.process_index(),
             jax.process_count(), jax.local_device_count(), jax.device_count())


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A mesh over `devices` (default: every device of every process) with the one axis "data"."""
    devices = list(jax.devices() if devices is None else devices)
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    """Every device holds the whole array (parameters, optimiser state)."""
    return NamedSharding(mesh, PartitionSpec())


def data_sharded(mesh: Mesh) -> NamedSharding:
    """The leading (batch) axis is split over "data"."""
    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def check_batch_size(batch_size: int, mesh: Mesh, key: str = "data.batch_size") -> None:
    """ConfigError unless the global batch (config key `key`) splits evenly over the mesh. The
    batch size is not changed to fit: it changes what training computes (the optimiser's steps),
    so the message offers the next multiple of the device count instead."""
    devices = mesh.shape[DATA_AXIS]
    if batch_size % devices:
        raise ConfigError(f"--config.{key}={batch_size} does not split over {devices} devices "
                          f"(fix: --config.{key}={-(-batch_size // devices) * devices}, a "
                          f"multiple of {devices})")


def check_batch_sizes(data_cfg: Mapping[str, Any], mesh: Mesh) -> None:
    """`check_batch_size` of data.batch_size and data.eval_batch_size."""
    for key in ("batch_size", "eval_batch_size"):
        check_batch_size(data_cfg[key], mesh, f"data.{key}")


def check_loop_settings(encoder_config: object, mesh: Mesh) -> None:
    """Warns when an encoder's attention loop steps through the batch's items where that is slow
    (jaxenc.layers.loops): on an accelerator, or on several devices, where the loop walks the
    batch axis that the devices split and XLA gathers the whole axis on every device, which
    computes all of it (no data-parallel speed-up). The loops are DiSAN's blocked token2token
    attention and PSAN's streaming form (`examples_per_step`) and PSAN's packed phrase attention
    (`packed_chunk`). "auto" warns only on several CPU devices, where it takes one item per
    step."""
    devices, backend = mesh.shape[DATA_AXIS], jax.default_backend()
    impl, psa_impl = (getattr(encoder_config, name, None)
                      for name in ("attention_impl", "psa_impl"))
    looping = {"examples_per_step": impl not in (None, "dense") or psa_impl == "streaming",
               "packed_chunk": psa_impl == "packed"}
    for field, loops in looping.items():
        setting = getattr(encoder_config, field, AUTO)
        if loops and steps_per_item(setting, devices, backend):
            log.warning("model.%s=%s on %d %s device(s): the attention loop steps through the "
                        "batch (fix: --config.model.%s=%s)", field, setting, devices, backend,
                        field, 0 if devices > 1 else AUTO)


def shard_batch(batch: Mapping[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
    """Global host batch (the same on every process) -> global arrays split over "data" along
    axis 0; each process transfers only the rows of its own devices."""
    sharding = data_sharded(mesh)
    if jax.process_count() == 1:
        return {key: jax.device_put(value, sharding) for key, value in batch.items()}
    return {key: jax.make_array_from_callback(value.shape, sharding,
                                              lambda index, value=value: value[index])
            for key, value in batch.items()}

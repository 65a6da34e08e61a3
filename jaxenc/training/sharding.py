"""Data parallelism: a 1-D device mesh with axis "data", params replicated, batches split.

On several hosts call `initialize_distributed()` first. Every host builds the same global batch
(the batcher is deterministic given seed and epoch); `shard_batch` keeps this process's rows and
assembles the global array from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxenc.errors import ConfigError

DATA_AXIS = "data"


def initialize_distributed(coordinator_address: str = "", num_processes: int = 0,
                           process_id: int = -1) -> None:
    """jax.distributed.initialize(); empty/default arguments let JAX auto-detect the cluster."""
    kwargs = {}
    if coordinator_address:
        kwargs = {"coordinator_address": coordinator_address, "num_processes": num_processes,
                  "process_id": process_id}
    jax.distributed.initialize(**kwargs)


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


def check_batch_size(batch_size: int, mesh: Mesh) -> None:
    """ConfigError unless the global batch splits evenly over the mesh."""
    devices = mesh.shape[DATA_AXIS]
    if batch_size % devices:
        raise ConfigError(f"data.batch_size={batch_size} does not split over {devices} devices "
                          f"(fix: use a multiple of {devices})")


def shard_batch(batch: Mapping[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
    """Global host batch -> global arrays split over "data" along axis 0."""
    sharding = data_sharded(mesh)
    processes = jax.process_count()
    if processes == 1:
        return {key: jax.device_put(value, sharding) for key, value in batch.items()}
    index = jax.process_index()
    return {key: jax.make_array_from_process_local_data(
                sharding, np.array_split(value, processes)[index], value.shape)
            for key, value in batch.items()}

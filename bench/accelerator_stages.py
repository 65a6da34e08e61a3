"""The stages of the GPU run (bench.accelerator) that run in a fresh process of their own, JAX
inside: the devices and matmul peaks, bench.run per length, the flax and PyTorch Transformer
benches; `child` runs one and writes its result, or its error, as JSON."""

from __future__ import annotations

import json
import math
import os
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

from bench import device_wheels

MIB = 2**20


def one_line(error: BaseException, limit: int = 400) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:limit]}"


def device_memory() -> dict | None:
    """The device's peak and limit in MiB (memory_stats), None where the backend has none."""
    import jax

    stats = jax.devices()[0].memory_stats()
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    return dict(peak_mib=stats["peak_bytes_in_use"] / MIB,
                limit_mib=stats.get("bytes_limit", 0) / MIB)


def matmul_peak(size: int, dtype: str, repeats: int) -> float:
    """FLOP/s of a size^3 matmul in `dtype` (best of `repeats`, random operands)."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (size, size), dtype)
    b = jax.random.normal(jax.random.key(1), (size, size), dtype)
    matmul = jax.jit(jnp.dot)
    matmul(a, b).block_until_ready()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best


def stage_devices(settings: Mapping, scratch: Path) -> dict:
    import jax

    devices = jax.devices()
    print(f"jax {jax.__version__} devices: {devices}", flush=True)
    found = dict(jax=jax.__version__, backend=jax.default_backend(),
                 devices=[str(device) for device in devices],
                 device_kind=devices[0].device_kind, gpu=jax.default_backend() == "gpu")
    if settings["need_gpu"] and not found["gpu"]:
        return found  # refused by the caller: nothing to measure
    peaks = {dtype: matmul_peak(settings["peak_size"], dtype, settings["peak_repeats"])
             for dtype in ("float32", "bfloat16")}
    print("matmul peak: " + ", ".join(f"{dtype} {flops / 1e12:.1f} TFLOP/s"
                                      for dtype, flops in peaks.items()), flush=True)
    for module in ("bench.run", "bench.bench_flax_transformer", "jaxenc.training.main",
                   "jaxenc.training.loop", "train.configs.default"):
        __import__(module)
    return dict(found, matmul_peak_flops=peaks, matmul_size=settings["peak_size"])


def stage_bench(settings: Mapping, scratch: Path, stage: str) -> dict:
    """bench.run, one call per length, each into scratch/stage/L<length>."""
    import jax

    from bench import run
    from bench.machine import available_mib

    argv = [*settings["bench"], "--batch", str(settings["batch"][stage])]
    limit = device_memory()
    if limit and limit["limit_mib"]:
        # bench.run's memory guard compares XLA's compiled peak with a fraction of the host's
        # available memory; here the device's pool is the limit
        argv += ["--memory_fraction", f"{0.9 * limit['limit_mib'] / available_mib():.4f}"]
    errors = {}
    for length in settings["lengths"][stage]:
        print(f"{stage}: bench.run at L {length} on {jax.devices()[0].device_kind}", flush=True)
        try:
            run.main([*argv, "--lengths", str(length), "--out",
                      str(scratch / stage / f"L{length}")])
        except BaseException as error:  # noqa: BLE001 - e.g. out of memory: the next length runs
            traceback.print_exc()
            errors[length] = one_line(error, 300)
    if len(errors) == len(settings["lengths"][stage]):
        raise RuntimeError(f"bench.run failed at every length: {errors}")
    return dict(argv=argv, length_errors=errors)


def stage_flax(settings: Mapping, scratch: Path) -> dict:
    from bench import bench_flax_transformer

    return dict(rows=bench_flax_transformer.main(settings["flax"]))


def stage_torch(settings: Mapping, scratch: Path) -> dict:
    os.environ["JAX_PLATFORMS"] = "cpu"  # torch alone holds the GPU in this process
    from bench import bench_torch_transformer

    missing = bench_torch_transformer.cuda_missing()
    if missing:
        print(f"torch: skipped ({missing})", flush=True)
        return dict(skipped=missing, rows=[])
    return dict(rows=bench_torch_transformer.main(settings["torch"]))


STAGE_FUNCTIONS: dict[str, Callable[..., dict]] = dict(
    devices=stage_devices, flax=stage_flax, torch=stage_torch,
    bench_b64=lambda settings, scratch: stage_bench(settings, scratch, "bench_b64"),
    bench_b512=lambda settings, scratch: stage_bench(settings, scratch, "bench_b512"))


def child(stage: str, settings: Mapping, scratch: str, result_file: str) -> None:
    """A stage in this (fresh) process; its result, or its error, as JSON in `result_file`."""
    try:
        result = STAGE_FUNCTIONS[stage](settings, Path(scratch))
        if stage != "torch":
            result["device_memory"] = device_memory()
    except BaseException as error:  # noqa: BLE001 - the parent reports it and goes on
        traceback.print_exc()
        result = dict(error=one_line(error))
    result["imported_beyond_image"] = device_wheels.imported_beyond_image()
    Path(result_file).write_text(json.dumps(result, default=str))

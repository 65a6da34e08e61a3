"""Measuring helpers shared by the benchmarks: wall/CPU timing of jitted steps taken in turns,
the machine's measured f32 matmul peak, compiled memory, and a generic encoder train step.

Timings are medians over interleaved repeats (variants take turns, so load drifts on a shared
machine hit all alike); ratios are only ever taken between variants measured in the same run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp

MIB = 2.0**20


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of fn() until its result is ready."""
    wall, cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn())
    return time.perf_counter() - wall, time.process_time() - cpu


def matmul_peak_flops(size: int = 2048, repeats: int = 10) -> float:
    """Measured f32 matmul FLOP/s of this machine (best of `repeats`)."""
    a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    matmul = jax.jit(jnp.dot)
    matmul(a, a).block_until_ready()
    best = min(timed(lambda: matmul(a, a))[0] for _ in range(repeats))
    return 2.0 * size**3 / best


def train_step(model, params, sentence):
    """Compiled loss-and-gradients step of an encoder and its arguments (params, sentence, rng):
    forward with dropout, a loss on the sentence vectors, gradients w.r.t. every parameter."""

    def loss(params, sentence, dropout_key):
        out = model.apply(params, sentence, train=True, rngs={"dropout": dropout_key})
        return jnp.mean(jnp.square(out["sentence"]))

    arguments = (params, sentence, jax.random.key(1))
    return jax.jit(jax.value_and_grad(loss)).lower(*arguments).compile(), arguments


def encode_step(model, params, sentence):
    """Compiled inference (train=False) of the sentence vectors, and its arguments."""
    apply = jax.jit(lambda params, sentence: model.apply(params, sentence, train=False)["sentence"])
    return apply.lower(params, sentence).compile(), (params, sentence)


def memory_mib(compiled) -> tuple[float, float]:
    """(temp, peak = temp + arguments + outputs - aliased) of a compiled function, in MiB."""
    stats = compiled.memory_analysis()
    peak = (stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes
            - stats.alias_size_in_bytes)
    return stats.temp_size_in_bytes / MIB, peak / MIB


def time_in_turns(steps: Mapping[str, tuple[Callable, tuple]],
                  repeats: int) -> dict[str, tuple[float, float]]:
    """name -> (median wall s, median CPU s) of each compiled step(*arguments), warmed up once,
    the variants taking turns in every repeat."""
    for step, arguments in steps.values():
        jax.block_until_ready(step(*arguments))
    wall = {name: [] for name in steps}
    cpu = {name: [] for name in steps}
    for _ in range(repeats):
        for name, (step, arguments) in steps.items():
            seconds, cpu_seconds = timed(lambda step=step, arguments=arguments: step(*arguments))
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name]))
            for name in steps}


def parse_ints(text: str) -> list[int]:
    """"16,32,64" -> [16, 32, 64]."""
    return [int(value) for value in text.split(",") if value]

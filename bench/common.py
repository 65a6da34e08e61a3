"""Measuring helpers shared by the benchmarks: wall/CPU timing of jitted steps taken in turns,
the machine's measured f32 matmul peak, compiled memory, FLOPs counted from the jaxpr (loop
bodies times their trip counts), and a generic encoder train step.

Timings are medians over interleaved repeats (variants take turns, so load drifts on a shared
machine hit all alike); ratios are only ever taken between variants measured in the same run.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

MIB = 2.0**20

# jaxpr primitives counted as one transcendental per output element (XLA's convention).
TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos",
                  "tan", "sqrt", "rsqrt", "cbrt", "pow", "erf", "erfc", "erf_inv", "atan2",
                  "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "lgamma",
                  "digamma"}
# one FLOP per (floating) output element
ELEMENTWISE = {"add", "sub", "mul", "div", "neg", "max", "min", "abs", "sign", "select_n",
               "integer_pow", "square", "rem", "floor", "ceil", "round", "clamp", "add_any",
               "nextafter"}
# one FLOP per input element
REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin",
              "cumsum", "cummax", "cumlogsumexp"}


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


def _sub_jaxprs(params: dict) -> list:
    """The (closed) jaxprs among an equation's parameters (jit, checkpoint, custom_vjp, cond)."""
    found = []
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


def jaxpr_cost(jaxpr) -> dict[str, float]:
    """{"flops", "transcendentals"} of a jaxpr, every scan body counted `length` times (XLA's
    cost_analysis counts a loop body once). FLOPs: 2 m n k per dot_general, one per floating
    output element of an elementwise op, one per input element of a reduction; exp, tanh, ...
    count as transcendentals, not FLOPs. A cond counts its costliest branch; a while loop (trip
    count unknown) is an error."""
    total = {"flops": 0.0, "transcendentals": 0.0}
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "while":
            raise ValueError("jaxpr_cost: a while loop has no static trip count")
        if name == "scan":
            inner = jaxpr_cost(eqn.params["jaxpr"].jaxpr)
            for key in total:
                total[key] += eqn.params["length"] * inner[key]
            continue
        subs = _sub_jaxprs(eqn.params)
        if name == "cond":
            costs = [jaxpr_cost(sub) for sub in subs]
            for key in total:
                total[key] += max(cost[key] for cost in costs)
            continue
        if subs:
            for sub in subs:
                inner = jaxpr_cost(sub)
                for key in total:
                    total[key] += inner[key]
            continue
        out = eqn.outvars[0].aval
        if not jnp.issubdtype(out.dtype, jnp.floating):
            continue
        if name == "dot_general":
            (contracting, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            total["flops"] += 2.0 * math.prod(out.shape) * math.prod(lhs[i] for i in contracting)
        elif name in TRANSCENDENTAL:
            total["transcendentals"] += math.prod(out.shape)
        elif name in ELEMENTWISE:
            total["flops"] += math.prod(out.shape)
        elif name in REDUCTIONS:
            total["flops"] += math.prod(eqn.invars[0].aval.shape)
    return total


def counted_cost(fn: Callable, *arguments) -> dict[str, float]:
    """`jaxpr_cost` of fn(*arguments) (traced, not run)."""
    return jaxpr_cost(jax.make_jaxpr(fn)(*arguments).jaxpr)


def xla_flops(compiled) -> float:
    """FLOPs of XLA's cost analysis of a compiled function (loop bodies counted once)."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else {}
    return float(np.asarray(analysis.get("flops", float("nan"))))


def loss_and_grads(model):
    """loss(params, sentence, dropout_key) -> (loss, grads) of an encoder's training step:
    forward with dropout, a loss on the sentence vectors, gradients w.r.t. every parameter."""

    def loss(params, sentence, dropout_key):
        out = model.apply(params, sentence, train=True, rngs={"dropout": dropout_key})
        return jnp.mean(jnp.square(out["sentence"]))

    return jax.value_and_grad(loss)


def train_step(model, params, sentence):
    """Compiled `loss_and_grads` step of an encoder and its arguments (params, sentence, rng)."""
    arguments = (params, sentence, jax.random.key(1))
    return jax.jit(loss_and_grads(model)).lower(*arguments).compile(), arguments


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

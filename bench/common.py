"""Measuring helpers shared by the benchmarks: wall/CPU timing of jitted steps taken in turns,
the machine's measured f32 matmul peak, compiled memory and FLOPs (also counted from the jaxpr,
loop bodies times their trip counts), compilation counting, a generic encoder train / encode
step, one-core pinning for host rates, and synthetic batches with real-shaped structure arrays.

Timings are medians over interleaved repeats (variants take turns, so load drifts on a shared
machine hit all alike), each timed call right after an untimed call of the same step (so no step
inherits the state of the variant before it); ratios are only ever taken between variants
measured in the same run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import re
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.data.featurize import Featurizer
from jaxenc.data.vocab import Vocabulary
from jaxenc.models.registry import structure_spec
from jaxenc.records import Example, Sentence
from jaxenc.structures.arrays import UD_RELATIONS, build_relation_vocab

MIB = 2.0**20
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
# the element types of an HLO shape, e.g. "(s32[], u32[4,8]{1,0})" -> s32, u32
_ELEMENT_TYPE = re.compile(r"\b([a-z]+\d*)\[")

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
        return jnp.mean(jnp.square(out["sentence"].astype(jnp.float32)))

    return jax.value_and_grad(loss)


def train_function(model) -> Callable:
    """`loss_and_grads(model)`, jitted: called as (variables, sentence, dropout key)."""
    return jax.jit(loss_and_grads(model))


def encode_function(model) -> Callable:
    """The jitted inference (train=False) of the sentence vectors: (variables, sentence)."""
    return jax.jit(lambda params, sentence: model.apply(params, sentence, train=False)["sentence"])


def train_step(model, params, sentence):
    """Compiled `train_function` of an encoder and its arguments (params, sentence, rng)."""
    arguments = (params, sentence, jax.random.key(1))
    return train_function(model).lower(*arguments).compile(), arguments


def encode_step(model, params, sentence):
    """Compiled `encode_function` of an encoder, and its arguments."""
    return encode_function(model).lower(params, sentence).compile(), (params, sentence)


def compile_timed(function: Callable, *arguments) -> tuple[object, float]:
    """(compiled, seconds to lower and compile) of a jitted function; the arguments may be
    abstract (jax.ShapeDtypeStruct). Calling the jitted function later with arrays of the same
    shapes reuses this compilation (`time_in_turns` counts any that does not)."""
    start = time.perf_counter()
    compiled = function.lower(*arguments).compile()
    return compiled, time.perf_counter() - start


def memory_mib(compiled) -> tuple[float, float]:
    """(temp, peak = temp + arguments + outputs - aliased) of a compiled function, in MiB."""
    stats = compiled.memory_analysis()
    peak = (stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes
            - stats.alias_size_in_bytes)
    return stats.temp_size_in_bytes / MIB, peak / MIB


def random_bits_loop(line: str) -> bool:
    """Whether an HLO while instruction is one of jax's random-bit loops (threefry rounds, e.g.
    of dropout masks; a CPU rolls them into a loop, a GPU unrolls them): its state is its s32
    counter and u32 words only, where a model's loops carry floats."""
    types = _ELEMENT_TYPE.findall(line.split(" while(", 1)[0].split("=", 1)[-1])
    return types.count("s32") == 1 and set(types) == {"s32", "u32"}


def flop_count(compiled) -> tuple[float, bool]:
    """(FLOPs of one call from XLA's cost analysis, exact). XLA counts the body of a loop (a
    while, e.g. lax.scan / lax.map) once, not once per trip: with a loop the count is a lower
    bound and `exact` is False. The random-bit loops of dropout (threefry rounds: integer work,
    `random_bits_loop`) do not count as loops here."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, Sequence):  # older jax: one dict per program
        analysis = analysis[0]
    loops = [line for line in compiled.as_text().splitlines() if " while(" in line
             and not random_bits_loop(line)]
    return float(analysis.get("flops", 0.0)), not loops


@functools.cache
def _compile_events() -> list[int]:
    """A one-element counter of backend compilations, kept by a jax.monitoring listener."""
    count = [0]

    def listener(event: str, seconds: float, **kwargs) -> None:
        del seconds, kwargs
        if event == BACKEND_COMPILE_EVENT:
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    return count


def compile_count() -> int:
    """Backend compilations (XLA programs built, jitted or eager) since the first call."""
    return _compile_events()[0]


class Rotation(list):
    """Argument tuples a timed step cycles through, one per call: new data of the same shapes
    each repeat (a recompilation would show in `Timing.compiles`)."""


class Timing(NamedTuple):
    """Median wall and process-CPU seconds of a step's timed calls, how many there were, and the
    backend compilations during them (0: nothing recompiled after the warm-up)."""

    wall: float
    cpu: float
    calls: int
    compiles: int


def time_in_turns(steps: Mapping[str, tuple[Callable, tuple | Rotation]], repeats: int, *,
                  budget_s: float | None = None, settle: bool = True) -> dict[str, Timing]:
    """name -> Timing of each step(*arguments), warmed up once, the variants taking turns in every
    repeat. `arguments` is one tuple, or a Rotation of tuples used in turn. With `budget_s`, a
    step whose warm-up call took w seconds gets max(1, min(repeats, budget_s / (k w) - 1)) timed
    calls (k = 2 with `settle`, else 1), so no variant takes much longer than the budget.

    settle: each timed call follows an untimed call of the same step in its turn, so it is timed
    as in training, where the same step repeats. Without it a step is timed right after another
    variant's and inherits that one's state: right after DiSAN's dense step (3.8 GiB at batch
    64, L 64) the next variant's step ran slower (bench/bench_disan.py; every XLA:CPU step maps
    and first-touches its temp buffer), which biased any ratio of two variants by the turn order
    (results/disan/speed.md, "A turn-order bias in the timings").
    """
    counter = _compile_events()
    calls_per_timed = 2 if settle else 1

    def arguments_of(name: str, call: int) -> tuple:
        arguments = steps[name][1]
        return arguments[call % len(arguments)] if isinstance(arguments, Rotation) else arguments

    calls = {}
    for name, (step, _) in steps.items():
        warm_up = timed(lambda step=step, name=name: step(*arguments_of(name, 0)))[0]
        allowed = (repeats if budget_s is None
                   else int(budget_s / (calls_per_timed * max(warm_up, 1e-9))) - 1)
        calls[name] = max(1, min(repeats, allowed))
    wall = {name: [] for name in steps}
    cpu = {name: [] for name in steps}
    compiles = dict.fromkeys(steps, 0)
    for call in range(repeats):
        for name, (step, _) in steps.items():
            if call >= calls[name]:
                continue
            run = functools.partial(step, *arguments_of(name, call + 1))
            before = counter[0]
            if settle:
                timed(run)
            seconds, cpu_seconds = timed(run)
            compiles[name] += counter[0] - before
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    return {name: Timing(statistics.median(wall[name]), statistics.median(cpu[name]),
                         calls[name], compiles[name]) for name in steps}


@contextlib.contextmanager
def one_core() -> Iterator[None]:
    """Pins the calling thread to one CPU core (host rates are per core), then restores it."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores)


def measure_and_report(measure: Callable[[object], list[dict]],
                       markdown: Callable[[list[dict], object, tuple[float, float]], str],
                       args) -> list[dict]:
    """rows = measure(args); prints markdown(rows, args, (load average at the start, at the
    end)) and writes it to `args.out` too when that is set."""
    start = os.getloadavg()[0]
    rows = measure(args)
    table = markdown(rows, args, (start, os.getloadavg()[0]))
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
    return rows


def parse_ints(text: str) -> list[int]:
    """"16,32,64" -> [16, 32, 64]."""
    return [int(value) for value in text.split(",") if value]


def phrase_data_bound(segments: np.ndarray, lengths: np.ndarray, bucket: int) -> float:
    """PSAN's attention elements sum over levels and phrases of l^2, over DiSAN's dense 2 B L^2
    (two directions), of a batch's segments int32[B, T, L]."""
    total = sum(int((np.bincount(row[row >= 0]) ** 2).sum()) for sentence in segments
                for row in sentence)
    return total / (2 * len(lengths) * bucket**2)


def random_heads(words: int, rng: np.random.Generator) -> list[int]:
    """1-based heads (0 = root) of a random projective dependency tree over `words` words: a
    span's head is a random word of it, each side of it splits into 1-3 dependent subtrees."""
    heads = [0] * words
    spans = [(0, words, 0)]  # (first, end, 1-based head of the span's own head)
    while spans:
        first, end, head = spans.pop()
        top = int(rng.integers(first, end))
        heads[top] = head
        for side_first, side_end in ((first, top), (top + 1, end)):
            size = side_end - side_first
            if size <= 0:
                continue
            pieces = min(int(rng.integers(1, 4)), size)
            cuts = np.sort(rng.choice(np.arange(1, size), pieces - 1, replace=False)) if (
                pieces > 1) else np.array([], np.int64)
            bounds = [side_first, *(side_first + cuts).tolist(), side_end]
            spans += [(a, b, top + 1) for a, b in zip(bounds, bounds[1:], strict=False)]
    return heads


def random_examples(count: int, words: int, vocab_words: int, seed: int) -> list[Example]:
    """`count` single-sentence examples of `words` random words ("w<id>", ids < vocab_words)
    with random projective dependency trees and UD labels (constituency trees are derived from
    them, as for spaCy-parsed data)."""
    rng = np.random.default_rng(seed)
    examples = []
    for index in range(count):
        heads = random_heads(words, rng)
        tokens = tuple(f"w{i}" for i in rng.integers(0, vocab_words, words))
        labels = tuple("root" if head == 0 else str(rng.choice(UD_RELATIONS)) for head in heads)
        sentence = Sentence(tokens=tokens, text=" ".join(tokens), heads=tuple(heads),
                            deprels=labels)
        examples.append(Example(sentences=(sentence,), label=0, uid=f"synthetic:{index}"))
    return examples


def synthetic_batches(model_cfg: Mapping, length: int, batch_size: int, num_batches: int, *,
                      vocab_words: int = 10_000, seed: int = 0) -> tuple[list[dict], int]:
    """(`num_batches` sentence-field dicts of full-length rows at bucket `length`, vocabulary
    size) for the encoder of `model_cfg`: random words and trees through the real featurizer
    (gold trees; the model's structure fields, prefix tokens and options) and batcher (its
    packing plan, planned over these batches), as in training. Every model gets the same trees
    for the same (length - prefix tokens, seed)."""
    needs = structure_spec(model_cfg)
    words = length - len(needs.prefix_tokens)
    examples = random_examples(batch_size * num_batches, words, vocab_words, seed + length)
    vocab = Vocabulary.build([[f"w{i}" for i in range(vocab_words)]])
    options = dict(model_cfg)
    if "parser" in options:
        options["parser"] = "gold"
    relations = None
    if "relations" in needs.fields:
        relations = build_relation_vocab([e.sentences[0] for e in examples], "gold",
                                         max_distance=options.get("max_distance", 2),
                                         keep_subtypes=options.get("keep_subtypes", False))
    featurizer = Featurizer(kind="single", vocab=vocab,
                            model_cfg=ml_collections.ConfigDict(options),
                            structure_fields=needs.fields, prefix=needs.prefix_tokens,
                            relation_vocab=relations)
    packing = needs.packing and dataclasses.replace(needs.packing, epochs=1)
    batcher = Batcher(featurizer.many(examples), batch_size=batch_size, buckets=(length,),
                      shuffle=True, seed=seed, packing=packing)
    return [sentence_fields(batch, "sentence") for batch in batcher.epoch(0)], len(vocab)

"""The measurements of bench.run: every variant of a plan compiled at each length (compile
times, XLA's memory and cost analysis, kernels), then timed in turns, behind the guards that keep
a run from hanging or swapping."""

from __future__ import annotations

import argparse
import functools
import math
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import ml_collections

from bench.common import (
    Rotation,
    compile_timed,
    encode_function,
    flop_count,
    memory_mib,
    phrase_data_bound,
    synthetic_batches,
    time_in_turns,
    train_function,
)
from bench.kernels import bytes_accessed, count_hlo
from bench.machine import available_mib
from bench.plan import Plan
from bench.rows import STEPS
from jaxenc.errors import ConfigError
from jaxenc.models.registry import build_encoder, encoder_config, structure_spec
from jaxenc.training.compilation import persistent_cache


def predicted(history: Sequence[tuple[int, float]], length: int, lowest: float,
              highest: float) -> float | None:
    """A time at `length` extrapolated from (length, seconds) at shorter lengths, growing as
    length^e with e from the last two points clamped to [lowest, highest] (highest with one)."""
    if not history:
        return None
    (last_length, last), exponent = history[-1], highest
    if len(history) > 1:
        first_length, first = history[-2]
        exponent = math.log(max(last, 1e-9) / max(first, 1e-9)) / math.log(last_length /
                                                                             first_length)
    return last * (length / last_length) ** min(max(exponent, lowest), highest)


class Measurer:
    """Measures the variants length by length, keeping what guards the longer lengths."""

    def __init__(self, plan: Plan, args: argparse.Namespace, widths: Mapping):
        self.plan, self.args, self.widths = plan, args, widths
        self.compile_history: dict[tuple[str, str], list[tuple[int, float]]] = {}
        self.step_history: dict[tuple[str, str], list[tuple[int, float]]] = {}
        self.stopped: dict[str, str] = {}  # label -> why it is no longer run (time guard)
        # parameter shapes do not depend on the length: variants with the same shapes
        # (implementations, dtypes, lengths) share one initialisation
        self.params: dict[tuple[int, str], Any] = {}

    def log(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def data(self, cfg: ml_collections.ConfigDict, length: int, memo: dict) -> tuple:
        """(device batches, vocabulary size, PSAN data bound or None), shared by the variants
        whose featurizer output is the same."""
        needs = structure_spec(cfg)
        options = {key: cfg[key] for key in ("num_levels", "min_split_len", "binarize",
                                             "max_distance", "max_level", "keep_subtypes",
                                             "division") if key in cfg}
        key = repr((needs, sorted(options.items())))
        if key not in memo:
            batches, vocab_size = synthetic_batches(cfg, length, self.args.batch,
                                                    self.args.batches,
                                                    vocab_words=self.args.vocab,
                                                    seed=self.args.seed)
            bound = None
            if "segments" in batches[0]:
                bound = phrase_data_bound(batches[0]["segments"], batches[0]["lengths"], length)
            memo[key] = ([jax.device_put(batch) for batch in batches], vocab_size, bound,
                         int(batches[0]["lengths"].sum()))
        return memo[key]

    def length(self, length: int) -> list[dict]:
        """Compiles every variant at `length`, then times those that pass the guards in turns."""
        args, memo, rows, steps, shared_params = self.args, {}, {}, {}, self.params
        lines = {line(length) for line in self.plan.lines.values()}
        dropout_key = jax.device_put(jax.random.key(1))
        for variant in self.plan.variants:
            row = rows[variant.label] = dict(variant=variant.label, model=variant.model,
                                             dtype=variant.dtype, length=length, batch=args.batch,
                                             status="ok", reason=None, train=None, encode=None)
            kinds = STEPS if variant.label in lines and not args.kernels_only else STEPS[:1]
            try:
                cfg = variant.config(self.widths)
                encoder_config(cfg)  # a refused config (e.g. an unsupported dtype) fails here
                late = [(kind, seconds) for kind in kinds if (seconds := predicted(
                    self.compile_history.get((variant.label, kind), []), length, 0.0, 1.0))
                    and seconds > args.max_compile_s]
                if late:
                    row.update(status="not compiled", reason=(
                        f"predicted {late[0][0]} compile {late[0][1]:.0f} s > "
                        f"--max_compile_s {args.max_compile_s:g}"))
                    continue
                batches, vocab_size, bound, tokens = self.data(cfg, length, memo)
                encoder = build_encoder(cfg, vocab_size)
                row.update(tokens=tokens, data_bound=bound)
                init = functools.partial(encoder.init, train=False)
                abstract = jax.eval_shape(init, jax.random.key(0), batches[0])
                functions = {"train": train_function(encoder), "encode": encode_function(encoder)}
                arguments = {"train": lambda params, batch: (params, batch, dropout_key),
                             "encode": lambda params, batch: (params, batch)}
                for kind in kinds:
                    with tempfile.TemporaryDirectory() as folder, persistent_cache(folder):
                        compiled, seconds = compile_timed(functions[kind],
                                                          *arguments[kind](abstract, batches[0]))
                        # the same program through a new jitted function: traced and lowered
                        # again, XLA's executable read from the persistent compilation cache
                        cached = None if args.kernels_only else compile_timed(
                            train_function(encoder) if kind == "train" else
                            encode_function(encoder), *arguments[kind](abstract, batches[0]))[1]
                    temp, peak = memory_mib(compiled)
                    flops, exact = flop_count(compiled)
                    counted = count_hlo(compiled.as_text())
                    row[kind] = dict(compile_s=seconds, cached_compile_s=cached, temp_mib=temp,
                                     peak_mib=peak, flops=flops, flops_exact=exact,
                                     flops_from=variant.label, kernels=counted.kernels,
                                     kernels_exact=not counted.unknown_loops,
                                     bytes_accessed=bytes_accessed(compiled),
                                     bytes_exact=exact)
                    self.compile_history.setdefault((variant.label, kind), []).append(
                        (length, seconds))
                if args.kernels_only:
                    row.update(status="compiled only", reason="--kernels-only")
                    self.log(f"L={length} {variant.label}: {counted.kernels:,} kernels")
                    continue
                reason = self.run_guard(variant.label, row, kinds, length)
                if reason:
                    row.update(status="compiled only", reason=reason)
                    continue
                shapes = (vocab_size, repr(jax.tree.map(lambda x: (x.shape, x.dtype), abstract)))
                if shapes not in shared_params:
                    shared_params[shapes] = jax.jit(init)(jax.random.key(0), batches[0])
                for kind in kinds:
                    steps[variant.label, kind] = (functions[kind], Rotation(
                        arguments[kind](shared_params[shapes], batch) for batch in batches))
                self.log(f"L={length} {variant.label}: compiled in " + " + ".join(
                    f"{row[kind]['compile_s']:.1f}" for kind in kinds) +
                    f" s, train peak {row['train']['peak_mib']:,.0f} MiB")
            except ConfigError as error:
                row.update(status="unsupported", reason=str(error))
            except Exception as error:  # noqa: BLE001 - one variant's failure is reported
                row.update(status="failed", reason=f"{type(error).__name__}: "
                           f"{' '.join(str(error).split())[:300]}")
                self.log(f"L={length} {variant.label} failed: {row['reason']}")
        if args.kernels_only:
            return list(rows.values())
        self.log(f"L={length}: timing {len(steps)} steps in turns, {args.repeats} repeats")
        timings = time_in_turns(steps, args.repeats, budget_s=args.budget_s)
        for (label, kind), timing in timings.items():
            function = steps[label, kind][0]
            row = rows[label]
            row[kind].update(wall_s=timing.wall, cpu_s=timing.cpu, calls=timing.calls,
                             recompiles=max(timing.compiles, function._cache_size() - 1),
                             sentences_per_s=args.batch / timing.wall,
                             tokens_per_s=row["tokens"] / timing.wall)
            self.step_history.setdefault((label, kind), []).append((length, timing.wall))
        return list(rows.values())

    def run_guard(self, label: str, row: dict, kinds: Sequence[str], length: int) -> str | None:
        """Why a compiled variant is not run at this length (memory, predicted time), or None."""
        args = self.args
        if label in self.stopped:
            return self.stopped[label]
        limit = args.memory_fraction * available_mib()
        if row["train"]["peak_mib"] > limit:
            return (f"compiled peak {row['train']['peak_mib']:,.0f} MiB > --memory_fraction "
                    f"{args.memory_fraction:g} of the available memory ({limit:,.0f} MiB)")
        for kind in kinds:
            history = self.step_history.get((label, kind), [])
            seconds = predicted(history, length, 1.0, 2.5)
            if seconds and seconds > args.max_step_s:
                self.stopped[label] = (f"predicted {kind} step {seconds:.0f} s at L={length} "
                                       f"(from {history[-1][1]:.1f} s at L={history[-1][0]}) > "
                                       f"--max_step_s {args.max_step_s:g}")
                return self.stopped[label]
        return None

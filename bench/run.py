"""Every registered encoder side by side on this machine, in one run: train-step and encode
throughput, compile time, peak memory, FLOPs and achieved FLOP/s per model and sentence length,
the ratios between them, and the host-side rates. Writes OUT/results.json, OUT/report.md,
OUT/throughput.png and OUT/memory.png.

    python -m bench.run --models all --lengths 16,32,64,128,256 --batch 64 --out results/bench/cpu
    python -m bench.run --quick --out /tmp/bench       # all models, 2 lengths, batch 16: < 10 min
    python -m bench.run --tiny --lengths 8,16 --batch 4 --repeats 1 --host off --out /tmp/smoke
    python -m bench.run --kernels-only --lengths 64 --batch 64 --out /tmp/kernels  # no timing

Models are built from their registry presets (paper widths; --tiny: the encoder contract test's
TINY widths; the attention loops set for the backend, `loop_settings`) with random token ids
and REAL-shaped structure arrays: random projective dependency trees of full-length sentences
go through the real featurizer (gold trees: dependency relations, levels, heads, derived phrase
trees, PSAN's segments / blocks) and batcher (PSAN's packing plan), as in training
(bench.common.synthetic_batches). Each variant is measured at each length:
  - train step: forward (dropout on) + backward of the encoder with a loss on the sentence
    vectors, gradients w.r.t. every parameter; encode: the sentence vectors, train=False (for
    each model's preset only: the other variants are compared by their train steps);
  - compile s: lowering + XLA compilation, cold (an empty persistent compilation cache) and
    cached (the same program again through a new jitted function: traced and lowered, XLA's
    executable read from the cache, as in a rerun or a resume); temp / peak MiB: XLA's compiled
    memory analysis (peak = temp + arguments + outputs); FLOPs: XLA's compiled cost analysis (a
    loop body counts once: such counts are lower bounds, or borrowed from a loop-free
    implementation of the same math);
  - kernels: the kernels one call launches, a proxy from the program compiled here
    (bench.kernels.count_hlo: a loop's body counted once per trip); H100 bound: the least time
    of the step on one H100, the largest of FLOPs at its peak, bytes accessed (XLA's cost
    analysis) at its memory bandwidth and kernels at a launch each (bench.kernels.h100_bound);
    --kernels-only compiles the train steps with the GPU loop settings and writes only these;
  - sentences/s and tokens/s: median over repeats after a warm-up call, every variant taking turns
    in each repeat (load drift on a shared machine hits all alike), each timed call right after
    an untimed one of the same step (`bench.common.time_in_turns`: a step timed right after a
    bigger variant's was up to 1.4x slower), each call on another batch of the same shapes;
    achieved FLOP/s as a fraction of the f32 matmul peak measured in this run;
  - recompiles: XLA compilations during the timed calls (jax.monitoring) and extra entries in the
    jitted function's cache; must be 0.
Variants: every requested model at its preset; every choice of its implementation axis (AXES:
DiSAN's attention_impl, PSAN's psa_impl, PhraseTransformer's phase2, the Dependency-Transformer
with and without relations); DiSAN's blocked step with 32-bit dropout masks (flax's dropout, 32
random bits per decision: the reference of its speed goal, report.DISAN_BLOCKED_32BIT); with --dtype
bfloat16/both, each model's preset with model.dtype=bfloat16 (parameters f32, compute bf16; a
model that refuses it is reported); and a plain Transformer of each model's width (the
per-model reference).
Guards, so the run never hangs or swaps: a variant is only compiled when the compile time
predicted from shorter lengths is under --max_compile_s, only run when its compiled peak memory is
under --memory_fraction of the available memory and its step time predicted from shorter lengths
is under --max_step_s, and its repeats shrink to fit --budget_s; what was skipped says why.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import ml_collections
import numpy as np

from bench import bench_input, bench_packing, bench_parse, bench_structures, report
from bench.common import (
    Rotation,
    compile_timed,
    encode_function,
    flop_count,
    matmul_peak_flops,
    memory_mib,
    one_core,
    phrase_data_bound,
    synthetic_batches,
    time_in_turns,
    train_function,
)
from bench.kernels import bytes_accessed, count_hlo
from jaxenc import cli
from jaxenc.configs import model_config
from jaxenc.data.batching import bucket_lengths
from jaxenc.data.packing import PackingConfig
from jaxenc.data.paths import data_dir
from jaxenc.errors import ConfigError, JaxencError
from jaxenc.layers.masks import DirectionalMask
from jaxenc.layers.multidim_attention import IMPLEMENTATIONS, resolve_impl
from jaxenc.models import phrase_transformer, psan
from jaxenc.models.config import AUTO
from jaxenc.models.registry import ENCODERS, build_encoder, encoder_config, structure_spec
from jaxenc.training.compilation import persistent_cache

SCHEMA = 1
STEPS = ("train", "encode")
DTYPES = {"float32": ("float32",), "bfloat16": ("bfloat16",), "both": ("float32", "bfloat16")}
HOST_MODES = ("full", "quick", "off")
DEFAULTS = dict(lengths="16,32,64,128,256", batch=64, repeats=3, host="full", dtype="both")
QUICK = dict(lengths="16,64", batch=16, repeats=2, host="quick", dtype="float32")
WIDTH_FIELDS = ("model_dim", "hidden", "memory_dim", "embed_dim")  # a model's width: the first


class Axis(NamedTuple):
    """A config field whose every choice is measured (implementations of one model).

    Attributes:
      field: the model config field.
      choices: its values, read from the model's own list of choices where it has one.
      base: the choice the others are compared with.
      same_work: value -> the value whose loop-free FLOP count it shares (same math), or None.
      resolve: (preset config, length) -> the choice the preset computes at that length; None:
        the preset's value once its "auto" options are resolved (the built encoder's).
    """

    field: str
    choices: tuple[str, ...]
    base: str
    same_work: Callable[[str], str | None] = lambda value: None
    resolve: Callable[[Mapping[str, Any], int], str] | None = None


def disan_impl(cfg: Mapping[str, Any], length: int) -> str:
    """The token2token kernel a DiSAN config computes at this length: its attention, like the
    model's, has directional masks and the scaled tanh bounded by c."""
    return resolve_impl(cfg["attention_impl"], length, cfg["blocked_threshold"],
                        DirectionalMask(np.zeros(1, np.int32), "forward"), cfg["c"])


AXES: dict[str, Axis] = {
    "disan": Axis("attention_impl", tuple(i for i in IMPLEMENTATIONS if i != "auto"), "dense",
                  same_work=lambda impl: "dense", resolve=disan_impl),
    "psan": Axis("psa_impl", psan.PSA_IMPLS, "dense", same_work={"streaming": "dense"}.get),
    "phrase_transformer": Axis("phase2", tuple(p for p in phrase_transformer.PHASE2 if p != AUTO),
                               "dense"),
    "dependency_transformer": Axis("variant", ("full", "transformer"), "transformer"),
}


@dataclasses.dataclass(frozen=True)
class Variant:
    """One measured configuration: a registered model, overrides of its preset, a dtype."""

    label: str
    model: str
    overrides: tuple[tuple[str, Any], ...] = ()
    dtype: str = "float32"
    reference: bool = False  # a plain Transformer added as some model's same-width reference

    def config(self, widths: Mapping[str, Mapping[str, Any]]) -> ml_collections.ConfigDict:
        return model_config(self.model, **{**widths.get(self.model, {}), **dict(self.overrides),
                                           "dtype": self.dtype})


class Plan(NamedTuple):
    """The variants of a run; `lines[model](length)` is the label of the model's f32 preset at a
    length, `references[model]` the label of its same-width Transformer."""

    variants: list[Variant]
    lines: dict[str, Callable[[int], str]]
    references: dict[str, str]


class _Parser(argparse.ArgumentParser):
    """Usage errors as one-line ConfigErrors (reported by jaxenc.cli.reports_errors)."""

    def error(self, message: str):
        raise ConfigError(f"{message} (fix: see python -m bench.run --help)")


def parse_lengths(text: str) -> list[int]:
    """"16,32" -> [16, 32], sorted; a ConfigError unless every item is an integer >= 2."""
    try:
        lengths = sorted({int(item) for item in text.split(",") if item.strip()})
    except ValueError:
        lengths = []
    if not lengths or lengths[0] < 2:
        raise ConfigError(f"--lengths {text!r} is not a comma-separated list of integer lengths "
                          ">= 2 (fix: e.g. --lengths 16,32,64)")
    return lengths


def parse_models(text: str) -> list[str]:
    """"all" or a comma-separated list of registered encoders, in registry order."""
    names = list(ENCODERS) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [name for name in names if name not in ENCODERS]
    if unknown or not names:
        raise ConfigError(f"unknown model(s) {unknown or [text]} in --models (fix: 'all' or a "
                          f"comma-separated list of {', '.join(ENCODERS)})")
    return sorted(set(names), key=list(ENCODERS).index)


def tiny_widths() -> dict[str, dict[str, Any]]:
    """The encoder contract test's TINY widths (tests/test_encoder_contract.py)."""
    from tests.test_encoder_contract import TINY  # a test module: only --tiny needs it

    return TINY


def loop_settings(backend: str) -> dict[str, dict[str, int]]:
    """Each model's attention-loop settings for `backend`, what "auto" picks there
    (jaxenc.layers.loops), made explicit so that a CPU can compile a GPU's program: one example
    (DiSAN's blocked and directional loops, PSAN's streaming one) and one phrase (PSAN's packed
    attention) per step on a CPU, where that is fastest or as fast with the least memory
    (results/disan/speed.md, results/psan); the whole batch and a whole length class on
    accelerators."""
    per_step = int(backend == "cpu")
    return {"disan": dict(examples_per_step=per_step),
            "psan": dict(packed_chunk=per_step, examples_per_step=per_step)}


def with_loop_settings(widths: Mapping[str, Mapping[str, Any]],
                       backend: str) -> dict[str, dict[str, Any]]:
    """`widths` (each model's preset overrides) with this backend's loop settings under them."""
    loops = loop_settings(backend)
    return {model: {**loops.get(model, {}), **widths.get(model, {})}
            for model in {*loops, *widths}}


def width(cfg: Mapping[str, Any]) -> int:
    return next(cfg[field] for field in WIDTH_FIELDS if field in cfg)


def reference_overrides(cfg: Mapping[str, Any], widths: Mapping) -> dict[str, Any]:
    """A plain Transformer (its preset, or TINY sizes) at the model's width and embedding size."""
    base = model_config("transformer", **widths.get("transformer", {}))
    size = width(cfg)
    heads = base.num_heads
    while size % heads:
        heads -= 1
    return dict(model_dim=size, ff_dim=size * base.ff_dim // base.model_dim, num_heads=heads,
                embed_dim=cfg["embed_dim"])


def plan_variants(models: Sequence[str], dtypes: Sequence[str], widths: Mapping) -> Plan:
    variants: list[Variant] = []
    lines: dict[str, Callable[[int], str]] = {}
    for model in models:
        axis = AXES.get(model)
        if axis is None:
            if "float32" in dtypes:
                variants.append(Variant(model, model))
            lines[model] = functools.partial(lambda length, label: label, label=model)
        else:
            if "float32" in dtypes:
                variants += [Variant(report.axis_label(model, axis.field, value), model,
                                     ((axis.field, value),)) for value in axis.choices]
                if model == "disan":
                    variants.append(Variant(report.DISAN_BLOCKED_32BIT, model,
                                            (("attention_impl", "blocked"),
                                             ("dropout_bits", 32))))
            preset = Variant(model, model).config(widths)
            resolve = axis.resolve or (
                lambda cfg, length, field=axis.field: getattr(encoder_config(cfg), field))
            lines[model] = functools.partial(
                lambda length, model, field, preset, resolve:
                report.axis_label(model, field, resolve(preset, length)),
                model=model, field=axis.field, preset=preset, resolve=resolve)
        if "bfloat16" in dtypes:
            variants.append(Variant(f"{model} bf16", model, dtype="bfloat16"))
    configs = {json.dumps(v.config(widths).to_dict(), sort_keys=True): v.label for v in variants}
    references = {}
    for model in models:
        overrides = reference_overrides(Variant(model, model).config(widths), widths)
        reference = Variant(f"transformer d={overrides['model_dim']}", "transformer",
                            tuple(sorted(overrides.items())), reference=True)
        key = json.dumps(reference.config(widths).to_dict(), sort_keys=True)
        if key not in configs:
            configs[key] = reference.label
            variants.append(reference)
        references[model] = configs[key]
    return Plan(variants, lines, references)


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


def available_mib() -> float:
    """MemAvailable from /proc/meminfo (MiB); infinity where there is none."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.inf


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


def packing_plan_rate(features: list[dict]) -> dict:
    """PSAN's packing plan over one planned epoch of `features` (bench_packing.measure at the
    default PackingConfig and packed_tile, batch 64, buckets of 8 up to 64): its rate and its
    attention elements against dense."""
    packing = bench_packing.measure(features, PackingConfig(), batch_size=64, max_length=64,
                                    bucket_step=8, later=0, tile=psan.PSANConfig.packed_tile)
    return dict(sentences_per_s=packing["rate"], packed=packing["packed"],
                bound=packing["bound"], batch_size=64, max_length=64)


def host_section(mode: str, explicit_dir: str | None) -> dict:
    """Host-side rates on one pinned core: gold-tree and spaCy parsing, tree -> arrays, PSAN's
    packing plan, the input pipeline, padding waste (the bench_* scripts' functions)."""
    if mode == "off":
        return {"skipped": "--host off"}
    try:
        root = data_dir(explicit_dir)
    except JaxencError as error:
        return {"skipped": str(error)}
    quick = mode == "quick"
    host: dict[str, Any] = {}
    with one_core():
        timings, trees = bench_structures.measure(root, repeats=1 if quick else 3)
        host["structures"] = dict(trees=trees, rates={name: 1 / seconds
                                                      for name, seconds in timings.items()},
                                  parse_gold=bench_structures.PARSE_GOLD,
                                  all_models=bench_structures.ALL_MODELS)
        try:
            host["parse"] = bench_parse.parse_rate(root, num_sentences=500 if quick else 2000)
        except JaxencError as error:
            host["parse"] = {"skipped": str(error)}
        host["packing"] = packing_plan_rate(bench_packing.sst_features(root))
        lengths, source = bench_input.sentence_lengths(0)
        features = bench_input.random_features(lengths, 0)
        max_length = int(lengths.max())
        _, rate = bench_input.throughput(features, bucket_lengths(max_length, 8), 64,
                                         epochs=1 if quick else 3, num_threads=0)
        host["input"] = dict(source=source, examples_per_s=rate, batch_size=64,
                             waste=bench_input.waste_by_scheme(features, max_length, 64))
    return host


def machine() -> dict[str, Any]:
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bench.run", description=__doc__.split("\n\n")[0],
                     epilog=__doc__.split("\n\n", 1)[1],
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path,
                        help="output folder: results.json, report.md, throughput.png, memory.png")
    parser.add_argument("--models", default="all",
                        help=f"'all' or comma-separated, of: {', '.join(ENCODERS)}")
    parser.add_argument("--lengths", default=None,
                        help=f"bucket lengths, comma-separated (default {DEFAULTS['lengths']}; "
                             f"--quick: {QUICK['lengths']})")
    parser.add_argument("--batch", type=int, default=None,
                        help=f"sentences per batch (default {DEFAULTS['batch']}; --quick: "
                             f"{QUICK['batch']})")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"timed calls per step after the warm-up (default "
                             f"{DEFAULTS['repeats']}; --quick: {QUICK['repeats']})")
    parser.add_argument("--dtype", default=None, help=f"one of {', '.join(DTYPES)}: compute "
                        "dtype(s) of the models (bfloat16: model.dtype, parameters stay f32; "
                        f"default {DEFAULTS['dtype']}; --quick: {QUICK['dtype']})")
    parser.add_argument("--quick", action="store_true",
                        help="short run of every model: the --quick defaults above, host rates "
                             "on fewer sentences")
    parser.add_argument("--kernels-only", action="store_true",
                        help="count, do not time: compile each variant's train step with the "
                             "GPU loop settings (loop_settings('gpu'): the whole batch per "
                             "DiSAN loop step, a whole class per PSAN packed step) and write "
                             "only its kernels per step, FLOPs, bytes accessed and H100 bound "
                             "(results.json, report.md; no timing, host rates, plots or goals); "
                             "the kernel count is a CPU-compiled proxy of a GPU's launches")
    parser.add_argument("--tiny", action="store_true",
                        help="the contract test's TINY widths instead of the paper's, and a "
                             "smaller matmul for the peak (smoke test)")
    parser.add_argument("--host", default=None, help=f"host-side rates: {', '.join(HOST_MODES)} "
                        "(default full; --quick: quick); need $JAXENC_DATA_DIR or --data_dir")
    parser.add_argument("--data_dir", default=None,
                        help="the data root, docs/data.md (else $JAXENC_DATA_DIR)")
    parser.add_argument("--vocab", type=int, default=10_000, help="synthetic vocabulary words")
    parser.add_argument("--batches", type=int, default=2,
                        help="distinct batches per length, used in turn by the timed calls")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data")
    parser.add_argument("--max_step_s", type=float, default=60.0,
                        help="do not run a variant whose step, predicted from shorter lengths, "
                             "takes longer (seconds)")
    parser.add_argument("--max_compile_s", type=float, default=300.0,
                        help="do not compile a variant whose compilation, predicted from shorter "
                             "lengths, takes longer (seconds)")
    parser.add_argument("--budget_s", type=float, default=120.0,
                        help="time per step and length: fewer repeats (at least 1) for slow ones")
    parser.add_argument("--memory_fraction", type=float, default=0.5,
                        help="run a variant only if its compiled peak memory is below this "
                             "fraction of the available memory")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    defaults = QUICK if args.quick else DEFAULTS
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.models = parse_models(args.models)
    args.lengths = parse_lengths(args.lengths)
    if args.dtype not in DTYPES:
        raise ConfigError(f"--dtype {args.dtype!r} is not one of {', '.join(DTYPES)} "
                          "(fix: --dtype both)")
    if args.host not in HOST_MODES:
        raise ConfigError(f"--host {args.host!r} is not one of {', '.join(HOST_MODES)} "
                          "(fix: --host full)")
    for name in ("batch", "repeats", "batches", "vocab"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name} {getattr(args, name)} is not a positive integer "
                              f"(fix: --{name} {DEFAULTS.get(name, 1)})")
    return args


@cli.reports_errors
def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    widths = with_loop_settings(tiny_widths() if args.tiny else {},
                                "gpu" if args.kernels_only else jax.default_backend())
    plan = plan_variants(args.models, DTYPES[args.dtype], widths)
    results: dict[str, Any] = dict(
        schema=SCHEMA, command="python -m bench.run " + " ".join(
            sys.argv[1:] if argv is None else argv),
        settings=dict(models=args.models, lengths=args.lengths, batch=args.batch,
                      repeats=args.repeats, dtype=args.dtype, quick=args.quick, tiny=args.tiny,
                      kernels_only=args.kernels_only,
                      vocab=args.vocab, batches=args.batches, seed=args.seed, host=args.host,
                      max_step_s=args.max_step_s, max_compile_s=args.max_compile_s,
                      budget_s=args.budget_s, memory_fraction=args.memory_fraction),
        machine=machine())
    peak_size = dict(size=512, repeats=3) if args.tiny else {}  # a smoke test's is quick
    if not args.kernels_only:
        results["matmul_peak_flops"] = dict(start=matmul_peak_flops(**peak_size))
    results["variants"] = [dict(label=v.label, model=v.model, dtype=v.dtype,
                                overrides=dict(v.overrides), reference=v.reference,
                                config=v.config(widths).to_dict()) for v in plan.variants]
    results["lines"] = {model: {str(length): line(length) for length in args.lengths}
                        for model, line in plan.lines.items()}
    results["references"] = plan.references
    results["axes"] = {model: dict(field=axis.field, choices=list(axis.choices), base=axis.base,
                                   same_work={value: axis.same_work(value)
                                              for value in axis.choices})
                       for model, axis in AXES.items() if model in args.models}
    measurer = Measurer(plan, args, widths)
    results["rows"], results["load_by_length"] = [], {}
    for length in args.lengths:
        results["rows"] += measurer.length(length)
        results["load_by_length"][str(length)] = os.getloadavg()
    if args.kernels_only:
        return _write_kernels(results, args.out, start)
    results["matmul_peak_flops"]["end"] = matmul_peak_flops(**peak_size)
    results["host"] = host_section(args.host, args.data_dir)
    results["machine"]["load_end"] = os.getloadavg()
    results["wall_s"] = time.perf_counter() - start
    report.finish(results)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=_json_default))
    report.write(results, args.out)
    print("\n".join(report.kernel_table(results)))
    print(f"wrote {args.out}/results.json, report.md, throughput.png, memory.png in "
          f"{results['wall_s']:.0f} s")
    return results


def _write_kernels(results: dict, out: Path, start: float) -> dict:
    """A --kernels-only run's results.json and report.md (its kernel table, also printed)."""
    results["machine"]["load_end"] = os.getloadavg()
    results["wall_s"] = time.perf_counter() - start
    report.add_bounds(results)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=_json_default))
    table = report.kernel_table(results)
    (out / "report.md").write_text("\n".join(report.kernel_markdown(results)), encoding="utf-8")
    print("\n".join(table))
    print(f"wrote {out}/results.json, report.md in {results['wall_s']:.0f} s")
    return results


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


if __name__ == "__main__":
    main()

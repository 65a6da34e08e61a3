"""Every registered encoder side by side on this machine, in one run: train-step and encode
throughput, compile time, peak memory, FLOPs and achieved FLOP/s per model and sentence length,
the ratios between them, and the host-side rates. Writes OUT/results.json, OUT/report.md,
OUT/throughput.png and OUT/memory.png.

    python -m bench.run --models all --lengths 16,32,64,128,256 --batch 64 --out results/bench/cpu
    python -m bench.run --quick --out /tmp/bench       # all models, 2 lengths, batch 16: < 10 min
    python -m bench.run --tiny --lengths 8,16 --batch 4 --repeats 1 --host off --out /tmp/smoke
    python -m bench.run --kernels-only --lengths 64 --batch 64 --out /tmp/kernels  # no timing

Models are built from their registry presets (paper widths; --tiny: the encoder contract test's
TINY widths; the attention loops set for the backend, `bench.plan.loop_settings`) with random
token ids and REAL-shaped structure arrays: random projective dependency trees of full-length
sentences go through the real featurizer (gold trees: dependency relations, levels, heads,
derived phrase trees, PSAN's segments / blocks) and batcher (PSAN's packing plan), as in
training (bench.common.synthetic_batches). Each variant is measured at each length
(bench.measurer):
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
Variants (bench.plan): every requested model at its preset; every choice of its implementation
axis (AXES: DiSAN's attention_impl, PSAN's psa_impl, PhraseTransformer's phase2, the
Dependency-Transformer with and without relations); DiSAN's blocked step with 32-bit dropout
masks (flax's dropout, 32 random bits per decision: the reference of its speed goal,
bench.rows.DISAN_BLOCKED_32BIT); with --dtype bfloat16/both, each model's preset with
model.dtype=bfloat16 (parameters f32, compute bf16; a model that refuses it is reported); and a
plain Transformer of each model's width (the per-model reference).
Guards, so the run never hangs or swaps: a variant is only compiled when the compile time
predicted from shorter lengths is under --max_compile_s, only run when its compiled peak memory is
under --memory_fraction of the available memory and its step time predicted from shorter lengths
is under --max_step_s, and its repeats shrink to fit --budget_s; what was skipped says why.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bench import report
from bench.common import matmul_peak_flops
from bench.derived import add_bounds, finish
from bench.host_rates import host_section
from bench.machine import machine
from bench.measurer import Measurer
from bench.plan import AXES, plan_variants, tiny_widths, with_loop_settings
from jaxenc import cli
from jaxenc.errors import ConfigError
from jaxenc.models.registry import ENCODERS

SCHEMA = 1
DTYPES = {"float32": ("float32",), "bfloat16": ("bfloat16",), "both": ("float32", "bfloat16")}
HOST_MODES = ("full", "quick", "off")
DEFAULTS = dict(lengths="16,32,64,128,256", batch=64, repeats=3, host="full", dtype="both")
QUICK = dict(lengths="16,64", batch=16, repeats=2, host="quick", dtype="float32")


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
                             "GPU loop settings (bench.plan.loop_settings('gpu'): the whole "
                             "batch per DiSAN loop step, a whole class per PSAN packed step) and "
                             "write only its kernels per step, FLOPs, bytes accessed and H100 "
                             "bound (results.json, report.md; no timing, host rates, plots or "
                             "goals); the kernel count is a CPU-compiled proxy of a GPU's "
                             "launches")
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
            sys.argv[1:] if argv is None else argv), date=time.strftime("%Y-%m-%d"),
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
    finish(results)
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
    add_bounds(results)
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

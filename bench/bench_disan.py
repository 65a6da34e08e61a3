"""DiSAN token2token attention: dense vs blocked vs directional, memory and train-step time.

For every length, each variant (dense; blocked and directional at each of their block sizes) is
compiled once as one training step of the encoder: forward + backward of DiSAN (train=True,
dropout on) and a simple loss, gradients w.r.t. all parameters. "directional" computes only the
key blocks on the allowed side of each query block; "blocked" is the query-block
kernel that computes every key and masks half away. Reported per variant:
  - temp MiB: XLA's buffer assignment for the compiled step (`memory_analysis()`): activations
    and workspace beside the arguments and outputs; `peak MiB` adds arguments and outputs.
    Compile-only, so it is reported at every length, even those too big to run.
  - step ms / cpu ms: median wall-clock and process-CPU time over interleaved repeats (variants
    take turns, so load drifts hit all alike, each timed call right after an untimed one of the
    same step; CPU time is less sensitive to a shared machine).
    `vs blk` = the fastest blocked variant's median step time / this one's (same run), where
    blocked is timed with 32 random bits per dropout decision (`dropout_bits`, flax's
    nn.Dropout), the reference step of the speed goal. The other variants use `--dropout_bits`
    (default 0, DiSANConfig's default: the fewest bits that hold the keep probability 0.75
    exactly, 2, i.e. sixteen decisions per random word; the `bits` column shows the resolved
    width); with
    --blocked_at_default_bits, blocked is also timed with them (`vs blk` still refers to 32).
  - GFLOP: FLOPs of the step counted from its jaxpr, every loop body times its trip count
    (`bench.common.jaxpr_cost`: 2mnk per matmul, 1 per element of an elementwise op, the
    backward pass's recomputation included); Gtr: transcendentals (tanh, exp, ...) counted
    the same way; XLA GF: XLA's own cost analysis, which counts a loop body once (so it is
    only the whole step for dense).
  - GFLOP/s: counted FLOPs / wall time, and its fraction of this machine's f32 matmul rate
    measured here with a big jnp.dot (`bench.common.matmul_peak_flops`).
With --floor, a row "no t2t" times the same step with the n^2 token2token attention replaced by
an O(n d) stand-in (v * tanh(q + k)): everything else DiSAN does (projections, fusion gates,
source2token, dropout), i.e. the step time no attention kernel can go below.

    python -m bench.bench_disan --lengths=64,128 --memory_lengths=256,512 \\
        --blocked_sizes=16 --directional_sizes=8,16,32 --floor
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import (
    counted_cost,
    loss_and_grads,
    matmul_peak_flops,
    memory_mib,
    parse_ints,
    time_in_turns,
    train_step,
    xla_flops,
)
from jaxenc import cli
from jaxenc.files import write_text_atomic
from jaxenc.layers import multidim_attention
from jaxenc.layers.dropout import AUTO_BITS, resolve_mask_bits
from jaxenc.models import disan
from jaxenc.training.run_report import markdown_table

FLOOR = "no t2t"
REFERENCE_BITS = 32  # blocked's reference dropout (flax's): one random word per decision
KEEP_PROB = 0.75  # DiSAN's on SNLI (disan.md)


@contextlib.contextmanager
def without_token2token():
    """While tracing: token2token attention replaced by the O(n d) stand-in v * tanh(q + k)."""
    original = multidim_attention.multidim_token2token

    def stand_in(queries, keys, values, mask, **unused):
        return values * jnp.tanh(queries + keys)

    multidim_attention.multidim_token2token = stand_in
    try:
        yield
    finally:
        multidim_attention.multidim_token2token = original


Variant = tuple[str, int | None, int]  # (impl, block size or None, dropout bits)


def encoder_config(impl: str, block_size: int | None, dropout_bits: int, embed_dim: int,
                   hidden: int) -> disan.DiSANConfig:
    """The SNLI configuration with the given attention implementation (block_size: blocked and
    directional only; the floor variant is traced with `without_token2token`)."""
    return disan.DiSANConfig(embed_dim=embed_dim, hidden=hidden, keep_prob=KEEP_PROB,
                             attention_impl="blocked" if impl == FLOOR else impl,
                             block_size=block_size or 1, blocked_threshold=0,
                             dropout_bits=dropout_bits)


def benchmark_length(length: int, variants: list[Variant], to_run: list[Variant], args,
                     peak_flops: float) -> list[dict]:
    """Compiles every variant at this length (memory, FLOPs); times those in `to_run`."""
    rng = np.random.default_rng(length)
    sentence = {"tokens": jnp.asarray(rng.integers(1, args.vocab, (args.batch, length)),
                                      jnp.int32),
                "lengths": jnp.full((args.batch,), length, jnp.int32)}
    models = {variant: disan.DiSAN(args.vocab, encoder_config(*variant, args.embed_dim,
                                                              args.hidden))
              for variant in variants}
    init = jax.jit(lambda key: models[variants[0]].init(key, sentence, train=False))
    params = init(jax.random.key(0)) if to_run else jax.eval_shape(init, jax.random.key(0))
    steps, rows = {}, {}
    for variant, model in models.items():
        with without_token2token() if variant[0] == FLOOR else contextlib.nullcontext():
            steps[variant] = train_step(model, params, sentence)
            cost = counted_cost(loss_and_grads(model), *steps[variant][1])
        temp, peak = memory_mib(steps[variant][0])
        rows[variant] = dict(length=length, impl=variant[0], block=variant[1] or "-",
                             bits=resolve_mask_bits(KEEP_PROB, variant[2]), temp=temp,
                             peak=peak, flops=cost["flops"], trans=cost["transcendentals"],
                             xla_flops=xla_flops(steps[variant][0]), ms=None)
    load_before = os.getloadavg()[0]
    timings = time_in_turns({variant: steps[variant] for variant in to_run}, args.repeats)
    load_after = os.getloadavg()[0]
    for variant in to_run:
        seconds, cpu_seconds = timings[variant].wall, timings[variant].cpu
        rows[variant].update(ms=1e3 * seconds, cpu_ms=1e3 * cpu_seconds,
                             gflops=rows[variant]["flops"] / seconds / 1e9,
                             of_peak=rows[variant]["flops"] / seconds / peak_flops,
                             load=f"{load_before:.1f}-{load_after:.1f}" if to_run else "-")
    return list(rows.values())


def table_rows(rows: list[dict]) -> list[dict[str, str]]:
    """The report's rows as formatted cells, one dict per variant and length ("-" where a
    variant was compiled but not timed)."""
    fastest_blocked = {}
    for row in rows:
        if row["impl"] == "blocked" and row["bits"] == REFERENCE_BITS and row["ms"] is not None:
            best = fastest_blocked.get(row["length"])
            fastest_blocked[row["length"]] = min(best or row["ms"], row["ms"])
    cells = []
    for row in rows:
        timed = row["ms"] is not None
        reference = fastest_blocked.get(row["length"])
        cells.append({
            "L": str(row["length"]), "impl": row["impl"], "block": str(row["block"]),
            "bits": str(row["bits"]), "temp MiB": f"{row['temp']:.1f}",
            "peak MiB": f"{row['peak']:.1f}",
            "step ms": f"{row['ms']:.1f}" if timed else "-",
            "cpu ms": f"{row['cpu_ms']:.1f}" if timed else "-",
            "vs blk": f"{reference / row['ms']:.2f}" if timed and reference else "-",
            "GFLOP": f"{row['flops'] / 1e9:.1f}", "Gtr": f"{row['trans'] / 1e9:.2f}",
            "XLA GF": f"{row['xla_flops'] / 1e9:.1f}",
            "GFLOP/s": f"{row['gflops']:.1f}" if timed else "-",
            "%peak": f"{100 * row['of_peak']:.1f}" if timed else "-",
            "load": row["load"] if timed else "-"})
    return cells


def machine_line(peak_flops: float) -> str:
    return (f"f32 matmul peak measured: {peak_flops / 1e9:.1f} GFLOP/s; nproc {os.cpu_count()}; "
            f"load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def print_table(cells: list[dict[str, str]], peak_flops: float) -> None:
    widths = {column: max(len(column), *(len(row[column]) for row in cells))
              for column in cells[0]}
    header = " ".join(f"{column:>{width}}" for column, width in widths.items())
    print(f"\n{machine_line(peak_flops)}\n{header}\n{'-' * len(header)}")
    for row in cells:
        print(" ".join(f"{row[column]:>{width}}" for column, width in widths.items()))


def write_report(path: Path, cells: list[dict[str, str]], peak_flops: float,
                 argv: list[str]) -> None:
    """`--out`: the command, date and machine, then the table as markdown (the file
    reports.performance reads)."""
    command = " ".join(["python -m bench.bench_disan", *argv])
    text = (f"`{command}` on {datetime.date.today().isoformat()}, "
            f"{jax.devices()[0].platform}: {machine_line(peak_flops)}.\n\n"
            f"{markdown_table(cells)}\n")
    write_text_atomic(path, text)


@cli.reports_errors
def main(argv: list[str] | None = None) -> list[dict[str, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=parse_ints, default=[64, 128],
                        help="lengths to compile and time")
    parser.add_argument("--memory_lengths", type=parse_ints, default=[256, 512],
                        help="lengths to compile for memory and FLOPs only (not run)")
    parser.add_argument("--run_dense_up_to", type=int, default=64,
                        help="longer lengths time the blocked and directional variants only "
                             "(the dense step needs ~0.9 GiB x (L/32)^2 at batch 64)")
    parser.add_argument("--blocked_sizes", type=parse_ints, default=[16],
                        help="block sizes of the blocked kernel (16: the config default)")
    parser.add_argument("--directional_sizes", type=parse_ints, default=[8, 16, 32],
                        help="block sizes (queries = keys) of the directional kernel")
    parser.add_argument("--no_dense", action="store_true", help="leave the dense variant out")
    parser.add_argument("--floor", action="store_true",
                        help="also time the step without the n^2 attention (module docstring)")
    parser.add_argument("--dropout_bits", type=int, default=AUTO_BITS,
                        help="random bits per dropout decision of every variant but the "
                             f"reference blocked one ({REFERENCE_BITS}, flax's dropout: the "
                             f"reference of the speed goal); {AUTO_BITS}: DiSANConfig's default, "
                             f"the fewest that hold keep_prob {KEEP_PROB} exactly "
                             f"({resolve_mask_bits(KEEP_PROB, AUTO_BITS)})")
    parser.add_argument("--blocked_at_default_bits", action="store_true",
                        help="also time blocked with --dropout_bits")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--embed_dim", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=300)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the command, machine and table to this markdown file")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)

    peak_flops = matmul_peak_flops()
    bits = args.dropout_bits
    variants: list[Variant] = [] if args.no_dense else [("dense", None, bits)]
    variants += [("blocked", size, REFERENCE_BITS) for size in args.blocked_sizes]
    if args.blocked_at_default_bits and bits != REFERENCE_BITS:
        variants += [("blocked", size, bits) for size in args.blocked_sizes]
    variants += [("directional", size, bits) for size in args.directional_sizes]
    variants += [(FLOOR, None, bits)] if args.floor else []
    rows = []
    for length in args.lengths:
        to_run = [v for v in variants if v[0] != "dense" or length <= args.run_dense_up_to]
        rows += benchmark_length(length, variants, to_run, args, peak_flops)
        print(f"length {length} done", flush=True)
    for length in args.memory_lengths:
        rows += benchmark_length(length, [v for v in variants if v[0] != FLOOR], [], args,
                                 peak_flops)
    cells = table_rows(rows)
    print_table(cells, peak_flops)
    if args.out:
        write_report(args.out, cells, peak_flops, argv)
        print(f"wrote {args.out}")
    return cells


if __name__ == "__main__":
    main()

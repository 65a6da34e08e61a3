"""DiSAN token2token attention: dense [n, n, d] vs blocked, memory and train-step time.

For every length, each variant (dense, blocked at every block size) is compiled once as one
training step of the encoder: forward + backward of DiSAN (train=True, dropout on) and a simple
loss, gradients w.r.t. all parameters. Reported per variant:
  - temp MiB: XLA's buffer assignment for the compiled step (`memory_analysis()`): activations
    and workspace beside the arguments and outputs; `peak MiB` adds arguments and outputs.
    Compile-only, so it is reported at every length, even those too big to run.
  - step ms / cpu ms: median wall-clock and process-CPU time over interleaved repeats (variants
    take turns, so load drifts hit all alike; CPU time is less sensitive to a shared machine).
  - GFLOP/s: model FLOPs / wall time, and its fraction of this machine's f32 matmul rate measured
    here with a big jnp.dot. Model FLOPs = 6 m k n per linear map (forward and two backward
    matmuls) + ATTENTION_FLOPS per score element and direction (recomputation not counted).

    python -m bench.bench_disan --lengths=32,64,128 --memory_lengths=256,512 --block_sizes=8,16,32
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import matmul_peak_flops, memory_mib, parse_ints, time_in_turns, train_step
from jaxenc import cli
from jaxenc.models import disan

# per (query, key, feature) element: add, scale, tanh, scale, exp, select, multiply-add, add
# forward; about twice that backward.
ATTENTION_FLOPS = 3 * 9


def encoder_config(impl: str, block_size: int | None, embed_dim: int,
                   hidden: int) -> disan.DiSANConfig:
    """The SNLI configuration with the given attention implementation (block_size: blocked only)."""
    return disan.DiSANConfig(embed_dim=embed_dim, hidden=hidden, keep_prob=0.75,
                             attention_impl=impl, block_size=block_size or 1, blocked_threshold=0)


def model_flops(batch: int, length: int, embed_dim: int, hidden: int) -> float:
    """FLOPs of one training step (forward + backward) of the DiSAN encoder."""
    tokens = batch * length
    linear = 6.0 * tokens * (embed_dim * hidden + 4 * hidden * hidden)  # per direction
    source2token = 6.0 * tokens * 2 * (2 * hidden) ** 2
    attention = ATTENTION_FLOPS * batch * length * length * hidden  # per direction
    return 2 * (linear + attention) + source2token


def benchmark_length(length: int, variants: list[tuple[str, int | None]],
                     to_run: list[tuple[str, int | None]], args, peak_flops: float) -> list[dict]:
    """Compiles every variant at this length (memory); times those in `to_run`."""
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
        steps[variant] = train_step(model, params, sentence)
        temp, peak = memory_mib(steps[variant][0])
        rows[variant] = dict(length=length, impl=variant[0], block=variant[1] or "-", temp=temp,
                             peak=peak, ms=None)
    timings = time_in_turns({variant: steps[variant] for variant in to_run}, args.repeats)
    flops = model_flops(args.batch, length, args.embed_dim, args.hidden)
    for variant in to_run:
        seconds, cpu_seconds = timings[variant].wall, timings[variant].cpu
        rows[variant].update(ms=1e3 * seconds, cpu_ms=1e3 * cpu_seconds,
                             gflops=flops / seconds / 1e9, of_peak=flops / seconds / peak_flops)
    return list(rows.values())


def print_table(rows: list[dict], peak_flops: float) -> None:
    print(f"\nf32 matmul peak measured: {peak_flops / 1e9:.1f} GFLOP/s")
    header = (f"{'L':>5} {'impl':>8} {'block':>5} {'temp MiB':>10} {'peak MiB':>10} "
              f"{'dense/blk':>9} {'step ms':>9} {'cpu ms':>9} {'speedup':>7} {'GFLOP/s':>8} "
              f"{'% peak':>6}")
    print(header)
    print("-" * len(header))
    dense = {row["length"]: row for row in rows if row["impl"] == "dense"}
    for row in rows:
        reference = dense[row["length"]]
        timing = "        -         -       -        -      -"
        if row["ms"] is not None:
            speedup = reference["ms"] / row["ms"] if reference["ms"] else float("nan")
            timing = (f"{row['ms']:9.1f} {row['cpu_ms']:9.1f} {speedup:7.2f} "
                      f"{row['gflops']:8.1f} {100 * row['of_peak']:6.1f}")
        print(f"{row['length']:>5} {row['impl']:>8} {row['block']:>5} {row['temp']:10.1f} "
              f"{row['peak']:10.1f} {reference['temp'] / row['temp']:9.1f} {timing}")


@cli.reports_errors
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=parse_ints, default=[32, 64, 128],
                        help="lengths to compile and time")
    parser.add_argument("--memory_lengths", type=parse_ints, default=[256, 512],
                        help="lengths to compile for the memory analysis only (not run)")
    parser.add_argument("--run_dense_up_to", type=int, default=64,
                        help="longer lengths time the blocked variants only (the dense step "
                             "needs ~0.9 GiB x (L/32)^2 at batch 64)")
    parser.add_argument("--block_sizes", type=parse_ints, default=[8, 16, 32])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--embed_dim", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=300)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    peak_flops = matmul_peak_flops()
    variants = [("dense", None)] + [("blocked", size) for size in args.block_sizes]
    rows = []
    for length in args.lengths:
        to_run = variants if length <= args.run_dense_up_to else variants[1:]
        rows += benchmark_length(length, variants, to_run, args, peak_flops)
        print(f"length {length} done", flush=True)
    for length in args.memory_lengths:
        rows += benchmark_length(length, variants, [], args, peak_flops)
    print_table(rows, peak_flops)


if __name__ == "__main__":
    main()

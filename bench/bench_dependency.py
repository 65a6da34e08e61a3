"""Dependency-Transformer vs the plain Transformer (and the Child-Sum Tree-LSTM when
registered): train-step and encode time, compiled memory, measured side by side in one run.

Each model is the paper's size (d 300, 3 layers, 6 heads, FFN 300, d_r 30; Tree-LSTM memory 150)
on batches of random projective dependency trees ([root] first; relation ids, levels and heads
computed by the featurizer, bench.common.synthetic_batches, so every model sees the same
sentences). Reported per model and length:
train-step ms (forward + backward), encode ms and sentences/s, compiled temp/peak MiB, and the
ratio to the plain Transformer measured in the same run (goal: DT <= 1.2x at length 64).

    python -m bench.bench_dependency --lengths=32,64 --batch=32 --repeats=5
"""

from __future__ import annotations

import argparse

import jax

from bench.common import (
    encode_step,
    memory_mib,
    parse_ints,
    synthetic_batches,
    time_in_turns,
    train_step,
)
from jaxenc import cli
from jaxenc.models import registry
from train.configs import base

PAPER_MODELS = {  # name -> (registered model, overrides of its preset)
    "DT_full": ("dependency_transformer", dict(variant="full")),
    "DT_rg": ("dependency_transformer", dict(variant="rg")),
    "Transformer": ("dependency_transformer", dict(variant="transformer")),
    "Tree-LSTM": ("tree_lstm", {}),
}


def benchmark(length: int, args) -> list[dict]:
    """Compiles and times every available model at one length."""
    steps, rows = {}, {}
    for label, (name, overrides) in PAPER_MODELS.items():
        if not registry.available(name):
            continue
        model_cfg = base.model_config(name, **overrides)
        (sentence,), vocab_size = synthetic_batches(model_cfg, length, args.batch, 1)
        encoder = registry.build_encoder(model_cfg, vocab_size)
        params = jax.jit(lambda key, e=encoder, s=sentence: e.init(key, s, train=False))(
            jax.random.key(0))
        steps[f"{label} train"] = train_step(encoder, params, sentence)
        steps[f"{label} encode"] = encode_step(encoder, params, sentence)
        rows[label] = dict(model=label, length=length,
                           memory=memory_mib(steps[f"{label} train"][0]))
    timings = time_in_turns(steps, args.repeats)
    for label, row in rows.items():
        row["train_ms"] = 1e3 * timings[f"{label} train"][0]
        row["encode_ms"] = 1e3 * timings[f"{label} encode"][0]
    return list(rows.values())


def print_table(rows: list[dict]) -> None:
    header = (f"{'L':>4} {'model':>12} {'train ms':>9} {'x Transf.':>9} {'encode ms':>10} "
              f"{'sent/s':>8} {'temp MiB':>9} {'peak MiB':>9}")
    print(header)
    print("-" * len(header))
    reference = {row["length"]: row for row in rows if row["model"] == "Transformer"}
    for row in rows:
        ratio = row["train_ms"] / reference[row["length"]]["train_ms"]
        per_second = row["batch"] / row["encode_ms"] * 1e3
        print(f"{row['length']:>4} {row['model']:>12} {row['train_ms']:9.1f} {ratio:9.2f} "
              f"{row['encode_ms']:10.1f} {per_second:8.0f} {row['memory'][0]:9.1f} "
              f"{row['memory'][1]:9.1f}")


@cli.reports_errors
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=parse_ints, default=[32, 64],
                        help="sentence lengths incl. [root] (comma-separated)")
    parser.add_argument("--batch", type=int, default=32, help="sentences per batch (paper: 32)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per model")
    args = parser.parse_args()
    rows = []
    for length in args.lengths:
        rows += [dict(row, batch=args.batch) for row in benchmark(length, args)]
        print(f"length {length} done", flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()

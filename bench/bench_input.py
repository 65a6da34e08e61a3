"""Input pipeline benchmark: batching throughput and the padding waste of bucket schemes.

    python -m bench.bench_input [--epochs 3] [--batch-size 64]

Sentence lengths are SST-5's (train + dev + test) when $JAXENC_DATA_DIR points at the datasets,
otherwise synthetic lengths with a similar spread. The throughput examples are featurised like a
PSAN input on SST: token ids, 3 levels of phrase segments and a label per sentence.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from jaxenc import cli
from jaxenc.data.batching import Batcher, bucket_lengths
from jaxenc.data.paths import DATA_DIR_ENV

NUM_LEVELS = 3


def sentence_lengths(seed: int) -> tuple[np.ndarray, str]:
    """int[N] sentence lengths and where they come from."""
    if os.environ.get(DATA_DIR_ENV):
        from jaxenc.data import registry

        examples = [e for split in ("train", "dev", "test") for e in registry.load("sst5", split)]
        return np.array([len(e.sentences[0]) for e in examples]), "SST-5 train+dev+test"
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.gamma(4.0, 4.8, size=11855)), 1, 56).astype(np.int64)
    return lengths, f"synthetic (set {DATA_DIR_ENV} for SST-5)"


def random_features(lengths: np.ndarray, seed: int) -> list[dict[str, np.ndarray]]:
    """Per-example features: tokens int32[n], segments int32[T, n] (sorted phrase ids), label."""
    rng = np.random.default_rng(seed)
    features = []
    for n in lengths:
        segments = np.sort(rng.integers(0, max(n // 4, 1), (NUM_LEVELS, n)), axis=1)
        features.append({"sentence/tokens": rng.integers(6, 20000, n).astype(np.int32),
                         "sentence/segments": segments.astype(np.int32),
                         "label": np.int32(rng.integers(0, 5))})
    return features


def bucket_schemes(max_length: int) -> dict[str, tuple[int, ...]]:
    powers = tuple(2 ** k for k in range(3, max(int(np.ceil(np.log2(max_length))), 3) + 1))
    return {
        "step 4": bucket_lengths(max_length, 4),
        "step 8": bucket_lengths(max_length, 8),
        "step 16": bucket_lengths(max_length, 16),
        "powers of 2": powers,
        "single bucket": (max_length,),
    }


def throughput(features: list[dict[str, np.ndarray]], buckets: tuple[int, ...], batch_size: int,
               epochs: int, num_threads: int) -> tuple[float, float]:
    """(seconds to build the batcher, real examples per second over `epochs` epochs)."""
    start = time.perf_counter()
    batcher = Batcher(features, batch_size=batch_size, buckets=buckets, shuffle=True, seed=0,
                      num_threads=num_threads)
    built = time.perf_counter() - start
    start = time.perf_counter()
    examples = 0
    for epoch in range(epochs):
        for batch in batcher.epoch(epoch):
            examples += int(batch["weight"].sum())
    return built, examples / (time.perf_counter() - start)


def waste_by_scheme(features: list[dict[str, np.ndarray]], max_length: int,
                    batch_size: int) -> dict[str, dict[str, float]]:
    """Bucket scheme -> its bucket count, padding waste (padded / real tokens - 1), the waste with
    filler rows, and batches per epoch."""
    table = {}
    for name, buckets in bucket_schemes(max_length).items():
        report = Batcher(features, batch_size=batch_size, buckets=buckets, shuffle=False).report()
        table[name] = {"buckets": len(buckets), "waste": report.waste,
                       "waste_with_filler": report.waste_with_filler,
                       "batches": report.num_batches}
    return table


@cli.reports_errors
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    lengths, source = sentence_lengths(args.seed)
    features = random_features(lengths, args.seed)
    max_length = int(lengths.max())
    print(f"{len(lengths)} sentences ({source}), mean length {lengths.mean():.1f}, "
          f"max {max_length}; batch size {args.batch_size}\n")

    print("| grain threads | build (s) | examples/s |")
    print("|---:|---:|---:|")
    for num_threads in (0, 2):
        built, rate = throughput(features, bucket_lengths(max_length, 8), args.batch_size,
                                 args.epochs, num_threads)
        print(f"| {num_threads} | {built:.2f} | {rate:,.0f} |")

    print("\n| buckets | count | padding waste | with filler rows | batches/epoch |")
    print("|---|---:|---:|---:|---:|")
    for name, row in waste_by_scheme(features, max_length, args.batch_size).items():
        print(f"| {name} | {row['buckets']} | {row['waste']:.3f} | {row['waste_with_filler']:.3f} "
              f"| {row['batches']} |")
    print("\npadding waste = (padded token slots - real tokens) / real tokens")


if __name__ == "__main__":
    main()

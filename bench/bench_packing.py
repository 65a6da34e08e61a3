"""PSAN's packed phrase attention on SST training batches: attention memory and host plan rate.

    python -m bench.bench_packing [--data-dir DATA] [--out results/psan/packing.md]

SST training trees (8544, gold, binarised; psan.segments: 3 levels, min split length 4), batches
of 64 in buckets of 8 tokens, shuffled (seed 0). Attention elements per batch, summed over the 3
levels, relative to DiSAN's dense 2 B L^2 (forward and backward [L, L] masks, L = the bucket):
- packed: sum over the plan arrays int32[G, N, L_c] of G N L_c^2 (the plan's static shapes: the
  planned capacities, or the bound ones for a batch that falls back);
- tiles: what PSAN's packed attention computes on those shapes, G (T + 1 + P) tile^2 per level
  (jaxenc.layers.packed_attention.tile_schedule with --tile positions per tile: T tiles and an
  empty one attend themselves, P pairs of tiles of one long phrase attend each other);
- per-batch classes: each phrase padded to its class length, sum L_c^2 (what dynamic shapes would
  cost: the floor of any static capacity policy);
- data bound: sum of l^2 over the phrases (the "exact" floor);
- longest phrase: every phrase of a level padded to the batch's longest, B P_max l_max^2 (the
  naive blocked kernel, psan.md's "3.3x").
Planned capacities fit the batches of epochs [0, E); the batches of the next `--later` epochs that
do not fit them fall back to the bound ones (counted). Host rate: the plan alone (PhrasePacker on
ready padded batches), one pinned CPU core, in sentences per second.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np

from bench.common import one_core
from jaxenc import cli
from jaxenc.data.batching import Batcher, bucket_lengths
from jaxenc.data.packing import PackingConfig, level_prefix
from jaxenc.data.paths import data_dir
from jaxenc.layers.packed_attention import tile_schedule
from jaxenc.structures import psan
from jaxenc.structures.formats import read_bracketed

ROLE = "sentence"


def sst_features(root: Path) -> list[dict[str, np.ndarray]]:
    trees = read_bracketed(root / "sst_ptb_trees" / "train.txt")
    return [{f"{ROLE}/tokens": np.ones(len(tree.leaves()), np.int32),
             f"{ROLE}/blocks": psan.blocks(psan.segments(tree))} for tree in trees]


def packed_elements(batch: dict[str, np.ndarray]) -> int:
    """Attention elements of the batch's plan: sum of G N L_c^2 over its arrays."""
    return sum(value.shape[0] * value.shape[1] * value.shape[2] ** 2
               for key, value in batch.items() if key.startswith(f"{ROLE}/pack_t"))


def tile_elements(batch: dict[str, np.ndarray], tile: int) -> int:
    """Score elements per feature of PSAN's tiled attention over the batch's plan, all levels."""
    total = 0
    for level in range(1, batch[f"{ROLE}/blocks"].shape[1] + 1):
        plan = sorted((value for key, value in batch.items()
                       if key.startswith(f"{ROLE}/{level_prefix(level)}")),
                      key=lambda index: index.shape[-1])
        schedule = tile_schedule(tuple(index.shape[1:] for index in plan), tile)
        total += plan[0].shape[0] * (schedule.num_tiles + len(schedule.query_tiles)) * tile ** 2
    return total


def data_elements(blocks: np.ndarray, lengths: np.ndarray) -> tuple[int, int, int]:
    """(sum l^2, sum L_class(l)^2, B P_max l_max^2 summed over levels) of blocks [B, T, L, 2]."""
    sizes = blocks[..., 1]
    real = sizes > 0
    classes = lengths[np.searchsorted(lengths, sizes[real])]
    longest = sum(blocks.shape[0] * real[:, level].sum(axis=1).max()
                  * sizes[:, level].max() ** 2 for level in range(blocks.shape[1]))
    return int((sizes[real] ** 2).sum()), int((classes ** 2).sum()), int(longest)


def plan_shapes(batch: dict[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
    """Plan field (role prefix removed) -> shape."""
    return {key.split("/")[1]: value.shape for key, value in batch.items()
            if key.startswith(f"{ROLE}/pack_t")}


def measure(features: list[dict], config: PackingConfig, *, batch_size: int, max_length: int,
            bucket_step: int, later: int, tile: int) -> dict:
    """One row of the table: ratios over the planned epochs, fallbacks in the `later` epochs
    after them, and the host plan rate (sentences/s on the calling thread)."""
    buckets = bucket_lengths(max_length, bucket_step)
    source = Batcher(features, batch_size=batch_size, buckets=buckets, shuffle=True, seed=0,
                     packing=config)
    totals = dict.fromkeys(("dense", "packed", "tiles", "bound", "classes", "longest", "arrays"),
                           0)
    for epoch in range(config.epochs):
        for batch in source.epoch(epoch):
            blocks = batch[f"{ROLE}/blocks"]
            bound, classes, longest = data_elements(blocks, config.class_lengths(blocks.shape[2]))
            totals["dense"] += 2 * batch_size * blocks.shape[2] ** 2
            totals["packed"] += packed_elements(batch)
            totals["tiles"] += tile_elements(batch, tile)
            totals["bound"] += bound
            totals["classes"] += classes
            totals["longest"] += longest
            totals["arrays"] += len(plan_shapes(batch))
    later = [batch for epoch in range(config.epochs, config.epochs + later)
             for batch in source.epoch(epoch)]
    fallbacks = sum(plan_shapes(batch) != source.packer.layouts[
        ROLE, batch[f"{ROLE}/blocks"].shape[2]].plan_shapes(config.groups) for batch in later)
    plain = list(Batcher(features, batch_size=batch_size, buckets=buckets, shuffle=True,
                         seed=0).epoch(0))
    start = time.perf_counter()
    for batch in plain:
        source.packer(batch)
    seconds = time.perf_counter() - start
    ratios = {key: value / totals["dense"] for key, value in totals.items()
              if key not in ("dense", "arrays")}
    levels = plain[0][f"{ROLE}/blocks"].shape[1]
    return {**ratios, "arrays": totals["arrays"] / (config.epochs * source.num_batches * levels),
            "fallbacks": f"{fallbacks} / {len(later)}",
            "rate": sum(int((batch["weight"] > 0).sum()) for batch in plain) / seconds}


@cli.reports_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None,
                        help="the data root, docs/data.md (default $JAXENC_DATA_DIR)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--bucket-step", type=int, default=8)
    parser.add_argument("--schemes", nargs="+",
                        default=["exact", "multiple_of_2", "multiple_of_4", "pow2"])
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 20],
                        help="planned epochs E of the 'planned' rows")
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 8],
                        help="packing groups G (data shards)")
    parser.add_argument("--later", type=int, default=10,
                        help="epochs after the planned ones checked for fallbacks")
    parser.add_argument("--tile", type=int, default=4,
                        help="positions per tile of PSAN's packed attention (packed_tile)")
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown here")
    args = parser.parse_args(argv)
    logging.getLogger("jaxenc.data.packing").setLevel(logging.ERROR)  # fallbacks are counted
    features = sst_features(data_dir(args.data_dir))
    columns = ["scheme", "capacity", "G", "packed / dense", f"tiles of {args.tile} / dense",
               "per-batch classes / dense",
               "fallback batches (next epochs)", "plan arrays per level", "plan sent./s"]
    rows, results, floors = [], [], None
    for scheme in args.schemes:
        for groups in args.groups:
            policies = [("planned", epochs) for epochs in args.epochs] + [("bound", 1)]
            for capacity, epochs in policies:
                with one_core():
                    result = measure(features, PackingConfig(scheme, capacity, groups, epochs),
                                     batch_size=args.batch_size, max_length=args.max_length,
                                     bucket_step=args.bucket_step, later=args.later,
                                     tile=args.tile)
                floors = floors or result
                name = f"planned, E={epochs}" if capacity == "planned" else "bound"
                fallbacks = result["fallbacks"] if capacity == "planned" else "-"
                results.append((f"{scheme}, {name}, G={groups}", result))
                rows.append([scheme, name, str(groups), f"{result['packed']:.3f}",
                             f"{result['tiles']:.3f}", f"{result['classes']:.3f}", fallbacks,
                             f"{result['arrays']:.1f}", f"{result['rate']:,.0f}"])
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    table += ["| " + " | ".join(row) + " |" for row in rows]
    below = [name for name, result in results if result["packed"] < 1]
    rates = [result["rate"] for _, result in results]
    text = "\n".join([
        "# PSAN packed phrase attention: memory on SST training batches",
        "",
        f"Made by `python -m bench.bench_packing` ({len(features)} SST training trees, gold, "
        f"binarised, 3 levels; batches of {args.batch_size}, buckets of {args.bucket_step} up to "
        f"{args.max_length}, shuffled, seed 0). Attention elements per batch summed over the 3 "
        "levels, divided by DiSAN's dense 2 B L^2 (L = bucket length), over the batches of the "
        "planned epochs E. `packed`: the static plan shapes, sum of G N L_c^2; `tiles`: what "
        f"PSAN's packed attention computes on them in tiles of {args.tile} positions, "
        "G (T + 1 + P) tile^2 per level; "
        "`per-batch classes`: each phrase padded to its class length (what per-batch dynamic "
        "shapes would cost, the floor of any static capacity); fallback batches: batches of the "
        f"{args.later} epochs after E that did not fit the planned capacities and got the bound "
        "ones; plan rate: PhrasePacker on ready padded batches, one pinned core of a shared "
        "machine.",
        "",
        f"Scheme-free references: data bound (sum of l^2) **{floors['bound']:.3f}** of DiSAN "
        "dense; every phrase of a level padded to the batch's longest phrase (B P_max l_max^2) "
        f"**{floors['longest']:.3f}**.",
        "",
        *table,
        "",
        f"- Below DiSAN dense (packed < 1): {'; '.join(below) if below else 'none'}.",
        "- \"bound\" capacities fit any batch a bucket can form, so each class is sized for the "
        "bucket's worst batch; \"planned\" ones fit exactly the batches of the run's epochs "
        "(the batcher is deterministic given seed and epoch), which is what keeps the packed "
        "total below DiSAN's. Plan E = the run's epochs: later batches fall back to the bound "
        "shapes (one more compile per bucket, more memory).",
        "- G groups (data shards) size each class for the worst group of B/G rows, so more groups "
        "cost more at the same global batch; at G=8 a group of this table has 8 rows. A larger "
        "per-device batch makes larger groups (`--batch-size 512 --groups 8`: 64 rows each).",
        f"- Host plan rate {min(rates):,.0f} to {max(rates):,.0f} sentences/s on one core "
        "(goal: 2,000).",
        "",
    ])
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

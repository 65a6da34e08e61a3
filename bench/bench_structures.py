"""Host-side cost of trees -> structure arrays, in sentences per second on one CPU core.

    python -m bench.bench_structures [--data-dir DATA] [--repeats 3]

Constituency trees: the SST trees (train+dev+test, 11855). Dependency trees: UD English-EWT train
sentences of 5 words up to the longest SST sentence, so both have SST-like lengths. Per sentence:
- PSAN: `psan.segments` + `psan.blocks` (from the SST tree; also from a derived UD tree);
- Dependency-Transformer: `relations` (max_distance 2) + `levels`;
- PhraseTransformer: `dependency_members` (n-gram spans are one fixed layout per bucket);
"all models" = one sentence through all three (1 / the sum of the per-sentence times).
The process is pinned to one core. Goal: >= 2,000 sentences/s.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.common import one_core
from jaxenc import cli
from jaxenc.data.paths import data_dir
from jaxenc.structures import hypernodes, psan
from jaxenc.structures.derive import derive_tree
from jaxenc.structures.formats import read_bracketed, read_conllu
from jaxenc.structures.relations import RelationVocabulary, levels, relations
from jaxenc.structures.trees import DependencyTree, parse_bracketed

MAX_LEVEL = 16
PARSE_GOLD = "parse SST bracket string -> Tree"
ALL_MODELS = "all models (PSAN + Dep.-Transformer + PhraseTransformer)"


def seconds_per_item(function: Callable, items: Sequence, repeats: int) -> float:
    """Best-of-`repeats` wall time of `function` over all `items`, divided by their number."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for item in items:
            function(item)
        best = min(best, time.perf_counter() - start)
    return best / len(items)


def measure(root: Path, repeats: int) -> tuple[dict[str, float], str]:
    """(step -> seconds per sentence, a line describing the trees) on the calling thread; pin it
    to one core (bench.common.one_core) for per-core rates."""
    sst_paths = [root / "sst_ptb_trees" / f"{split}.txt" for split in ("train", "dev", "test")]
    trees = [tree for path in sst_paths for tree in read_bracketed(path)]
    lines = [line for path in sst_paths for line in path.read_text("utf-8").splitlines()]
    lengths = [len(tree.leaves()) for tree in trees]
    ud_paths = sorted((root / "ud_english_ewt").glob("en_ewt-ud-train.part*.conllu"))
    dtrees = [DependencyTree.from_sentence(sentence) for path in ud_paths
              for sentence in read_conllu(path)
              if 5 <= len(sentence) <= max(lengths)]
    vocab = RelationVocabulary.build(dtrees)

    def psan_arrays(tree):
        return psan.blocks(psan.segments(tree))

    def transformer_arrays(dtree):
        return relations(dtree, vocab), levels(dtree, MAX_LEVEL)

    timings = {
        PARSE_GOLD: seconds_per_item(parse_bracketed, lines, repeats),
        "PSAN segments + blocks (SST tree)": seconds_per_item(psan_arrays, trees, repeats),
        "PSAN from a UD tree (derive + segments + blocks)": seconds_per_item(
            lambda dtree: psan_arrays(derive_tree(dtree).tree), dtrees, repeats),
        "Dependency-Transformer relations + levels (UD tree)": seconds_per_item(
            transformer_arrays, dtrees, repeats),
        "PhraseTransformer dependency members (UD tree)": seconds_per_item(
            hypernodes.dependency_members, dtrees, repeats),
    }
    per_model = list(timings)[1:2] + list(timings)[3:]
    timings[ALL_MODELS] = sum(timings[name] for name in per_model)
    return timings, (f"SST trees: {len(trees)}, mean {np.mean(lengths):.1f} words; UD-EWT trees: "
                     f"{len(dtrees)}, mean {np.mean([len(d) for d in dtrees]):.1f} words; one core")


@cli.reports_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None,
                        help="the data root, docs/data.md (default $JAXENC_DATA_DIR)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with one_core():
        timings, trees = measure(data_dir(args.data_dir), args.repeats)
    print(f"{trees}\n")
    print("| step | sentences/s | µs/sentence |\n|---|---|---|")
    for name, seconds in timings.items():
        print(f"| {name} | {1 / seconds:,.0f} | {seconds * 1e6:.0f} |")


if __name__ == "__main__":
    main()

"""PSAN Table 1 statistics of a tree corpus: phrases per sentence and words per phrase per level.

    python -m jaxenc.structures.stats --trees sst_ptb_trees/{train,dev,test}.txt
    python -m jaxenc.structures.stats --conllu ud_english_ewt/en_ewt-ud-dev.conllu

Prints a markdown table with the PSAN paper's SST-5 row beside the measured one, so the division
(jaxenc.structures.psan) can be checked against the paper. Phrases per sentence is the mean of P_t
over sentences; words per phrase is all words over all phrases of the level (each phrase weighted
equally). `segment_stats` counts the same from segment ids (the "segments" structure arrays);
`python -m reports.psan_table1` applies it to every dataset the project parses, with the
paper's whole Table 1 (`PAPER_TABLE1`) beside.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from jaxenc import cli
from jaxenc.structures import psan
from jaxenc.structures.derive import derive_tree
from jaxenc.structures.formats import numbered_conllu, read_bracketed
from jaxenc.structures.trees import DependencyTree, Tree

# Wu et al. (2018), Table 1: dataset -> (size, phrases per sentence, words per phrase), levels
# 1-3, from Stanford PCFG 3.5.2 trees. Size counts examples (sentence pairs for SICK, STS14 and
# MRPC); SST2 is SentEval's (every training phrase, dev and test sentences).
PAPER_TABLE1: dict[str, tuple[int, tuple[float, ...], tuple[float, ...]]] = {
    "MR": (10662, (2.00, 2.89, 6.03), (10.79, 7.47, 3.58)),
    "CR": (3775, (1.99, 3.22, 6.02), (10.11, 6.25, 3.34)),
    "MPQA": (10606, (1.13, 1.52, 1.63), (2.73, 2.03, 1.89)),
    "SUBJ": (10000, (1.98, 3.29, 4.51), (5.61, 3.40, 2.48)),
    "SST2": (70042, (1.95, 3.35, 5.03), (5.53, 3.22, 2.15)),
    "SST5": (11855, (2.00, 3.53, 6.10), (10.08, 5.71, 3.31)),
    "TREC": (5952, (2.00, 3.73, 5.59), (5.03, 2.98, 1.99)),
    "SICK-E": (9930, (1.93, 3.40, 4.92), (5.01, 2.85, 1.97)),
    "SICK-R": (9930, (1.93, 3.40, 4.92), (5.01, 2.85, 1.97)),
    "STS14": (4500, (1.96, 3.58, 5.12), (5.34, 2.92, 2.04)),
    "MRPC": (5803, (1.99, 3.31, 4.55), (5.59, 3.37, 2.65)),
}
_, PAPER_SST5_PHRASES, PAPER_SST5_WORDS = PAPER_TABLE1["SST5"]


@dataclasses.dataclass(frozen=True)
class DivisionStats:
    """Averages over a corpus, one entry per level 1..T."""

    sentences: int
    phrases_per_sentence: tuple[float, ...]
    words_per_phrase: tuple[float, ...]


def division_stats(trees: Iterable[Tree], num_levels: int = 3, min_split_len: int = 4,
                   binarize: bool = True) -> DivisionStats:
    """Table 1 columns for `trees` divided by `psan.segments` with these settings."""
    return segment_stats(psan.segments(tree, num_levels, min_split_len, binarize)
                         for tree in trees)


def segment_stats(divisions: Iterable[np.ndarray]) -> DivisionStats:
    """Table 1 columns of sentences given by their segment ids int32[T, n] (`psan.segments`, or
    the "segments" structure arrays a featurizer stores; padding -1 is ignored).

    Raises ValueError for no sentences, an empty sentence or levels of different counts.
    """
    counts, words = [], 0
    for ids in divisions:
        ids = np.asarray(ids)
        if ids.ndim != 2 or not np.any(ids[0] >= 0):
            raise ValueError(f"segment ids must be int32[T, n] with n >= 1, got shape {ids.shape}")
        if counts and len(ids) != len(counts[0]):
            raise ValueError(f"sentences with {len(counts[0])} and {len(ids)} levels")
        counts.append(ids.max(axis=1) + 1)
        words += int(np.sum(ids[0] >= 0))
    if not counts:
        raise ValueError("no sentences to count")
    per_sentence = np.array(counts, dtype=np.int64)  # [N, T]
    return DivisionStats(len(counts), tuple(per_sentence.mean(axis=0).round(2).tolist()),
                         tuple((words / per_sentence.sum(axis=0)).round(2).tolist()))


def markdown_table(name: str, stats: DivisionStats) -> str:
    """The measured row and the paper's SST-5 row as a markdown table."""
    levels = range(1, len(stats.phrases_per_sentence) + 1)
    header = (["trees", "sentences"] + [f"phrases/sent. L{t}" for t in levels]
              + [f"words/phrase L{t}" for t in levels])

    def row(label: str, count: int, phrases: Sequence[float], words: Sequence[float]) -> str:
        cells = [label, str(count)] + [f"{value:.2f}" for value in (*phrases, *words)]
        return "| " + " | ".join(cells) + " |"

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
             row(name, stats.sentences, stats.phrases_per_sentence, stats.words_per_phrase)]
    if len(stats.phrases_per_sentence) == len(PAPER_SST5_PHRASES):
        lines.append(row("PSAN paper, SST-5", 11855, PAPER_SST5_PHRASES, PAPER_SST5_WORDS))
    return "\n".join(lines)


def _derived_trees(path: str) -> tuple[list[Tree], int]:
    """The trees derived from a CoNLL-U file's dependencies, and how many were non-projective."""
    derived = [derive_tree(DependencyTree.from_sentence(sentence, source=f"{path}:{line}"))
               for line, sentence in numbered_conllu(path)]
    return [item.tree for item in derived], sum(item.non_projective for item in derived)


@cli.reports_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jaxenc.structures.stats",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--trees", nargs="+", required=True,
                        help="bracket-per-line tree files (or CoNLL-U files with --conllu)")
    parser.add_argument("--conllu", action="store_true",
                        help="the files are CoNLL-U; phrases are derived from dependency subtrees")
    parser.add_argument("--levels", type=int, default=3)
    parser.add_argument("--min-split-len", type=int, default=4)
    parser.add_argument("--no-binarize", action="store_true", help="divide n-ary trees as they are")
    args = parser.parse_args(argv)
    trees, non_projective = [], 0
    for path in args.trees:
        if args.conllu:
            derived, count = _derived_trees(path)
            trees += derived
            non_projective += count
        else:
            trees += read_bracketed(path)
    stats = division_stats(trees, args.levels, args.min_split_len, not args.no_binarize)
    print(markdown_table(" + ".join(Path(path).name for path in args.trees), stats))
    if args.conllu:
        print(f"\nnon-projective subtrees (covering span used): {non_projective}")


if __name__ == "__main__":
    main()

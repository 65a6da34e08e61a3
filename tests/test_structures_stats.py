"""PSAN Table 1 statistics: `division_stats` / `segment_stats` against a brute-force count of the
phrases of small hand-built trees (results/psan/table1.md, reports.psan_table1, is checked by
tests/reports/test_psan_table1.py)."""

import numpy as np
import pytest

from jaxenc.structures import psan, stats
from jaxenc.structures.trees import Tree, parse_bracketed

TREES = [
    # The big brown dog | chased a small cat into the garden | .  (unary chains, a 3-way S)
    "(ROOT (S (NP (DT The) (JJ big) (JJ brown) (NN dog)) (VP (VP (VBD chased) (NP (DT a) "
    "(JJ small) (NN cat)) (PP (IN into) (NP (NP (DT the) (NN garden)))))) (. .)))",
    "(S a b c d e)",  # flat: binarised to a (b (c (d e)))
    "(X (Y w))",  # one word under a unary chain
    "(S (A a b) (B c d))",
    "(S (A (B (C a b c d e f g h))))",  # an 8-way node under a chain
    "(S (NP (D x) (N y)) (VP (V z) (NP (D u) (A v) (N w) (P (P1 p) (P2 q)))) (E e))",
]


def brute_force_counts(tree: Tree, num_levels: int, min_split_len: int,
                       binarize: bool) -> list[int]:
    """Phrases per level by the rule itself, on Tree nodes: level 0 is the whole tree; a phrase
    of at least `min_split_len` words is replaced by its children, a shorter one is kept."""
    root = tree.collapse_unary()
    level = [root.binarize() if binarize else root]
    counts = []
    for _ in range(num_levels):
        level = [part for node in level
                 for part in (node.children if len(node.leaves()) >= min_split_len
                              and node.children else [node])]
        counts.append(len(level))
    return counts


def brute_force_stats(trees: list[Tree], num_levels: int, min_split_len: int,
                      binarize: bool) -> tuple[list[float], list[float]]:
    """(mean phrases per sentence, all words / all phrases) of every level, unrounded."""
    counts = np.array([brute_force_counts(tree, num_levels, min_split_len, binarize)
                       for tree in trees])
    words = sum(len(tree.leaves()) for tree in trees)
    return list(counts.mean(axis=0)), list(words / counts.sum(axis=0))


@pytest.mark.parametrize("num_levels", [1, 3, 4])
@pytest.mark.parametrize("min_split_len", [2, 4, 5])
@pytest.mark.parametrize("binarize", [True, False])
def test_division_stats_equal_a_brute_force_count(num_levels, min_split_len, binarize):
    trees = [parse_bracketed(text) for text in TREES]
    result = stats.division_stats(trees, num_levels, min_split_len, binarize)
    phrases, words = brute_force_stats(trees, num_levels, min_split_len, binarize)
    assert result.sentences == len(TREES)
    assert result.phrases_per_sentence == pytest.approx(phrases, abs=0.005)
    assert result.words_per_phrase == pytest.approx(words, abs=0.005)


def test_brute_force_counts_by_hand():
    dog, flat = (parse_bracketed(text) for text in TREES[:2])
    assert brute_force_counts(dog, 3, 4, True) == [2, 4, 5]
    # a | b c d e;  a | b | c d e;  c d e has 3 words: kept.  Unbinarised: five words at once.
    assert brute_force_counts(flat, 3, 4, True) == [2, 3, 3]
    assert brute_force_counts(flat, 3, 4, False) == [5, 5, 5]
    result = stats.division_stats([dog, flat])
    assert result.phrases_per_sentence == (2.0, 3.5, 4.0)
    assert result.words_per_phrase == (4.25, round(17 / 7, 2), round(17 / 8, 2))


def test_segment_stats_ignore_padding_and_refuse_bad_input():
    trees = [parse_bracketed(text) for text in TREES]
    divisions = [psan.segments(tree) for tree in trees]
    padded = [np.pad(ids, ((0, 0), (0, 3)), constant_values=-1) for ids in divisions]
    assert stats.segment_stats(padded) == stats.segment_stats(divisions)
    assert stats.segment_stats(divisions) == stats.division_stats(trees)
    with pytest.raises(ValueError, match="no sentences"):
        stats.segment_stats([])
    with pytest.raises(ValueError, match="levels"):
        stats.segment_stats([divisions[0], divisions[1][:2]])
    with pytest.raises(ValueError, match="n >= 1"):
        stats.segment_stats([np.full((3, 2), -1)])


def test_paper_table1_holds_the_sst5_row():
    size, phrases, words = stats.PAPER_TABLE1["SST5"]
    assert (size, stats.PAPER_SST5_PHRASES, stats.PAPER_SST5_WORDS) == (11855, phrases, words)

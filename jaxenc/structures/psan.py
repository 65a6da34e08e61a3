"""PSAN phrase division: segment ids per level and the phrase lists of the blocked kernel.

The paper's rule, made precise (Wu et al. 2018, Sec. 2.2: "a phrase will not be further divided if
its length is smaller than 4"):
1. level 0 is the whole sentence; unary chains are collapsed (descend while one child);
2. at level t = 1..T every phrase of level t-1 with >= `min_split_len` words is replaced by the
   spans of its children (after collapsing unary chains); shorter phrases are carried over;
3. `segments[t-1, i]` = index (0..P_t-1, left to right) of the phrase holding token i at level t.
n-ary trees are binarized (right-factored, as `Tree.binarize`) by default: the paper's level-1 count
of ~2.00 phrases per sentence is what binary trees give. Padding (-1) is added by the batcher.
"""

from __future__ import annotations

import numpy as np

from jaxenc.errors import ConfigError, StructureError
from jaxenc.structures.trees import Tree

# A phrase as the division sees it: (start, end) token span and its child phrases (end exclusive).
Phrase = tuple[int, int, list["Phrase"]]


def _phrase(node: Tree, start: int, binarize: bool) -> Phrase:
    """The phrase of `node` (unary chain collapsed) starting at token `start`."""
    while len(node.children) == 1:
        node = node.children[0]
    if not node.children:
        if node.word is None:
            raise StructureError(f"constituent ({node.label}) has no words",
                                 fix="drop empty constituents (Tree.strip_ptb)")
        return (start, start + 1, [])
    children = []
    for child in node.children:
        phrase = _phrase(child, start, binarize)
        children.append(phrase)
        start = phrase[1]
    if binarize:  # the same right factoring as Tree.binarize
        while len(children) > 2:
            children[-2:] = [(children[-2][0], children[-1][1], children[-2:])]
    return (children[0][0], start, children)


def segments(tree: Tree, num_levels: int = 3, min_split_len: int = 4,
             binarize: bool = True) -> np.ndarray:
    """int32[num_levels, n]: the phrase index of every token at levels 1..num_levels.

    Args:
      tree: a constituency tree over the n tokens (leaves).
      num_levels: T, the number of division levels (PSAN: 3).
      min_split_len: phrases with fewer words are never divided (PSAN: 4).
      binarize: right-factor nodes with more than two children first.
    """
    if num_levels < 1 or min_split_len < 2:
        raise ConfigError(f"num_levels={num_levels}, min_split_len={min_split_len} "
                          "(fix: use num_levels >= 1 and min_split_len >= 2)")
    root = _phrase(tree, 0, binarize)
    ids = np.empty((num_levels, root[1]), np.int32)
    level = [root]
    for depth in range(num_levels):
        level = [part for phrase in level
                 for part in (phrase[2] if phrase[1] - phrase[0] >= min_split_len else (phrase,))]
        ids[depth] = np.repeat(np.arange(len(level), dtype=np.int32),
                               [end - start for start, end, _ in level])
    return ids


def blocks(segments: np.ndarray) -> np.ndarray:
    """int32[T, P, 2]: the (start, length) of every phrase of every level, for the blocked PSA.

    `segments` is int32[T, n] (tokens with id -1 are padding and ignored). Row t lists level
    t+1's P_t phrases left to right; P = max_t P_t and the rows of shorter levels are padded with
    -1 (the batcher pads P further, to the bucket length). Raises StructureError when a level's
    phrases are not contiguous and numbered 0..P-1 from left to right.
    """
    levels = []
    for depth, row in enumerate(np.asarray(segments)):
        ids = row[row >= 0]
        starts = np.flatnonzero(np.diff(ids, prepend=-1))
        if not np.array_equal(ids[starts], np.arange(len(starts))):
            raise StructureError(f"segments of level {depth + 1} are not contiguous phrases "
                                 f"numbered 0..P-1 left to right: {row.tolist()}",
                                 fix="build them with jaxenc.structures.psan.segments")
        levels.append(np.stack([starts, np.diff(starts, append=len(ids))], axis=1))
    result = np.full((len(levels), max((len(level) for level in levels), default=0), 2), -1,
                     np.int32)
    for depth, level in enumerate(levels):
        result[depth, :len(level)] = level
    return result


def equal_segments(segments: np.ndarray) -> np.ndarray:
    """The "w/o syntactic division" ablation: at every level the same number of phrases as
    `segments` has, of nearly equal length (the first n mod P phrases one word longer).

    int32[T, n] -> int32[T, n]; padding (-1) stays in place.
    """
    segments = np.asarray(segments)
    result = np.full_like(segments, -1)
    for depth, row in enumerate(segments):
        n = int(np.sum(row >= 0))
        count = int(row.max()) + 1 if n else 0
        if count:
            sizes = np.full(count, n // count)
            sizes[: n % count] += 1
            result[depth, :n] = np.repeat(np.arange(count), sizes)
    return result

"""A constituency-like tree from a dependency tree, for PSAN when no constituency parse exists.

Each token's projective subtree is a contiguous span (the head word plus its dependents' spans). A
token whose subtree is not contiguous (non-projective arcs) gets the smallest contiguous span
covering it, and is counted. Spans are kept from the longest down; a span that crosses one already
kept (only possible after such a fallback) is dropped, its words join the enclosing phrase. On a
projective tree every subtree span is kept, so the phrases are exactly the dependency subtrees.

Phrase nodes are labelled with the arc label of their head word; words are unlabelled leaves.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxenc.structures.trees import DependencyTree, Tree


class DerivedTree(NamedTuple):
    """tree: the phrase tree over the tokens; non_projective: how many subtrees were not contiguous
    and fell back to their covering span."""

    tree: Tree
    non_projective: int


def subtree_spans(dtree: DependencyTree) -> tuple[list[int], list[int], list[int]]:
    """Per token (0-based): the first and last token of its subtree, and the subtree's size."""
    n = len(dtree.validate())
    first, last, size = list(range(n)), list(range(n)), [1] * n
    for token in _bottom_up_order(dtree):
        head = dtree.heads[token] - 1
        if head >= 0:
            first[head] = min(first[head], first[token])
            last[head] = max(last[head], last[token])
            size[head] += size[token]
    return first, last, size


def _bottom_up_order(dtree: DependencyTree) -> list[int]:
    """Token indices (0-based), every dependent before its head."""
    dependents: list[list[int]] = [[] for _ in range(len(dtree) + 1)]  # index 0 = the root node
    for token, head in enumerate(dtree.heads, start=1):
        dependents[head].append(token)
    top_down, frontier = [], dependents[0]
    while frontier:
        top_down.extend(frontier)
        frontier = [child for node in frontier for child in dependents[node]]
    return [node - 1 for node in reversed(top_down)]


def derive_tree(dtree: DependencyTree) -> DerivedTree:
    """The phrase tree of `dtree` (see the module docstring) and its non-projective count."""
    first, last, size = subtree_spans(dtree)
    n = len(dtree)
    non_projective = sum(last[t] - first[t] + 1 != size[t] for t in range(n))
    candidates = sorted((t for t in range(n) if size[t] > 1),
                        key=lambda t: (first[t] - last[t], first[t]))  # longest first
    kept: list[tuple[int, int, int]] = []  # (start, end inclusive, head token)
    for token in candidates:
        start, end = first[token], last[token]
        crosses = any(start < kept_start <= end < kept_end or kept_start < start <= kept_end < end
                      for kept_start, kept_end, _ in kept)
        duplicate = any((start, end) == (kept_start, kept_end) for kept_start, kept_end, _ in kept)
        if not (crosses or duplicate):
            kept.append((start, end, token))
    return DerivedTree(_nest(dtree, kept), non_projective)


def _nest(dtree: DependencyTree, spans: list[tuple[int, int, int]]) -> Tree:
    """The tree whose inner nodes are the laminar `spans` and whose leaves are the tokens."""
    leaves = [(token, token, -1) for token in range(len(dtree))]
    top = Tree("", [])
    open_nodes: list[tuple[int, Tree]] = [(len(dtree), top)]  # (last token, node)
    for start, end, head in sorted(spans + leaves, key=lambda item: (item[0], -item[1])):
        while open_nodes[-1][0] < start:
            open_nodes.pop()
        if head < 0:
            open_nodes[-1][1].children.append(Tree("", [], dtree.tokens[start]))
        else:
            node = Tree(dtree.labels[head], [])
            open_nodes[-1][1].children.append(node)
            open_nodes.append((end, node))
    return top.children[0]

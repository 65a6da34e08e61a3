"""Property tests (hypothesis) of the structure code against slow reference implementations written
here: bracket round trips, PSAN division invariants, relation symmetry, levels, derived trees,
dependency-tree validation and hypernode adjacency (the subset definition, eq. 6)."""

import itertools

import chex
import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxenc.errors import StructureError
from jaxenc.layers import masks
from jaxenc.structures import hypernodes, psan
from jaxenc.structures.derive import derive_tree
from jaxenc.structures.relations import RelationVocabulary, levels, relations
from jaxenc.structures.trees import DependencyTree, Tree, parse_bracketed

SETTINGS = settings(max_examples=50, deadline=None)
WORDS = st.text(st.characters(exclude_characters=" \t\n\r\f\v()", exclude_categories=("Cs",)),
                min_size=1, max_size=4)
LEAF_LABELS = st.sampled_from(["NN", "DT", "-LRB-", "2"])
NODE_LABELS = st.sampled_from(["S", "NP-SBJ", "", "3", "@VP"])
ARC_LABELS = st.sampled_from(["nsubj", "obj", "nmod:poss", "nmod", "det", "acl:relcl"])


# ----------------------------------------------------------------------------- strategies


def _subtree(draw, start: int, end: int, unary_budget: int) -> Tree:
    """A random tree over words start..end-1 with up to `unary_budget` unary nodes per path."""
    if unary_budget and draw(st.integers(0, 3)) == 0:
        return Tree(draw(NODE_LABELS), [_subtree(draw, start, end, unary_budget - 1)])
    if end - start == 1:
        return Tree(draw(LEAF_LABELS), [], draw(WORDS))
    cuts = draw(st.lists(st.integers(start + 1, end - 1), min_size=1, max_size=3, unique=True))
    bounds = [start, *sorted(cuts), end]
    return Tree(draw(NODE_LABELS), [_subtree(draw, a, b, unary_budget)
                                    for a, b in itertools.pairwise(bounds)])


@st.composite
def constituency_trees(draw, max_words: int = 16) -> Tree:
    return _subtree(draw, 0, draw(st.integers(1, max_words)), unary_budget=2)


@st.composite
def dependency_trees(draw, max_words: int = 9) -> DependencyTree:
    """A random valid (often non-projective) tree: in a random order, each word takes an earlier
    word as head; the first is the root."""
    n = draw(st.integers(1, max_words))
    order = draw(st.permutations(range(1, n + 1)))
    heads = [0] * (n + 1)
    for position, word in enumerate(order[1:], start=1):
        heads[word] = order[draw(st.integers(0, position - 1))]
    labels = tuple(draw(ARC_LABELS) for _ in range(n))
    return DependencyTree(tuple(f"w{i}" for i in range(n)), tuple(heads[1:]), labels)


# ----------------------------------------------------------------------------- references


def reference_segments(tree: Tree, num_levels: int, min_split_len: int,
                       binarize: bool) -> np.ndarray:
    """structures.md's division, literally, on Tree objects."""

    def collapse(node):
        while len(node.children) == 1:
            node = node.children[0]
        return node

    level = [collapse(tree.binarize() if binarize else tree)]
    rows = []
    for _ in range(num_levels):
        next_level = []
        for phrase in level:
            if len(phrase.leaves()) >= min_split_len:
                next_level.extend(collapse(child) for child in phrase.children)
            else:
                next_level.append(phrase)
        level = next_level
        rows.append([index for index, phrase in enumerate(level) for _ in phrase.leaves()])
    return np.array(rows)


def path_to_root(heads, node: int) -> list[int]:
    """Nodes from `node` up to the [root] node 0 (node k = word k, heads 1-based)."""
    path = [node]
    while path[-1] != 0:
        path.append(heads[path[-1] - 1])
    return path


def reference_relation_names(dtree: DependencyTree, max_distance: int, keep_subtypes: bool):
    size = len(dtree) + 1
    names = [["NONE"] * size for _ in range(size)]
    for i, j in itertools.product(range(size), repeat=2):
        up_i, up_j = path_to_root(dtree.heads, i), path_to_root(dtree.heads, j)
        lca = next(node for node in up_i if node in up_j)
        a, b = up_i.index(lca), up_j.index(lca)
        label = dtree.labels[(i if a else j) - 1] if a + b else ""
        if not keep_subtypes:
            label = label.split(":")[0]
        if (a, b) == (0, 0):
            names[i][j] = "SELF"
        elif (a, b) == (1, 0):
            names[i][j] = f"{label}/UP"
        elif (a, b) == (0, 1):
            names[i][j] = f"{label}/DOWN"
        elif a + b <= max_distance:
            names[i][j] = f"({a},{b})"
    return names


def reference_yields(dtree: DependencyTree) -> list[set[int]]:
    """Per word (0-based), the set of words (0-based) of its subtree."""
    n = len(dtree)
    return [{w for w in range(n) if t + 1 in path_to_root(dtree.heads, w + 1)} for t in range(n)]


def inner_spans(tree: Tree) -> list[tuple[int, int]]:
    """(first, last) word of every inner node, by walking the tree."""
    spans = []

    def walk(node, start):
        if node.is_leaf:
            return start + 1
        end = start
        for child in node.children:
            end = walk(child, end)
        spans.append((start, end - 1))
        return end

    walk(tree, 0)
    return spans


# ----------------------------------------------------------------------------- trees


@SETTINGS
@given(constituency_trees())
def test_bracket_round_trip(tree):
    text = tree.to_bracketed()
    assert parse_bracketed(text) == tree
    assert "\n" not in text


@SETTINGS
@given(constituency_trees())
def test_collapse_and_binarize_keep_the_words(tree):
    assert tree.collapse_unary().leaves() == tree.leaves() == tree.binarize().leaves()
    for node in tree.binarize().subtrees():
        assert len(node.children) <= 2
    for node in tree.collapse_unary().subtrees():
        assert len(node.children) != 1




# ----------------------------------------------------------------------------- PSAN


@SETTINGS
@given(constituency_trees(), st.integers(1, 4), st.integers(2, 5), st.booleans())
def test_segments_equal_the_reference_division(tree, num_levels, min_split_len, binarize):
    ids = psan.segments(tree, num_levels, min_split_len, binarize)
    chex.assert_shape(ids, (num_levels, len(tree.leaves())))
    chex.assert_type(ids, np.int32)
    np.testing.assert_array_equal(ids, reference_segments(tree, num_levels, min_split_len,
                                                          binarize))
    np.testing.assert_array_equal(
        psan.segments(tree, num_levels, min_split_len, binarize=True),
        psan.segments(tree.binarize(), num_levels, min_split_len, binarize=False))


@SETTINGS
@given(constituency_trees(max_words=24), st.booleans())
def test_segments_partition_refine_and_never_split_short_phrases(tree, binarize):
    ids = psan.segments(tree, num_levels=4, min_split_len=4, binarize=binarize)
    n = ids.shape[1]
    previous = np.zeros(n, np.int32)  # level 0: the whole sentence
    for row in ids:
        assert row[0] == 0 and set(np.diff(row).tolist()) <= {0, 1}  # contiguous, left to right
        for i in range(n - 1):
            if row[i] == row[i + 1]:
                assert previous[i] == previous[i + 1]  # refines the level above
        for phrase in range(previous.max() + 1):
            members = row[previous == phrase]
            if len(members) < 4:
                assert len(set(members.tolist())) == 1  # short phrases are carried over
            else:
                assert len(set(members.tolist())) >= 2  # long ones are divided
        previous = row


@SETTINGS
@given(constituency_trees(max_words=24), st.integers(0, 4))
def test_blocks_and_equal_split_against_loops(tree, padding):
    ids = psan.segments(tree)
    padded = np.concatenate([ids, np.full((3, padding), -1, np.int32)], axis=1)
    phrase_lists = psan.blocks(padded)
    assert phrase_lists.shape == (3, ids.max() + 1, 2) and phrase_lists.dtype == np.int32
    for row, phrases in zip(ids, phrase_lists, strict=True):
        expected, start = [], 0
        for i in range(1, len(row) + 1):
            if i == len(row) or row[i] != row[i - 1]:
                expected.append([start, i - start])
                start = i
        assert phrases.tolist() == expected + [[-1, -1]] * (len(phrases) - len(expected))
    equal = psan.equal_segments(padded)
    assert (equal[:, ids.shape[1]:] == -1).all()
    for row, equal_row in zip(ids, equal[:, :ids.shape[1]], strict=True):
        sizes = np.bincount(equal_row)
        assert len(sizes) == row.max() + 1  # same number of phrases
        assert sizes.max() - sizes.min() <= 1 and (np.diff(sizes) <= 0).all()
        assert set(np.diff(equal_row).tolist()) <= {0, 1}


# ----------------------------------------------------------------------------- relations


@SETTINGS
@given(dependency_trees(), st.integers(1, 3), st.booleans())
def test_relations_equal_the_path_reference(dtree, max_distance, keep_subtypes):
    vocab = RelationVocabulary.build([dtree], max_distance=max_distance,
                                     keep_subtypes=keep_subtypes)
    rel = relations(dtree, vocab)
    chex.assert_shape(rel, (len(dtree) + 1, len(dtree) + 1))
    chex.assert_type(rel, np.int32)
    names = [[vocab.names[r] for r in row] for row in rel]
    assert names == reference_relation_names(dtree, max_distance, keep_subtypes)
    for i, j in itertools.product(range(len(dtree) + 1), repeat=2):
        if names[i][j].endswith("/UP"):
            assert names[j][i] == names[i][j].replace("/UP", "/DOWN")
        if names[i][j].endswith("/DOWN"):
            assert names[j][i] == names[i][j].replace("/DOWN", "/UP")
        if names[i][j].startswith("("):
            a, b = names[i][j][1:-1].split(",")
            assert names[j][i] == f"({b},{a})"


@SETTINGS
@given(dependency_trees(), st.integers(1, 6))
def test_levels_are_path_lengths(dtree, max_level):
    expected = [min(len(path_to_root(dtree.heads, node)) - 1, max_level)
                for node in range(len(dtree) + 1)]
    assert levels(dtree, max_level).tolist() == expected


# ----------------------------------------------------------------------------- derived trees


@SETTINGS
@given(dependency_trees())
def test_derived_tree_spans(dtree):
    derived = derive_tree(dtree)
    assert derived.tree.leaves() == list(dtree.tokens)
    yields = reference_yields(dtree)
    covering = {(min(words), max(words)) for words in yields if len(words) > 1}
    contiguous = [max(words) - min(words) + 1 == len(words) for words in yields]
    assert derived.non_projective == contiguous.count(False)
    spans = inner_spans(derived.tree)
    assert len(spans) == len(set(spans)) and set(spans) <= covering
    if all(contiguous):  # projective: the phrases are exactly the subtrees
        assert set(spans) == covering
    for (s1, e1), (s2, e2) in itertools.combinations(spans, 2):  # laminar
        assert e1 < s2 or e2 < s1 or (s1 <= s2 and e2 <= e1) or (s2 <= s1 and e1 <= e2)


# ----------------------------------------------------------------------------- validation


def reference_is_valid(heads) -> bool:
    n = len(heads)
    if not all(0 <= head <= n for head in heads) or list(heads).count(0) != 1:
        return False
    for start in range(1, n + 1):
        node, steps = start, 0
        while node != 0 and steps <= n:
            node, steps = heads[node - 1], steps + 1
        if node != 0:
            return False
    return True


@SETTINGS
@given(st.lists(st.integers(-1, 7), min_size=1, max_size=6))
def test_validate_agrees_with_the_reference(heads):
    dtree = DependencyTree(tuple("abcdef"[:len(heads)]), tuple(heads), ("dep",) * len(heads))
    try:
        dtree.validate("random")
        valid = True
    except StructureError as error:
        valid = False
        assert str(error).startswith("random: ")
    assert valid == reference_is_valid(heads)


# ----------------------------------------------------------------------------- hypernodes

NUM_WORDS, BATCH = 6, 2
member_adjacency = jax.jit(masks.member_adjacency, static_argnums=2)
interval_adjacency = jax.jit(masks.span_adjacency, static_argnums=2)


def reference_adjacency(node_sets: list[set[int]], length: int) -> np.ndarray:
    valid = [bool(words) and max(words) < length for words in node_sets]
    size = len(node_sets)
    result = np.zeros((size, size), bool)
    for s, t in itertools.product(range(size), repeat=2):
        result[s, t] = valid[s] and valid[t] and (
            node_sets[s] <= node_sets[t] or node_sets[t] <= node_sets[s])
    return result


@SETTINGS
@given(st.lists(st.lists(st.integers(-1, NUM_WORDS - 1), min_size=3, max_size=3),
                min_size=BATCH * 5, max_size=BATCH * 5),
       st.lists(st.integers(0, NUM_WORDS), min_size=BATCH, max_size=BATCH))
def test_member_adjacency_is_the_subset_definition(rows, lengths):
    members = np.array(rows, np.int32).reshape(BATCH, 5, 3)
    adjacency = np.asarray(member_adjacency(members, np.array(lengths), NUM_WORDS))
    for b in range(BATCH):
        node_sets = [{w} for w in range(NUM_WORDS)]
        node_sets += [{w for w in row if w >= 0} for row in members[b]]
        np.testing.assert_array_equal(adjacency[b], reference_adjacency(node_sets, lengths[b]))


@SETTINGS
@given(st.lists(st.integers(0, NUM_WORDS), min_size=BATCH, max_size=BATCH))
def test_ngram_adjacency_is_the_subset_definition(lengths):
    spans = hypernodes.ngram_spans(NUM_WORDS, 3)
    batched = np.broadcast_to(spans, (BATCH, *spans.shape))
    adjacency = np.asarray(interval_adjacency(batched, np.array(lengths), NUM_WORDS))
    members = hypernodes.spans_to_members(spans)
    np.testing.assert_array_equal(
        adjacency, member_adjacency(np.broadcast_to(members, (BATCH, *members.shape)),
                                    np.array(lengths), NUM_WORDS))
    for b in range(BATCH):
        node_sets = [{w} for w in range(NUM_WORDS)]
        node_sets += [set(range(start, end + 1)) for start, end in spans]
        np.testing.assert_array_equal(adjacency[b], reference_adjacency(node_sets, lengths[b]))

"""Structure arrays on hand-worked examples: PSAN segments / blocks / equal split, Dependency-
Transformer relations and levels, Tree-LSTM node heads, PhraseTransformer hypernodes and adjacency,
the Table 1 stats."""

import chex
import jax
import numpy as np
import pytest

from jaxenc.errors import ConfigError, DataError, StructureError
from jaxenc.layers import masks
from jaxenc.structures import hypernodes, psan, stats
from jaxenc.structures.formats import read_bracketed
from jaxenc.structures.relations import (
    NONE_ID,
    SELF_ID,
    RelationVocabulary,
    levels,
    node_heads,
    relations,
)
from jaxenc.structures.trees import DependencyTree, Tree, parse_bracketed

# The big brown dog | chased a small cat into the garden | .   (12 tokens, with unary chains)
DOG_TREE = ("(ROOT (S (NP (DT The) (JJ big) (JJ brown) (NN dog)) "
            "(VP (VP (VBD chased) (NP (DT a) (JJ small) (NN cat)) "
            "(PP (IN into) (NP (NP (DT the) (NN garden)))))) (. .)))")


# ----------------------------------------------------------------------------- PSAN


def test_psan_division_of_a_small_tree_binarized():
    ids = psan.segments(parse_bracketed(DOG_TREE))
    chex.assert_shape(ids, (3, 12))
    chex.assert_type(ids, np.int32)
    # L1: S splits into NP | @S.  L2: NP (4 words) -> The | @NP; @S (8) -> VP | '.'.
    # L3: @NP (3) and '.' are carried; VP (7, its unary chain collapsed) -> chased | @VP.
    np.testing.assert_array_equal(ids, [
        [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
        [0, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3],
        [0, 1, 1, 1, 2, 3, 3, 3, 3, 3, 3, 4],
    ])
    levels_blocks = psan.blocks(ids)
    chex.assert_shape(levels_blocks, (3, 5, 2))  # P = 5 phrases at the finest level
    chex.assert_type(levels_blocks, np.int32)
    np.testing.assert_array_equal(levels_blocks, [
        [[0, 4], [4, 8], [-1, -1], [-1, -1], [-1, -1]],
        [[0, 1], [1, 3], [4, 7], [11, 1], [-1, -1]],
        [[0, 1], [1, 3], [4, 1], [5, 6], [11, 1]],
    ])


def test_psan_division_of_the_n_ary_tree():
    ids = psan.segments(parse_bracketed(DOG_TREE), binarize=False)
    np.testing.assert_array_equal(ids, [
        [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2],
        [0, 1, 2, 3, 4, 5, 5, 5, 6, 6, 6, 7],
        [0, 1, 2, 3, 4, 5, 5, 5, 6, 6, 6, 7],  # every phrase is shorter than 4: carried over
    ])
    two_levels = psan.segments(parse_bracketed(DOG_TREE), num_levels=2, min_split_len=8)
    np.testing.assert_array_equal(two_levels, [[0] * 4 + [1] * 8, [0] * 4 + [1] * 7 + [2]])


def test_short_sentence_and_single_word_are_never_split():
    np.testing.assert_array_equal(psan.segments(parse_bracketed("(S (A a) (B (C c) (D d)))")),
                                  np.zeros((3, 3), np.int32))
    np.testing.assert_array_equal(psan.segments(parse_bracketed("(X (NN word))")), [[0]] * 3)


def test_psan_bad_settings_and_empty_constituents():
    with pytest.raises(ConfigError, match="min_split_len"):
        psan.segments(parse_bracketed(DOG_TREE), min_split_len=1)
    with pytest.raises(StructureError, match=r"constituent \(NP\) has no words"):
        psan.segments(Tree("S", [Tree("NP", []), Tree("VP", [], "go")]))


def test_blocks_ignore_padding_and_reject_non_contiguous_ids():
    padded = np.array([[0, 0, 1, -1, -1], [0, 1, 2, -1, -1]], np.int32)
    np.testing.assert_array_equal(psan.blocks(padded), [[[0, 2], [2, 1], [-1, -1]],
                                                        [[0, 1], [1, 1], [2, 1]]])
    with pytest.raises(StructureError, match="level 1"):
        psan.blocks(np.array([[0, 1, 0]]))
    with pytest.raises(StructureError, match="level 2"):
        psan.blocks(np.array([[0, 0, 0], [1, 1, 2]]))


def test_equal_split_keeps_phrase_counts():
    ids = psan.segments(parse_bracketed(DOG_TREE))  # 2, 4, 5 phrases over 12 words
    np.testing.assert_array_equal(psan.equal_segments(ids), [
        [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
        [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3],
        [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4],
    ])
    padded = np.array([[0, 0, 1, 1, 1, -1]], np.int32)
    np.testing.assert_array_equal(psan.equal_segments(padded), [[0, 0, 0, 1, 1, -1]])


def test_table1_statistics_of_sst_match_the_spec(data_root):
    trees = [tree for split in ("train", "dev", "test")
             for tree in read_bracketed(data_root / "sst_ptb_trees" / f"{split}.txt")]
    result = stats.division_stats(trees)
    # shared/spec/structures.md: measured with this rule on the 11855 SST gold trees.
    assert result.sentences == 11855
    assert result.phrases_per_sentence == (1.99, 3.25, 4.62)
    assert result.words_per_phrase == (9.65, 5.90, 4.15)
    table = stats.markdown_table("SST", result)
    assert "| SST | 11855 | 1.99 | 3.25 | 4.62 | 9.65 | 5.90 | 4.15 |" in table
    assert "| PSAN paper, SST-5 | 11855 | 2.00 | 3.53 | 6.10 | 10.08 | 5.71 | 3.31 |" in table


def test_stats_command_on_a_conllu_file(tmp_path, capsys):
    path = tmp_path / "five.conllu"
    rows = [("a", 2, "det"), ("b", 0, "root"), ("c", 5, "amod"), ("d", 5, "amod"), ("e", 2, "obj")]
    path.write_text("".join(f"{i}\t{word}\t_\t_\t_\t_\t{head}\t{label}\t_\t_\n"
                            for i, (word, head, label) in enumerate(rows, start=1)))
    stats.main(["--conllu", "--trees", str(path)])
    printed = capsys.readouterr().out
    # Derived (root a b (obj c d e)), binarized (root a (@root b (obj c (@obj d e)))):
    # L1: a | b c d e;  L2: a | b | c d e;  L3: c d e has 3 words, so it is kept.
    assert "| five.conllu | 1 | 2.00 | 3.00 | 3.00 | 2.50 | 1.67 | 1.67 |" in printed
    assert "non-projective subtrees (covering span used): 0" in printed


# ----------------------------------------------------------------------------- relations


# the big dog barked: the -> dog (det), big -> dog (amod), dog -> barked (nsubj), barked root.
DOG_DEPS = DependencyTree(("the", "big", "dog", "barked"), (3, 3, 4, 0),
                          ("det", "amod:adj", "nsubj", "root"))


def test_relation_matrix_of_a_short_sentence():
    vocab = RelationVocabulary.build([DOG_DEPS], max_distance=2)
    assert vocab.labels == ("amod", "det", "nsubj", "root")  # subtypes dropped by default
    rel = relations(DOG_DEPS, vocab)
    chex.assert_shape(rel, (5, 5))
    chex.assert_type(rel, np.int32)
    names = [[vocab.names[i] for i in row] for row in rel]
    #            [root]         the           big           dog            barked
    assert names == [
        ["SELF", "NONE", "NONE", "(0,2)", "root/DOWN"],     # [root]
        ["NONE", "SELF", "(1,1)", "det/UP", "(2,0)"],       # the
        ["NONE", "(1,1)", "SELF", "amod/UP", "(2,0)"],      # big
        ["(2,0)", "det/DOWN", "amod/DOWN", "SELF", "nsubj/UP"],  # dog
        ["root/UP", "(0,2)", "(0,2)", "nsubj/DOWN", "SELF"],  # barked
    ]
    assert vocab.names[NONE_ID] == "NONE" and vocab.names[SELF_ID] == "SELF"
    one = relations(DOG_DEPS, vocab, max_distance=1)  # pairs beyond the arcs become NONE
    is_pair = rel >= vocab.pair_id(2, 0)
    assert is_pair.sum() == 8 and set(one[is_pair].tolist()) == {NONE_ID}
    np.testing.assert_array_equal(one[~is_pair], rel[~is_pair])
    with pytest.raises(ConfigError, match="stops at 2"):
        relations(DOG_DEPS, vocab, max_distance=3)


def test_levels_are_depths_clipped():
    np.testing.assert_array_equal(levels(DOG_DEPS, max_level=10), [0, 3, 3, 2, 1])
    np.testing.assert_array_equal(levels(DOG_DEPS, max_level=2), [0, 2, 2, 2, 1])
    assert levels(DOG_DEPS, 10).dtype == np.int32


def test_node_heads_put_the_root_node_first():
    # nodes: 0 [root], 1 the, 2 big, 3 dog, 4 barked; the -> dog, big -> dog, dog -> barked,
    # barked -> [root]; the [root] node has no head.
    heads = node_heads(DOG_DEPS)
    np.testing.assert_array_equal(heads, [-1, 3, 3, 4, 0])
    chex.assert_type(heads, np.int32)
    with pytest.raises(StructureError, match="cycle"):
        node_heads(DependencyTree(("a", "b", "c"), (0, 3, 2), ("x", "y", "z")))


def test_unseen_labels_map_to_unk_and_subtypes_flag(tmp_path):
    vocab = RelationVocabulary.build([DOG_DEPS], keep_subtypes=True, max_distance=3)
    assert "amod:adj" in vocab.labels and len(vocab) == 2 + 2 * 5 + 3 + 4
    other = DependencyTree(("a", "b"), (2, 0), ("flat:name", "root"))
    names = [[vocab.names[i] for i in row] for row in relations(other, vocab)]
    assert names[1][2] == "<unk>/UP" and names[2][1] == "<unk>/DOWN"
    vocab.save(tmp_path / "relations.json")
    assert RelationVocabulary.load(tmp_path / "relations.json") == vocab
    (tmp_path / "broken.json").write_text("{\"labels\": []}")
    with pytest.raises(DataError, match="broken.json: not a relation vocabulary"):
        RelationVocabulary.load(tmp_path / "broken.json")


def test_relations_reject_invalid_trees():
    vocab = RelationVocabulary.build([DOG_DEPS])
    with pytest.raises(StructureError, match="cycle"):
        relations(DependencyTree(("a", "b", "c"), (0, 3, 2), ("x", "y", "z")), vocab)
    with pytest.raises(StructureError, match="2 roots"):
        levels(DependencyTree(("a", "b"), (0, 0), ("x", "y")), 5)


# ----------------------------------------------------------------------------- hypernodes


def test_ngram_layout_for_a_bucket():
    spans = hypernodes.ngram_spans(5, 3)
    assert spans.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4], [0, 2], [1, 3], [2, 4]]
    assert len(spans) == sum(5 - size + 1 for size in (2, 3))  # m = sum_l (L - l + 1)
    assert hypernodes.spans_to_members(spans).tolist() == [
        [0, 1, -1], [1, 2, -1], [2, 3, -1], [3, 4, -1], [0, 1, 2], [1, 2, 3], [2, 3, 4]]
    with pytest.raises(ConfigError):
        hypernodes.ngram_spans(2, 3)


def test_dependency_hypernodes_are_the_arcs():
    members = hypernodes.dependency_members(DOG_DEPS)
    chex.assert_shape(members, (3, 2))
    assert members.tolist() == [[0, 2], [1, 2], [2, 3]]


def test_ngram_adjacency_by_hand():
    # L = 4 word nodes, k = 3: hypernodes (0,1) (1,2) (2,3) (0,2) (1,3); sentence length 3.
    spans = hypernodes.ngram_spans(4, 3)
    adjacency = np.asarray(jax.jit(masks.span_adjacency, static_argnums=2)(spans, 3, 4))
    chex.assert_shape(adjacency, (9, 9))
    names = ["w0", "w1", "w2", "w3", "01", "12", "23", "012", "123"]
    neighbours = {names[s]: {names[t] for t in np.flatnonzero(adjacency[s])} for s in range(9)}
    assert neighbours == {
        "w0": {"w0", "01", "012"},
        "w1": {"w1", "01", "12", "012"},
        "w2": {"w2", "12", "012"},
        "w3": set(),  # padding word
        "01": {"01", "w0", "w1", "012"},
        "12": {"12", "w1", "w2", "012"},  # (1,2) and (0,1) overlap but neither contains the other
        "23": set(),  # runs past the sentence
        "012": {"012", "w0", "w1", "w2", "01", "12"},
        "123": set(),
    }
    members = hypernodes.spans_to_members(spans)
    from_members = jax.jit(masks.member_adjacency, static_argnums=2)(members, 3, 4)
    np.testing.assert_array_equal(from_members, adjacency)


def test_dependency_adjacency_batched():
    members = np.full((2, 4, 2), -1, np.int32)  # two sentences, up to 4 arcs each
    members[0, :3] = hypernodes.dependency_members(DOG_DEPS)  # 4 words
    members[1, :1] = [[1, 0]]  # 2 words
    adjacency = np.asarray(jax.jit(masks.member_adjacency, static_argnums=2)(
        members, np.array([4, 2]), 5))
    chex.assert_shape(adjacency, (2, 9, 9))
    chex.assert_type(adjacency, bool)
    # sentence 0: arc node 5 = {0, 2} holds words 0 and 2; arc nodes only meet themselves.
    assert set(np.flatnonzero(adjacency[0, 5])) == {0, 2, 5}
    assert set(np.flatnonzero(adjacency[0, 2])) == {2, 5, 6, 7}
    assert not adjacency[0, 4].any() and not adjacency[0, 8].any()  # padding word / arc
    assert set(np.flatnonzero(adjacency[1, 5])) == {0, 1, 5}
    assert adjacency[1].sum() == 2 + 2 + 3  # w0, w1 (self + arc), arc (self + 2 words)

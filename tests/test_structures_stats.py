"""PSAN Table 1 statistics: `division_stats` / `segment_stats` against a brute-force count of the
phrases of small hand-built trees, and results/psan/table1.md against the numbers its script
stores (the gold-tree rows re-measured when the data folder is present)."""

import re
from pathlib import Path

import numpy as np
import pytest

from jaxenc.structures import psan, stats
from jaxenc.structures.trees import Tree, parse_bracketed

REPO = Path(__file__).resolve().parents[1]

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


# ----------------------------------------------------------------------------- table1.md


@pytest.fixture(scope="module")
def table1(load_script):
    return load_script("results/psan/table1.py", "psan_table1")


def test_table1_md_is_the_rendering_of_the_stored_numbers(table1):
    stored = table1.load_stored()
    assert stored, "results/psan/table1.json is missing (fix: python results/psan/table1.py)"
    assert table1.TABLE.read_text(encoding="utf-8") == table1.render(stored), (
        "results/psan/table1.md differs from its rendering (fix: python results/psan/table1.py "
        "--render)")


def test_stored_rows_read_the_trees_psan_gets(table1):
    stored = table1.load_stored()
    for key, numbers in stored.items():
        row = table1.ROWS_BY_KEY[key]
        model = table1.psan_model_config(row.datasets[0])
        assert numbers["parser"] == (row.parser or model.parser), key
        assert (numbers["num_levels"], numbers["min_split_len"], numbers["binarize"],
                numbers["division"]) == (model.num_levels, model.min_split_len, model.binarize,
                                         model.division), key
    assert {stored[key]["parser"] for key in ("sst5_trees", "sst5_phrases", "snli")} == {"gold"}
    assert stored["trec"]["parser"] == stored["ud_ewt"]["parser"] == "spacy-constituency"
    assert stored["ud_ewt_gold"]["parser"] == stored["ptb_sample"]["parser"] == "gold"


def test_every_psan_training_config_has_a_row(table1):
    trained = {match for path in (REPO / "train" / "configs").glob("psan_*.py")
               for match in re.findall(r'paper_config\("psan", "(\w+)"\)', path.read_text())}
    assert trained, "no train/configs/psan_*.py names its dataset as the test expects"
    covered = {dataset for row in table1.ROWS if table1.TRAINING in row.uses
               for dataset in row.datasets}
    assert trained <= covered


def test_gold_rows_equal_a_fresh_measurement(table1, data_root, tmp_path):
    stored = table1.load_stored()
    # gold trees: nothing to parse
    for key in ("sst5_trees", "sst2_trees", "snli", "ud_ewt_gold", "ptb_sample"):
        assert table1.measure(table1.ROWS_BY_KEY[key], str(data_root),
                              str(tmp_path)) == stored[key], key
    assert stored["sst5_trees"]["sentences"] == 11855
    assert stored["sst5_trees"]["phrases_per_sentence"] == [1.99, 3.25, 4.62]


def test_ud_gold_row_is_what_the_stats_command_prints(table1, data_root, capsys):
    """`python -m jaxenc.structures.stats --conllu` over the UD English-EWT files (phrase trees
    derived from the gold arcs, straight from CoNLL-U) prints the ud_ewt_gold row's numbers."""
    folder = data_root / "ud_english_ewt"
    files = sorted(str(path) for path in folder.glob("en_ewt-ud-*.conllu"))
    assert len(files) >= 3, f"no UD English-EWT CoNLL-U files in {folder}"
    stats.main(["--conllu", "--trees", *files])
    measured = capsys.readouterr().out.splitlines()[2].strip("| ").split(" | ")[1:]
    stored = table1.load_stored()["ud_ewt_gold"]
    assert measured == [str(stored["sentences"])] + [
        f"{value:.2f}" for value in stored["phrases_per_sentence"] + stored["words_per_phrase"]]

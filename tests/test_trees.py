"""Trees, tree-file formats and derived phrase trees: hand-worked examples, bad input, and round
trips over every real tree in shared/data (PTB sample, SST, UD English-EWT, SNLI parses)."""

import json
import zipfile

import pytest

from jaxenc.errors import DataError, StructureError
from jaxenc.records import Sentence
from jaxenc.structures.derive import derive_tree
from jaxenc.structures.formats import (
    read_bracketed,
    read_conllu,
    read_treebank_zip,
    write_bracketed,
    write_conllu,
)
from jaxenc.structures.trees import (
    DependencyTree,
    Tree,
    parse_bracketed,
    parse_bracketed_all,
    tree_from_sentence,
    unescape_ptb,
)

UD_SPLITS = {"train": [f"en_ewt-ud-train.part{i}of4.conllu" for i in range(1, 5)],
             "dev": ["en_ewt-ud-dev.conllu"], "test": ["en_ewt-ud-test.conllu"]}


def leaf(label, word):
    return Tree(label, [], word)


# ----------------------------------------------------------------------------- bracket parsing


def test_parse_ptb_tree_into_preterminal_leaves():
    tree = parse_bracketed("(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ barks))))")
    expected = Tree("ROOT", [Tree("S", [
        Tree("NP", [leaf("DT", "The"), leaf("NN", "dog")]),
        Tree("VP", [leaf("VBZ", "barks")]),
    ])])
    assert tree == expected
    assert tree.leaves() == ["The", "dog", "barks"]


def test_parse_unlabelled_binary_parse_and_mixed_bare_words():
    # SNLI *_binary_parse: a space after '(' means no label; bare words are unlabelled leaves.
    tree = parse_bracketed("( ( Two women ) ( sleep . ) )")
    assert tree == Tree("", [Tree("", [leaf("", "Two"), leaf("", "women")]),
                             Tree("", [leaf("", "sleep"), leaf("", ".")])])
    assert parse_bracketed("(NP (DT the) dog)") == Tree("NP", [leaf("DT", "the"), leaf("", "dog")])
    assert parse_bracketed("(NP(DT the)(NN dog))") == parse_bracketed("(NP (DT the) (NN dog))")


def test_to_bracketed_is_canonical_and_parses_back():
    text = "(3 (2 (2 The) (2 Rock)) (4 (2 is) (2 .)))"
    assert parse_bracketed(text).to_bracketed() == text
    binary = parse_bracketed("( ( Two women ) ( sleep . ) )")
    assert binary.to_bracketed() == "( ( Two women) ( sleep .))"
    assert parse_bracketed(binary.to_bracketed()) == binary
    # A top-level bare word still round-trips; brackets inside words become PTB escapes.
    assert parse_bracketed(leaf("", "hi").to_bracketed()) == leaf("", "hi")
    assert Tree("X", [leaf("", "("), leaf("NN", "a)b")]).to_bracketed() == "(X -LRB- (NN a-RRB-b))"


def test_words_with_no_break_space_stay_one_word():
    # SST: `(2 8\xa01\/2)` is one leaf; only ASCII white space separates words.
    tree = parse_bracketed("(2 (2 and) (2 8\xa01\\/2))")
    assert tree.leaves() == ["and", "8\xa01\\/2"]
    assert tree.leaves(unescape=True) == ["and", "8\xa01/2"]
    with pytest.raises(StructureError, match="white space"):
        leaf("", "two words").to_bracketed()


def test_ptb_escapes_are_mapped_for_lookup_only():
    tree = parse_bracketed("(S (-LRB- -LRB-) (`` ``) (NN a\\/b) ('' '') (-RCB- -RCB-))")
    assert tree.leaves() == ["-LRB-", "``", "a\\/b", "''", "-RCB-"]
    assert tree.leaves(unescape=True) == ["(", '"', "a/b", '"', "}"]
    assert [unescape_ptb(t) for t in ("-RRB-", "-LSB-", "-RSB-", "-LCB-", "x")] == [
        ")", "[", "]", "{", "x"]


@pytest.mark.parametrize("text, position, problem", [
    ("(S (NP dog)", 0, "never closed"),
    ("(S (NP dog)))", 12, "unmatched"),
    ("(S (NP dog) (VP))", 12, "empty constituent"),
    ("dog (S cat)", 0, "outside any bracket"),
])
def test_malformed_brackets_name_source_and_position(text, position, problem):
    with pytest.raises(StructureError) as error:
        parse_bracketed(text, source="trees.txt:7")
    message = str(error.value)
    assert message.startswith("trees.txt:7: ") and problem in message
    assert f"at character {position}" in message and "fix:" in message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["", "   ", "()"])
def test_empty_tree_is_an_error(text):
    with pytest.raises(StructureError, match="trees.txt:3: (empty tree|empty constituent)"):
        parse_bracketed(text, source="trees.txt:3")


def test_two_trees_where_one_is_expected():
    with pytest.raises(StructureError, match="2 trees"):
        parse_bracketed("(A a) (B b)")
    assert len(parse_bracketed_all("(A a)\n(B (C c) d)")) == 2


def test_tree_token_count_must_match_the_sentence():
    sentence = Sentence(tokens=("a", "b", "c"), tree="(S (X a) (Y b))")
    with pytest.raises(StructureError, match="2 leaves but the sentence has 3 tokens"):
        tree_from_sentence(sentence, source="sst/train.txt:4")
    with pytest.raises(StructureError, match="no binary_tree"):
        tree_from_sentence(sentence, binary=True)
    good = Sentence(tokens=("a", "b"), tree="(S (X a) (Y b))", binary_tree="( a b )")
    assert tree_from_sentence(good, binary=True).leaves() == ["a", "b"]


# ----------------------------------------------------------------------------- tree transforms


def test_strip_ptb_removes_traces_empty_constituents_and_function_tags():
    text = ("( (S (NP-SBJ-1 (-NONE- *-2)) (NP-SBJ=2 (PRP It)) (VP (VBD rose) "
            "(S (NP-SBJ (-NONE- *-1)) (VP (TO to) (VP (-NONE- *T*)))) "
            "(PP-TMP (IN in) (-LRB- -LRB-) (NP (NN May)))) (. .)) )")
    stripped = parse_bracketed(text).strip_ptb()
    assert stripped.to_bracketed() == (
        "( (S (NP (PRP It)) (VP (VBD rose) (S (VP (TO to))) "
        "(PP (IN in) (-LRB- -LRB-) (NP (NN May)))) (. .)))")
    with pytest.raises(StructureError, match="only -NONE- traces"):
        parse_bracketed("(S (-NONE- *))").strip_ptb()


def test_collapse_unary_keeps_the_lowest_node_of_each_chain():
    tree = parse_bracketed("(ROOT (S (NP (NN it)) (VP (VP (VBD was) (ADJP (JJ fine))))))")
    assert tree.collapse_unary().to_bracketed() == "(S (NN it) (VP (VBD was) (JJ fine)))"


def test_binarize_right_factors_wide_nodes():
    tree = parse_bracketed("(NP (DT a) (JJ b) (JJ c) (NN d))")
    assert tree.binarize().to_bracketed() == "(NP (DT a) (@NP (JJ b) (@NP (JJ c) (NN d))))"
    binary = parse_bracketed("(S (A a) (B b))")
    assert binary.binarize() == binary


# ----------------------------------------------------------------------------- dependency trees


def test_dependency_tree_from_sentence_defaults_labels_to_dep():
    sentence = Sentence(tokens=("dogs", "bark"), heads=(2, 0))
    assert DependencyTree.from_sentence(sentence) == DependencyTree(
        ("dogs", "bark"), (2, 0), ("dep", "dep"))
    with pytest.raises(StructureError, match="x.conllu:9: sentence has no dependency heads"):
        DependencyTree.from_sentence(Sentence(tokens=("a",)), source="x.conllu:9")


@pytest.mark.parametrize("heads, labels, problem", [
    ((2, 0, 2), ("a", "b"), "3 tokens but 3 heads and 2 labels"),
    ((2, 0), ("a", "b", "c"), "3 tokens but 2 heads and 3 labels"),
    ((2, 0, 7), ("a", "b", "c"), "token 3 'z' has head 7, outside 0..3"),
    ((2, 0, -1), ("a", "b", "c"), "token 3 'z' has head -1"),
    ((2, 3, 1), ("a", "b", "c"), "no root"),
    ((0, 1, 0), ("a", "b", "c"), "2 roots \\(tokens 1, 3 have head 0\\)"),
    ((0, 3, 2), ("a", "b", "c"), "cycle 2 -> 3 -> 2"),
    ((0, 2, 1), ("a", "b", "c"), "cycle 2 -> 2"),
])
def test_invalid_dependency_trees_raise_one_line_errors(heads, labels, problem):
    with pytest.raises(StructureError, match=problem) as error:
        DependencyTree(("x", "y", "z"), heads, labels).validate("ud.conllu:12")
    assert str(error.value).startswith("ud.conllu:12: ") and "fix:" in str(error.value)


# ----------------------------------------------------------------------------- derived trees


def test_derive_tree_gives_dependency_subtrees_as_phrases():
    # the big dog barked at the cat ; det amod nsubj root case det obl
    dtree = DependencyTree(("the", "big", "dog", "barked", "at", "the", "cat"),
                           (3, 3, 4, 0, 7, 7, 4),
                           ("det", "amod", "nsubj", "root", "case", "det", "obl"))
    derived = derive_tree(dtree)
    assert derived.non_projective == 0
    assert derived.tree.to_bracketed() == "(root (nsubj the big dog) barked (obl at the cat))"
    single = derive_tree(DependencyTree(("hi",), (0,), ("root",)))
    assert single.tree == leaf("", "hi") and single.non_projective == 0


def test_derive_tree_falls_back_to_covering_spans_and_counts():
    # Non-projective: "saw" (2) heads "hearing" (4) across "dog" (3), whose head is 1.
    # yields: 1 -> {1,2,3,4}; 2 -> {2,4} (not contiguous, covering span 2..4); 3 -> {3}.
    dtree = DependencyTree(("A", "saw", "dog", "yesterday"), (0, 1, 1, 2),
                           ("root", "obj", "nsubj", "obl"))
    derived = derive_tree(dtree)
    assert derived.non_projective == 1
    assert derived.tree.to_bracketed() == "(root A (obj saw dog yesterday))"
    assert derived.tree.leaves() == list(dtree.tokens)


# ----------------------------------------------------------------------------- CoNLL-U


CONLLU = """# sent_id = 1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tknows\t_\t_\t_\t_\t_\t_\t4:conj\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

1\tYes\tyes\tINTJ\t_\t_\t0\tdiscourse:emo\t_\t_
"""


def test_read_conllu_skips_multiword_and_empty_nodes(tmp_path):
    path = tmp_path / "tiny.conllu"
    path.write_text(CONLLU)
    first, second = read_conllu(path)
    assert first == Sentence(tokens=("I", "do", "n't", "know", "."), text="I don't know.",
                             heads=(4, 4, 4, 0, 4),
                             deprels=("nsubj", "aux", "advmod", "root", "punct"),
                             tags=("PRP", "VBP", "RB", "VB", "."))
    assert second == Sentence(tokens=("Yes",), text="Yes", heads=(0,),
                              deprels=("discourse:emo",), tags=None)
    write_conllu([first, second], tmp_path / "again.conllu")
    assert read_conllu(tmp_path / "again.conllu") == [first, second]


@pytest.mark.parametrize("row, problem", [
    ("1\tI\tI\tPRON\tPRP\t_\t0\troot\t_", "9 tab-separated columns"),
    ("2\tI\tI\tPRON\tPRP\t_\t0\troot\t_\t_", "word ID '2', expected 1"),
    ("1\tI\tI\tPRON\tPRP\t_\tx\troot\t_\t_", "HEAD 'x' of word 1 is not an integer"),
])
def test_bad_conllu_names_file_and_line(tmp_path, row, problem):
    path = tmp_path / "bad.conllu"
    path.write_text(f"# text = I\n{row}\n")
    with pytest.raises(DataError, match=problem) as error:
        read_conllu(path)
    assert str(error.value).startswith(f"{path}:2: ")


@pytest.mark.parametrize("heads, problem", [
    ("2 0 9", "token 3 'c' has head 9, outside 0..3"),
    ("2 3 2", "no root"),
    ("0 3 2", "heads form a cycle"),
])
def test_conllu_tree_errors_name_the_file_line_of_the_sentence(tmp_path, heads, problem):
    rows = "".join(f"{i}\t{w}\t_\t_\t_\t_\t{h}\tdep\t_\t_\n"
                   for i, (w, h) in enumerate(zip("abc", heads.split(), strict=True), start=1))
    path = tmp_path / "bad.conllu"
    path.write_text(f"# text = x\n1\tx\t_\t_\t_\t_\t0\troot\t_\t_\n\n# text = a b c\n{rows}")
    with pytest.raises(StructureError, match=problem) as error:
        read_conllu(path)
    assert str(error.value).startswith(f"{path}:5: ")  # the sentence's first word line


@pytest.mark.parametrize("read, text", [
    (read_conllu, "# text = x\n1\tx\t_\t_\t_\t_\t0\troot\t_\t_\n\n1\tna\xefve"),
    (read_bracketed, "(S (NN a))\n(S (NN na\xefve))\n"),
])
def test_bad_utf8_in_tree_files_names_file_and_line(tmp_path, read, text):
    path = tmp_path / "trees.txt"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(DataError, match="byte 0xef is not valid utf-8") as error:
        read(path)
    assert str(error.value).startswith(f"{path}:")
    assert str(error.value).split(":")[1] == ("4" if read is read_conllu else "2")


@pytest.mark.parametrize("read", [read_conllu, read_bracketed])
def test_an_empty_tree_file_is_a_data_error_naming_it(tmp_path, read):
    path = tmp_path / "empty.txt"
    path.write_text("")
    with pytest.raises(DataError, match="empty.txt: the file is empty"):
        read(path)


def _reference_word_rows(path):
    """Slow reference: the 10-column rows of words (integer IDs) per sentence."""
    sentences, rows = [], []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line:
            if rows:
                sentences.append(rows)
            rows = []
        elif not line.startswith("#") and line.split("\t")[0].isdigit():
            rows.append(line.split("\t"))
    return sentences


def test_ud_english_ewt_round_trips_and_validates(data_root, tmp_path):
    by_split = {}
    for split, names in UD_SPLITS.items():
        sentences = []
        for name in names:
            path = data_root / "ud_english_ewt" / name
            read = read_conllu(path)
            reference = _reference_word_rows(path)
            assert [s.tokens for s in read] == [tuple(r[1] for r in rows) for rows in reference]
            assert [s.heads for s in read] == [tuple(int(r[6]) for r in rows)
                                               for rows in reference]
            assert [s.deprels for s in read] == [tuple(r[7] for r in rows) for rows in reference]
            assert [s.tags for s in read] == [tuple(r[4] for r in rows) for rows in reference]
            sentences += read
        by_split[split] = sentences
        write_conllu(sentences, tmp_path / f"{split}.conllu")
        assert read_conllu(tmp_path / f"{split}.conllu") == sentences
        for number, sentence in enumerate(sentences):
            DependencyTree.from_sentence(sentence, source=f"{split} #{number}")
    assert {split: len(items) for split, items in by_split.items()} == {
        "train": 12544, "dev": 2001, "test": 2077}
    assert by_split["dev"][0].text == "From the AP comes this story :"


def test_ud_derived_trees_cover_every_token(data_root):
    sentences = read_conllu(data_root / "ud_english_ewt" / "en_ewt-ud-dev.conllu")
    non_projective = 0
    for sentence in sentences:
        derived = derive_tree(DependencyTree.from_sentence(sentence))
        assert derived.tree.leaves() == list(sentence.tokens)
        non_projective += derived.non_projective
    assert 0 < non_projective < len(sentences) // 10


# ----------------------------------------------------------------------------- PTB sample


def test_ptb_sample_aligns_constituency_and_dependency(data_root, tmp_path):
    folder = data_root / "nltk_treebank"
    sentences = read_treebank_zip(folder / "treebank.zip", folder / "dependency_treebank.zip")
    assert len(sentences) == 3914 and sum(map(len, sentences)) == 94084
    trees = []
    for sentence in sentences:
        tree = tree_from_sentence(sentence)
        trees.append(tree)
        assert tree.to_bracketed() == sentence.tree
        assert "-NONE-" not in sentence.tree and "-SBJ" not in sentence.tree
        assert sentence.tags == tuple(_preterminal_labels(tree))
        assert set(sentence.deprels) == {"dep"}
        DependencyTree.from_sentence(sentence)
    write_bracketed(trees, tmp_path / "ptb.txt")
    assert read_bracketed(tmp_path / "ptb.txt") == trees
    with zipfile.ZipFile(folder / "treebank.zip") as archive:
        raw = archive.read("treebank/combined/wsj_0001.mrg").decode()
    first = parse_bracketed_all(raw)[0]
    assert parse_bracketed(first.to_bracketed()) == first  # traces and tags survive a round trip
    assert first.strip_ptb().to_bracketed() == sentences[0].tree
    assert sentences[0].tokens[:3] == ("Pierre", "Vinken", ",")
    assert sentences[0].heads[:3] == (2, 8, 2)


def _preterminal_labels(tree):
    labels, stack = [], [tree]
    while stack:
        node = stack.pop()
        if node.is_leaf:
            labels.append(node.label)
        stack.extend(reversed(node.children))
    return labels


def test_treebank_zip_mismatch_is_a_structure_error(tmp_path):
    mrg, dp = tmp_path / "treebank.zip", tmp_path / "dependency_treebank.zip"
    with zipfile.ZipFile(mrg, "w") as archive:
        archive.writestr("treebank/combined/wsj_0001.mrg", "( (S (NP (NN a)) (VP (VB b))) )\n")
    with zipfile.ZipFile(dp, "w") as archive:
        archive.writestr("dependency_treebank/wsj_0001.dp", "a\tNN\t2\nc\tVB\t0\n")
    with pytest.raises(StructureError, match="wsj_0001.mrg sentence 1: tree leaves"):
        read_treebank_zip(mrg, dp)


# ----------------------------------------------------------------------------- SST and SNLI


def test_sst_trees_round_trip_byte_for_byte(data_root, tmp_path):
    expected_counts = {"train": 8544, "dev": 1101, "test": 2210}
    for split, count in expected_counts.items():
        path = data_root / "sst_ptb_trees" / f"{split}.txt"
        trees = read_bracketed(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        assert len(trees) == count == len(lines)
        assert [tree.to_bracketed() for tree in trees] == lines
        write_bracketed(trees, tmp_path / f"{split}.txt")
        assert read_bracketed(tmp_path / f"{split}.txt") == trees


def test_snli_parses_round_trip(data_root):
    path = data_root / "snli" / "snli_1.0_dev.first1289.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 1289
    for number, record in enumerate(records, start=1):
        for key in ("sentence1", "sentence2"):
            parse = parse_bracketed(record[f"{key}_parse"], source=f"{path}:{number}")
            binary = parse_bracketed(record[f"{key}_binary_parse"], source=f"{path}:{number}")
            assert parse.to_bracketed() == record[f"{key}_parse"]
            assert parse_bracketed(binary.to_bracketed()) == binary
            assert binary.leaves() == parse.leaves()
            assert all(len(node.children) in (0, 2) for node in binary.collapse_unary().subtrees())



"""The embedded synthetic dataset: determinism, splits, trees, and a label that needs structure."""

from collections import defaultdict

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

from jaxenc.data import synthetic
from jaxenc.records import Example
from jaxenc.structures.trees import Tree, parse_bracketed

NEGATIONS = {"not", "never"}


@pytest.fixture(scope="module")
def splits() -> dict[str, list[Example]]:
    return {split: synthetic.generate_split(split) for split in ("train", "dev", "test")}


def bag(example: Example) -> tuple[str, ...]:
    return tuple(sorted(example.sentences[0].tokens))


# --- Reference implementations, written independently of the generator ------------------------
def reference_label(tree: Tree) -> int:
    """1 iff the main clause's value is +1: follow the root S's VP down through do-support VPs and
    "that" complements, flipping the sign at every negation that is a direct child of a VP."""

    def clause_value(clause: Tree) -> int:
        (verb_phrase,) = [child for child in clause.children if child.label == "VP"]
        return predicate_value(verb_phrase)

    def predicate_value(verb_phrase: Tree) -> int:
        sign = (-1) ** sum(child.word in NEGATIONS for child in verb_phrase.children)
        for child in verb_phrase.children:
            if child.label == "VP":
                return sign * predicate_value(child)
            if child.label == "ADJP":
                return sign * synthetic.WORD_POLARITY[child.leaves()[-1]]
            if child.label == "SBAR":
                return sign * clause_value(child.children[-1])
        (verb,) = [child.word for child in verb_phrase.children
                   if child.label.startswith("VB") and child.word in synthetic.WORD_POLARITY]
        return sign * synthetic.WORD_POLARITY[verb]

    return int(clause_value(tree) > 0)


def constituent_spans(tree: Tree) -> list[tuple[str, int, int]]:
    """(label, start, end) of every inner node, end exclusive."""
    spans = []

    def walk(node: Tree, start: int) -> int:
        if node.is_leaf:
            return start + 1
        end = start
        for child in node.children:
            end = walk(child, end)
        spans.append((node.label, start, end))
        return end

    walk(tree, 0)
    return spans


def leaf_labels(tree: Tree) -> list[str]:
    """The POS label of every leaf, left to right."""
    if tree.is_leaf:
        return [tree.label]
    return [label for child in tree.children for label in leaf_labels(child)]


# --- Tests -------------------------------------------------------------------------------------
def test_generate_is_deterministic_and_seeded():
    first, again = synthetic.generate(40, seed=7), synthetic.generate(40, seed=7)
    other = synthetic.generate(40, seed=8)
    assert first == again
    assert [e.sentences for e in first] != [e.sentences for e in other]
    assert [e.uid for e in first] == [f"synthetic:custom:{i}" for i in range(40)]
    assert len({e.sentences[0].tokens for e in first}) == 40


def test_split_sizes_uids_and_balance(splits):
    for split, examples in splits.items():
        assert len(examples) == synthetic.SPLIT_SIZES[split]
        assert [e.uid for e in examples] == [f"synthetic:{split}:{i}" for i in range(len(examples))]
        positive_rate = np.mean([e.label for e in examples])
        assert 0.4 <= positive_rate <= 0.6, (split, positive_rate)
        lengths = [len(e.sentences[0]) for e in examples]
        assert synthetic.MIN_LENGTH <= min(lengths) and max(lengths) <= synthetic.MAX_LENGTH
    synthetic.generate_split("dev").clear()  # callers get their own list
    assert synthetic.generate_split("dev") == splits["dev"]
    with pytest.raises(ValueError, match="unknown synthetic split"):
        synthetic.generate_split("validation")


def test_splits_share_no_sentence_nor_bag_of_words(splits):
    bags = {split: {bag(e) for e in examples} for split, examples in splits.items()}
    assert not bags["train"] & bags["dev"]
    assert not bags["train"] & bags["test"]
    assert not bags["dev"] & bags["test"]


def test_trees_parse_with_leaves_equal_to_tokens_and_tags(splits):
    labels_seen = set()
    for example in splits["dev"] + splits["test"]:
        sentence = example.sentences[0]
        tree = parse_bracketed(sentence.tree, source=example.uid)
        assert tuple(tree.leaves()) == sentence.tokens
        assert tuple(leaf_labels(tree)) == sentence.tags
        assert tree.label == "S"
        labels_seen |= {label for label, start, end in constituent_spans(tree)}
        assert sentence.text == " ".join(sentence.tokens)
    assert {"S", "NP", "VP", "PP", "SBAR", "ADJP", "WHNP"} <= labels_seen


def test_dependency_heads_form_one_tree_that_agrees_with_the_constituents(splits):
    for example in splits["dev"]:
        sentence = example.sentences[0]
        heads = np.asarray(sentence.heads)
        n = len(sentence)
        assert len(heads) == len(sentence.deprels) == n
        assert np.all((heads >= 0) & (heads <= n))
        roots = np.flatnonzero(heads == 0)
        assert len(roots) == 1 and sentence.deprels[roots[0]] == "root"
        for token in range(1, n + 1):  # every token reaches the root in fewer than n steps
            node, steps = token, 0
            while node != 0:
                node, steps = heads[node - 1], steps + 1
                assert steps <= n, f"{example.uid}: cycle through token {token}"
        tree = parse_bracketed(sentence.tree)
        for label, start, end in constituent_spans(tree):
            inside = np.arange(start, end)
            escaping = [k for k in inside if not start < heads[k] <= end]
            assert len(escaping) == 1, f"{example.uid}: {label} span {start}:{end} not headed"


def test_label_is_the_tree_rule_and_not_a_function_of_the_words(splits):
    for examples in splits.values():
        for example in examples:
            tree = parse_bracketed(example.sentences[0].tree)
            assert reference_label(tree) == example.label, example.sentences[0].text

    labels_by_bag = defaultdict(set)
    for example in splits["train"]:
        labels_by_bag[bag(example)].add(example.label)
    conflicting = sum(len(labels) == 2 for labels in labels_by_bag.values())
    assert conflicting >= 300, conflicting  # same multiset of tokens, opposite labels

    vectorizer = CountVectorizer(analyzer=list)
    train_x = vectorizer.fit_transform([e.sentences[0].tokens for e in splits["train"]])
    test_x = vectorizer.transform([e.sentences[0].tokens for e in splits["test"]])
    model = LogisticRegression(max_iter=2000).fit(train_x, [e.label for e in splits["train"]])
    accuracy = model.score(test_x, [e.label for e in splits["test"]])
    assert accuracy < 0.70, accuracy

"""The "sst2_phrases" dataset (phrase-level SST-2, the Dependency-Transformer's SST-2 training
data) against a brute-force read of the shared SST trees: its train split is every non-neutral
labelled bracket of every tree without a neutral root, in pre-order, labelled 0 (0-1) or 1 (3-4);
dev and test are the SST-2 sentences. And the Dependency-Transformer's SST-2 config trains on it."""

import re

import pytest

from jaxenc.data import registry
from jaxenc.training import preparation
from train.configs import dependency_transformer_sst2

TREES = 200  # the first real train trees (the whole file gives 84k phrases: too slow for a test)


def brute_force_phrases(line: str) -> list[tuple[tuple[str, ...], int]]:
    """(words, 0-4 label) of every bracket of one SST line, in pre-order, by a bracket walk:
    a bracket's words are its bare words and those of the brackets inside it, in order."""
    tokens = re.findall(r"\(|\)|[^\s()]+", line)
    found, stack, expect_label = [], [], False
    for token in tokens:
        if token == "(":
            expect_label = True
        elif expect_label:
            found.append([None, int(token)])  # words filled in when the bracket closes
            stack.append((len(found) - 1, []))
            expect_label = False
        elif token == ")":
            index, words = stack.pop()
            found[index][0] = tuple(words)
            if stack:
                stack[-1][1].extend(words)
        else:
            stack[-1][1].append(token)
    return [(words, label) for words, label in found]


@pytest.fixture(scope="module")
def lines(data_root):
    text = (data_root / "sst_ptb_trees" / "train.txt").read_text(encoding="utf-8")
    return [line for line in text.split("\n") if line.strip()][:TREES]


def test_train_phrases_are_the_non_neutral_brackets_of_the_sst2_trees(lines, tmp_path):
    (tmp_path / "sst_ptb_trees").mkdir()
    (tmp_path / "sst_ptb_trees" / "train.txt").write_text("\n".join(lines) + "\n")
    phrases = registry.load("sst2_phrases", "train", tmp_path)
    expected, roots = [], 0
    for line in lines:
        brackets = brute_force_phrases(line)
        if brackets[0][1] == 2:  # a neutral root: not an SST-2 sentence
            continue
        roots += 1
        expected += [(words, int(label > 2)) for words, label in brackets if label != 2]
    assert [(p.sentences[0].tokens, p.label) for p in phrases] == expected
    assert 0 < roots < len(lines) and len(expected) > roots
    assert len({p.uid for p in phrases}) == len(phrases)
    assert sum(p.uid.endswith("#0") for p in phrases) == roots  # one whole sentence per tree
    sentences = registry.load("sst2_trees", "train", tmp_path)
    assert [(p.sentences[0].tokens, p.label) for p in phrases if p.uid.endswith("#0")] == [
        (s.sentences[0].tokens, s.label) for s in sentences]


def test_dev_and_test_are_the_sst2_sentences(data_root):
    for split, count in (("dev", 872), ("test", 1821)):
        phrases = registry.load("sst2_phrases", split, data_root)
        sentences = registry.load("sst2_trees", split, data_root)
        assert len(phrases) == count
        assert [(p.sentences[0].tokens, p.label) for p in phrases] == [
            (s.sentences[0].tokens, s.label) for s in sentences]


def test_dependency_transformer_sst2_config_trains_on_phrases():
    config = dependency_transformer_sst2.get_config()
    assert config.task.dataset == "sst2_phrases"
    info = registry.DATASETS["sst2_phrases"]
    assert info.kind == "single" and info.label_names == ("negative", "positive")
    preparation.validate(config)

"""Stanford Sentiment Treebank: sentence files and PTB-style sentiment trees.

- Sentence files `stsa.{binary,fine}.{train,dev,test}`: `label tokens ...` per line, lower-cased and
  tokenised, labels 0-1 (SST-2) or 0-4 (SST-5).
- Trees `{train,dev,test}.txt`: one binarised constituency tree a line with a 0-4 sentiment label
  on every node, `(3 (2 (2 The) (2 Rock)) ...)`. An Example per tree: label = root label,
  `Sentence.tree` = the bracket string (labels kept), tokens = its leaves. `expand_phrases` turns a
  tree into an Example per labelled node, for phrase-level training; `repeat_emphasised` repeats
  the non-neutral phrases and whole sentences among them (DiSAN's code does so 3x);
  `binary_phrases` keeps the non-neutral ones with SST-2 labels (phrase-level SST-2 training).
"""

from __future__ import annotations

import dataclasses
import os

from jaxenc.errors import DataError
from jaxenc.records import Example, Sentence
from jaxenc.structures.trees import Tree, parse_bracketed
from jaxenc.text_io import read_lines, report_skipped

SST5_LABELS = ("very negative", "negative", "neutral", "positive", "very positive")
SST2_LABELS = ("negative", "positive")
NEUTRAL = SST5_LABELS.index("neutral")

_SENTIMENTS = frozenset(str(index) for index in range(len(SST5_LABELS)))
_TREE_FIX = "give one bracketed tree a line with a label 0-4 on every node, e.g. (3 (2 a) (3 b))"


def read_sst_sentences(path: str | os.PathLike, *, num_classes: int) -> list[Example]:
    """Reads an `stsa.*` sentence file whose labels are 0 .. num_classes - 1."""
    labels = {str(index): index for index in range(num_classes)}
    examples = []
    for line in read_lines(path):
        label, _, text = line.text.partition(" ")
        tokens = tuple(line.nonempty(text, "sentence").split())
        examples.append(Example(sentences=(Sentence(tokens=tokens, text=" ".join(tokens)),),
                                label=line.label_field(label, labels, "label"), uid=line.uid))
    return examples


def read_sst_trees(path: str | os.PathLike, *, binary: bool = False) -> list[Example]:
    """Reads an SST tree file: one Example per tree, label = the root's sentiment.

    With `binary`, labels 0-1 become 0 (negative), 3-4 become 1 (positive) and trees with a neutral
    root are dropped (count logged), which gives the SST-2 sentences.
    """
    examples, neutral = [], 0
    for line in read_lines(path):
        source = f"{line.path}:{line.number}"
        tree = parse_bracketed(line.text, source=source)
        label = _sentiment(tree, source)
        if binary:
            if label == NEUTRAL:
                neutral += 1
                continue
            label = int(label > NEUTRAL)
        tokens = tuple(tree.leaves())
        examples.append(Example(
            sentences=(Sentence(tokens=tokens, text=" ".join(tokens), tree=line.text.strip()),),
            label=label, uid=line.uid))
    report_skipped(path, neutral, "neutral root, not an SST-2 sentence")
    return examples


def expand_phrases(example: Example) -> list[Example]:
    """Every labelled node of an SST tree Example as an Example of its own (pre-order, root first).

    Single words count as phrases (their pre-terminal carries a label); bare words inside a
    multi-word bracket (`(2 8 1\\/2)` in train.txt) have no label of their own and are not
    phrases. Each phrase's `Sentence.tree` is its subtree; its uid is `<tree uid>#<phrase index>`.
    """
    (sentence,) = example.sentences
    if sentence.tree is None:
        raise DataError("example has no tree to expand into phrases", path=example.uid,
                        fix="read it with read_sst_trees")
    tree = parse_bracketed(sentence.tree, source=example.uid)
    return [Example(sentences=(Sentence(tokens=tokens, text=" ".join(tokens), tree=bracketed),),
                    label=_sentiment(node, example.uid), uid=f"{example.uid}#{index}")
            for index, (node, tokens, bracketed) in enumerate(_labelled_nodes(tree))]


def binary_phrases(example: Example) -> list[Example]:
    """The non-neutral phrases of an SST tree Example (`expand_phrases`, same order and uids) with
    SST-2 labels: 0-1 -> 0 (negative), 3-4 -> 1 (positive); neutral phrases are dropped (Tai et
    al. 2015's binary setting, whose dependency Tree-LSTM is supervised at every node that has a
    label)."""
    return [dataclasses.replace(phrase, label=int(phrase.label > NEUTRAL))
            for phrase in expand_phrases(example) if phrase.label != NEUTRAL]


def repeat_emphasised(phrases: list[Example], repeats: int) -> list[Example]:
    """`phrases` (from `expand_phrases`) with every non-neutral phrase and every whole sentence
    (phrase index 0) `repeats` times in a row; copy k > 0 gets uid `<uid>*<k>`. Neutral
    sub-sentence phrases stay once. repeats = 1 returns the list unchanged."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    repeated = []
    for phrase in phrases:
        copies = repeats if phrase.label != NEUTRAL or phrase.uid.endswith("#0") else 1
        repeated.append(phrase)
        repeated.extend(dataclasses.replace(phrase, uid=f"{phrase.uid}*{copy}")
                        for copy in range(1, copies))
    return repeated


def _labelled_nodes(tree: Tree) -> list[tuple[Tree, tuple[str, ...], str]]:
    """(node, its words, its bracket string) for every labelled node, in pre-order.

    One bottom-up pass: a node's string joins its children's (words from `parse_bracketed` hold no
    space or bracket, so none needs escaping), which keeps the 8544 train trees fast (~320k nodes).
    """
    found: list = []

    def visit(node: Tree) -> tuple[tuple[str, ...], str]:
        slot = len(found)
        if node.label:
            found.append(None)  # reserve the pre-order position
        if node.is_leaf:
            words, bracketed = (node.word,), f"({node.label} {node.word})"
        else:
            parts = [visit(child) for child in node.children]
            words = tuple(word for child_words, _ in parts for word in child_words)
            bracketed = f"({node.label} {' '.join(text for _, text in parts)})"
        if not node.label:
            return words, (node.word if node.is_leaf else bracketed)
        found[slot] = (node, words, bracketed)
        return words, bracketed

    visit(tree)
    return found


def _sentiment(node: Tree, source: str) -> int:
    """The node's 0-4 label; a DataError naming `source` ("file:line") otherwise."""
    if node.label not in _SENTIMENTS:
        raise DataError(f"node label {node.label!r} is not a sentiment 0-4", path=source,
                        fix=_TREE_FIX)
    return int(node.label)

"""Constituency and dependency trees, and the PTB bracket format.

A constituency `Tree` is the PTB bracket string made into objects. A pre-terminal such as `(NN dog)`
is one leaf node: `Tree("NN", [], word="dog")`; a bare word inside a bracket (SNLI's unlabelled
`*_binary_parse`, `( ( Two women ) ... )`) is a leaf with the empty label. A label is the text right
after `(` with no space in between, so `( Two women )` has no label and two word leaves.

A `DependencyTree` holds heads (1-based, 0 = root) and arc labels aligned with the tokens.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from jaxenc.errors import StructureError
from jaxenc.records import Sentence

# PTB escapes of brackets and quotes, mapped back for embedding look-up (the original is kept).
PTB_ESCAPES = {
    "-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]",
    "``": '"', "''": '"',
}
TRACE_LABEL = "-NONE-"
BINARIZED_PREFIX = "@"  # label prefix of the nodes binarize() introduces (Stanford's convention)

# `(LABEL` (label possibly empty) | `)` | a word. Only ASCII white space separates: SST has words
# with a no-break space inside (`8\xa01\\/2`).
_BRACKET_TOKEN = re.compile(r"\(([^\s()]*)|(\))|([^\s()]+)", re.ASCII)
_BRACKET_UNSAFE = re.compile(r"[\s()]", re.ASCII)  # what a word may not contain inside brackets
_ASCII_SPACE = re.compile(r"\s", re.ASCII)
_FUNCTION_TAG = re.compile(r"[-=]")


def unescape_ptb(token: str) -> str:
    """The token as a word-vector table spells it: `-LRB-` -> `(`, `''` -> `"`, `1\\/2` -> `1/2`."""
    token = PTB_ESCAPES.get(token, token)
    if "\\" in token:
        token = token.replace("\\/", "/").replace("\\*", "*")
    return token


def strip_function_tags(label: str) -> str:
    """`NP-SBJ-1` -> `NP`, `PP-LOC=2` -> `PP`; labels that start with `-` (`-LRB-`) are kept."""
    if label.startswith("-"):
        return label
    return _FUNCTION_TAG.split(label, maxsplit=1)[0]


@dataclasses.dataclass
class Tree:
    """A constituency tree node.

    Attributes:
      label: the constituent or POS label ("" for an unlabelled bracket or a bare word).
      children: the child nodes, left to right; empty for a leaf.
      word: the token of a leaf (PTB escapes such as `-LRB-` kept verbatim); None for inner nodes.
    """

    label: str
    children: list[Tree] = dataclasses.field(default_factory=list)
    word: str | None = None

    @property
    def is_leaf(self) -> bool:
        return self.word is not None

    def subtrees(self) -> Iterator[Tree]:
        """Every node, this one included, in pre-order (parents first, left to right)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def leaves(self, *, unescape: bool = False) -> list[str]:
        """The tokens left to right; `unescape=True` maps PTB escapes back (`unescape_ptb`)."""
        return [unescape_ptb(node.word) if unescape else node.word
                for node in self.subtrees() if node.word is not None]

    def to_bracketed(self) -> str:
        """One-line PTB bracket string; `parse_bracketed` of it gives an equal tree.

        Brackets inside words are written as `-LRB-` / `-RRB-` (the PTB's own escapes).
        """
        if self.word is not None:
            word = _bracket_safe(self.word)
            return f"({self.label} {word})" if self.label else f"( {word})"
        return f"({self.label} {' '.join(_child_bracketed(child) for child in self.children)})"

    def strip_ptb(self) -> Tree:
        """A copy without `-NONE-` traces, the constituents left empty by them, and function tags.

        Raises StructureError when nothing but traces is left.
        """
        stripped = _strip_ptb(self)
        if stripped is None:
            raise StructureError("the tree holds only -NONE- traces",
                                 fix="drop this sentence or give it a real parse")
        return stripped

    def collapse_unary(self) -> Tree:
        """A copy with every unary chain replaced by its lowest node (PSAN division, step 1)."""
        node = self
        while len(node.children) == 1:
            node = node.children[0]
        if node.word is not None:
            return Tree(node.label, [], node.word)
        return Tree(node.label, [child.collapse_unary() for child in node.children])

    def binarize(self) -> Tree:
        """A right-factored binary copy: `(X a b c)` -> `(X a (@X b c))`; other nodes unchanged."""
        if self.word is not None:
            return Tree(self.label, [], self.word)
        children = [child.binarize() for child in self.children]
        inner_label = self.label if self.label.startswith(BINARIZED_PREFIX) else (
            BINARIZED_PREFIX + self.label)
        while len(children) > 2:
            children[-2:] = [Tree(inner_label, children[-2:])]
        return Tree(self.label, children)


def _bracket_safe(word: str) -> str:
    if _BRACKET_UNSAFE.search(word) is None:
        return word
    if _ASCII_SPACE.search(word):
        raise StructureError(f"word {word!r} contains white space and cannot be bracketed",
                             fix="tokenise it into words without spaces")
    return word.replace("(", "-LRB-").replace(")", "-RRB-")


def _child_bracketed(child: Tree) -> str:
    if child.word is not None and not child.label:
        return _bracket_safe(child.word)
    return child.to_bracketed()


def _strip_ptb(node: Tree) -> Tree | None:
    if node.word is not None:
        if node.label == TRACE_LABEL:
            return None
        return Tree(strip_function_tags(node.label), [], node.word)
    children = [kept for kept in map(_strip_ptb, node.children) if kept is not None]
    return Tree(strip_function_tags(node.label), children) if children else None


def _structure_error(problem: str, source: str, position: int) -> StructureError:
    return StructureError(f"{problem} at character {position}", path=source or None,
                          fix="balance the brackets: every '(' needs its ')'")


def _node(label: str, children: list[Tree | str], source: str, position: int) -> Tree:
    if not children:
        raise _structure_error(f"empty constituent ({label})", source, position)
    if len(children) == 1 and isinstance(children[0], str):
        return Tree(label, [], children[0])
    return Tree(label, [child if isinstance(child, Tree) else Tree("", [], child)
                        for child in children])


def parse_bracketed_all(text: str, *, source: str = "") -> list[Tree]:
    """All trees of a PTB bracket text, one after another (an `.mrg` file, a tree per line).

    Raises StructureError naming `source` and the character position for mismatched brackets,
    empty constituents and words outside any bracket.
    """
    trees: list[Tree] = []
    stack: list[tuple[str, list[Tree | str], int]] = []  # (label, children, position of its '(')
    for match in _BRACKET_TOKEN.finditer(text):
        label, close, word = match.groups()
        if label is not None:
            stack.append((label, [], match.start()))
        elif close is not None:
            if not stack:
                raise _structure_error("unmatched ')'", source, match.start())
            label, children, position = stack.pop()
            node = _node(label, children, source, position)
            (stack[-1][1] if stack else trees).append(node)
        elif stack:
            stack[-1][1].append(word)
        else:
            raise _structure_error(f"word {word!r} outside any bracket", source, match.start())
    if stack:
        raise _structure_error("'(' never closed", source, stack[-1][2])
    return trees


def parse_bracketed(text: str, *, source: str = "") -> Tree:
    """The one tree of a PTB bracket string (SST line, SNLI `*_parse`, benepar output).

    Raises StructureError naming `source` and the character position when the brackets do not
    match, the text is empty or holds more than one tree.
    """
    trees = parse_bracketed_all(text, source=source)
    if len(trees) != 1:
        problem = "empty tree" if not trees else f"{len(trees)} trees where one was expected"
        raise StructureError(problem, path=source or None,
                             fix="give exactly one bracketed tree, e.g. (S (NP I) (VP left))")
    return trees[0]


def tree_from_sentence(sentence: Sentence, *, binary: bool = False, source: str = "") -> Tree:
    """The parse shipped with `sentence` (`tree`, or `binary_tree` when `binary`), checked against
    its tokens; raises StructureError when it is missing or its leaf count differs."""
    text = sentence.binary_tree if binary else sentence.tree
    field = "binary_tree" if binary else "tree"
    if text is None:
        raise StructureError(f"sentence has no {field}", path=source or None,
                             fix="parse it first (jaxenc.structures.parsers)")
    tree = parse_bracketed(text, source=source)
    num_leaves = len(tree.leaves())
    if num_leaves != len(sentence.tokens):
        raise StructureError(
            f"{field} has {num_leaves} leaves but the sentence has {len(sentence.tokens)} tokens",
            path=source or None, fix="use the tokens of the tree, or re-parse the tokens")
    return tree


@dataclasses.dataclass(frozen=True)
class DependencyTree:
    """A dependency tree over `tokens`.

    Attributes:
      tokens: the words, n of them.
      heads: for each word, the 1-based index of its head; 0 = the word is the root.
      labels: the arc label of each word (relation to its head).
    """

    tokens: tuple[str, ...]
    heads: tuple[int, ...]
    labels: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.tokens)

    def validate(self, source: str = "") -> DependencyTree:
        """Returns self; raises StructureError for a length mismatch, a head out of range, zero or
        several roots, or a cycle, naming `source` (e.g. "file:line") and the token."""
        where = source or None
        n = len(self.tokens)
        if not (len(self.heads) == len(self.labels) == n):
            raise StructureError(
                f"{n} tokens but {len(self.heads)} heads and {len(self.labels)} labels",
                path=where, fix="give one head and one label per token")
        if n == 0:
            raise StructureError("empty dependency tree", path=where, fix="drop empty sentences")
        for index, head in enumerate(self.heads, start=1):
            if not 0 <= head <= n:
                raise StructureError(
                    f"token {index} {self.tokens[index - 1]!r} has head {head}, outside 0..{n}",
                    path=where, fix="heads are 1-based word indices, 0 for the root")
        roots = [index for index, head in enumerate(self.heads, start=1) if head == 0]
        if len(roots) != 1:
            problem = "no root (no token has head 0)" if not roots else (
                f"{len(roots)} roots (tokens {', '.join(map(str, roots))} have head 0)")
            raise StructureError(problem, path=where, fix="exactly one token must have head 0")
        cycle = self._find_cycle()
        if cycle:
            path = " -> ".join(map(str, cycle))
            raise StructureError(f"heads form a cycle {path}", path=where,
                                 fix="every token must reach the root by following heads")
        return self

    def _find_cycle(self) -> list[int]:
        """Token indices (1-based) of a cycle of heads, closed (first == last); [] if none."""
        state = [0] * (len(self.tokens) + 1)  # 0 unseen, 1 on the current walk, 2 reaches root
        state[0] = 2
        for start in range(1, len(state)):
            walk, node = [], start
            while state[node] == 0:
                state[node] = 1
                walk.append(node)
                node = self.heads[node - 1]
            if state[node] == 1:
                return walk[walk.index(node):] + [node]
            for visited in walk:
                state[visited] = 2
        return []

    @classmethod
    def from_sentence(cls, sentence: Sentence, *, source: str = "") -> DependencyTree:
        """The validated gold tree of a `Sentence` (heads required; labels default to "dep")."""
        if sentence.heads is None:
            raise StructureError("sentence has no dependency heads", path=source or None,
                                 fix="read it from CoNLL-U / .dp, or parse it (spaCy)")
        labels = sentence.deprels if sentence.deprels is not None else ("dep",) * len(sentence)
        return cls(tuple(sentence.tokens), tuple(sentence.heads), tuple(labels)).validate(source)

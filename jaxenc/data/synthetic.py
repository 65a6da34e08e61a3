"""The embedded default dataset: English-like sentences whose sentiment is decided by syntax.

Nothing to download and no data folder: a small probabilistic grammar driven by a seeded numpy RNG
emits each sentence with its gold constituency tree (`Sentence.tree`, n-ary PTB brackets), POS tags
and gold dependency tree (`heads`, `deprels`: UD-style relations read off the constituency tree by
its head rules, so the two trees always agree). The same (num_examples, seed) gives the same data.

Grammar (every clause picks its own tense; verbs agree with their subject; ~300 words):

    sentence   -> [SBAR(although|though|while clause) ,] clause .
    clause     -> NP VP
    VP         -> be [not|never] ADJP                          "is not very good"      (copular)
                | [do not|never] V_eval NP                     "did not like the plot" (evaluative)
                | [do not|never] V_say SBAR(that clause)       "says that S"           (reporting)
    ADJP       -> [intensifier] JJ
    NP         -> Det [JJ] N [PP | SBAR(relative clause)]
    relative   -> WHNP VP          (subject gap: "that was bad", "who hated the plot")
                | WHNP NP V_eval   (object gap: "that the critic liked")
    PP         -> IN Det [JJ] N

Labelling rule (`LABEL_NAMES`; 1 = positive). The value of a clause is
    copular:    polarity(adjective) * (-1 if the VP is negated)
    evaluative: polarity(verb)      * (-1 if the VP is negated)
    reporting:  value(complement)   * (-1 if the VP is negated)
and the label is positive iff the main clause has value +1: only the negations on the path down
the chain of reporting verbs count, and they compose. Relative clauses, PPs, attributive
adjectives and the fronted clause carry polar words and negations that never change the label,
so the words alone leave it open.
Minimal pairs (about a quarter of the examples): a draw with a copular main predicate and a
copular distractor of the other value comes with the draw that swaps their polar cores, e.g.
"the film that was not good is good ." / "the film that was good is not good .".
Splits: one seeded stream of draws; a hash of a sentence's sorted tokens picks its split (the
ratio of SPLIT_SIZES), so no multiset of tokens, hence no minimal pair, spans two splits.
"""

from __future__ import annotations

import dataclasses
import functools
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from jaxenc.records import Example, Sentence

LABEL_NAMES = ("negative", "positive")
SPLIT_SIZES = {"train": 4000, "dev": 500, "test": 500}
MIN_LENGTH, MAX_LENGTH = 5, 30

_SEED = 0
_SPLIT_HASH_BUCKETS = {"train": range(0, 8), "dev": range(8, 9), "test": range(9, 10)}
_NUM_HASH_BUCKETS = 10

# --- Lexicon -----------------------------------------------------------------------------------
# Nouns as (singular, plural).
_HUMAN_NOUNS = tuple((noun, noun + "s") for noun in (
    "critic", "viewer", "reviewer", "director", "actor", "writer", "producer", "friend", "teacher",
    "student", "journalist", "fan", "neighbour", "editor", "judge", "parent", "child", "expert",
)) + (("audience", "audiences"), ("woman", "women"), ("man", "men"))
_THING_NOUNS = tuple((noun, noun + "s") for noun in (
    "film", "movie", "plot", "script", "ending", "soundtrack", "performance", "scene", "book",
    "show", "novel", "play", "song", "album", "dialogue", "setting", "character", "sequel",
    "trailer", "episode", "chapter", "poem", "painting", "game", "meal", "concert", "design",
    "village", "river", "war",
)) + (("story", "stories"), ("city", "cities"), ("family", "families"), ("country", "countries"))
_POSITIVE_ADJECTIVES = (
    "good", "great", "excellent", "wonderful", "brilliant", "superb", "charming", "delightful",
    "moving", "clever", "beautiful", "funny", "gripping", "fresh", "elegant", "lovely", "powerful",
    "smart", "touching", "enjoyable",
)
_NEGATIVE_ADJECTIVES = (
    "bad", "awful", "terrible", "boring", "dull", "weak", "clumsy", "tedious", "bland", "silly",
    "messy", "poor", "stupid", "painful", "lame", "flat", "annoying", "dreadful", "shallow",
    "predictable",
)
_NEUTRAL_ADJECTIVES = (
    "new", "old", "long", "short", "recent", "young", "local", "early", "foreign", "second",
)
_ATTRIBUTIVE_ADJECTIVES = _POSITIVE_ADJECTIVES + _NEGATIVE_ADJECTIVES + _NEUTRAL_ADJECTIVES
_INTENSIFIERS = ("very", "really", "quite", "rather", "truly", "so", "extremely")
# Verbs as (base, third person singular, past).
_POSITIVE_VERBS = (
    ("like", "likes", "liked"), ("love", "loves", "loved"), ("enjoy", "enjoys", "enjoyed"),
    ("admire", "admires", "admired"), ("praise", "praises", "praised"),
    ("adore", "adores", "adored"), ("appreciate", "appreciates", "appreciated"),
)
_NEGATIVE_VERBS = (
    ("hate", "hates", "hated"), ("dislike", "dislikes", "disliked"),
    ("despise", "despises", "despised"), ("criticize", "criticizes", "criticized"),
    ("resent", "resents", "resented"), ("loathe", "loathes", "loathed"),
    ("mock", "mocks", "mocked"),
)
_REPORTING_VERBS = (
    ("say", "says", "said"), ("think", "thinks", "thought"), ("believe", "believes", "believed"),
    ("claim", "claims", "claimed"), ("feel", "feels", "felt"), ("insist", "insists", "insisted"),
)
_DO = ("do", "does", "did")
_BE = {("present", "sg"): ("VBZ", "is"), ("present", "pl"): ("VBP", "are"),
       ("past", "sg"): ("VBD", "was"), ("past", "pl"): ("VBD", "were")}
_DETERMINERS = {"sg": ("the", "a", "this", "every"), "pl": ("the", "some", "these", "those")}
_PREPOSITIONS = ("about", "from", "with", "in", "without")
_SUBORDINATORS = ("although", "though", "while")

WORD_POLARITY: dict[str, int] = {
    **{word: +1 for word in _POSITIVE_ADJECTIVES},
    **{word: -1 for word in _NEGATIVE_ADJECTIVES},
    **{form: +1 for forms in _POSITIVE_VERBS for form in forms},
    **{form: -1 for forms in _NEGATIVE_VERBS for form in forms},
}
"""+1 / -1 for every polar adjective and every form of an evaluative verb."""

# --- Probabilities -----------------------------------------------------------------------------
_P_ADVERBIAL = 0.2          # fronted "although S ," clause
_P_NEGATION = {None: 0.5, "not": 0.3, "never": 0.2}
_P_CLAUSE = {"copular": 0.4, "evaluative": 0.25, "reporting": 0.35}
_P_CLAUSE_WITHOUT_REPORTING = {kind: p for kind, p in _P_CLAUSE.items() if kind != "reporting"}
_MAX_REPORTING_DEPTH = 2    # "A says that B thinks that C is good" at most
_P_HUMAN_COPULAR_SUBJECT = 0.2
_P_HUMAN_OBJECT = 0.2
_P_INTENSIFIER = 0.3
_P_ATTRIBUTIVE = 0.25
_P_RELATIVE, _P_PP = 0.45, 0.15  # modifier of an NP that may still nest one
_MAIN_NESTING, _INNER_NESTING = 2, 1  # how deep NP modifiers may nest


# --- Trees -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Node:
    """A constituent, or a pre-terminal when `word` is set.

    `relations[k]` is "head" for the one head child and otherwise the dependency relation that the
    lexical head of child k bears to the lexical head of this node.
    """

    label: str
    children: tuple[_Node, ...] = ()
    relations: tuple[str, ...] = ()
    word: str | None = None

    def bracketed(self) -> str:
        if self.word is not None:
            return f"({self.label} {self.word})"
        return f"({self.label} {' '.join(child.bracketed() for child in self.children)})"

    def preterminals(self) -> list[_Node]:
        if self.word is not None:
            return [self]
        return [leaf for child in self.children for leaf in child.preterminals()]


def _leaf(tag: str, word: str) -> _Node:
    return _Node(tag, word=word)


def _phrase(label: str, parts: Sequence[tuple[str, _Node]]) -> _Node:
    """A constituent from (relation, child) parts; exactly one part has relation "head"."""
    relations = tuple(relation for relation, _ in parts)
    if relations.count("head") != 1:
        raise ValueError(f"{label} needs exactly one head child, got relations {relations}")
    return _Node(label, tuple(child for _, child in parts), relations)


def _dependencies(root: _Node) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Heads (1-based, 0 = root) and relations of the tokens, by percolating lexical heads."""
    num_tokens = len(root.preterminals())
    heads, relations = [0] * num_tokens, ["root"] * num_tokens

    def lexical_head(node: _Node, position: int) -> tuple[int, int]:
        """(token index of the head of `node`, position after `node`)."""
        if node.word is not None:
            return position, position + 1
        child_heads = []
        for child in node.children:
            head, position = lexical_head(child, position)
            child_heads.append(head)
        head = child_heads[node.relations.index("head")]
        for child_head, relation in zip(child_heads, node.relations, strict=True):
            if relation != "head":
                heads[child_head], relations[child_head] = head + 1, relation
        return head, position

    lexical_head(root, 0)
    return tuple(heads), tuple(relations)


# --- Grammar -----------------------------------------------------------------------------------
class _Core(NamedTuple):
    """The polar part of a copular predicate: "[negation] [intensifier] adjective"."""

    negation: str | None
    intensifier: str | None
    adjective: str

    @property
    def value(self) -> int:
        return WORD_POLARITY[self.adjective] * (-1 if self.negation else 1)


class _CoreSupply:
    """Hands out the copular cores of one draw: fresh from `rng`, or replayed from `fixed`."""

    def __init__(self, rng: np.random.Generator, fixed: Sequence[_Core] | None = None):
        self._rng, self._fixed = rng, fixed
        self.drawn: list[_Core] = []

    def next(self) -> int:
        """Draws the next core; returns its index in `drawn`."""
        if self._fixed is not None:
            core = self._fixed[len(self.drawn)]
        else:
            rng = self._rng
            adjectives = _POSITIVE_ADJECTIVES if rng.random() < 0.5 else _NEGATIVE_ADJECTIVES
            negation = _draw_negation(rng)
            intensifier = _pick(rng, _INTENSIFIERS) if rng.random() < _P_INTENSIFIER else None
            core = _Core(negation, intensifier, _pick(rng, adjectives))
        self.drawn.append(core)
        return len(self.drawn) - 1


class _Clause(NamedTuple):
    """A clause as the (relation, child) parts of its S, its value and its spine-final core."""

    parts: list[tuple[str, _Node]]
    value: int
    core: int | None  # index of the copular core that decides `value`, None for a verb


def _pick(rng: np.random.Generator, options: Sequence):
    return options[rng.integers(len(options))]


def _pick_weighted(rng: np.random.Generator, weights: Mapping):
    """A key of `weights` drawn with probability proportional to its value."""
    threshold = rng.random() * sum(weights.values())
    for option, weight in weights.items():
        threshold -= weight
        if threshold < 0:
            return option
    return option  # rounding left threshold at 0


def _draw_negation(rng: np.random.Generator) -> str | None:
    return _pick_weighted(rng, _P_NEGATION)


class _Grammar:
    """Draws one sentence with `rng`; copular cores come from `cores` so that a draw can be
    replayed with its cores permuted (the rest of the sentence consumes `rng` identically)."""

    def __init__(self, rng: np.random.Generator, cores: _CoreSupply):
        self._rng, self._cores = rng, cores

    def sentence(self) -> tuple[_Node, int, int | None]:
        """(root S, value of the main clause, index of its deciding core)."""
        parts: list[tuple[str, _Node]] = []
        if self._rng.random() < _P_ADVERBIAL:
            adverbial = self._clause(_MAX_REPORTING_DEPTH, _INNER_NESTING)
            marker = _leaf("IN", _pick(self._rng, _SUBORDINATORS))
            parts += [("advcl", _phrase("SBAR", [("mark", marker),
                                                 ("head", _phrase("S", adverbial.parts))])),
                      ("punct", _leaf(",", ","))]
        main = self._clause(0, _MAIN_NESTING)
        root = _phrase("S", parts + main.parts + [("punct", _leaf(".", "."))])
        return root, main.value, main.core

    def _clause(self, depth: int, nesting: int) -> _Clause:
        rng = self._rng
        kind = _pick_weighted(rng, _P_CLAUSE if depth < _MAX_REPORTING_DEPTH
                              else _P_CLAUSE_WITHOUT_REPORTING)
        number, tense = _pick(rng, ("sg", "pl")), _pick(rng, ("present", "past"))
        human = kind != "copular" or rng.random() < _P_HUMAN_COPULAR_SUBJECT
        subject = self._noun_phrase(number, human, nesting)
        if kind == "copular":
            verb_phrase, value, core = self._copular(number, tense)
        elif kind == "evaluative":
            obj = self._noun_phrase(_pick(rng, ("sg", "pl")),
                                    rng.random() < _P_HUMAN_OBJECT, nesting - 1)
            verb_phrase, value = self._evaluative(number, tense, [("obj", obj)])
            core = None
        else:
            inner = self._clause(depth + 1, _INNER_NESTING)
            complement = _phrase("SBAR", [("mark", _leaf("IN", "that")),
                                          ("head", _phrase("S", inner.parts))])
            negation = _draw_negation(rng)
            verb_phrase = self._lexical_verb_phrase(_pick(rng, _REPORTING_VERBS), number, tense,
                                                    negation, [("ccomp", complement)])
            value, core = inner.value * (-1 if negation else 1), inner.core
        return _Clause([("nsubj", subject), ("head", verb_phrase)], value, core)

    def _copular(self, number: str, tense: str) -> tuple[_Node, int, int]:
        """"is [not] [very] good": the adjective heads, the copula is `cop` (UD)."""
        index = self._cores.next()
        core = self._cores.drawn[index]
        tag, word = _BE[tense, number]
        parts = [("cop", _leaf(tag, word))]
        if core.negation:
            parts.append(("advmod", _leaf("RB", core.negation)))
        adjective = [("advmod", _leaf("RB", core.intensifier))] if core.intensifier else []
        adjective.append(("head", _leaf("JJ", core.adjective)))
        parts.append(("head", _phrase("ADJP", adjective)))
        return _phrase("VP", parts), core.value, index

    def _evaluative(self, number: str, tense: str,
                    complements: list[tuple[str, _Node]]) -> tuple[_Node, int]:
        """"[did not] like NP" with its value polarity(verb) * (-1 if negated)."""
        polarity = +1 if self._rng.random() < 0.5 else -1
        verb = _pick(self._rng, _POSITIVE_VERBS if polarity > 0 else _NEGATIVE_VERBS)
        negation = _draw_negation(self._rng)
        verb_phrase = self._lexical_verb_phrase(verb, number, tense, negation, complements)
        return verb_phrase, polarity * (-1 if negation else 1)

    def _lexical_verb_phrase(self, forms: tuple[str, str, str], number: str, tense: str,
                             negation: str | None,
                             complements: list[tuple[str, _Node]]) -> _Node:
        """"likes X", "never liked X" or, with do-support, "does not like X"."""
        if negation == "not":
            inner = _phrase("VP", [("head", _leaf("VB", forms[0]))] + complements)
            return _phrase("VP", [("aux", _inflect(_DO, number, tense)),
                                  ("advmod", _leaf("RB", "not")), ("head", inner)])
        parts = [("advmod", _leaf("RB", negation))] if negation else []
        return _phrase("VP", parts + [("head", _inflect(forms, number, tense))] + complements)

    def _noun_phrase(self, number: str, human: bool, nesting: int) -> _Node:
        """"the [old] critic [who hated the plot | from the city]"."""
        rng = self._rng
        singular, plural = _pick(rng, _HUMAN_NOUNS if human else _THING_NOUNS)
        noun = singular if number == "sg" else plural
        adjective = None
        if rng.random() < _P_ATTRIBUTIVE:
            adjective = _pick(rng, _ATTRIBUTIVE_ADJECTIVES)
        determiner = _pick(rng, _DETERMINERS[number])
        if determiner == "a" and (adjective or noun)[0] in "aeiou":
            determiner = "an"
        parts = [("det", _leaf("DT", determiner))]
        if adjective:
            parts.append(("amod", _leaf("JJ", adjective)))
        parts.append(("head", _leaf("NN" if number == "sg" else "NNS", noun)))
        noun_phrase = _phrase("NP", parts)
        if nesting <= 0:
            return noun_phrase
        draw = rng.random()
        if draw < _P_RELATIVE:
            relative = self._relative_clause(number, human, nesting - 1)
            return _phrase("NP", [("head", noun_phrase), ("acl:relcl", relative)])
        if draw < _P_RELATIVE + _P_PP:
            object_np = self._noun_phrase(_pick(rng, ("sg", "pl")), False, 0)
            preposition = _phrase("PP", [("case", _leaf("IN", _pick(rng, _PREPOSITIONS))),
                                         ("head", object_np)])
            return _phrase("NP", [("head", noun_phrase), ("nmod", preposition)])
        return noun_phrase

    def _relative_clause(self, number: str, human: bool, nesting: int) -> _Node:
        """"that was not bad" / "who hated the plot" (subject gap), "that the critic liked"."""
        rng = self._rng
        pronoun = _pick(rng, ("that", "who" if human else "which"))
        wh_phrase = _phrase("WHNP", [("head", _leaf("WP" if pronoun == "who" else "WDT", pronoun))])
        tense = _pick(rng, ("present", "past"))
        draw = rng.random()
        if draw < 0.5:
            verb_phrase = self._copular(number, tense)[0]
            return _phrase("SBAR", [("nsubj", wh_phrase),
                                    ("head", _phrase("S", [("head", verb_phrase)]))])
        if draw < 0.75 and human:
            obj = self._noun_phrase(_pick(rng, ("sg", "pl")), False, nesting)
            verb_phrase = self._evaluative(number, tense, [("obj", obj)])[0]
            return _phrase("SBAR", [("nsubj", wh_phrase),
                                    ("head", _phrase("S", [("head", verb_phrase)]))])
        subject_number = _pick(rng, ("sg", "pl"))
        subject = self._noun_phrase(subject_number, True, nesting)
        verb_phrase = self._evaluative(subject_number, tense, [])[0]
        return _phrase("SBAR", [("obj", wh_phrase),
                                ("head", _phrase("S", [("nsubj", subject),
                                                       ("head", verb_phrase)]))])


def _inflect(forms: tuple[str, str, str], number: str, tense: str) -> _Node:
    base, third, past = forms
    if tense == "past":
        return _leaf("VBD", past)
    return _leaf("VBZ", third) if number == "sg" else _leaf("VBP", base)


# --- Sampling ----------------------------------------------------------------------------------
class _Draw(NamedTuple):
    root: _Node
    label: int
    main_core: int | None
    cores: list[_Core]


def _draw(seed: int, attempt: int, cores: Sequence[_Core] | None = None) -> _Draw:
    """Sentence `attempt` of `seed`; with `cores`, the same sentence with those copular cores."""
    supply = _CoreSupply(np.random.default_rng((seed, attempt, 1)), fixed=cores)
    root, value, main_core = _Grammar(np.random.default_rng((seed, attempt, 0)), supply).sentence()
    return _Draw(root, int(value > 0), main_core, supply.drawn)


def _minimal_pair(seed: int, attempt: int, draw: _Draw) -> _Draw | None:
    """`draw` with its main core swapped for a distractor core of the other value, if it has one."""
    if draw.main_core is None:
        return None
    main_value = draw.cores[draw.main_core].value
    candidates = [index for index, core in enumerate(draw.cores) if core.value != main_value]
    if not candidates:
        return None
    other = _pick(np.random.default_rng((seed, attempt, 2)), candidates)
    cores = list(draw.cores)
    cores[draw.main_core], cores[other] = cores[other], cores[draw.main_core]
    return _draw(seed, attempt, cores)


def _example(root: _Node, label: int, uid: str) -> Example:
    leaves = root.preterminals()
    tokens = tuple(leaf.word for leaf in leaves)
    heads, deprels = _dependencies(root)
    sentence = Sentence(tokens=tokens, text=" ".join(tokens), tree=root.bracketed(), heads=heads,
                        deprels=deprels, tags=tuple(leaf.label for leaf in leaves))
    return Example(sentences=(sentence,), label=label, uid=uid)


def _sample(sizes: Mapping[str, int], seed: int,
            route: Callable[[Sequence[str]], str]) -> dict[str, list[Example]]:
    """Distinct sentences of `seed`, each put in split `route(tokens)` until every split is full.

    A minimal pair always goes to one split: both members have the same multiset of tokens.
    """
    examples: dict[str, list[Example]] = {split: [] for split in sizes}
    seen: set[tuple[str, ...]] = set()
    attempt = 0
    while any(len(examples[split]) < size for split, size in sizes.items()):
        draw = _draw(seed, attempt)
        pair = _minimal_pair(seed, attempt, draw)
        attempt += 1
        draws = [draw] if pair is None else [draw, pair]
        tokens = [tuple(leaf.word for leaf in d.root.preterminals()) for d in draws]
        if not MIN_LENGTH <= len(tokens[0]) <= MAX_LENGTH or any(t in seen for t in tokens):
            continue
        split = route(tokens[0])
        target = examples[split]
        for d, t in list(zip(draws, tokens, strict=True))[:sizes[split] - len(target)]:
            seen.add(t)
            target.append(_example(d.root, d.label, f"synthetic:{split}:{len(target)}"))
    return examples


def _split_of(tokens: Sequence[str]) -> str:
    """The split of a sentence, from a hash of its multiset of tokens (stable across runs)."""
    bucket = zlib.crc32(" ".join(sorted(tokens)).encode()) % _NUM_HASH_BUCKETS
    return next(split for split, buckets in _SPLIT_HASH_BUCKETS.items() if bucket in buckets)


@functools.cache
def _fixed_splits() -> dict[str, tuple[Example, ...]]:
    splits = _sample(SPLIT_SIZES, _SEED, _split_of)
    return {split: tuple(examples) for split, examples in splits.items()}


def generate(num_examples: int, seed: int, *, split: str = "custom") -> list[Example]:
    """`num_examples` distinct labelled sentences of `seed`; uids "synthetic:<split>:<i>"."""
    return _sample({split: num_examples}, seed, lambda tokens: split)[split]


def generate_split(split: str) -> list[Example]:
    """The fixed "train" (4000), "dev" (500) or "test" (500) split; splits share no token multiset.

    Raises ValueError for another split name.
    """
    if split not in SPLIT_SIZES:
        raise ValueError(f"unknown synthetic split {split!r}; choose one of {sorted(SPLIT_SIZES)}")
    return list(_fixed_splits()[split])

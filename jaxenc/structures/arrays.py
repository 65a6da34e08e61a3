"""A sentence's structure arrays for every model, at natural length.

One place computes them, so the featurizer (`jaxenc.data.featurize`) and the TFDS builds
(`jaxenc.data.tfds_builders`) store exactly the same arrays. Fields (n = number of words):

| field       | array                                  | model               | tree         |
|-------------|----------------------------------------|---------------------|--------------|
| `segments`  | int32[T, n] phrase id per level        | PSAN                | constituency |
| `blocks`    | int32[T, P, 2] (start, length) of each | PSAN (blocked PSA)  | constituency |
|             | phrase per level, -1 padded along P    |                     |              |
| `relations` | int32[n+1, n+1] ([root] node at 0)     | Dependency-Transf.  | dependency   |
| `levels`    | int32[n+1] depth, clipped to max_level | Dependency-Transf.  | dependency   |
| `heads`     | int32[n+1] head node of each node      | Tree-LSTM           | dependency   |
|             | ([root] node at 0, its head -1)        |                     |              |
| `members`   | int32[n-1, 2] (dependent, head) of     | PhraseTransformer   | dependency   |
|             | each dependency hypernode              |                     |              |

Trees come from the parser a `StructureSpec` names, through `jaxenc.structures.cache.parse_cached`
so a dataset is parsed once:
- "gold": the trees shipped with the data; a sentence without a constituency tree gets the phrase
  tree derived from its gold dependency tree (`jaxenc.structures.derive`).
- "spacy" / "spacy-constituency": spaCy dependency trees; the constituency tree is derived from
  the same parse (spaCy runs once even when both kinds are needed).
- "benepar": benepar constituency trees (constituency fields only).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import NamedTuple

import ml_collections
import numpy as np

from jaxenc.errors import ConfigError, StructureError
from jaxenc.records import Sentence
from jaxenc.structures import cache, hypernodes, parsers, psan, relations
from jaxenc.structures.derive import derive_tree
from jaxenc.structures.trees import DependencyTree, Tree

CONSTITUENCY, DEPENDENCY = "constituency", "dependency"
DEFAULT_MAX_LEVEL = 15  # the level-embedding table has max_level + 1 rows
# Structure field -> the kind of tree it is computed from.
FIELD_TREES: dict[str, str] = {
    "segments": CONSTITUENCY, "blocks": CONSTITUENCY,
    "relations": DEPENDENCY, "levels": DEPENDENCY, "heads": DEPENDENCY, "members": DEPENDENCY,
}
PARSER_NAMES = ("gold", "spacy", "spacy-constituency", "benepar")
# A model's parser option left for its config to resolve (jaxenc.models.config.AUTO): "gold" where
# the dataset ships the trees (jaxenc.training.validation), else `text_parser`.
AUTO_PARSER = "auto"
# PSAN's phrase division: the tree's (jaxenc.structures.psan), equal-length phrases with the
# same counts (Table 4, "w/o syntactic division"), or the whole sentence as one phrase per level.
DIVISIONS = ("syntactic", "equal", "sentence")
# The 37 universal relations of Universal Dependencies v2: the relation vocabulary of gold UD trees.
UD_RELATIONS = (
    "acl", "advcl", "advmod", "amod", "appos", "aux", "case", "cc", "ccomp", "clf", "compound",
    "conj", "cop", "csubj", "dep", "det", "discourse", "dislocated", "expl", "fixed", "flat",
    "goeswith", "iobj", "list", "mark", "nmod", "nsubj", "nummod", "obj", "obl", "orphan",
    "parataxis", "punct", "reparandum", "root", "vocative", "xcomp")


class SentenceTrees(NamedTuple):
    """The trees of one sentence; a kind no requested field needs is None."""

    constituency: Tree | None = None
    dependency: DependencyTree | None = None


def structure_arrays(sentence: Sentence, trees: SentenceTrees, fields: Sequence[str], *,
                     relation_vocab: relations.RelationVocabulary | None = None,
                     num_levels: int = 3, min_split_len: int = 4,
                     max_distance: int = relations.DEFAULT_MAX_DISTANCE,
                     max_level: int = DEFAULT_MAX_LEVEL, binarize: bool = True,
                     division: str = "syntactic", source: str = "") -> dict[str, np.ndarray]:
    """The arrays of `fields` (module table) for one sentence, at natural length, all int32.

    Args:
      sentence: the sentence; its tokens must be the trees' words.
      trees: its trees (`parse_trees`); the kinds the fields need must be present.
      fields: names from FIELD_TREES.
      relation_vocab: relation ids, needed by "relations".
      num_levels, min_split_len, binarize: the PSAN division (psan.segments).
      division: one of DIVISIONS (the segments of "equal" are psan.equal_segments of the tree's).
      max_distance: the largest a + b that gets a distance-pair relation.
      max_level: levels are clipped to it.
      source: names the sentence in errors (e.g. "file:line").
    """
    _check_fields(fields)
    constituency = _tree_of(trees, CONSTITUENCY, fields, sentence, source)
    dependency = _tree_of(trees, DEPENDENCY, fields, sentence, source)
    arrays: dict[str, np.ndarray] = {}
    if constituency is not None:
        segments = _division(psan.segments(constituency, num_levels, min_split_len, binarize),
                             division)
        if "segments" in fields:
            arrays["segments"] = segments
        if "blocks" in fields:
            arrays["blocks"] = psan.blocks(segments)
    if "relations" in fields:
        _require_relation_vocab(relation_vocab)
        arrays["relations"] = relations.relations(dependency, relation_vocab, max_distance)
    if "levels" in fields:
        arrays["levels"] = relations.levels(dependency, max_level)
    if "heads" in fields:
        arrays["heads"] = relations.node_heads(dependency)
    if "members" in fields:
        arrays["members"] = hypernodes.dependency_members(dependency)
    return arrays


def _division(segments: np.ndarray, division: str) -> np.ndarray:
    """The tree's segments int32[T, n] turned into the `division` (DIVISIONS)."""
    if division not in DIVISIONS:
        raise ConfigError(f"unknown phrase division {division!r} (fix: one of "
                          f"{', '.join(DIVISIONS)})")
    if division == "equal":
        return psan.equal_segments(segments)
    return np.zeros_like(segments) if division == "sentence" else segments


def output_fields(fields: Sequence[str]) -> dict[str, int]:
    """Key -> rank of every array `structure_arrays` returns for `fields`."""
    ranks = {"segments": 2, "blocks": 3, "relations": 2, "levels": 1, "heads": 1, "members": 2}
    return {field: ranks[field] for field in _check_fields(fields)}


def _check_fields(fields: Sequence[str]) -> Sequence[str]:
    unknown = [field for field in fields if field not in FIELD_TREES]
    if unknown:
        raise ConfigError(f"unknown structure fields {unknown} (fix: use fields of "
                          f"{', '.join(FIELD_TREES)})")
    return fields


def _require_relation_vocab(vocab: relations.RelationVocabulary | None) -> None:
    if vocab is None:
        raise ConfigError("the 'relations' field needs a relation vocabulary (fix: pass "
                          "relation_vocab=RelationVocabulary.build(training trees))")


def _tree_of(trees: SentenceTrees, kind: str, fields: Sequence[str], sentence: Sentence,
             source: str) -> Tree | DependencyTree | None:
    """The tree of `kind` when a field needs it, checked to have the sentence's words."""
    if not any(FIELD_TREES[field] == kind for field in fields):
        return None
    tree = getattr(trees, kind)
    if tree is None:
        raise StructureError(f"no {kind} tree for fields {list(fields)}", path=source or None,
                             fix="parse the sentences with parse_trees(..., fields)")
    words = tree.leaves() if kind == CONSTITUENCY else list(tree.tokens)
    if len(words) != len(sentence.tokens):
        raise StructureError(f"{kind} tree has {len(words)} words, the sentence "
                             f"{len(sentence.tokens)} tokens", path=source or None,
                             fix="parse the sentence's own tokens")
    return tree


def text_parser(fields: Sequence[str]) -> str:
    """The parser of text without trees for `fields`: "spacy-constituency" when they need phrase
    trees only, else "spacy" (which gives both kinds)."""
    _check_fields(fields)
    return "spacy-constituency" if {FIELD_TREES[field] for field in fields} == {
        CONSTITUENCY} else "spacy"


def parse_trees(sentences: Sequence[Sentence], fields: Sequence[str], parser: str = "gold", *,
                cache_dir: str | os.PathLike | None = None) -> list[SentenceTrees]:
    """The trees `fields` need for every sentence, from `parser` (module docstring).

    Parser outputs are cached in `cache_dir` when one is given (gold trees are read directly).
    """
    _check_fields(fields)
    if parser not in PARSER_NAMES:
        raise ConfigError(f"unknown structure parser {parser!r} (fix: one of "
                          f"{', '.join(PARSER_NAMES)})")
    kinds = {FIELD_TREES[field] for field in fields}
    if not kinds:
        return [SentenceTrees() for _ in sentences]
    if parser == "benepar" and DEPENDENCY in kinds:
        raise ConfigError(f"benepar gives no dependency trees for fields {list(fields)} (fix: use "
                          "parser 'spacy' or 'gold')")
    dependency: list[DependencyTree | None] = [None] * len(sentences)
    constituency: list[Tree | None] = [None] * len(sentences)
    if parser == "gold":
        if DEPENDENCY in kinds:
            dependency = _parse(parsers.GoldParser(DEPENDENCY), sentences, None)
        if CONSTITUENCY in kinds:
            constituency = _gold_constituency(sentences, dependency)
    elif parser == "benepar":
        constituency = _parse(parsers.BeneparParser(), sentences, cache_dir)
    else:  # spaCy: one dependency parse, the phrase tree derived from it
        dependency = _parse(parsers.SpacyParser(), sentences, cache_dir)
        if CONSTITUENCY in kinds:
            constituency = [derive_tree(tree).tree for tree in dependency]
        if DEPENDENCY not in kinds:
            dependency = [None] * len(sentences)
    return [SentenceTrees(*pair) for pair in zip(constituency, dependency, strict=True)]


def _parse(parser: parsers.Parser, sentences: Sequence[Sentence],
           cache_dir: str | os.PathLike | None) -> list:
    if cache_dir is None or parser.name == "gold":
        return parser.parse(sentences)
    return cache.parse_cached(parser, sentences, cache_dir)


def _gold_constituency(sentences: Sequence[Sentence],
                       dependency: Sequence[DependencyTree | None]) -> list[Tree]:
    """Gold constituency trees; a sentence without one gets the tree derived from its heads."""
    trees = []
    gold = parsers.GoldParser(CONSTITUENCY)
    for sentence, dtree in zip(sentences, dependency, strict=True):
        if sentence.tree is not None or sentence.heads is None:
            trees.append(gold.parse([sentence])[0])
        else:
            dtree = dtree or parsers.GoldParser(DEPENDENCY).parse([sentence])[0]
            trees.append(derive_tree(dtree).tree)
    return trees


@dataclasses.dataclass(frozen=True)
class StructureSpec:
    """Which structure arrays to compute, from which parser, with which options.

    Attributes:
      fields: structure fields (FIELD_TREES), e.g. a model's structure_spec(config).fields.
      parser: one of PARSER_NAMES.
      relation_vocab: relation ids for "relations".
      num_levels, min_split_len, binarize, division, max_distance, max_level: as
        `structure_arrays`.
      cache_dir: where parser outputs are cached (None: not cached).
    """

    fields: tuple[str, ...]
    parser: str = "gold"
    relation_vocab: relations.RelationVocabulary | None = None
    num_levels: int = 3
    min_split_len: int = 4
    binarize: bool = True
    division: str = "syntactic"
    max_distance: int = relations.DEFAULT_MAX_DISTANCE
    max_level: int = DEFAULT_MAX_LEVEL
    cache_dir: str | None = None

    @classmethod
    def from_config(cls, model_cfg: ml_collections.ConfigDict, fields: Sequence[str], *,
                    relation_vocab: relations.RelationVocabulary | None = None,
                    cache_dir: str | os.PathLike | None = None) -> StructureSpec:
        """The spec of a model config: its keys named like the attributes override the defaults.
        A `parser` still AUTO_PARSER (a config no training run resolved) reads `text_parser`'s
        trees, which the model config resolves it to when no dataset makes it "gold"."""
        options = {field.name: model_cfg[field.name] for field in dataclasses.fields(cls)
                   if field.name in model_cfg and field.name not in ("fields", "relation_vocab",
                                                                     "cache_dir")}
        if options.get("parser") == AUTO_PARSER:
            options["parser"] = text_parser(fields)
        return cls(tuple(fields), relation_vocab=relation_vocab,
                   cache_dir=None if cache_dir is None else os.fspath(cache_dir), **options)

    def __post_init__(self):
        _check_fields(self.fields)
        if "relations" in self.fields:
            _require_relation_vocab(self.relation_vocab)

    def output_fields(self) -> dict[str, int]:
        """Key -> rank of every array `arrays` returns."""
        return output_fields(self.fields)

    def parse(self, sentences: Sequence[Sentence]) -> list[SentenceTrees]:
        return parse_trees(sentences, self.fields, self.parser, cache_dir=self.cache_dir)

    def arrays(self, sentence: Sentence, trees: SentenceTrees,
               source: str = "") -> dict[str, np.ndarray]:
        """`structure_arrays` of one parsed sentence with this spec's options."""
        return structure_arrays(
            sentence, trees, self.fields, relation_vocab=self.relation_vocab,
            num_levels=self.num_levels, min_split_len=self.min_split_len,
            max_distance=self.max_distance, max_level=self.max_level, binarize=self.binarize,
            division=self.division, source=source)

    def __call__(self, sentences: Sequence[Sentence],
                 sources: Sequence[str] | None = None) -> list[dict[str, np.ndarray]]:
        """The arrays of every sentence (parsed together); `sources` name them in errors."""
        sources = [""] * len(sentences) if sources is None else sources
        return [self.arrays(sentence, trees, source) for sentence, trees, source
                in zip(sentences, self.parse(sentences), sources, strict=True)]


def build_relation_vocab(sentences: Sequence[Sentence], parser: str = "gold", *,
                         max_distance: int = relations.DEFAULT_MAX_DISTANCE,
                         keep_subtypes: bool = False, direction: str = "split",
                         cache_dir: str | os.PathLike | None = None,
                         ) -> relations.RelationVocabulary:
    """The relation vocabulary of the dependency trees `parser` gives `sentences` (training);
    `direction`: relations.DIRECTIONS (arc relations with UP / DOWN, or one per label)."""
    trees = parse_trees(sentences, ("levels",), parser, cache_dir=cache_dir)
    return relations.RelationVocabulary.build((t.dependency for t in trees),
                                              max_distance=max_distance,
                                              keep_subtypes=keep_subtypes, direction=direction)


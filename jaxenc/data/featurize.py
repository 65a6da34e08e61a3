"""Example -> per-example feature dict (flat keys, natural length; docs/ARCHITECTURE.md "Batches").

For every sentence role of the dataset kind (`ROLES`) the featurizer writes `<role>/tokens`
(the encoder's prefix tokens first, then the vocabulary ids) and each structure field the
encoder's `structure_spec` lists (jaxenc.models.registry.structure_spec), computed by
`jaxenc.structures.arrays` from the trees of the
parser `model_cfg.parser` names ("gold" by default); the sentences of a `many` call are parsed
together. Structure arrays index the words (`relations` / `levels` put the [root] node first,
matching an encoder whose prefix tokens are (ROOT,)). The example's target follows the kind:
`label` int32[], `score` float32[], `tags` int32[n] (-1 under prefix tokens and for tags unseen in
training) or `target/tokens` = [BOS] w_1..w_m [EOS].
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import ml_collections
import numpy as np

from jaxenc.data.embeddings import drop_oov
from jaxenc.data.vocab import BOS, EOS, Vocabulary
from jaxenc.errors import ConfigError, DataError
from jaxenc.records import Example, Sentence
from jaxenc.structures import arrays
from jaxenc.structures.relations import DEFAULT_MAX_DISTANCE, RelationVocabulary

# Dataset kind -> the batch roles its examples fill (the second seq2seq role is the target).
ROLES: dict[str, tuple[str, ...]] = {
    "single": ("sentence",),
    "pair": ("first", "second"),
    "relatedness": ("first", "second"),
    "tagging": ("sentence",),
    "translation": ("source", "target"),
    "unlabelled": ("source", "target"),
}
SEQ2SEQ_KINDS = ("translation", "unlabelled")
IGNORED_TAG = -1

# Structure field -> the kind of tree it is computed from; jaxenc.structures.arrays builds them all.
STRUCTURE_BUILDERS: Mapping[str, str] = arrays.FIELD_TREES
RELATIONS_FILE = "relations.json"  # the relation vocabulary in a training run's workdir


def input_roles(kind: str) -> tuple[str, ...]:
    """The roles an encoder reads for a dataset kind (seq2seq: the source only)."""
    if kind not in ROLES:
        raise ConfigError(f"no featurizer for dataset kind {kind!r} (fix: one of "
                          f"{', '.join(ROLES)})")
    return ROLES[kind][:1] if kind in SEQ2SEQ_KINDS else ROLES[kind]


def example_structures(spec: arrays.StructureSpec, kind: str,
                       examples: Sequence[Example]) -> list[dict[str, np.ndarray]]:
    """`{"<role>/<field>": array}` of every example's input sentences, parsed all at once."""
    roles = input_roles(kind)
    for example in examples:
        if len(example.sentences) != len(roles):
            raise DataError(f"{len(example.sentences)} sentence(s), a {kind} example "
                            f"needs {len(roles)}", path=example.uid or None,
                            fix="check the dataset's kind in jaxenc.data.registry")
        if not all(sentence.tokens for sentence in example.sentences):
            raise DataError("empty sentence", path=example.uid or None,
                            fix="drop empty lines from the data")
    if not spec.fields:
        return [{} for _ in examples]
    sentences = [sentence for example in examples for sentence in example.sentences]
    sources = [example.uid for example in examples for _ in example.sentences]
    per_sentence = iter(spec(sentences, sources))
    return [{f"{role}/{key}": array for role in roles for key, array in next(per_sentence).items()}
            for _ in examples]


def relation_vocabulary(workdir: str | os.PathLike, model_cfg: ml_collections.ConfigDict,
                        structure_fields: Sequence[str], train: Sequence[Example], *,
                        cache_dir: str | os.PathLike | None = None) -> RelationVocabulary | None:
    """The relation vocabulary of a model whose fields include "relations" (else None): read from
    `workdir/RELATIONS_FILE` when a previous run saved it, else built from the dependency trees
    of the training sentences (parser, max_distance, keep_subtypes and relation_direction from
    `model_cfg`)."""
    if "relations" not in structure_fields:
        return None
    saved = Path(workdir) / RELATIONS_FILE
    direction = model_cfg.get("relation_direction", "split")
    if saved.is_file():
        vocab = RelationVocabulary.load(saved)
        if vocab.direction != direction:
            raise ConfigError(f"{saved} has {vocab.direction!r} relations but the config says "
                              f"model.relation_direction={direction!r} (fix: "
                              f"--config.model.relation_direction={vocab.direction}, or a new "
                              "--workdir)")
    else:
        vocab = arrays.build_relation_vocab(
            [sentence for example in train for sentence in example.sentences],
            model_cfg.get("parser", "gold"),
            max_distance=model_cfg.get("max_distance", DEFAULT_MAX_DISTANCE),
            keep_subtypes=model_cfg.get("keep_subtypes", False), direction=direction,
            cache_dir=cache_dir)
    capacity = model_cfg.get("num_relations")
    if capacity is not None and len(vocab) > capacity:
        raise ConfigError(f"the training trees have {len(vocab)} relations, more than "
                          f"model.num_relations={capacity} (fix: "
                          f"--config.model.num_relations={len(vocab)})")
    return vocab


def target_sentence(example: Example, kind: str) -> Sentence | None:
    """The sentence a seq2seq example decodes to: the translation, or the input (autoencoding)."""
    return example.target if kind == "translation" else example.sentences[0]


def tag_index(examples: Sequence[Example]) -> dict[str, int]:
    """Tag -> id over the training examples' gold tags, in sorted order."""
    tags = {tag for example in examples for sentence in example.sentences
            for tag in sentence.tags or ()}
    return {tag: index for index, tag in enumerate(sorted(tags))}


@dataclasses.dataclass(frozen=True)
class Featurizer:
    """Turns Examples of one dataset kind into feature dicts for one encoder.

    Attributes:
      kind: the dataset kind (jaxenc.data.registry.KINDS).
      vocab: the input vocabulary.
      model_cfg: the encoder's config (options of its structure fields: `parser`, `num_levels`,
        ... as the attributes of jaxenc.structures.arrays.StructureSpec).
      structure_fields: the encoder's structure fields (StructureNeeds.fields).
      relation_vocab: relation ids of the "relations" field (`relation_vocabulary`).
      parse_cache_dir: where parser outputs are cached (None: not cached).
      prefix: the encoder's prefix tokens (StructureNeeds.prefix_tokens: special ids put
        before every sentence).
      found: bool[V] words that have a pretrained vector, when OOV words are dropped ("drop"
        policy), else None.
      target_vocab: the output vocabulary of seq2seq kinds.
      tags: tag -> id for tagging.
      lowercase_fallback: look unknown words up lower-cased too.
      keep_empty: a sentence whose words are all dropped (`found`) stays, empty (an encoder
        gives it a zero vector), instead of raising: for encoding text that is not training data.
    """

    kind: str
    vocab: Vocabulary
    model_cfg: ml_collections.ConfigDict
    structure_fields: tuple[str, ...] = ()
    prefix: tuple[int, ...] = ()
    found: np.ndarray | None = None
    target_vocab: Vocabulary | None = None
    tags: Mapping[str, int] | None = None
    lowercase_fallback: bool = False
    keep_empty: bool = False
    relation_vocab: RelationVocabulary | None = None
    parse_cache_dir: str | os.PathLike | None = None
    structures: arrays.StructureSpec = dataclasses.field(init=False, repr=False)

    def __post_init__(self):
        input_roles(self.kind)  # checks the kind
        unknown = [field for field in self.structure_fields if field not in STRUCTURE_BUILDERS]
        if unknown:
            raise ConfigError(f"model {self.model_cfg.name!r} needs structure fields {unknown} "
                              f"that the featurizer cannot build (fix: add them to "
                              f"jaxenc.data.featurize.STRUCTURE_BUILDERS)")
        if "relations" in self.structure_fields and self.relation_vocab is None:
            raise ConfigError(f"model {self.model_cfg.name!r} needs the structure field "
                              "'relations', which STRUCTURE_BUILDERS computes only with a relation "
                              "vocabulary (fix: pass relation_vocab=relation_vocabulary(...))")
        if self.found is not None and self.structure_fields:
            raise ConfigError("data.oov='drop' removes words, which would misalign the "
                              f"structure fields {list(self.structure_fields)} (fix: use "
                              "data.oov='random' or 'hashed' with this model)")
        if self.kind in SEQ2SEQ_KINDS and self.target_vocab is None:
            raise ConfigError(f"a {self.kind} dataset needs a target vocabulary")
        if self.kind == "tagging" and self.tags is None:
            raise ConfigError("a tagging dataset needs a tag index")
        object.__setattr__(self, "structures", arrays.StructureSpec.from_config(
            self.model_cfg, self.structure_fields, relation_vocab=self.relation_vocab,
            cache_dir=self.parse_cache_dir))

    @property
    def input_roles(self) -> tuple[str, ...]:
        """The roles the encoder reads (seq2seq: the source only)."""
        return input_roles(self.kind)

    def __call__(self, example: Example) -> dict[str, np.ndarray]:
        return self.many([example])[0]

    def many(self, examples: Sequence[Example]) -> list[dict[str, np.ndarray]]:
        """The features of every example; their sentences are parsed together (one parser call,
        cached in `parse_cache_dir`)."""
        structures = example_structures(self.structures, self.kind, examples)
        return [self._features(example, arrays_of_example)
                for example, arrays_of_example in zip(examples, structures, strict=True)]

    def _features(self, example: Example,
                  structures: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        features = {}
        for role, sentence in zip(self.input_roles, example.sentences, strict=True):
            features.update(self._tokens(role, sentence, example.uid))
        features.update(structures)
        features.update(self._targets(example))
        return features

    def _tokens(self, role: str, sentence: Sentence, uid: str) -> dict[str, np.ndarray]:
        ids = self.vocab.encode(sentence.tokens, self.lowercase_fallback)
        if self.found is not None:
            ids = drop_oov(ids, self.found)
            if not len(ids) and not self.keep_empty:
                raise DataError("no word of the sentence has a vector (data.oov='drop')",
                                path=uid or None, fix="use data.oov='random' or filter the data")
        return {f"{role}/tokens": np.concatenate(
            [np.asarray(self.prefix, np.int32), ids]).astype(np.int32)}

    def _targets(self, example: Example) -> dict[str, np.ndarray]:
        where = example.uid or None
        if self.kind in ("single", "pair"):
            if example.label is None:
                raise DataError("example has no label", path=where,
                                fix="drop unlabelled examples (e.g. SNLI '-')")
            return {"label": np.int32(example.label)}
        if self.kind == "relatedness":
            if example.score is None:
                raise DataError("example has no score", path=where, fix="drop unscored pairs")
            return {"score": np.float32(example.score)}
        if self.kind == "tagging":
            sentence = example.sentences[0]
            if sentence.tags is None:
                raise DataError("sentence has no gold tags", path=where,
                                fix="use a treebank with POS tags (CoNLL-U XPOS, PTB)")
            ids = [self.tags.get(tag, IGNORED_TAG) for tag in sentence.tags]
            return {"tags": np.asarray([IGNORED_TAG] * len(self.prefix) + ids, np.int32)}
        target = target_sentence(example, self.kind)
        if target is None or not target.tokens:
            raise DataError("example has no target sentence", path=where,
                            fix="give every source line a non-empty target line")
        ids = self.target_vocab.encode(target.tokens, self.lowercase_fallback)
        return {"target/tokens": np.concatenate([[BOS], ids, [EOS]]).astype(np.int32)}

"""Example -> per-example feature dict (flat keys, natural length; docs/ARCHITECTURE.md "Batches").

For every sentence role of the dataset kind (`ROLES`) the featurizer writes `<role>/tokens`
(the encoder's `PREFIX_TOKENS` first, then the vocabulary ids) and each structure field the
encoder lists in `REQUIRED_FIELDS`, built by `STRUCTURE_BUILDERS` from the sentence's trees. The
example's target follows the kind: `label` int32[], `score` float32[], `tags` int32[n] (-1 under
prefix tokens and for tags unseen in training) or `target/tokens` = [BOS] w_1..w_m [EOS].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import ml_collections
import numpy as np

from jaxenc.data.embeddings import drop_oov
from jaxenc.data.records import Example, Sentence
from jaxenc.data.vocab import BOS, EOS, Vocabulary
from jaxenc.errors import ConfigError, DataError

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

StructureBuilder = Callable[[Sentence, ml_collections.ConfigDict, str], np.ndarray]


def _psan_segments(sentence: Sentence, model_cfg: ml_collections.ConfigDict,
                   source: str) -> np.ndarray:
    """int32[T, n] PSAN phrase ids from the sentence's constituency tree (structures.md)."""
    from jaxenc.structures import psan
    from jaxenc.structures.trees import tree_from_sentence

    options = {key: model_cfg[key] for key in ("num_levels", "min_split_len", "binarize")
               if key in model_cfg}
    return psan.segments(tree_from_sentence(sentence, source=source), **options)


# Structure field -> builder(sentence, model config, uid) -> array at natural length.
STRUCTURE_BUILDERS: dict[str, StructureBuilder] = {
    "segments": _psan_segments,
}


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
      model_cfg: the encoder's config (options of its structure fields).
      structure_fields: the encoder's REQUIRED_FIELDS.
      prefix: the encoder's PREFIX_TOKENS (special ids put before every sentence).
      found: bool[V] words that have a pretrained vector, when OOV words are dropped ("drop"
        policy), else None.
      target_vocab: the output vocabulary of seq2seq kinds.
      tags: tag -> id for tagging.
      lowercase_fallback: look unknown words up lower-cased too.
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

    def __post_init__(self):
        if self.kind not in ROLES:
            raise ConfigError(f"no featurizer for dataset kind {self.kind!r} (fix: one of "
                              f"{', '.join(ROLES)})")
        unknown = [field for field in self.structure_fields if field not in STRUCTURE_BUILDERS]
        if unknown:
            raise ConfigError(f"model {self.model_cfg.name!r} needs structure fields {unknown} "
                              f"that the featurizer cannot build (fix: add them to "
                              f"jaxenc.data.featurize.STRUCTURE_BUILDERS)")
        if self.found is not None and self.structure_fields:
            raise ConfigError("data.oov='drop' removes words, which would misalign the "
                              f"structure fields {list(self.structure_fields)} (fix: use "
                              "data.oov='random' or 'hashed' with this model)")
        if self.kind in SEQ2SEQ_KINDS and self.target_vocab is None:
            raise ConfigError(f"a {self.kind} dataset needs a target vocabulary")
        if self.kind == "tagging" and self.tags is None:
            raise ConfigError("a tagging dataset needs a tag index")

    @property
    def input_roles(self) -> tuple[str, ...]:
        """The roles the encoder reads (seq2seq: the source only)."""
        roles = ROLES[self.kind]
        return roles[:1] if self.kind in SEQ2SEQ_KINDS else roles

    def __call__(self, example: Example) -> dict[str, np.ndarray]:
        roles = self.input_roles
        if len(example.sentences) != len(roles):
            raise DataError(f"{len(example.sentences)} sentence(s), a {self.kind} example "
                            f"needs {len(roles)}", path=example.uid or None,
                            fix="check the dataset's kind in jaxenc.data.registry")
        features = {}
        for role, sentence in zip(roles, example.sentences, strict=True):
            features.update(self._sentence(role, sentence, example.uid))
        features.update(self._targets(example))
        return features

    def many(self, examples: Sequence[Example]) -> list[dict[str, np.ndarray]]:
        return [self(example) for example in examples]

    def _sentence(self, role: str, sentence: Sentence, uid: str) -> dict[str, np.ndarray]:
        if not sentence.tokens:
            raise DataError("empty sentence", path=uid or None,
                            fix="drop empty lines from the data")
        ids = self.vocab.encode(sentence.tokens, self.lowercase_fallback)
        if self.found is not None:
            ids = drop_oov(ids, self.found)
            if not len(ids):
                raise DataError("no word of the sentence has a vector (data.oov='drop')",
                                path=uid or None, fix="use data.oov='random' or filter the data")
        features = {f"{role}/tokens": np.concatenate(
            [np.asarray(self.prefix, np.int32), ids]).astype(np.int32)}
        for field in self.structure_fields:
            features[f"{role}/{field}"] = STRUCTURE_BUILDERS[field](sentence, self.model_cfg, uid)
        return features

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
        target = example.target if self.kind == "translation" else example.sentences[0]
        if target is None or not target.tokens:
            raise DataError("example has no target sentence", path=where,
                            fix="give every source line a non-empty target line")
        ids = self.target_vocab.encode(target.tokens, self.lowercase_fallback)
        return {"target/tokens": np.concatenate([[BOS], ids, [EOS]]).astype(np.int32)}

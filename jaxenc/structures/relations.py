"""Dependency-Transformer relation ids, tree levels and node heads (Ma et al. 2022, Fig. 2).

A `[root]` node is prepended: word i (0-based) is node i+1 and head 0 means the root node. For "node
i attends to node j":
- i == j: SELF;
- j is the head of i: (label(i), UP); i is the head of j: (label(j), DOWN) (direction "split");
  with direction "none" both are the one relation label(dependent);
- otherwise, with a = dist(i, lca(i, j)) and b = dist(j, lca(i, j)), the pair (a, b) when
  a + b <= max_distance (siblings (1, 1), grandparent (2, 0), grandchild (0, 2), ...);
- otherwise NONE (id 0: the model gives it a fixed zero vector). Padding (-1) is the batcher's.
Labels are the universal part before ':' unless `keep_subtypes`; labels not seen when the vocabulary
was built map to UNK_LABEL ((UNK_LABEL, UP/DOWN) with "split", so the direction survives).

The paper (Section 2.2, Fig. 2) names neither the UP / DOWN split (`direction="none"` is the
literal reading) nor SELF (a node is its own nearest common ancestor at (0, 0), so SELF is that
pair under its own name, in both directions); docs/models.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable

import numpy as np

from jaxenc.errors import ConfigError, DataError
from jaxenc.files import write_text_atomic
from jaxenc.structures.trees import DependencyTree

NONE_ID = 0
SELF_ID = 1
UNK_LABEL = "<unk>"
UP, DOWN = "UP", "DOWN"
FIRST_ARC_ID = 2  # split: (UNK_LABEL, UP); (label k, UP) is FIRST_ARC_ID + 2 k, its DOWN one more;
# none: label k is FIRST_ARC_ID + k (UNK_LABEL is label 0)
DEFAULT_MAX_DISTANCE = 2
DIRECTIONS = ("split", "none")  # arc relations with UP / DOWN, or one per label


def distance_pairs(max_distance: int) -> list[tuple[int, int]]:
    """The (a, b) relations: a + b in 2..max_distance (SELF is (0, 0), the arcs (1, 0) / (0, 1))."""
    return [(a, total - a) for total in range(2, max_distance + 1) for a in range(total, -1, -1)]


@dataclasses.dataclass(frozen=True)
class RelationVocabulary:
    """Relation ids: NONE=0, SELF=1, then the arc relations of UNK_LABEL and each label ("split":
    (label, UP), (label, DOWN), named "label/UP", "label/DOWN"; "none": one per label, named
    "label"), then the distance pairs (a, b) in `distance_pairs(max_distance)` order; `names[id]`
    spells them. R = 2 + (2 or 1) (|labels| + 1) + |distance pairs|.

    Attributes:
      labels: the known arc labels, sorted (normalised: universal part only unless keep_subtypes).
      max_distance: the largest a + b that gets a distance-pair relation.
      keep_subtypes: keep `nmod:poss` as is instead of `nmod`.
      direction: one of DIRECTIONS, "split" (UP / DOWN arcs) or "none" (module docstring).
    """

    labels: tuple[str, ...]
    max_distance: int = DEFAULT_MAX_DISTANCE
    keep_subtypes: bool = False
    direction: str = "split"
    names: tuple[str, ...] = dataclasses.field(init=False, repr=False, compare=False)
    _label_index: dict[str, int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.max_distance < 1:
            raise ConfigError(f"max_distance={self.max_distance} (fix: use max_distance >= 1)")
        if self.direction not in DIRECTIONS:
            raise ConfigError(f"relation direction {self.direction!r} is not one of "
                              f"{', '.join(DIRECTIONS)} (fix: --config.model.relation_direction="
                              "split)")
        arc_labels = (UNK_LABEL, *self.labels)
        ways = (UP, DOWN) if self.direction == "split" else ("",)
        names = ["NONE", "SELF"] + [f"{label}/{way}" if way else label
                                    for label in arc_labels for way in ways]
        names += [f"({a},{b})" for a, b in distance_pairs(self.max_distance)]
        object.__setattr__(self, "_label_index", {label: i for i, label in enumerate(arc_labels)})
        object.__setattr__(self, "names", tuple(names))

    @classmethod
    def build(cls, trees: Iterable[DependencyTree], *, max_distance: int = DEFAULT_MAX_DISTANCE,
              keep_subtypes: bool = False, direction: str = "split") -> RelationVocabulary:
        """The vocabulary of every label in `trees` (the training trees)."""
        labels = {normalize_label(label, keep_subtypes) for tree in trees for label in tree.labels}
        labels.discard(UNK_LABEL)
        return cls(tuple(sorted(labels)), max_distance, keep_subtypes, direction)

    @property
    def ids_per_label(self) -> int:
        """Arc relations per label: 2 ("split": UP and DOWN) or 1 ("none")."""
        return 2 if self.direction == "split" else 1

    def __len__(self) -> int:
        return len(self.names)

    def arc_ids(self, labels: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """int32 ids of (label, UP) and (label, DOWN) for each label (unseen -> UNK_LABEL); with
        direction "none" the two are the same id, the label's."""
        index = np.array([self._label_index.get(normalize_label(label, self.keep_subtypes), 0)
                          for label in labels], dtype=np.int32)
        up = FIRST_ARC_ID + self.ids_per_label * index
        return up, up + (self.ids_per_label - 1)

    def pair_id(self, a: int, b: int) -> int:
        """The id of the distance pair (a, b), a + b in 2..max_distance, not (1, 0) / (0, 1)."""
        pairs = distance_pairs(self.max_distance)
        return FIRST_ARC_ID + self.ids_per_label * (len(self.labels) + 1) + pairs.index((a, b))

    def save(self, path: str | os.PathLike) -> None:
        """Writes the vocabulary as JSON (saved with the model), atomically: the other
        processes of a multi-host run may read it meanwhile."""
        write_text_atomic(path, json.dumps({"labels": list(self.labels),
                                            "max_distance": self.max_distance,
                                            "keep_subtypes": self.keep_subtypes,
                                            "direction": self.direction}, indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike) -> RelationVocabulary:
        """Reads a vocabulary written by `save` (one saved before `direction` existed is
        "split", the only layout there was)."""
        try:
            with open(path, encoding="utf-8") as source:
                fields = json.load(source)
            return cls(tuple(fields["labels"]), int(fields["max_distance"]),
                       bool(fields["keep_subtypes"]), str(fields.get("direction", "split")))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DataError(f"not a relation vocabulary: {error}", path=path,
                            fix="write it with RelationVocabulary.save") from error


def normalize_label(label: str, keep_subtypes: bool = False) -> str:
    """`nmod:poss` -> `nmod` (UD universal part) unless keep_subtypes."""
    return label if keep_subtypes else label.split(":", 1)[0]


def _ancestors(dtree: DependencyTree, max_steps: int) -> np.ndarray:
    """int[max_steps+1, n+1]: row a = the a-th ancestor of every node ([root] = 0), -1 past it."""
    parent = np.array((-1, *dtree.heads), dtype=np.int64)
    rows = [np.arange(len(parent))]
    for _ in range(max_steps):
        previous = rows[-1]
        rows.append(np.where(previous >= 0, parent[np.maximum(previous, 0)], -1))
    return np.stack(rows)


def relations(dtree: DependencyTree, vocab: RelationVocabulary,
              max_distance: int | None = None) -> np.ndarray:
    """int32[n+1, n+1]: relation id of node i attending to node j (module docstring).

    `max_distance` defaults to the vocabulary's; a smaller one turns the longer pairs into NONE.
    """
    max_distance = vocab.max_distance if max_distance is None else max_distance
    if not 1 <= max_distance <= vocab.max_distance:
        raise ConfigError(f"max_distance={max_distance} but the relation vocabulary stops at "
                          f"{vocab.max_distance} (fix: rebuild it with that max_distance)")
    up = _ancestors(dtree.validate(), max_distance)
    up_ids, down_ids = vocab.arc_ids(("", *dtree.labels))  # node 0 ([root]) has no label
    result = np.full((up.shape[1], up.shape[1]), NONE_ID, dtype=np.int32)
    for total in range(max_distance + 1):
        for a in range(total + 1):
            b = total - a
            meet = (up[a][:, None] == up[b][None, :]) & (up[a][:, None] >= 0)
            if a and b:  # the meeting node is the lowest common ancestor only if the paths differ
                meet &= up[a - 1][:, None] != up[b - 1][None, :]
            if (a, b) == (0, 0):
                relation = SELF_ID
            elif (a, b) == (1, 0):
                relation = up_ids[:, None]
            elif (a, b) == (0, 1):
                relation = down_ids[None, :]
            else:
                relation = vocab.pair_id(a, b)
            result = np.where(meet, relation, result)
    return result


def levels(dtree: DependencyTree, max_level: int) -> np.ndarray:
    """int32[n+1]: depth of every node ([root] node 0, words under it 1, ...), clipped to
    `max_level` (the size of the level-embedding table minus one)."""
    parent = np.array((0, *dtree.validate().heads), dtype=np.int64)
    depth = np.zeros(len(parent), dtype=np.int32)
    node = np.arange(len(parent))
    while np.any(node > 0):
        depth += node > 0
        node = parent[node]
    return np.minimum(depth, max_level)


def node_heads(dtree: DependencyTree) -> np.ndarray:
    """int32[n+1]: the head node of every node in the [root]-prefixed layout (word i is node i,
    1-based; head 0 = the [root] node), -1 for the [root] node itself (Child-Sum Tree-LSTM)."""
    return np.array((-1, *dtree.validate().heads), dtype=np.int32)

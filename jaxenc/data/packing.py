"""PSAN's packing plan: the phrases of a batch packed into a few length classes (host side).

Phrase-level self-attention over phrases padded to the batch's longest phrase costs more than
DiSAN's dense [L, L] attention. Instead, for every level t the phrases of all
rows of a batch (`<role>/blocks` int32[B, T, L, 2]) go to length classes: class c pads its phrases
to length L_c (the `scheme`) and has N_{t,c} slots (the `capacity` policy), both fixed per bucket
length L, so a jitted step compiles once per bucket. The plan is one batch array per level t
(1-based) and class with N_{t,c} > 0:

    "<role>/pack_t{t}_len{L_c}": int32[G, N_{t,c}, L_c]

Slot (g, n) holds the tokens of one phrase of group g, in order, as positions
`row_in_group * L + position` into the group's flattened [B/G * L] tokens, then -1; an unused
slot is all -1. The B rows form G groups of B/G consecutive rows (G = the number of data shards)
and indices never leave their group, so the plan shards over the mesh axis "data" with its rows.
Every phrase of every real row is in exactly one slot; padding tokens and filler rows are in none.
`jaxenc.layers.packed_attention` gathers the slots on device and scatters results back.

Schemes (class lengths, capped at and ending with L): "exact" 1, 2, ..., L (no padding inside a
class); "multiple_of_K" K, 2K, ...; "pow2" 1, 2, 4, ....

Overflow: a phrase goes to the shortest class with a free slot among those at least as long as it
(classes are filled shortest first), so a full class spills into the next longer one and no phrase
is dropped when, for every class c, the slots of classes >= c are at least the phrases that need
one of them. Capacities N_{t,c} = M_{t,c} - M_{t,c+1} are the cheapest that satisfy this for every
group whose count of phrases of class >= c is at most M_{t,c}. Policies choose M per bucket:
- "bound": the sum of the B/G largest per-example counts among the bucket's examples, so every
  batch the bucket can form fits;
- "planned": the largest group count over the batches of the batcher's epochs [0, `epochs`)
  (deterministic given its seed); a later batch that does not fit gets the "bound" capacities
  (never a dropped phrase, at most one more compile per bucket, logged);
- "worst": what any batch of the bucket length can need, whatever its sentences: the phrases of a
  level partition a row's n <= L tokens, so a row has at most L // (L_{c-1} + 1) phrases of class
  >= c. The shapes depend on (L, B, G, T) only, as an exported encoder needs (one serialised
  function per bucket); attention elements are about 2 B L^2 per level, DiSAN's dense count.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from jaxenc.errors import ConfigError

SCHEMES = ("exact", "multiple_of_K", "pow2")
CAPACITY_POLICIES = ("planned", "bound", "worst")
_MULTIPLE_OF = re.compile(r"multiple_of_([1-9]\d*)")

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class PackingConfig:
    """How a batch's phrases are packed (module docstring); PSAN's `model.packing`.

    Attributes:
      scheme: length classes, "exact", "multiple_of_K" (K >= 1) or "pow2".
      capacity: capacity policy, "planned", "bound" or "worst".
      groups: G, groups of consecutive rows the plan never mixes (the number of data shards).
      epochs: the epochs [0, epochs) whose batches the "planned" policy fits (the run's epochs).
    """

    scheme: str = "exact"
    capacity: str = "planned"
    groups: int = 1
    epochs: int = 1

    def __post_init__(self):
        if self.scheme not in ("exact", "pow2") and not _MULTIPLE_OF.fullmatch(self.scheme):
            raise ConfigError(f"packing scheme {self.scheme!r} is unknown (fix: one of "
                              f"{', '.join(SCHEMES)}, with an integer K >= 1)")
        if self.capacity not in CAPACITY_POLICIES:
            raise ConfigError(f"packing capacity {self.capacity!r} is unknown (fix: one of "
                              f"{', '.join(CAPACITY_POLICIES)})")
        if self.groups < 1 or self.epochs < 1:
            raise ConfigError(f"packing groups={self.groups}, epochs={self.epochs} (fix: use "
                              "groups >= 1 (the data shards) and epochs >= 1)")

    def class_lengths(self, length: int) -> np.ndarray:
        """int64[C]: the increasing class lengths L_c of bucket length `length` (last = length)."""
        sizes = np.arange(1, length + 1)
        if self.scheme == "pow2":
            sizes = 1 << np.ceil(np.log2(sizes)).astype(np.int64)
        elif self.scheme != "exact":
            step = int(_MULTIPLE_OF.fullmatch(self.scheme).group(1))
            sizes = -(-sizes // step) * step
        return np.unique(np.minimum(sizes, length))


def pack_key(level: int, length: int) -> str:
    """The batch field of the plan of `level` (1-based) and class length `length`."""
    return f"{level_prefix(level)}{length}"


def level_prefix(level: int) -> str:
    """What the plan fields of `level` (1-based), and only they, start with."""
    return f"pack_t{level}_len"


@dataclasses.dataclass(frozen=True)
class ClassLayout:
    """The length classes of one role in one bucket.

    Attributes:
      lengths: int64[C] class lengths L_c, increasing.
      capacities: int64[T, C] slots N_{t,c} per group of the batches that fit them (the policy's).
      fallback: int64[T, C] slots every batch of the bucket fits (the "bound" policy's).
    """

    lengths: np.ndarray
    capacities: np.ndarray
    fallback: np.ndarray

    def attention_elements(self, capacities: np.ndarray | None = None) -> np.ndarray:
        """int64[T]: sum_c N_{t,c} L_c^2 per group and level (default: the policy capacities)."""
        capacities = self.capacities if capacities is None else capacities
        return capacities @ self.lengths ** 2

    def plan_shapes(self, groups: int,
                    capacities: np.ndarray | None = None) -> dict[str, tuple[int, int, int]]:
        """Plan field (`pack_key`) -> shape (G, N_{t,c}, L_c) of a batch that gets `capacities`
        (default: the policy capacities)."""
        capacities = self.capacities if capacities is None else capacities
        return {pack_key(t + 1, length): (groups, count, length)
                for t, counts in enumerate(capacities.tolist())
                for length, count in zip(self.lengths.tolist(), counts, strict=True) if count}


class PhrasePacker:
    """Computes the packing plan of every role with a `blocks` field of a batch (module doc).

    Args:
      config: classes, capacity policy, groups and planned epochs.
      blocks: role -> every example's `<role>/blocks` int32[T, P, 2] at natural length.
      batch_size: B, a multiple of config.groups.
      buckets: bucket length -> indices (into `blocks`) of the examples batched at that length.
      batches: (bucket length, example indices) of every batch of the planned epochs; read only
        by the "planned" policy.
    """

    def __init__(self, config: PackingConfig, blocks: Mapping[str, Sequence[np.ndarray]], *,
                 batch_size: int, buckets: Mapping[int, np.ndarray],
                 batches: Iterable[tuple[int, np.ndarray]]):
        if batch_size % config.groups:
            raise ConfigError(f"batch size {batch_size} does not split into {config.groups} "
                              "packing groups (fix: use groups that divide the batch size)")
        self.config = config
        group_size = batch_size // config.groups
        counts = {(role, length): _suffix_counts([role_blocks[i] for i in members],
                                                 config.class_lengths(length))
                  for role, role_blocks in blocks.items() for length, members in buckets.items()
                  if len(members)}
        fallback = {key: _capacities(np.sort(count, axis=0)[-group_size:].sum(axis=0))
                    for key, count in counts.items()}
        if config.capacity == "worst":  # the data only names the buckets and the level count
            fallback = {(role, length): worst_capacities(config.class_lengths(length), length,
                                                         group_size, count.shape[1])
                        for (role, length), count in counts.items()}
        planned = fallback
        if config.capacity == "planned":
            position = np.zeros(len(next(iter(blocks.values()))), np.int64)
            for members in buckets.values():
                position[members] = np.arange(len(members))
            planned = {key: _capacities(maxima) for key, maxima in _planned_maxima(
                counts, position, batches, batch_size, config.groups).items()}
        self.layouts = {(role, length): ClassLayout(config.class_lengths(length),
                                                    planned[role, length], fallback[role, length])
                        for role, length in counts}
        self._warned: set[tuple[str, int]] = set()

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(role for role, _ in self.layouts))

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The plan fields `"<role>/pack_t{t}_len{L_c}"` int32[G, N_{t,c}, L_c] of `batch`."""
        plan = {}
        for role in self.roles:
            blocks = batch[f"{role}/blocks"]
            layout = self.layouts[role, blocks.shape[2]]
            arrays = pack(blocks, layout.lengths, layout.capacities, self.config.groups)
            if arrays is None:
                if (role, blocks.shape[2]) not in self._warned:
                    self._warned.add((role, blocks.shape[2]))
                    log.warning("a batch of bucket %d does not fit the planned %s capacities; "
                                "it gets the bound ones (one more compile; plan more epochs)",
                                blocks.shape[2], role)
                arrays = pack(blocks, layout.lengths, layout.fallback, self.config.groups)
            plan.update({f"{role}/{key}": array for key, array in arrays.items()})
        return plan


def pack(blocks: np.ndarray, lengths: np.ndarray, capacities: np.ndarray,
         groups: int) -> dict[str, np.ndarray] | None:
    """The plan fields `pack_t{t}_len{L_c}` int32[G, N_{t,c}, L_c] of one role (module doc).

    Args:
      blocks: int32[B, T, L, 2] (start, length) of each phrase per row and level, -1 padded.
      lengths: int[C] increasing class lengths, the last >= every phrase length.
      capacities: int[T, C] slots N_{t,c} per group; classes with none get no field.
      groups: G, dividing B.
    Returns None when a group has more phrases than its classes hold (after overflow).
    """
    num_rows, num_levels, length, _ = blocks.shape
    group_size, num_classes = num_rows // groups, len(lengths)
    real = blocks[..., 1] > 0
    rows, levels, _ = np.nonzero(real)  # every phrase, ordered by row, level, position
    starts, sizes = blocks[..., 0][real].astype(np.int64), blocks[..., 1][real].astype(np.int64)
    segment = levels * groups + rows // group_size  # (level, group)
    key = segment * num_classes + np.searchsorted(lengths, sizes)  # natural class: shortest fit
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=num_levels * groups * num_classes)
    counts = counts.reshape(num_levels * groups, num_classes)
    # taken[s, c]: phrases of segment s in classes <= c when classes fill shortest first
    # (taken_c = min(taken_{c-1} + N_c, phrases of class <= c), in closed form).
    slots = np.repeat(np.cumsum(capacities, axis=1), groups, axis=0)
    needed = np.cumsum(counts, axis=1)
    taken = slots + np.minimum(0, np.minimum.accumulate(needed - slots, axis=1))
    if np.any(taken[:, -1] < needed[:, -1]):
        return None
    # The phrases sorted by (segment, natural class) fill the segment's classes in order.
    segment = segment[order]
    rank = np.arange(len(order)) - (np.cumsum(needed[:, -1]) - needed[:, -1])[segment]
    stride = num_rows * length + 1  # > any rank: makes the rows of `taken` one sorted sequence
    flat = (taken + stride * np.arange(len(taken))[:, None]).ravel()
    chosen = np.searchsorted(flat, rank + stride * segment, side="right") - segment * num_classes
    slot = rank - np.where(chosen > 0, taken[segment, chosen - 1], 0)
    level, group = segment // groups, segment % groups
    sizes_of_fields = (capacities * lengths * groups).ravel()
    offsets = (np.cumsum(sizes_of_fields) - sizes_of_fields).reshape(capacities.shape)
    first = offsets[level, chosen] + (group * capacities[level, chosen] + slot) * lengths[chosen]
    source = (rows[order] % group_size) * length + starts[order]
    sizes = sizes[order]
    within = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    buffer = np.full(sizes_of_fields.sum(), -1, np.int32)
    buffer[np.repeat(first, sizes) + within] = np.repeat(source, sizes) + within
    return {pack_key(t + 1, int(lengths[c])):
            buffer[offsets[t, c]:offsets[t, c] + sizes_of_fields[t * num_classes + c]].reshape(
                groups, capacities[t, c], lengths[c])
            for t in range(num_levels) for c in range(num_classes) if capacities[t, c]}


def _suffix_counts(blocks: Sequence[np.ndarray], lengths: np.ndarray) -> np.ndarray:
    """int64[N, T, C]: per example and level, its phrases of class >= c (classes `lengths`)."""
    num_levels, num_classes = blocks[0].shape[0], len(lengths)
    sizes = np.zeros((len(blocks), num_levels, max(b.shape[1] for b in blocks)), np.int64)
    for index, example in enumerate(blocks):
        sizes[index, :, :example.shape[1]] = example[..., 1]
    examples, levels, _ = np.nonzero(sizes > 0)
    key = (examples * num_levels + levels) * num_classes
    counts = np.bincount(key + np.searchsorted(lengths, sizes[sizes > 0]),
                         minlength=len(blocks) * num_levels * num_classes)
    counts = counts.reshape(len(blocks), num_levels, num_classes)
    return np.cumsum(counts[..., ::-1], axis=-1)[..., ::-1]


def _planned_maxima(counts: Mapping[tuple[str, int], np.ndarray], position: np.ndarray,
                    batches: Iterable[tuple[int, np.ndarray]], batch_size: int,
                    groups: int) -> dict[tuple[str, int], np.ndarray]:
    """(role, bucket) -> int64[T, C]: the largest per-group sum of `counts` over `batches`.

    counts: per (role, bucket), int64[N_bucket, T, C] of the bucket's examples; position: int[N]
    each example's row in its bucket's counts.
    """
    filled = {key: np.concatenate([count, np.zeros_like(count[:1])])  # last row: filler rows
              for key, count in counts.items()}
    maxima = {key: np.zeros(count.shape[1:], np.int64) for key, count in counts.items()}
    roles = tuple(dict.fromkeys(role for role, _ in counts))
    for length, rows in batches:
        index = np.full(batch_size, -1)
        index[:len(rows)] = position[rows]
        for role in roles:
            count = filled[role, length][index]
            sums = count.reshape(groups, -1, *count.shape[1:]).sum(axis=1).max(axis=0)
            np.maximum(maxima[role, length], sums, out=maxima[role, length])
    return maxima


def worst_capacities(lengths: np.ndarray, length: int, group_size: int,
                     num_levels: int) -> np.ndarray:
    """int64[T, C]: the "worst" policy's slots of bucket `length` (module doc): every group of
    `group_size` rows of at most `length` tokens fits them, whatever its phrases."""
    shortest = np.concatenate([[0], lengths[:-1]]) + 1  # the shortest phrase of each class
    maxima = group_size * (length // shortest)  # phrases of class >= c in a full group
    return np.broadcast_to(_capacities(maxima), (num_levels, len(lengths))).copy()


def _capacities(maxima: np.ndarray) -> np.ndarray:
    """int64[T, C] N_c = M_c - M_{c+1}: the fewest slots with overflow for suffix counts M."""
    return maxima - np.concatenate([maxima[..., 1:], np.zeros_like(maxima[..., :1])], axis=-1)

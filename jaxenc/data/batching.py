"""Length-bucketed, padded, fixed-size batches of per-example features (a grain pipeline).

Per-example features are flat dicts of numpy arrays at natural length; keys are
`"<role>/<field>"` for a sentence's fields (`sentence/tokens`, `first/relations`, ...) and
`"<field>"` for the example's own (`label`, `score`). Every field pads by the rule `PAD_RULES`
declares for its name; a field without a rule is an error. A batch adds `"<role>/lengths"`
int32[B] (the real token count of each row), `"weight"` float32[B] (0 for filler rows) and
`"index"` int32[B] (the example's position in `features`, -1 for filler rows). With a
`PackingConfig`, every role with PSAN's `blocks` also gets its phrase packing plan,
`"<role>/pack_t{t}_len{L_c}"` int32[G, N, L_c] (jaxenc.data.packing; computed from the padded
batch, -1 = empty slot, filler rows and padding tokens in no slot).

Each epoch follows a plan that depends only on (seed, epoch): examples are grouped by the
smallest bucket length holding their longest role, shuffled within the bucket, cut into batches
of `batch_size` (the last one of a bucket filled with weight-0 rows of padding) and the batch
order is shuffled. `epoch(e, start_batch=k)` yields exactly the batches k, k+1, ... of
`epoch(e)`, which is what a training run resumes from.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence

import grain
import numpy as np

from jaxenc.data.packing import PackingConfig, PhrasePacker
from jaxenc.errors import ConfigError, DataError

BUCKET_AXIS = "L"  # axis kind: pad to the batch's bucket length

AxisKind = str | int | None
PadRule = tuple[int | float, tuple[AxisKind, ...]]

# field name -> (pad value, one axis kind per axis of the per-example array). The pad value's
# type sets the batch dtype (int -> int32, float -> float32). Axis kinds: BUCKET_AXIS pads to the
# bucket length, an int pads to that size, None is not padded (same size in every example).
PAD_RULES: dict[str, PadRule] = {
    "tokens": (0, (BUCKET_AXIS,)),                 # int32[L], PAD = 0
    "tags": (-1, (BUCKET_AXIS,)),                  # int32[L] gold tag per token, -1 = ignored
    "segments": (-1, (None, BUCKET_AXIS)),         # int32[T, L] PSAN phrase id per level
    "blocks": (-1, (None, BUCKET_AXIS, None)),     # int32[T, P, 2] PSAN (start, length) per level
    "relations": (-1, (BUCKET_AXIS, BUCKET_AXIS)),  # int32[L, L] Dependency-Transformer ids
    "levels": (0, (BUCKET_AXIS,)),                 # int32[L] tree depth per node
    "heads": (-1, (BUCKET_AXIS,)),                 # int32[L] head node per node, -1 = none
    "members": (-1, (BUCKET_AXIS, None)),          # int32[M, K] hypernode token indices
    "label": (0, ()),
    "fine_label": (0, ()),
    "score": (0.0, ()),
    "weight": (0.0, ()),
    "index": (-1, ()),
}

log = logging.getLogger(__name__)


def bucket_lengths(max_length: int, step: int = 8) -> tuple[int, ...]:
    """(step, 2 step, ..., the first multiple of step >= max_length)."""
    if max_length < 1 or step < 1:
        raise ConfigError(f"bucket_lengths needs max_length >= 1 and step >= 1, got "
                          f"{max_length}, {step}")
    return tuple(range(step, -(-max_length // step) * step + 1, step))


def pad_rule(key: str) -> PadRule:
    """The PAD_RULES entry for a feature key (`"first/segments"` -> the rule of `segments`)."""
    name = key.rsplit("/", 1)[-1]
    rule = PAD_RULES.get(name)
    if rule is None:
        raise DataError(f"feature {key!r} has no padding rule",
                        fix="add '(pad value, axis kinds)' for it to "
                        "jaxenc.data.batching.PAD_RULES or rename it")
    return rule


def sentence_fields(batch: Mapping[str, np.ndarray], role: str) -> dict[str, np.ndarray]:
    """The fields of one role (`"sentence"`, `"first"`, ...) with the `"<role>/"` prefix removed."""
    prefix = role + "/"
    fields = {key[len(prefix):]: value for key, value in batch.items() if key.startswith(prefix)}
    if not fields:
        roles = sorted({key.rsplit("/", 1)[0] for key in batch if "/" in key})
        raise ConfigError(f"the batch has no role {role!r}; its roles are {roles}")
    return fields


def bucket_of(lengths: np.ndarray, buckets: Sequence[int]) -> np.ndarray:
    """int[...] index of the smallest bucket >= each length (len(buckets) when none is)."""
    return np.searchsorted(np.asarray(buckets), lengths, side="left")


def padding_waste(lengths: np.ndarray, buckets: Sequence[int]) -> float:
    """(padded slots - real tokens) / real tokens when each example is padded to its bucket.

    lengths: int[N], or int[N, R] for R roles padded together to the bucket of their longest.
    Every length must fit the largest bucket.
    """
    lengths = np.asarray(lengths).reshape(len(lengths), -1)
    padded = np.asarray(buckets)[bucket_of(lengths.max(axis=1), buckets)]
    real = lengths.sum()
    return float((padded.sum() * lengths.shape[1] - real) / max(real, 1))


@dataclasses.dataclass(frozen=True)
class BatchingReport:
    """What the batcher kept, dropped and padded; `print(report)` shows a table.

    Attributes:
      batch_size, buckets, max_length: the batcher's settings.
      num_examples: examples given; num_too_long: dropped for exceeding max_length.
      bucket_examples: kept examples per bucket; bucket_batches: batches per bucket per epoch.
      waste: (padded token slots - real tokens) / real tokens of the real rows, all roles.
      waste_with_filler: the same counting the filler rows' slots as padding too.
    """

    batch_size: int
    buckets: tuple[int, ...]
    max_length: int
    num_examples: int
    num_too_long: int
    bucket_examples: tuple[int, ...]
    bucket_batches: tuple[int, ...]
    waste: float
    waste_with_filler: float

    @property
    def num_batches(self) -> int:
        return sum(self.bucket_batches)

    @property
    def filler_rows(self) -> int:
        return self.num_batches * self.batch_size - sum(self.bucket_examples)

    def __str__(self) -> str:
        rows = [f"{'bucket':>8} {'examples':>9} {'batches':>8}"]
        rows += [f"{length:>8} {count:>9} {batches:>8}" for length, count, batches
                 in zip(self.buckets, self.bucket_examples, self.bucket_batches, strict=True)]
        rows += [
            f"{self.num_examples} examples, {self.num_too_long} longer than {self.max_length} "
            f"dropped; {self.num_batches} batches of {self.batch_size} per epoch with "
            f"{self.filler_rows} filler rows",
            f"padding waste (padded / real tokens): {self.waste:.3f}, "
            f"{self.waste_with_filler:.3f} counting filler rows",
        ]
        return "\n".join(rows)


class Batcher:
    """Deterministic, resumable batches of fixed size, padded to bucket lengths.

    Args:
      features: per-example feature dicts, all with the same keys (module doc).
      batch_size: rows per batch (filler rows complete the last batch of each bucket).
      buckets: increasing bucket lengths, e.g. `bucket_lengths(64)`.
      shuffle: shuffle within buckets and the batch order, per (seed, epoch); without it the
        batches come bucket by bucket in the examples' order (evaluation).
      seed: the shuffling seed.
      max_length: examples whose longest role is longer are dropped (default: largest bucket).
      num_threads: grain threads assembling batches ahead of the consumer (0: on demand, in
        the calling thread; assembly costs a few microseconds per example).
      packing: add the phrase packing plan of every role with a `blocks` field (`self.packer`
        holds its class layouts); None: no plan.
    """

    def __init__(self, features: Sequence[Mapping[str, np.ndarray]], *, batch_size: int,
                 buckets: Sequence[int], shuffle: bool, seed: int = 0,
                 max_length: int | None = None, num_threads: int = 0,
                 packing: PackingConfig | None = None):
        buckets = tuple(int(b) for b in buckets)
        if not buckets or any(b < 1 for b in buckets) or list(buckets) != sorted(set(buckets)):
            raise ConfigError(f"buckets must be increasing positive lengths, got {buckets}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        max_length = buckets[-1] if max_length is None else max_length
        if max_length > buckets[-1]:
            raise ConfigError(f"max_length {max_length} exceeds the largest bucket {buckets[-1]}; "
                              "add a bucket or lower max_length")
        if not features:
            raise DataError("no examples to batch", fix="check the dataset split and filters")
        self.batch_size, self.buckets, self.max_length = batch_size, buckets, max_length
        self.shuffle, self.seed, self.num_threads = shuffle, seed, num_threads
        self._features = features
        self._keys = _common_keys(features)
        self._rules = {key: pad_rule(key) for key in self._keys}
        shapes = {key: _shapes(features, key, self._rules[key]) for key in self._keys}
        self._roles = _roles(self._keys)
        self._role_lengths = {role: shapes[f"{role}/tokens"][:, 0] for role in self._roles}
        longest = np.max(np.stack(list(self._role_lengths.values()), axis=1), axis=1)
        too_long = longest > max_length
        self._num_too_long = int(too_long.sum())
        if self._num_too_long:
            log.warning("dropping %d of %d examples longer than %d tokens (largest bucket %d)",
                        self._num_too_long, len(features), max_length, buckets[-1])
        bucket = np.where(too_long, len(buckets), bucket_of(longest, buckets))
        bucket_length = np.asarray(buckets + (0,))[bucket]
        self._padded_shapes = {key: _padded_shape(key, self._rules[key], shapes[key],
                                                  bucket_length) for key in self._keys}
        self._bucket_members = [np.flatnonzero(bucket == b) for b in range(len(buckets))]
        self._bucket_batches = tuple(-(-len(m) // batch_size) for m in self._bucket_members)
        self.packer = None if packing is None else self._packer(packing)

    @property
    def num_batches(self) -> int:
        """Batches per epoch (the same every epoch)."""
        return sum(self._bucket_batches)

    def epoch(self, epoch: int, start_batch: int = 0) -> Iterator[dict[str, np.ndarray]]:
        """Batches `start_batch`, ... of epoch `epoch`: dicts of numpy arrays (module doc)."""
        if not 0 <= start_batch <= self.num_batches:
            raise ConfigError(f"start_batch {start_batch} is outside [0, {self.num_batches}]")
        plan = self._plan(epoch)[start_batch:]
        dataset = grain.MapDataset.source(plan).map(self._assemble)
        options = grain.ReadOptions(num_threads=self.num_threads,
                                    prefetch_buffer_size=2 * self.num_threads)
        return iter(dataset.to_iter_dataset(options))

    def report(self) -> BatchingReport:
        """Kept / dropped examples per bucket and the padding waste (see BatchingReport)."""
        kept = np.concatenate(self._bucket_members)
        lengths = np.stack([self._role_lengths[r][kept] for r in self._roles], axis=1)
        real = max(int(lengths.sum()), 1)
        slots = sum(n * self.batch_size * length * len(self._roles)
                    for n, length in zip(self._bucket_batches, self.buckets, strict=True))
        return BatchingReport(
            batch_size=self.batch_size, buckets=self.buckets, max_length=self.max_length,
            num_examples=len(self._features), num_too_long=self._num_too_long,
            bucket_examples=tuple(len(m) for m in self._bucket_members),
            bucket_batches=self._bucket_batches, waste=padding_waste(lengths, self.buckets),
            waste_with_filler=(slots - real) / real)

    def _plan(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        """[(bucket length, example indices)] of every batch of `epoch`, in order."""
        rng = np.random.default_rng([self.seed, epoch])
        batches = []
        for length, members in zip(self.buckets, self._bucket_members, strict=True):
            order = rng.permutation(members) if self.shuffle else members
            batches += [(length, order[i:i + self.batch_size])
                        for i in range(0, len(order), self.batch_size)]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def _packer(self, config: PackingConfig) -> PhrasePacker:
        """The packer of the roles with a `blocks` field, planned over this batcher's epochs."""
        roles = [role for role in self._roles if f"{role}/blocks" in self._keys]
        if not roles:
            raise ConfigError("phrase packing needs the structure field 'blocks' (fix: add it to "
                              "the encoder's structure_spec or drop the packing config)")
        return PhrasePacker(
            config, {role: [np.asarray(f[f"{role}/blocks"]) for f in self._features]
                     for role in roles},
            batch_size=self.batch_size, buckets=dict(zip(self.buckets, self._bucket_members,
                                                          strict=True)),
            batches=(batch for epoch in range(config.epochs) for batch in self._plan(epoch)))

    def _assemble(self, batch_plan: tuple[int, np.ndarray]) -> dict[str, np.ndarray]:
        """One padded batch: every field [batch_size, ...], lengths and weight added."""
        length, rows = batch_plan
        batch = {}
        for key in self._keys:
            pad = self._rules[key][0]
            shape = tuple(length if size == BUCKET_AXIS else size
                          for size in self._padded_shapes[key])
            out = np.full((self.batch_size, *shape), pad, dtype=_dtype(pad))
            for row, index in enumerate(rows):
                value = np.asarray(self._features[index][key])
                out[(row, *(slice(0, n) for n in value.shape))] = value
            batch[key] = out
        for role, lengths in self._role_lengths.items():
            batch[f"{role}/lengths"] = _filled(lengths[rows], self.batch_size, np.int32)
        if "weight" not in batch:
            batch["weight"] = _filled(np.ones(len(rows)), self.batch_size, np.float32)
        batch["index"] = np.full(self.batch_size, -1, np.int32)
        batch["index"][:len(rows)] = rows
        if self.packer is not None:
            batch.update(self.packer(batch))
        return batch


def _dtype(pad: int | float) -> type:
    return np.float32 if isinstance(pad, float) else np.int32


def _filled(values: np.ndarray, size: int, dtype: type) -> np.ndarray:
    """values followed by zeros up to `size` rows."""
    out = np.zeros(size, dtype=dtype)
    out[:len(values)] = values
    return out


def _common_keys(features: Sequence[Mapping[str, np.ndarray]]) -> tuple[str, ...]:
    """The feature keys, checked to be the same in every example and not to hold `lengths`."""
    keys = tuple(features[0])
    for index, example in enumerate(features):
        if example.keys() != set(keys):
            raise DataError(f"example {index} has fields {sorted(example)}, example 0 has "
                            f"{sorted(keys)}", fix="featurize every example the same way")
    if any(key.rsplit("/", 1)[-1] == "lengths" for key in keys):
        raise DataError(f"the features {sorted(keys)} carry 'lengths', which the batcher adds",
                        fix="remove the 'lengths' fields from the features")
    return keys


def _roles(keys: Sequence[str]) -> tuple[str, ...]:
    """The sentence roles of the feature keys, each checked to have a `tokens` field."""
    roles = tuple(dict.fromkeys(key.rsplit("/", 1)[0] for key in keys if "/" in key))
    for role in roles:
        if f"{role}/tokens" not in keys:
            raise DataError(f"role {role!r} has no '{role}/tokens' field",
                            fix="every sentence role needs its token ids")
    if not roles:
        raise DataError(f"no sentence fields among {sorted(keys)}",
                        fix="features need at least '<role>/tokens', e.g. 'sentence/tokens'")
    return roles


def _shapes(features: Sequence[Mapping[str, np.ndarray]], key: str,
            rule: PadRule) -> np.ndarray:
    """int[N, rank] shapes of one field, checked for the rule's rank and a castable dtype."""
    pad, axes = rule
    target = np.dtype(_dtype(pad))
    shapes = np.zeros((len(features), len(axes)), dtype=np.int64)
    for index, example in enumerate(features):
        value = np.asarray(example[key])
        if value.ndim != len(axes) or not np.can_cast(value.dtype, target, "same_kind"):
            raise DataError(f"example {index}: {key!r} is {value.dtype}{list(value.shape)}, its "
                            f"rule wants rank {len(axes)} and {target}",
                            fix="fix the featurizer or the field's PAD_RULES entry")
        shapes[index] = value.shape
    return shapes


def _padded_shape(key: str, rule: PadRule, shapes: np.ndarray,
                  lengths: np.ndarray) -> tuple[int | str, ...]:
    """The field's padded shape (BUCKET_AXIS on bucket axes), checked to fit every example.

    shapes: int[N, rank] of the field; lengths: int[N] bucket length of each example, 0 for the
    dropped ones (not checked).
    """
    kept = lengths > 0
    padded: list[int | str] = []
    for axis, kind in enumerate(rule[1]):
        size = shapes[:, axis]
        if kind is None:
            target = int(size[np.argmax(kept)])
            bad, problem = kept & (size != target), f"differs from the others' {target}"
        else:
            target = kind
            bad = kept & (size > (lengths if kind == BUCKET_AXIS else kind))
            problem = "exceeds the bucket length" if kind == BUCKET_AXIS else f"exceeds {kind}"
        if bad.any():
            index = int(np.argmax(bad))
            raise DataError(f"example {index}: axis {axis} of {key!r} has size {size[index]}, "
                            f"which {problem}",
                            fix="fix the featurizer or the field's PAD_RULES entry")
        padded.append(target)
    return tuple(padded)

"""Attention masks and masked reductions, built on device from small integer arrays.

One protocol serves both attention families (multi-dimensional token2token attention and
multi-head attention): a mask is an object with

    rows(query_index int[q], num_keys) -> bool[..., q, num_keys]

True where query j may attend key i, for one sentence (no leading axes) or a batch (leading
[B]); `matrix(num_queries, num_keys)` is every row at once. Masks are pytrees (flax.struct
dataclasses), so they pass through jit, vmap and lax.map like arrays. Implementations:

- `DenseMask`: an explicit bool[..., Lq, Lk] matrix.
- `PaddingMask`: real queries may attend real keys (from lengths).
- `DirectionalMask`: DiSAN's forward / backward / diag masks, the decoder's causal mask.
- `SegmentMask`: same-phrase attention from segment ids (PSAN, eq. 1; diagonal optional).
- `HypernodeMask`: PhraseTransformer's adjacency (eq. 6) from hypernode spans or members.

A query whose row has no True entry (padding, empty sentences, the first token of a forward
mask) gets zeros from `masked_softmax`, never NaN.
"""

from __future__ import annotations

from typing import Protocol

import flax.struct
import jax
import jax.numpy as jnp

from jaxenc.errors import ConfigError

DIRECTIONS = ("forward", "backward", "diag", "causal", "none")


def length_mask(lengths: jax.Array, max_len: int) -> jax.Array:
    """bool[..., max_len]: True at positions < length. lengths: int[...]."""
    return jnp.arange(max_len) < jnp.asarray(lengths)[..., None]


class Mask(Protocol):
    """What an attention function needs of a mask (module docstring)."""

    def rows(self, query_index: jax.Array, num_keys: int) -> jax.Array: ...

    def matrix(self, num_queries: int, num_keys: int | None = None) -> jax.Array: ...


class _RowsMask:
    """`matrix` from `rows`."""

    def matrix(self, num_queries: int, num_keys: int | None = None) -> jax.Array:
        """bool[..., num_queries, num_keys]: every row of the mask (num_keys: num_queries)."""
        return self.rows(jnp.arange(num_queries), num_queries if num_keys is None else num_keys)


@flax.struct.dataclass
class DenseMask(_RowsMask):
    """An explicit mask: `values` bool[..., Lq, Lk] (True: query may attend key)."""

    values: jax.Array

    def rows(self, query_index: jax.Array, num_keys: int) -> jax.Array:
        """Rows `query_index` int[q] (clipped into range) -> bool[..., q, Lk]."""
        del num_keys  # the matrix has its own
        return jnp.take(self.values, query_index, axis=-2, mode="clip")


@flax.struct.dataclass
class PaddingMask(_RowsMask):
    """Query j may attend key i iff i < key_lengths (and j < query_lengths when given).

    key_lengths, query_lengths: int[...] (one per sentence).
    """

    key_lengths: jax.Array
    query_lengths: jax.Array | None = None

    def rows(self, query_index: jax.Array, num_keys: int) -> jax.Array:
        keys = length_mask(self.key_lengths, num_keys)[..., None, :]  # [..., 1, Lk]
        if self.query_lengths is None:
            return jnp.broadcast_to(keys, (*keys.shape[:-2], len(query_index), num_keys))
        queries = query_index < jnp.asarray(self.query_lengths)[..., None]  # [..., q]
        return queries[..., :, None] & keys


@flax.struct.dataclass
class DirectionalMask(_RowsMask):
    """Structured mask built on the fly from positions (no [n, n] array needed).

    Query j may attend key i iff i < length and the direction allows it: forward i < j (earlier
    keys, DiSAN eq. 17), backward i > j (eq. 18), diag i != j (eq. 16), causal i <= j (a
    decoder's self-attention), none: any key. `lengths` int[...] (one per sentence); queries at or
    past the length keep their keys (callers zero padding rows, as DiSAN eq. 20 does).
    """

    lengths: jax.Array
    direction: str = flax.struct.field(pytree_node=False)

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ConfigError(f"unknown attention direction {self.direction!r} "
                              f"(fix: use one of {', '.join(DIRECTIONS)})")

    @property
    def triangle(self) -> str | None:
        """"lower" when every allowed key is at or before its query (forward, causal), "upper"
        when at or after it (backward), None otherwise (diag, none): what lets the directional
        attention kernel skip whole key blocks."""
        return {"forward": "lower", "causal": "lower", "backward": "upper"}.get(self.direction)

    def allows(self, query_pos: jax.Array, key_pos: jax.Array) -> jax.Array:
        """bool, the broadcast shape of query_pos and key_pos (int arrays of positions): whether
        the direction lets the query at query_pos see the key at key_pos, lengths ignored."""
        return {
            "forward": lambda: key_pos < query_pos,
            "backward": lambda: key_pos > query_pos,
            "diag": lambda: key_pos != query_pos,
            "causal": lambda: key_pos <= query_pos,
            "none": lambda: jnp.ones(jnp.broadcast_shapes(jnp.shape(query_pos),
                                                          jnp.shape(key_pos)), bool),
        }[self.direction]()

    def rows(self, query_index: jax.Array, num_keys: int) -> jax.Array:
        """bool[..., q, num_keys]: the mask rows of the queries at positions query_index int[q]."""
        keys = jnp.arange(num_keys)[None, :]
        allowed = self.allows(query_index[:, None], keys)
        return allowed & (keys < jnp.asarray(self.lengths)[..., None, None])


@flax.struct.dataclass
class SegmentMask(_RowsMask):
    """Same-segment attention: query j may attend key i iff both lie in the same segment
    (phrase) and segment ids are >= 0 (padding is -1). PSAN eq. 1 disables the diagonal
    (`include_self=False`), so a one-word phrase has no valid key.

    segments: int[..., L] segment id per token.
    """

    segments: jax.Array
    include_self: bool = flax.struct.field(pytree_node=False, default=False)

    def rows(self, query_index: jax.Array, num_keys: int) -> jax.Array:
        keys = self.segments[..., None, :num_keys]  # [..., 1, Lk]
        queries = jnp.take(self.segments, query_index, axis=-1, mode="clip")[..., :, None]
        allowed = (queries == keys) & (keys >= 0)
        if not self.include_self:
            allowed &= query_index[:, None] != jnp.arange(num_keys)[None, :]
        return allowed


def _with_word_nodes(hyper: jax.Array, num_words: int, word_row: jax.Array) -> jax.Array:
    """Prepends the L word-node rows `word_row` [L, C] to `hyper` [..., M, C] -> [..., L+M, C]."""
    words = jnp.broadcast_to(word_row, (*hyper.shape[:-2], num_words, hyper.shape[-1]))
    return jnp.concatenate([words, hyper.astype(word_row.dtype)], axis=-2)


def _member_nodes(members: jax.Array, num_words: int) -> jax.Array:
    """int[..., L+M, K]: the word nodes as one-member rows, then `members` [..., M, K]."""
    width = members.shape[-1]
    word_row = jnp.full((num_words, width), -1, jnp.int32).at[:, 0].set(jnp.arange(num_words))
    return _with_word_nodes(members, num_words, word_row)


def _member_valid(nodes: jax.Array, lengths: jax.Array) -> jax.Array:
    """bool[..., N]: a node is real iff it has a member and all its members are < length."""
    present = nodes >= 0
    lengths = jnp.asarray(lengths)[..., None, None]
    return jnp.any(present, axis=-1) & jnp.all(~present | (nodes < lengths), axis=-1)


def _span_nodes(spans: jax.Array, num_words: int) -> tuple[jax.Array, jax.Array]:
    """(start, end) int[..., L+M] of the word nodes (i, i), then `spans` [..., M, 2]."""
    word_row = jnp.stack([jnp.arange(num_words)] * 2, axis=-1)
    nodes = _with_word_nodes(spans, num_words, word_row)  # [..., N, 2]
    return nodes[..., 0], nodes[..., 1]


def _span_valid(start: jax.Array, end: jax.Array, lengths: jax.Array) -> jax.Array:
    """bool[..., N]: a span node is real iff it is non-empty and ends before the length."""
    return (start >= 0) & (start <= end) & (end < jnp.asarray(lengths)[..., None])


def member_adjacency(members: jax.Array, lengths: jax.Array, num_words: int) -> jax.Array:
    """bool[..., L+M, L+M]: PhraseTransformer eq. 6 for L word nodes then hypernodes given by
    their members: A[s, t] iff words(s) ⊆ words(t) or words(t) ⊆ words(s), diagonal included,
    False for invalid nodes.

    Args:
      members: int[..., M, K] token indices of each hypernode, -1 padded; an all -1 row is padding.
      lengths: int[...] real sentence lengths; a node with a word at or past it is invalid.
      num_words: L, the bucket length (static).
    """
    nodes = _member_nodes(members, num_words)  # [..., N, K]
    present = nodes >= 0
    valid = _member_valid(nodes, lengths)
    # found[..., s, t, a]: member a of node s is a member of node t.
    found = jnp.any(nodes[..., :, None, :, None] == nodes[..., None, :, None, :], axis=-1)
    subset = jnp.all(found | ~present[..., :, None, :], axis=-1)  # words(s) ⊆ words(t)
    related = subset | jnp.swapaxes(subset, -1, -2)
    return related & valid[..., :, None] & valid[..., None, :]


def span_adjacency(spans: jax.Array, lengths: jax.Array, num_words: int) -> jax.Array:
    """bool[..., L+M, L+M]: eq. 6 for hypernodes that are contiguous spans (n-grams): containment
    of intervals, no member lists. spans: int[..., M, 2] (start, end inclusive), -1 rows padding;
    lengths: int[...]; num_words: L (static). Equals `member_adjacency` of the same spans'
    members."""
    start, end = _span_nodes(spans, num_words)
    valid = _span_valid(start, end, lengths)
    inside = (start[..., None, :] <= start[..., :, None]) & (end[..., :, None] <= end[..., None, :])
    related = inside | jnp.swapaxes(inside, -1, -2)  # inside[s, t]: span s within span t
    return related & valid[..., :, None] & valid[..., None, :]


@flax.struct.dataclass
class HypernodeMask(_RowsMask):
    """PhraseTransformer's within-phrase adjacency (eq. 6) over L word nodes + M hypernodes.

    Exactly one of `spans` int[..., M, 2] (n-gram hypernodes, start/end inclusive) or `members`
    int[..., M, K] (general hypernodes, -1 padded) is given; `lengths` int[...]; `num_words` L.
    The adjacency is computed on device from these O(L) inputs, never shipped from the host.
    """

    lengths: jax.Array
    num_words: int = flax.struct.field(pytree_node=False)
    spans: jax.Array | None = None
    members: jax.Array | None = None

    def adjacency(self) -> jax.Array:
        """bool[..., L+M, L+M]."""
        if self.spans is not None:
            return span_adjacency(self.spans, self.lengths, self.num_words)
        return member_adjacency(self.members, self.lengths, self.num_words)

    def valid(self) -> jax.Array:
        """bool[..., L+M]: the real nodes (words before the length, hypernodes whose words all
        are), the nodes that adjacency rows and columns are False for otherwise."""
        if self.spans is not None:
            return _span_valid(*_span_nodes(self.spans, self.num_words), self.lengths)
        return _member_valid(_member_nodes(self.members, self.num_words), self.lengths)

    def rows(self, query_index: jax.Array, num_keys: int) -> jax.Array:
        return jnp.take(self.adjacency(), query_index, axis=-2, mode="clip")[..., :num_keys]


def as_mask(mask: Mask | jax.Array) -> Mask:
    """A mask object; a bool array [..., Lq, Lk] becomes a DenseMask."""
    return mask if hasattr(mask, "rows") else DenseMask(jnp.asarray(mask))


def at_least_float32(x: jax.Array) -> jax.Array:
    """x in float32 when its dtype is narrower (bfloat16), else unchanged: where mixed precision
    runs normalisers and reductions."""
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def masked_softmax(scores: jax.Array, mask: jax.Array, axis: int = -1) -> jax.Array:
    """Softmax of `scores` over `axis` restricted to `mask` (broadcastable bool).

    Masked entries get probability 0; a slice with no valid entry is all zeros (never NaN), and
    its gradient is zero. The max is subtracted over valid entries only. Computed and returned in
    float32 (at least) whatever the scores' dtype: a normaliser never runs in bfloat16.
    """
    scores = at_least_float32(scores)
    neg = jnp.finfo(scores.dtype).min
    masked = jnp.where(mask, scores, neg)
    top = jax.lax.stop_gradient(jnp.max(masked, axis=axis, keepdims=True))
    top = jnp.where(jnp.isfinite(top) & (top > neg), top, 0.0)
    exp = jnp.where(mask, jnp.exp(masked - top), 0.0)
    total = jnp.sum(exp, axis=axis, keepdims=True)
    return exp / jnp.where(total > 0, total, 1.0)


def masked_mean(values: jax.Array, mask: jax.Array, axis: int = -2) -> jax.Array:
    """Mean of `values` over `axis` where mask (values.shape without the feature axis) is True,
    summed and returned in float32 (at least) whatever the values' dtype."""
    values = at_least_float32(values)
    weights = mask.astype(values.dtype)[..., None]
    total = jnp.sum(values * weights, axis=axis)
    count = jnp.sum(weights, axis=axis)
    return total / jnp.maximum(count, 1.0)


def masked_max(values: jax.Array, mask: jax.Array, axis: int = -2) -> jax.Array:
    """Max of `values` over `axis` among valid positions; zeros where there is none."""
    neg = jnp.finfo(values.dtype).min
    top = jnp.max(jnp.where(mask[..., None], values, neg), axis=axis)
    has_any = jnp.any(mask, axis=axis if axis >= 0 else axis + 1)[..., None]
    return jnp.where(has_any, top, 0.0)

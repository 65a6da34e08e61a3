"""PhraseTransformer hypernodes (host side) and their adjacency matrix A (device side).

Implements shared/spec/structures.md, "PhraseTransformer: hypernodes". Nodes of a sentence padded
to bucket length L are the L word nodes followed by the hypernodes:
- n-gram hypernodes: every span of 2..k adjacent words (paper eq. 1: j - i < k) in a fixed layout,
  all spans of length 2, then 3, ..., k, each as (start, end) with `end` inclusive; a span running
  past the real sentence length is invalid. m = sum_{l=2..k} (L - l + 1).
- dependency ("semantic") hypernodes: one per dependency edge, members (dependent, head), the root
  arc excluded; `members: int32[M, K]` token indices, -1 padded.
Adjacency (eq. 6): A[s, t] = 1 iff words(s) ⊆ words(t) or words(t) ⊆ words(s), diagonal included,
0 for invalid (padding) nodes. It is built on device from O(L) inputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.errors import ConfigError
from jaxenc.structures.trees import DependencyTree


def num_ngram_hypernodes(bucket_length: int, k: int) -> int:
    """m = sum_{l=2..k} (L - l + 1): the number of n-gram hypernodes of bucket length L."""
    return sum(bucket_length - size + 1 for size in range(2, k + 1))


def ngram_spans(bucket_length: int, k: int) -> np.ndarray:
    """int32[m, 2]: (start, end inclusive) of every n-gram hypernode, by length then start."""
    if k < 2 or bucket_length < k:
        raise ConfigError(f"n-gram hypernodes need 2 <= k <= L, got k={k}, L={bucket_length} "
                          "(fix: use k=2 or k=3 and a bucket length >= k)")
    starts = np.concatenate([np.arange(bucket_length - size + 1) for size in range(2, k + 1)])
    sizes = np.concatenate([np.full(bucket_length - size + 1, size) for size in range(2, k + 1)])
    return np.stack([starts, starts + sizes - 1], axis=1).astype(np.int32)


def spans_to_members(spans: np.ndarray) -> np.ndarray:
    """int32[M, 2] (start, end inclusive) -> int32[M, K] token indices, -1 padded (K = longest)."""
    spans = np.asarray(spans)
    width = int((spans[:, 1] - spans[:, 0]).max()) + 1 if len(spans) else 1
    members = spans[:, :1] + np.arange(width)
    return np.where(members <= spans[:, 1:], members, -1).astype(np.int32)


def dependency_members(dtree: DependencyTree) -> np.ndarray:
    """int32[n-1, 2]: (dependent, head) 0-based token indices of every arc but the root arc,
    ordered by dependent."""
    arcs = [(dependent, head - 1) for dependent, head in enumerate(dtree.validate().heads) if head]
    return np.array(arcs, dtype=np.int32).reshape(-1, 2)


def _with_word_nodes(hyper: jax.Array, num_words: int, word_row: jax.Array) -> jax.Array:
    """Prepends the L word-node rows `word_row` [L, C] to `hyper` [..., M, C] -> [..., L+M, C]."""
    words = jnp.broadcast_to(word_row, (*hyper.shape[:-2], num_words, hyper.shape[-1]))
    return jnp.concatenate([words, hyper.astype(word_row.dtype)], axis=-2)


def adjacency(members: jax.Array, lengths: jax.Array, num_words: int) -> jax.Array:
    """bool[..., L+M, L+M]: eq. 6 for L word nodes then hypernodes given by their members.

    Args:
      members: int[..., M, K] token indices of each hypernode, -1 padded; an all -1 row is padding.
      lengths: int[...] real sentence lengths; a node with a word at or past it is invalid.
      num_words: L, the bucket length (static).
    """
    width = members.shape[-1]
    word_row = jnp.full((num_words, width), -1, jnp.int32).at[:, 0].set(jnp.arange(num_words))
    nodes = _with_word_nodes(members, num_words, word_row)  # [..., N, K]
    present = nodes >= 0
    lengths = jnp.asarray(lengths)[..., None, None]
    valid = jnp.any(present, axis=-1) & jnp.all(~present | (nodes < lengths), axis=-1)
    # found[..., s, t, a]: member a of node s is a member of node t.
    found = jnp.any(nodes[..., :, None, :, None] == nodes[..., None, :, None, :], axis=-1)
    subset = jnp.all(found | ~present[..., :, None, :], axis=-1)  # words(s) ⊆ words(t)
    related = subset | jnp.swapaxes(subset, -1, -2)
    return related & valid[..., :, None] & valid[..., None, :]


def span_adjacency(spans: jax.Array, lengths: jax.Array, num_words: int) -> jax.Array:
    """bool[..., L+M, L+M]: eq. 6 for hypernodes that are contiguous spans (n-grams): containment
    of intervals, no member lists. spans: int[..., M, 2] (start, end inclusive), -1 rows padding;
    lengths: int[...]; num_words: L (static). Equals `adjacency` of the same spans' members."""
    word_row = jnp.stack([jnp.arange(num_words)] * 2, axis=-1)
    nodes = _with_word_nodes(spans, num_words, word_row)  # [..., N, 2]
    start, end = nodes[..., 0], nodes[..., 1]
    valid = (start >= 0) & (start <= end) & (end < jnp.asarray(lengths)[..., None])
    inside = (start[..., None, :] <= start[..., :, None]) & (end[..., :, None] <= end[..., None, :])
    related = inside | jnp.swapaxes(inside, -1, -2)  # inside[s, t]: span s within span t
    return related & valid[..., :, None] & valid[..., None, :]

"""PhraseTransformer hypernodes (host side) and their adjacency matrix A (device side).

Nodes of a sentence padded to bucket length L are the L word nodes followed by the hypernodes:
- n-gram hypernodes: every span of 2..k adjacent words (paper eq. 1: j - i < k) in a fixed layout,
  all spans of length 2, then 3, ..., k, each as (start, end) with `end` inclusive; a span running
  past the real sentence length is invalid. m = sum_{l=2..k} (L - l + 1).
- dependency ("semantic") hypernodes: one per dependency edge, members (dependent, head), the root
  arc excluded; `members: int32[M, K]` token indices, -1 padded.
Adjacency (eq. 6): A[s, t] = 1 iff words(s) ⊆ words(t) or words(t) ⊆ words(s), diagonal included,
0 for invalid (padding) nodes. It is built on device from these O(L) inputs by
`jaxenc.layers.masks.HypernodeMask` (this module stays host-side numpy).
"""

from __future__ import annotations

import numpy as np

from jaxenc.errors import ConfigError
from jaxenc.structures.trees import DependencyTree


def ngram_spans(bucket_length: int, k: int) -> np.ndarray:
    """int32[m, 2]: (start, end inclusive) of every n-gram hypernode, by length then start."""
    if k < 2 or bucket_length < k:
        raise ConfigError(f"n-gram hypernodes need 2 <= k <= L, got k={k}, L={bucket_length} "
                          "(fix: use k=2 or k=3 and a bucket length >= k)")
    starts = np.concatenate([np.arange(bucket_length - size + 1) for size in range(2, k + 1)])
    sizes = np.concatenate([np.full(bucket_length - size + 1, size) for size in range(2, k + 1)])
    return np.stack([starts, starts + sizes - 1], axis=1).astype(np.int32)


def ngram_neighbours(bucket_length: int, k: int) -> np.ndarray:
    """int32[L+m, D]: row s lists every node t with A[s, t] = 1 (eq. 6) in the n-gram layout of
    bucket length L when the sentence fills the bucket, -1 padded; D <= k^2 (k=2: 3, k=3: 6).

    Contiguous spans nest iff one interval contains the other, so the neighbours of [a, b] (size
    n) of each size l are the |l - n| + 1 spans starting from min(a, b - l + 1) on: at most k
    per size, computed without any [L+m, L+m] array. Padding (a shorter sentence) is masked on
    device from the lengths (`jaxenc.layers.masks.HypernodeMask.valid`).
    """
    spans = np.concatenate([np.stack([np.arange(bucket_length)] * 2, axis=1),
                            ngram_spans(bucket_length, k)])
    start, size = spans[:, :1], spans[:, 1:] - spans[:, :1] + 1  # [N, 1]
    lengths = np.repeat(np.arange(1, k + 1), k)[None, :]  # candidate (size l, offset) pairs
    offsets = np.tile(np.arange(k), k)[None, :]
    first = np.minimum(start, start + size - lengths) + offsets  # [N, k^2] candidate starts
    ok = (offsets <= np.abs(lengths - size)) & (first >= 0) & (first + lengths <= bucket_length)
    # node index of span (first, l): words are 0..L-1, then the spans of size 2, 3, ... by start
    size_offset = np.cumsum([0, bucket_length] + [bucket_length - n + 1 for n in range(2, k)])
    index = np.where(ok, size_offset[lengths - 1] + first, -1)
    order = np.argsort(~ok, axis=1, kind="stable")  # real neighbours first
    width = int(ok.sum(axis=1).max())
    return np.take_along_axis(index, order, axis=1)[:, :width].astype(np.int32)


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

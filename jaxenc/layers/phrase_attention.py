"""PhraseTransformer's attention within phrases (phase 2, eq. 5-7), dense or sparse.

Over N = L word nodes + M hypernodes H [B, N, D], per head i (`jaxenc.layers.attention`):

    eq. 5:  head'_i = sigma(softmax(Q_i K_i^T / sqrt(d_k) ∘ A) V_i)      sigma: sigmoid (nonlinear)
    eq. 6:  A[s, t] = 1 iff words(s) ⊆ words(t) or words(t) ⊆ words(s)   (HypernodeMask)
    eq. 7:  MultiHead'(H, A) = Concat(head'_1, ..., head'_h) W_O

`phrase_mask` says how A enters eq. 5 (the paper is ambiguous; docs/models.md):
- "additive" (default): scores outside A are -inf, so a node attends only nodes of its phrases
  (what the text says: "we limit the attention ... to nodes within each phrase");
- "hadamard": the formula literally, softmax over all real nodes of S ∘ A, so a non-adjacent
  real node keeps the score 0 and the weight exp(0) / Z.
The dense path masks the [N, N] scores with A built on device from spans/members. The sparse path
(n-gram hypernodes) attends over a fixed neighbour list int32[N, D] (D <= k^2,
`jaxenc.structures.hypernodes.ngram_neighbours`, static for a bucket length): keys and values are
gathered per node, so the cost is O(N k^2 d) instead of O(N^2 d). Both equal each other in values
and gradients (same parameters); the literal Hadamard form weighs every real node, so it has no
sparse form.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.layers.attention import MultiHeadAttention, Normalizer
from jaxenc.layers.masks import HypernodeMask, masked_softmax

PHRASE_MASKS = ("additive", "hadamard")


def hadamard_softmax(valid: jax.Array) -> Normalizer:
    """The normaliser of eq. 5 read literally: (scores S, adjacency A) -> softmax of S ∘ A over
    the keys `valid` (bool, broadcastable to the scores: real query/key pairs) allows, so a real
    key outside A gets the weight exp(0) / Z; padding keys get 0."""

    def normalize(scores: jax.Array, adjacency: jax.Array) -> jax.Array:
        return masked_softmax(scores * adjacency.astype(scores.dtype), valid)

    return normalize


def neighbour_mask(phrases: HypernodeMask, neighbours: np.ndarray) -> jax.Array:
    """bool[B, N, D]: which entries of the neighbour list int[N, D] are real edges of A for the
    batch's lengths (the list holds A's edges for a full bucket; padding nodes drop out)."""
    valid = phrases.valid()  # [B, N]
    neighbour_valid = jnp.take(valid, np.maximum(neighbours, 0), axis=-1)  # [B, N, D]
    return (neighbours >= 0) & valid[..., :, None] & neighbour_valid


class WithinPhraseAttention(nn.Module):
    """Phase 2 (module docstring): nodes [B, N, D] -> [B, N, D].

    Attributes:
      num_heads: h of eq. 7.
      nonlinear: sigma = sigmoid on each head (eq. 5); False is the paper's "linear
        PhraseTransformer" (no activation).
      phrase_mask: "additive" or "hadamard" (module docstring).
      dropout_rate: dropout on the attention weights (training only).
      dtype: computation dtype; scores are normalised in float32.
    """

    num_heads: int
    nonlinear: bool = True
    phrase_mask: str = "additive"
    dropout_rate: float = 0.0
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, nodes: jax.Array, phrases: HypernodeMask, *, train: bool,
                 neighbours: np.ndarray | None = None) -> jax.Array:
        """nodes [B, N, D] (N = L + M as `phrases` lays them out); `neighbours` int32[N, D] (the
        sparse path, additive mask only) or None (dense)."""
        if self.phrase_mask not in PHRASE_MASKS:
            raise ValueError(f"phrase_mask {self.phrase_mask!r} is not one of {PHRASE_MASKS}")
        hadamard = self.phrase_mask == "hadamard"
        if hadamard and neighbours is not None:
            raise ValueError("phrase_mask='hadamard' weighs every real node: use the dense path")
        normalizer = masked_softmax
        if hadamard:
            valid = phrases.valid()
            normalizer = hadamard_softmax((valid[..., :, None] & valid[..., None, :])[:, None])
        attention = MultiHeadAttention(
            self.num_heads, head_activation="sigmoid" if self.nonlinear else "linear",
            normalizer=normalizer, dropout_rate=self.dropout_rate, dtype=self.dtype,
            name="attention")
        if neighbours is None:
            return attention(nodes, nodes, phrases, train=train)
        return attention(nodes, nodes, neighbour_mask(phrases, neighbours), train=train,
                         key_index=neighbours)

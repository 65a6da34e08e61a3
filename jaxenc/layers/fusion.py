"""Fusion gate: mixes a token's own representation with its attention context (DiSAN eq. 19-20)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.layers.dense import DropoutDense


class FusionGate(nn.Module):
    """F = sigmoid(W_f1 s + b_f1 + W_f2 h + b_f2 + b_f) (eq. 19), u = F ⊙ h + (1 - F) ⊙ s (eq. 20).

    h, s [..., d] -> u [..., d]. As in the authors' code: two biased linears ("context" on s,
    "input" on h, each with dropout on its input) plus a third bias "gate_bias" (3 d biases).
    """

    keep_prob: float = 1.0
    dropout_bits: int = 32  # random bits per dropout decision (jaxenc/layers/dropout.py)
    dtype: jnp.dtype = jnp.float32  # computation dtype (parameters stay float32)

    @nn.compact
    def __call__(self, h: jax.Array, s: jax.Array, *, train: bool) -> jax.Array:
        features = h.shape[-1]
        dense = lambda name: DropoutDense(features, keep_prob=self.keep_prob,
                                          dropout_bits=self.dropout_bits, dtype=self.dtype,
                                          name=name)
        gate_logits = (
            dense("context")(s, train=train) + dense("input")(h, train=train)
            + self.param("gate_bias", nn.initializers.zeros, (features,)).astype(self.dtype))
        gate = nn.sigmoid(gate_logits)
        return gate * h + (1.0 - gate) * s

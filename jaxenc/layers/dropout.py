"""Inverted dropout whose keep/drop decisions can share random words (issue 13, DiSAN speed).

flax's `nn.Dropout` draws one 32-bit threefry word per element. On a CPU that generator is a
large share of a training step: at batch 64, 64 tokens, d 300, DiSAN's 14.7M dropout decisions
take ~130 ms of a ~470 ms step outside its attention (bench/bench_disan.py). `Dropout` here is
`nn.Dropout` when `mask_bits` is 32 (the same module name and random stream, bit for bit), and
otherwise cuts each 32-bit word into 32 / mask_bits independent uniform integers of `mask_bits`
bits, one per decision: 4x (8 bits) or 2x (16 bits) fewer words to generate.

The cost: the keep probability becomes a multiple of 2^-mask_bits, the nearest one to
`1 - rate` (0.75 is exact with 8 bits, 0.7 becomes 179/256 = 0.6992; 16 bits: within 8e-6). The
kept values are scaled by 1 / that probability, so the expectation of the output is the input,
exactly as for nn.Dropout.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.errors import ConfigError

MASK_BITS = (8, 16, 32)
_UNSIGNED = {8: jnp.uint8, 16: jnp.uint16}


def quantized_keep_prob(keep_prob: float, mask_bits: int) -> float:
    """The keep probability `Dropout` really uses: the nearest multiple of 2^-mask_bits."""
    if mask_bits == 32:
        return keep_prob
    return round(keep_prob * 2 ** mask_bits) / 2 ** mask_bits


def check_mask_bits(mask_bits: int) -> None:
    """A one-line ConfigError unless mask_bits is one of MASK_BITS."""
    if mask_bits not in MASK_BITS:
        raise ConfigError(f"dropout_bits={mask_bits} is not one of {MASK_BITS} (fix: 32 for "
                          f"flax's nn.Dropout, 8 for four decisions per random word)")


class Dropout(nn.Dropout):
    """nn.Dropout with `mask_bits` (8, 16 or 32) random bits per keep/drop decision.

    x [...] -> [...]: the same call signature as nn.Dropout (`deterministic`, `rng`). With
    mask_bits=32 it is nn.Dropout itself; with 8 or 16 the keep probability is rounded to a
    multiple of 2^-mask_bits (`quantized_keep_prob`) and one threefry word serves 32 / mask_bits
    elements of the last axis.
    """

    mask_bits: int = 32

    @nn.compact
    def __call__(self, inputs: jax.Array, deterministic: bool | None = None,
                 rng: jax.Array | None = None) -> jax.Array:
        check_mask_bits(self.mask_bits)
        if self.mask_bits == 32:
            return super().__call__(inputs, deterministic, rng)
        deterministic = nn.merge_param("deterministic", self.deterministic, deterministic)
        if deterministic or self.rate == 0.0:
            return inputs
        if self.broadcast_dims:
            raise ConfigError("Dropout: broadcast_dims needs mask_bits=32 (fix: leave "
                              "dropout_bits at 32)")
        threshold = round((1.0 - self.rate) * 2 ** self.mask_bits)
        if threshold == 0:
            return jnp.zeros_like(inputs)
        if threshold == 2 ** self.mask_bits:
            return inputs
        rng = self.make_rng(self.rng_collection) if rng is None else rng
        per_word = 32 // self.mask_bits
        *batch, features = inputs.shape
        words = jax.random.bits(rng, (*batch, -(-features // per_word)), jnp.uint32)
        draws = jax.lax.bitcast_convert_type(words, _UNSIGNED[self.mask_bits])
        draws = draws.reshape(*batch, -1)[..., :features]  # [..., features] uniform integers
        keep = draws < jnp.asarray(threshold, draws.dtype)
        scale = 2 ** self.mask_bits / threshold
        return jnp.where(keep, inputs * jnp.asarray(scale, inputs.dtype), 0).astype(inputs.dtype)

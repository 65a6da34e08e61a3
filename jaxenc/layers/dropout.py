"""Inverted dropout whose keep/drop decisions can share random words (a faster DiSAN step).

flax's `nn.Dropout` draws one 32-bit threefry word per element, a large share of a CPU training
step. `Dropout` here is `nn.Dropout` when `mask_bits` is 32 (the same module name and random
stream, bit for bit), and otherwise cuts each 32-bit word into 32 / mask_bits independent
uniform integers of `mask_bits` bits, one per decision: 16x (2 bits), 8x (4), 4x (8) or 2x (16)
fewer words to generate.

The cost: the keep probability becomes a multiple of 2^-mask_bits, the nearest one to
`1 - rate` (0.75 is exact with 2 bits, 0.7 becomes 179/256 = 0.6992 with 8; 16 bits: within
8e-6). The kept values are scaled by 1 / that probability, so the expectation of the output is
the input, exactly as for nn.Dropout. `mask_bits=0` (AUTO_BITS, the models' default) picks the
fewest bits that hold the keep probability exactly (`resolve_mask_bits`: 2 for multiples of
1/4 such as 0.75 and 0.5, 4 for other multiples of 1/16, 8 otherwise), so it never rounds more
than 8 bits do.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.errors import ConfigError

AUTO_BITS = 0  # the fewest of AUTO_CHOICES bits that hold the keep probability exactly
AUTO_CHOICES = (2, 4, 8)  # 8 also when none is exact (rounded to 1/256)
MASK_BITS = (AUTO_BITS, 2, 4, 8, 16, 32)
_UNSIGNED = {8: jnp.uint8, 16: jnp.uint16}  # widths a bitcast slices a word into


def resolve_mask_bits(keep_prob: float, mask_bits: int) -> int:
    """The random bits per decision `Dropout` draws: mask_bits itself, or for AUTO_BITS the
    fewest of AUTO_CHOICES whose multiples of 2^-bits include keep_prob (8 when none does)."""
    if mask_bits != AUTO_BITS:
        return mask_bits
    exact = [bits for bits in AUTO_CHOICES if float(keep_prob * 2 ** bits).is_integer()]
    return exact[0] if exact else AUTO_CHOICES[-1]


def quantized_keep_prob(keep_prob: float, mask_bits: int) -> float:
    """The keep probability `Dropout` really uses: the nearest multiple of 2^-bits."""
    bits = resolve_mask_bits(keep_prob, mask_bits)
    if bits == 32:
        return keep_prob
    return round(keep_prob * 2 ** bits) / 2 ** bits


def check_mask_bits(mask_bits: int) -> None:
    """A one-line ConfigError unless mask_bits is one of MASK_BITS."""
    if mask_bits not in MASK_BITS:
        raise ConfigError(f"dropout_bits={mask_bits} is not one of {MASK_BITS} (fix: 0 for the "
                          f"fewest bits that hold keep_prob exactly, 32 for flax's nn.Dropout)")


class Dropout(nn.Dropout):
    """nn.Dropout with `mask_bits` (one of MASK_BITS) random bits per keep/drop decision.

    x [...] -> [...]: the same call signature as nn.Dropout (`deterministic`, `rng`). With
    mask_bits=32 it is nn.Dropout itself; with 2-16 the keep probability is rounded to a
    multiple of 2^-mask_bits (`quantized_keep_prob`) and one threefry word serves 32 / mask_bits
    elements of the last axis, its lowest bits first; 0 resolves to 2, 4 or 8
    (`resolve_mask_bits`).
    """

    mask_bits: int = 32

    @nn.compact
    def __call__(self, inputs: jax.Array, deterministic: bool | None = None,
                 rng: jax.Array | None = None) -> jax.Array:
        check_mask_bits(self.mask_bits)
        bits = resolve_mask_bits(1.0 - self.rate, self.mask_bits)
        if bits == 32:
            return super().__call__(inputs, deterministic, rng)
        deterministic = nn.merge_param("deterministic", self.deterministic, deterministic)
        if deterministic or self.rate == 0.0:
            return inputs
        if self.broadcast_dims:
            raise ConfigError("Dropout: broadcast_dims needs mask_bits=32 (fix: leave "
                              "dropout_bits at 32)")
        threshold = round((1.0 - self.rate) * 2 ** bits)
        if threshold == 0:
            return jnp.zeros_like(inputs)
        if threshold == 2 ** bits:
            return inputs
        rng = self.make_rng(self.rng_collection) if rng is None else rng
        per_word = 32 // bits
        *batch, features = inputs.shape
        words = jax.random.bits(rng, (*batch, -(-features // per_word)), jnp.uint32)
        if bits in _UNSIGNED:
            draws = jax.lax.bitcast_convert_type(words, _UNSIGNED[bits])  # little-endian
        else:
            shifts = jnp.arange(0, 32, bits, dtype=jnp.uint32)
            draws = (words[..., None] >> shifts) & jnp.uint32(2 ** bits - 1)
        draws = draws.reshape(*batch, -1)[..., :features]  # [..., features] uniform integers
        keep = draws < jnp.asarray(threshold, draws.dtype)
        scale = 2 ** bits / threshold
        return jnp.where(keep, inputs * jnp.asarray(scale, inputs.dtype), 0).astype(inputs.dtype)

"""Masks built on device from lengths, and a softmax that gives zeros for fully masked rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def length_mask(lengths: jax.Array, max_len: int) -> jax.Array:
    """bool[..., max_len]: True at positions < length. lengths: int[...]."""
    return jnp.arange(max_len) < lengths[..., None]


def masked_softmax(scores: jax.Array, mask: jax.Array, axis: int = -1) -> jax.Array:
    """Softmax of `scores` over `axis` restricted to `mask` (broadcastable bool).

    Masked entries get probability 0; a slice with no valid entry is all zeros (never NaN), and
    its gradient is zero. The max is subtracted over valid entries only.
    """
    neg = jnp.finfo(scores.dtype).min
    masked = jnp.where(mask, scores, neg)
    top = jax.lax.stop_gradient(jnp.max(masked, axis=axis, keepdims=True))
    top = jnp.where(jnp.isfinite(top) & (top > neg), top, 0.0)
    exp = jnp.where(mask, jnp.exp(masked - top), 0.0)
    total = jnp.sum(exp, axis=axis, keepdims=True)
    return exp / jnp.where(total > 0, total, 1.0)


def masked_mean(values: jax.Array, mask: jax.Array, axis: int = -2) -> jax.Array:
    """Mean of `values` over `axis` where mask (values.shape without the feature axis) is True."""
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

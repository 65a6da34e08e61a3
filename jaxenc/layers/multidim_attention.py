"""Multi-dimensional (feature-wise) attention: token2token with any mask, and source2token.

DiSAN (Shen et al., 2018) eq. 10-11 and 15 (token2token), eq. 12-13 (source2token); PSAN (Wu et
al., 2018) eq. 1-2 and 5 reuse them with another score activation. Index convention: row j is the
query, column i the key (as in the authors' code). For one sentence of n tokens, d features:

    f_ji  = score(Q_j + K_i)                     Q = x W_q,  K = x W_k + b            [n, n, d]
    out_j = sum_i softmax_i(f_ji + M_ji) ⊙ V_i    softmax over keys, separately per feature

M_ji = 0 where the mask (jaxenc.layers.masks: DirectionalMask, SegmentMask, DenseMask, ...)
allows query j to see key i and -inf elsewhere; a query with no valid key outputs zeros.

Two implementations of the same function (`impl`):
- "dense": the [n, n, d] score tensor at once (the authors' formulation; simple, O(n^2 d) memory).
- "blocked": a loop over blocks of queries that never holds more than [block, n, d] for one
  example; `jax.checkpoint` makes the backward pass recompute each block instead of storing it.
  When the scores are bounded (scaled tanh: |f| < c) the exponentials need no max-subtraction, so
  one pass over a block computes sum_i e^f ⊙ V_i and sum_i e^f. `examples_per_step` examples go
  through the block loop together: 1 suits a CPU (each block stays in cache; bench/bench_disan.py
  measures it faster than dense at every length), the whole batch (0) suits accelerators. It is an
  explicit option, never sniffed from the backend at trace time, so an exported function does not
  depend on where it was exported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.errors import ConfigError
from jaxenc.layers.dense import DropoutDense, get_activation
from jaxenc.layers.masks import Mask, as_mask, at_least_float32, masked_softmax

IMPLEMENTATIONS = ("auto", "dense", "blocked")
# exp(f) without a shift stays a normal, finite float32 (also summed over keys) while |f| <= this.
FUSED_EXP_LIMIT = 60.0

def score_function(name: str, c: float = 5.0) -> tuple[Callable[[jax.Array], jax.Array],
                                                       float | None]:
    """(elementwise score activation, bound B with |score| < B, or None when unbounded).

    "scaled_tanh" is DiSAN's c * tanh(z / c) (eq. 15), bounded by c; any name of ACTIVATIONS is
    used as is (PSAN eq. 1 uses "elu") and treated as unbounded.
    """
    if name == "scaled_tanh":
        return (lambda z: c * jnp.tanh(z / c)), float(c)
    return get_activation(name), None


def _attend(queries: jax.Array, keys: jax.Array, values: jax.Array, rows: jax.Array,
            score_fn: Callable[[jax.Array], jax.Array], *, fused: bool,
            key_axis: int) -> jax.Array:
    """queries [q, d], keys/values [n, d], rows bool[q, n] -> [q, d].

    The scores are [q, n, d] (key_axis=1, the authors' layout) or [n, q, d] (key_axis=0: XLA:CPU
    reduces a [block, n, d] chunk over its leading axis ~15x slower than over the others, and the
    backward pass reduces over queries). fused: one pass accumulating sum_i e^f ⊙ v_i and
    sum_i e^f, valid when |f| <= FUSED_EXP_LIMIT; otherwise a max-subtracted softmax.
    Mixed precision: the scores are computed in the inputs' dtype, the exponentials and the sums
    over keys in float32; the result has the values' dtype.
    """
    query_axis = 1 - key_axis
    scores = score_fn(jnp.expand_dims(queries, key_axis) + jnp.expand_dims(keys, query_axis))
    valid = jnp.moveaxis(rows, 1, key_axis)[..., None]
    dtype, values = values.dtype, at_least_float32(jnp.expand_dims(values, query_axis))
    if not fused:
        probs = masked_softmax(scores, valid, axis=key_axis)
        return jnp.sum(probs * values, axis=key_axis).astype(dtype)
    weights = jnp.where(valid, jnp.exp(at_least_float32(scores)), 0.0)
    total = jnp.sum(weights, axis=key_axis)
    weighted = jnp.sum(weights * values, axis=key_axis)
    return (weighted / jnp.where(total > 0, total, 1.0)).astype(dtype)  # no valid key: zeros


def token2token_dense(queries: jax.Array, keys: jax.Array, values: jax.Array, mask: Mask, *,
                      score_fn: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """One sentence: queries, keys, values [n, d], mask [n, n] -> [n, d], all [n, n, d] scores."""
    n = queries.shape[0]
    rows = as_mask(mask).rows(jnp.arange(n), n)
    return _attend(queries, keys, values, rows, score_fn, fused=False, key_axis=1)


def token2token_blocked(queries: jax.Array, keys: jax.Array, values: jax.Array, mask: Mask, *,
                        score_fn: Callable[[jax.Array], jax.Array], score_bound: float | None,
                        block_size: int) -> jax.Array:
    """One sentence, as `token2token_dense`, holding at most [block_size, n, d] at a time.

    Queries are padded to a multiple of the block (the extra rows are computed and dropped); a
    sentence shorter than block_size is one block of n queries.
    """
    n, d = queries.shape
    block_size = min(block_size, n)
    num_blocks = -(-n // block_size)
    padded = num_blocks * block_size
    query_blocks = jnp.pad(queries, ((0, padded - n), (0, 0))).reshape(num_blocks, block_size, d)
    starts = jnp.arange(num_blocks) * block_size
    fused = score_bound is not None and score_bound <= FUSED_EXP_LIMIT

    @jax.checkpoint
    def attend_block(block: tuple[jax.Array, jax.Array]) -> jax.Array:
        block_queries, start = block
        rows = as_mask(mask).rows(start + jnp.arange(block_size), n)
        return _attend(block_queries, keys, values, rows, score_fn, fused=fused, key_axis=0)

    outputs = jax.lax.map(attend_block, (query_blocks, starts))  # [num_blocks, block_size, d]
    return outputs.reshape(padded, d)[:n]


def resolve_impl(impl: str, length: int, blocked_threshold: int) -> str:
    """"dense" or "blocked"; "auto" picks blocked from `blocked_threshold` tokens up."""
    if impl not in IMPLEMENTATIONS:
        raise ConfigError(f"unknown attention_impl {impl!r} "
                          f"(fix: use one of {', '.join(IMPLEMENTATIONS)})")
    if impl == "auto":
        return "blocked" if length >= blocked_threshold else "dense"
    return impl


@dataclasses.dataclass(frozen=True)
class Token2TokenOptions:
    """How token2token attention is computed (never what it computes).

    Attributes:
      attention_impl: "dense", "blocked" or "auto" (blocked from `blocked_threshold` tokens up).
      block_size: queries per block of the blocked implementation.
      blocked_threshold: the shortest bucket length "auto" computes blocked.
      examples_per_step: examples the blocked loop takes per step; 0 = the whole batch (the
        right choice on accelerators), 1 = one at a time (the fastest on one CPU device,
        measured 1.7x faster than the whole batch at once). A data-parallel run over several
        devices needs 0: the loop walks the batch axis that the devices split, so any other
        count makes XLA gather the whole batch on every device, which computes all of it
        (bench/bench_scaling.py; `jaxenc.training.sharding.check_examples_per_step` warns).
    A model config that inherits these fields (DiSAN, PSAN) passes itself as the options.
    """

    attention_impl: str = "auto"
    block_size: int = 16
    blocked_threshold: int = 16
    examples_per_step: int = 1

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """One-line ConfigError for an invalid option; cooperates with other config bases."""
        fix = f"--config.model.attention_impl=auto, one of {', '.join(IMPLEMENTATIONS)}"
        if self.attention_impl not in IMPLEMENTATIONS:
            raise ConfigError(f"model.attention_impl={self.attention_impl!r} is not one of "
                              f"{', '.join(IMPLEMENTATIONS)} (fix: {fix})")
        for name, least in (("block_size", 1), ("blocked_threshold", 0),
                            ("examples_per_step", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise ConfigError(f"model.{name}={value!r} is not an integer >= {least} "
                                  f"(fix: --config.model.{name}={max(least, 1)})")
        parent = super()
        if hasattr(parent, "validate"):
            parent.validate()


def multidim_token2token(queries: jax.Array, keys: jax.Array, values: jax.Array, mask: Mask, *,
                         score_fn: Callable[[jax.Array], jax.Array], score_bound: float | None,
                         options: Token2TokenOptions = Token2TokenOptions()) -> jax.Array:
    """Batched token2token attention: queries, keys, values [B, n, d], mask [B, n, n] -> [B, n, d].

    keys already include the score bias. The dense version is vmapped over the batch; the blocked
    one visits `options.examples_per_step` examples at a time (0: all).
    """
    impl = resolve_impl(options.attention_impl, queries.shape[1], options.blocked_threshold)
    if impl == "dense":
        return jax.vmap(partial(token2token_dense, score_fn=score_fn))(queries, keys, values, mask)
    per_example = partial(token2token_blocked, score_fn=score_fn, score_bound=score_bound,
                          block_size=options.block_size)
    per_step = options.examples_per_step or queries.shape[0]
    return jax.lax.map(lambda example: per_example(*example), (queries, keys, values, mask),
                       batch_size=None if per_step == 1 else per_step)


def feature_mean_probs(queries: jax.Array, keys: jax.Array, mask: Mask,
                       score_fn: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """float32[B, n, n]: P^j_i averaged over features (row j = query), for pictures; rows
    without a valid key are zeros."""
    n = queries.shape[1]
    rows = as_mask(mask).matrix(n, n)
    scores = score_fn(queries[:, :, None, :] + keys[:, None, :, :])  # [B, query j, key i, d]
    return masked_softmax(scores, rows[..., None], axis=2).mean(axis=-1)


class Token2TokenAttention(nn.Module):
    """Multi-dimensional token2token self-attention (DiSAN eq. 15 and 11, PSAN eq. 1-2).

    x [B, n, d] -> [B, n, d]: f_ji = score(W_q x_j + W_k x_i + b) + M_ji, out_j = sum_i P^j_i ⊙ x_i.
    The two projections have no bias and share one dropout of their input; the values are the
    undropped inputs. `score`: "scaled_tanh" (c * tanh(z / c)) or an activation name. When the
    "intermediates" collection is mutable the feature-averaged probabilities [B, n, n] are sown
    as `attention_weights` (an extra dense pass; nothing is computed otherwise). `dtype`: the
    computation dtype (x is cast to it; the softmax runs in float32, `_attend`).
    """

    score: str = "scaled_tanh"
    c: float = 5.0
    keep_prob: float = 1.0
    options: Token2TokenOptions = Token2TokenOptions()
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, mask: Mask, *, train: bool) -> jax.Array:
        """x [B, n, d]; mask: bool[B, n, n] or a Mask with leading [B] -> [B, n, d]."""
        features, x = x.shape[-1], x.astype(self.dtype)
        dropped = nn.Dropout(rate=1.0 - self.keep_prob, deterministic=not train)(x)
        project = lambda name: DropoutDense(features, use_bias=False, dtype=self.dtype,
                                            name=name)(dropped, train=train)
        keys, queries = project("key"), project("query")
        keys = keys + self.param("score_bias", nn.initializers.zeros, (features,)).astype(
            self.dtype)
        score_fn, score_bound = score_function(self.score, self.c)
        if self.is_mutable_collection("intermediates"):
            self.sow("intermediates", "attention_weights",
                     feature_mean_probs(queries, keys, mask, score_fn))
        return multidim_token2token(queries, keys, x, mask, score_fn=score_fn,
                                    score_bound=score_bound, options=self.options)


class Source2Token(nn.Module):
    """Multi-dimensional source2token self-attention (DiSAN eq. 12-13, PSAN eq. 5).

    x [B, n, d], valid bool[B, n] -> [B, d]: f(x_i) = W sigma(W_1 x_i + b_1) + b,
    s = sum_i softmax_i(f(x_i)) ⊙ x_i over valid i, separately per feature (zeros if none valid).
    The scores are computed in `dtype`; the softmax and the sum run in float32, and s is float32.
    """

    activation: str = "elu"
    keep_prob: float = 1.0
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, valid: jax.Array, *, train: bool) -> jax.Array:
        features = x.shape[-1]
        dense = lambda name: DropoutDense(features, keep_prob=self.keep_prob, dtype=self.dtype,
                                          name=name)
        hidden = get_activation(self.activation)(dense("hidden")(x, train=train))
        scores = dense("score")(hidden, train=train)
        probs = masked_softmax(scores, valid[..., None], axis=-2)
        return jnp.sum(probs * at_least_float32(x), axis=-2)

"""Multi-dimensional (feature-wise) attention: token2token with any mask, and source2token.

DiSAN (Shen et al., 2018) eq. 10-11 and 15 (token2token), eq. 12-13 (source2token); PSAN (Wu et
al., 2018) eq. 1-2 and 5 reuse them with another score activation. Index convention: row j is the
query, column i the key (as in the authors' code). For one sentence of n tokens, d features:

    f_ji  = score(Q_j + K_i)                     Q = x W_q,  K = x W_k + b            [n, n, d]
    out_j = sum_i softmax_i(f_ji + M_ji) ⊙ V_i    softmax over keys, separately per feature

M_ji = 0 where the mask (jaxenc.layers.masks: DirectionalMask, SegmentMask, DenseMask, ...)
allows query j to see key i and -inf elsewhere; a query with no valid key outputs zeros.

Three implementations of the same function (`impl`):
- "dense": the [n, n, d] score tensor at once (the authors' formulation; O(n^2 d) memory).
- "blocked": a loop over query blocks holding at most [block, n, d] per example, recomputed in
  the backward pass (`jax.checkpoint`). Bounded scores (scaled tanh: |f| < c) need no
  max-subtraction, so one pass sums e^f ⊙ V_i and e^f. Any mask: all n^2 scores, masked.
- "directional": for a DirectionalMask (forward, backward, causal) and a bounded score, query
  block b meets only the key blocks on its allowed side: (nb + 1) / (2 nb) of the scores. A
  `lax.scan` over a static schedule (`_triangle_plan`) keeps shapes static and compile time
  independent of n; a custom VJP keeps per-query sums only (memory linear in n) and recomputes
  a step's scores once in one fused backward sweep; block sums are static-slice chains
  (`_block_sum`), which XLA:CPU vectorises. With any other mask or an unbounded score it
  computes what "blocked" computes, whose outputs stay pinned (tests/test_pinned_outputs.py).
  "auto" picks it wherever it applies.
`examples_per_step` examples go through the block loops together: 1 suits a CPU (each block stays
in cache), 0 (the whole batch) accelerators; "auto" picks per platform at lowering time
(jaxenc.layers.loops).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.errors import ConfigError
from jaxenc.layers.dense import DropoutDense, get_activation
from jaxenc.layers.dropout import Dropout
from jaxenc.layers.loops import AUTO, loop_setting, with_loop_setting
from jaxenc.layers.masks import DirectionalMask, Mask, as_mask, at_least_float32, masked_softmax

IMPLEMENTATIONS = ("auto", "dense", "blocked", "directional")
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
    reduces a [block, n, d] chunk over its leading axis slower than over the others, and the
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


def _triangle_plan(num_blocks: int, triangle: str) -> tuple[np.ndarray, ...]:
    """The static schedule of `token2token_directional` for `num_blocks` query (= key) blocks.

    Query block b needs key blocks 0..b (triangle "lower") or b..num_blocks-1 ("upper"), so
    blocks b and num_blocks-1-b together need num_blocks+1 key blocks: each step takes such a
    pair (the middle block of an odd count alone), and every step has the same static number of
    key-block slots. The steps cover exactly the key blocks on the allowed side of the diagonal,
    the diagonal blocks included.

    Returns (all int32 numpy arrays):
      query_blocks [steps, 2]: the two query blocks of each step (num_blocks: an all-padding
        spare block, the partner of a lone middle block; its output is dropped).
      key_blocks [steps, slots]: the key block of each slot (0 for an unused slot).
      owner [steps, slots]: which of the step's two query blocks a slot serves, -1: unused.
      order [num_blocks]: where block b's output lies among the steps' outputs [steps * 2].
    """
    def needed(block: int | None) -> list[int]:
        if block is None:
            return []
        return list(range(block + 1)) if triangle == "lower" else list(range(block, num_blocks))

    pairs = [(b, num_blocks - 1 - b) for b in range(num_blocks // 2)]
    if num_blocks % 2:
        pairs.append((num_blocks // 2, None))
    slots = max(len(needed(first)) + len(needed(second)) for first, second in pairs)
    query_blocks = np.full((len(pairs), 2), num_blocks, np.int32)
    key_blocks = np.zeros((len(pairs), slots), np.int32)
    owner = np.full((len(pairs), slots), -1, np.int32)
    order = np.zeros(num_blocks, np.int32)
    for step, pair in enumerate(pairs):
        row = [(side, key) for side, block in enumerate(pair) for key in needed(block)]
        for side, block in enumerate(pair):
            if block is not None:
                query_blocks[step, side] = block
                order[block] = 2 * step + side
        key_blocks[step, :len(row)] = [key for _, key in row]
        owner[step, :len(row)] = [side for side, _ in row]
    return query_blocks, key_blocks, owner, order


def _block_sum(x: jax.Array, axis: int) -> jax.Array:
    """Sum over a short (block-sized) axis as a chain of static slices: XLA:CPU turns a reduce
    into a slower library call that also fuses the producers' broadcast multiplies; these adds
    run in XLA's own loops over materialised inputs (a chain, not a tree of halves, into which
    XLA would fuse tanh/exp)."""
    return sum(jax.lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis]))


def _per_owner(owner_one_hot: jax.Array, slot_sums: jax.Array) -> jax.Array:
    """[2, q, d]: per-slot partial sums [S, q, d] added up per owning query block."""
    return jnp.einsum("so,sqd->oqd", owner_one_hot, slot_sums,
                      precision=jax.lax.Precision.HIGHEST)


def token2token_directional(queries: jax.Array, keys: jax.Array, values: jax.Array,
                            mask: DirectionalMask, *,
                            score_fn: Callable[[jax.Array], jax.Array],
                            block_size: int) -> jax.Array:
    """One sentence, as `token2token_dense`, computing only the key blocks the direction allows.

    For a DirectionalMask whose allowed keys all lie on one side of the query (forward, causal:
    `mask.triangle` "lower"; backward: "upper") and a bounded score (|f| <= FUSED_EXP_LIMIT, so
    e^f needs no max-subtraction). Queries and keys are cut into blocks of `block_size`; query
    block b meets only the key blocks on its allowed side, the diagonal block (partially
    masked) included: (nb + 1) / (2 nb) of the n x n score elements for nb blocks. A `lax.scan`
    over the steps of `_triangle_plan` (two query blocks a step, nb + 1 key blocks between them)
    keeps every shape static; each step holds [nb + 1, block, block, d] scores, about the
    [n, block, d] of the blocked kernel. A custom VJP keeps only the per-query sums (linear in
    n) and recomputes the scores of a step in the backward pass, in one fused sweep that yields
    the gradients of queries, keys and values together.
    """
    n, d = queries.shape
    if n == 0:
        return queries
    size = min(block_size, n)
    num_blocks = -(-n // size)
    plan = _triangle_plan(num_blocks, mask.triangle)

    def blocks(x: jax.Array, count: int) -> jax.Array:
        return jnp.pad(x, ((0, count * size - n), (0, 0))).reshape(count, size, d)

    attend = _directional_kernel(score_fn, mask.allows, plan, size)
    out = attend(blocks(queries, num_blocks + 1), blocks(keys, num_blocks),
                 blocks(values, num_blocks), jnp.asarray(mask.lengths))
    return out.reshape(num_blocks * size, d)[:n]


def _directional_kernel(score_fn: Callable[[jax.Array], jax.Array],
                        allows: Callable[[jax.Array, jax.Array], jax.Array],
                        plan: tuple[np.ndarray, ...], size: int) -> Callable:
    """(query blocks [nb+1, size, d], key and value blocks [nb, size, d], length int[]) ->
    output blocks [nb, size, d] with a custom VJP (`token2token_directional`)."""
    query_blocks, key_blocks, owner, order = plan
    schedule = (query_blocks, key_blocks, owner)  # numpy: constants wherever they are traced
    offsets = np.arange(size)

    def step_scores(step, q_blocks, k_blocks, v_blocks, length):
        """The step's score inputs z [S, key, query, d], valid [S, key, query, 1], values
        [S, key, d], slot -> owner one-hot [S, 2] and owner index [S]."""
        pair, slot_keys, slot_owner = step
        which = jnp.maximum(slot_owner, 0)
        query_pos = (pair[which] * size)[:, None] + offsets  # [S, query]
        key_pos = (slot_keys * size)[:, None] + offsets  # [S, key]
        valid = ((slot_owner >= 0)[:, None, None] & (key_pos < length)[:, :, None]
                 & allows(query_pos[:, None, :], key_pos[:, :, None]))
        z = k_blocks[slot_keys][:, :, None, :] + q_blocks[pair][which][:, None, :, :]
        one_hot = (slot_owner[:, None] == jnp.arange(2)).astype(z.dtype)
        return z, valid[..., None], v_blocks[slot_keys], one_hot, which

    def forward(q_blocks, k_blocks, v_blocks, length):
        def step(carry, plan_row):
            z, valid, slot_values, one_hot, _ = step_scores(plan_row, q_blocks, k_blocks,
                                                            v_blocks, length)
            # e^-inf = 0 masks inside the exponential's loop (a select after it is another pass)
            # mixed precision: scores in the input dtype, exponentials and sums in float32
            weights = jnp.exp(jnp.where(valid, at_least_float32(score_fn(z)), -jnp.inf))
            one_hot = one_hot.astype(weights.dtype)
            total = _per_owner(one_hot, _block_sum(weights, axis=1))
            weighted = _per_owner(one_hot, _block_sum(
                weights * at_least_float32(slot_values)[:, :, None], axis=1))
            return carry, (weighted / jnp.where(total > 0, total, 1.0), total)

        _, (out, total) = jax.lax.scan(step, None, schedule)  # [steps, 2, size, d] each
        blocks_out = out.reshape(-1, *out.shape[2:])[order].astype(v_blocks.dtype)
        return blocks_out, (out, total)

    @jax.custom_vjp
    def attend(q_blocks, k_blocks, v_blocks, length):
        return forward(q_blocks, k_blocks, v_blocks, length)[0]

    def attend_forward(q_blocks, k_blocks, v_blocks, length):
        blocks_out, (out, total) = forward(q_blocks, k_blocks, v_blocks, length)
        return blocks_out, (q_blocks, k_blocks, v_blocks, length, out, total)

    def attend_backward(residuals, grad_blocks):
        q_blocks, k_blocks, v_blocks, length, out, total = residuals
        # the cotangents in step layout; the spare query block (index nb) gets zeros
        grad = jnp.concatenate([grad_blocks, jnp.zeros_like(grad_blocks[:1])])[schedule[0]]

        def step(carry, inputs):
            grad_keys, grad_values = carry
            plan_row, step_out, step_total, step_grad = inputs
            z, valid, slot_values, one_hot, which = step_scores(plan_row, q_blocks, k_blocks,
                                                                v_blocks, length)
            score, slope = jax.jvp(score_fn, (z,), (jnp.ones_like(z),))
            score, slope, slot_values = map(at_least_float32, (score, slope, slot_values))
            one_hot = one_hot.astype(score.dtype)
            weights = jnp.exp(jnp.where(valid, score, -jnp.inf))
            # d out_j / d f_ji = e^f_ji (v_i - out_j) / total_j, per feature
            scale = step_grad / jnp.where(step_total > 0, step_total, 1.0)  # [2, size, d]
            shift = scale * step_out
            scaled = weights * scale[which][:, None]  # [S, key, query, d]: only the sum below
            grad_z = weights * (scale[which][:, None] * slot_values[:, :, None]
                                - shift[which][:, None]) * slope
            grad_queries = _per_owner(one_hot, _block_sum(grad_z, axis=1))  # [2, size, d]
            slot_keys = plan_row[1]
            grad_keys = grad_keys.at[slot_keys].add(_block_sum(grad_z, axis=2))
            grad_values = grad_values.at[slot_keys].add(_block_sum(scaled, axis=2))
            return (grad_keys, grad_values), grad_queries

        zeros = at_least_float32(jnp.zeros_like(k_blocks))
        (grad_keys, grad_values), grad_queries = jax.lax.scan(
            step, (zeros, zeros), (schedule, out, total, at_least_float32(grad)))
        grad_queries = grad_queries.reshape(-1, *grad_queries.shape[2:])[order]
        grad_queries = jnp.concatenate([grad_queries, jnp.zeros_like(grad_queries[:1])])
        return (grad_queries.astype(q_blocks.dtype), grad_keys.astype(k_blocks.dtype),
                grad_values.astype(v_blocks.dtype), None)

    attend.defvjp(attend_forward, attend_backward)
    return attend


def directional_applies(mask: Mask | jax.Array, score_bound: float | None) -> bool:
    """Whether `token2token_directional` computes this mask and score: a DirectionalMask with
    its keys on one side of the query and a bounded score."""
    return (isinstance(mask, DirectionalMask) and mask.triangle is not None
            and score_bound is not None and score_bound <= FUSED_EXP_LIMIT)


def resolve_impl(impl: str, length: int, blocked_threshold: int, mask: Mask | None = None,
                 score_bound: float | None = None) -> str:
    """"dense", "blocked" or "directional" for this bucket length, mask and score bound.

    "auto" picks dense below `blocked_threshold` tokens, and from there directional where it
    applies (`directional_applies`: DiSAN's forward/backward masks with the scaled tanh) and
    blocked otherwise; "directional" falls back to blocked where it does not apply.
    """
    if impl not in IMPLEMENTATIONS:
        raise ConfigError(f"unknown attention_impl {impl!r} "
                          f"(fix: use one of {', '.join(IMPLEMENTATIONS)})")
    if impl == "auto":
        impl = "blocked" if length >= blocked_threshold else "dense"
        if impl == "blocked" and mask is not None and directional_applies(mask, score_bound):
            impl = "directional"
    if impl == "directional" and not (mask is not None and directional_applies(mask, score_bound)):
        impl = "blocked"
    return impl


@dataclasses.dataclass(frozen=True)
class Token2TokenOptions:
    """How token2token attention is computed (never what it computes).

    Attributes:
      attention_impl: "dense", "blocked", "directional" or "auto" (dense below
        `blocked_threshold` tokens; from there directional where it applies, DiSAN's
        forward/backward masks with the scaled tanh, and blocked otherwise). "directional"
        elsewhere computes what "blocked" computes (module docstring).
      block_size: queries per block of the blocked implementation; queries and keys per block
        of the directional one (16 is fastest on a CPU).
      blocked_threshold: the shortest bucket length "auto" computes blocked or directional.
      examples_per_step: examples the blocked and directional loops take per step; 0 = the
        whole batch (right on accelerators), 1 = one at a time (fastest on one CPU device),
        "auto" = the platform's choice (jaxenc.layers.loops). A data-parallel run over several
        devices needs 0: any other count makes XLA gather the whole batch, which the devices
        split, on every device (`jaxenc.training.sharding.check_loop_settings` warns).
    A model config that inherits these fields (DiSAN, PSAN) passes itself as the options.
    """

    attention_impl: str = "auto"
    block_size: int = 16
    blocked_threshold: int = 16
    examples_per_step: int | str = AUTO

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """One-line ConfigError for an invalid option; cooperates with other config bases."""
        fix = f"--config.model.attention_impl=auto, one of {', '.join(IMPLEMENTATIONS)}"
        if self.attention_impl not in IMPLEMENTATIONS:
            raise ConfigError(f"model.attention_impl={self.attention_impl!r} is not one of "
                              f"{', '.join(IMPLEMENTATIONS)} (fix: {fix})")
        # a command line gives "0" for a field whose default is "auto": read it as 0
        object.__setattr__(self, "examples_per_step",
                           loop_setting(self.examples_per_step, "examples_per_step"))
        for name, least in (("block_size", 1), ("blocked_threshold", 0)):
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
    and directional ones visit `options.examples_per_step` examples at a time (0: all; "auto":
    jaxenc.layers.loops).
    """
    impl = resolve_impl(options.attention_impl, queries.shape[1], options.blocked_threshold,
                        mask, score_bound)
    if impl == "dense":
        return jax.vmap(partial(token2token_dense, score_fn=score_fn))(queries, keys, values, mask)
    if impl == "directional":
        per_example = partial(token2token_directional, score_fn=score_fn,
                              block_size=options.block_size)
    else:
        per_example = partial(token2token_blocked, score_fn=score_fn, score_bound=score_bound,
                              block_size=options.block_size)
    def loop(per_step: int) -> jax.Array:
        per_step = per_step or queries.shape[0]
        return jax.lax.map(lambda example: per_example(*example), (queries, keys, values, mask),
                           batch_size=None if per_step == 1 else per_step)

    return with_loop_setting(options.examples_per_step, loop)


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
    dropout_bits: int = 32  # random bits per dropout decision (jaxenc/layers/dropout.py)
    options: Token2TokenOptions = Token2TokenOptions()
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, mask: Mask, *, train: bool) -> jax.Array:
        """x [B, n, d]; mask: bool[B, n, n] or a Mask with leading [B] -> [B, n, d]."""
        features, x = x.shape[-1], x.astype(self.dtype)
        dropped = Dropout(rate=1.0 - self.keep_prob, mask_bits=self.dropout_bits,
                          deterministic=not train)(x)
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
    dropout_bits: int = 32  # random bits per dropout decision (jaxenc/layers/dropout.py)
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, valid: jax.Array, *, train: bool) -> jax.Array:
        features = x.shape[-1]
        dense = lambda name: DropoutDense(features, keep_prob=self.keep_prob,
                                          dropout_bits=self.dropout_bits, dtype=self.dtype,
                                          name=name)
        hidden = get_activation(self.activation)(dense("hidden")(x, train=train))
        scores = dense("score")(hidden, train=train)
        probs = masked_softmax(scores, valid[..., None], axis=-2)
        return jnp.sum(probs * at_least_float32(x), axis=-2)

"""Packed phrases on device: gather a level's phrases by the host's plan, apply, scatter back.

The plan (jaxenc.data.packing) of one level is a few index arrays int32[G, N, L_c], one per
length class: slot (g, n) lists the tokens of one phrase as positions `row_in_group * L +
position` into group g's flattened [B/G * L] tokens, then -1. Groups are B/G consecutive rows, so
with the batch and the plan both split over "data" by their leading axis every gather and scatter
stays on its device. Pure jnp with static shapes; the only Python loop is over the classes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp

from jaxenc.data.packing import level_prefix
from jaxenc.errors import ConfigError

# f(phrases [N, L_c, d], valid bool[N, L_c]) -> [N, L_c, d_out], one phrase per row.
PhraseFunction = Callable[[jax.Array, jax.Array], jax.Array]


def level_plan(fields: Mapping[str, jax.Array], level: int) -> list[jax.Array]:
    """The plan arrays int32[G, N_c, L_c] of `level` (1-based) among one role's batch fields,
    shortest class first."""
    prefix = level_prefix(level)
    return sorted((value for key, value in fields.items() if key.startswith(prefix)),
                  key=lambda index: index.shape[-1])


def gather_phrases(x: jax.Array, index: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The phrases of one class: (phrases [G, N, L_c, d], valid bool[G, N, L_c]).

    x: [B, L, d] token states (B a multiple of G); index: int32[G, N, L_c] plan of the class.
    Empty positions (-1) are zeros in `phrases` and False in `valid`; `valid.sum(-1)` is each
    slot's phrase length (0 for an unused slot).
    """
    groups = index.shape[0]
    tokens = x.reshape(groups, -1, x.shape[-1])  # [G, B/G * L, d]
    valid = index >= 0
    phrases = jax.vmap(lambda group, slots: group[slots])(tokens, jnp.maximum(index, 0))
    return jnp.where(valid[..., None], phrases, 0), valid


def scatter_phrases(phrases: jax.Array, index: jax.Array, out: jax.Array) -> jax.Array:
    """`out` [B, L, d] plus each phrase position added at its token (-1 slots dropped).

    phrases: [G, N, L_c, d]; index: int32[G, N, L_c] plan of the class. Start from zeros to get
    the phrases alone; every token is in at most one slot of a level, so adding the classes of a
    level one after the other writes each token once.
    """
    groups, features = index.shape[0], out.shape[-1]
    size = out.shape[0] // groups * out.shape[1]
    target = jnp.where(index >= 0, index, size).reshape(groups, -1)  # size: out of range, dropped
    values = phrases.reshape(groups, -1, features).astype(out.dtype)
    grouped = jax.vmap(lambda base, slots, value: base.at[slots].add(value, mode="drop"))(
        out.reshape(groups, size, features), target, values)
    return grouped.reshape(out.shape)


def apply_packed(function: PhraseFunction, x: jax.Array, plan: Sequence[jax.Array]) -> jax.Array:
    """`function` applied to every phrase of one level, scattered back: [B, L, d_out].

    x: [B, L, d]; plan: the level's class index arrays int32[G, N_c, L_c] (`level_plan`).
    `function(phrases [G*N_c, L_c, d], valid bool[G*N_c, L_c]) -> [G*N_c, L_c, d_out]` sees each
    class as one batch of phrases (zeros at invalid positions, unused slots all invalid). Tokens
    outside every phrase (padding, filler rows) are zero.

    The classes' slots are gathered in one gather and written back in one scatter (their indices
    concatenated, [G, sum_c N_c L_c]) rather than one of each per class: on Table 5's TREC batch
    (about 20 exact-length classes per level) PSAN's train step then peaks at 0.83x the memory
    (bench/bench_psan.py, results/psan).
    """
    if not plan:
        raise ConfigError("no packing plan for this level (fix: batch with a PackingConfig; "
                          "jaxenc.data.packing)")
    groups = plan[0].shape[0]
    slots = jnp.concatenate([index.reshape(groups, -1, 1) for index in plan], axis=1)
    gathered, _ = gather_phrases(x, slots)  # [G, S, 1, d], S = sum_c N_c L_c
    results, offset = [], 0
    for index in plan:
        _, count, size = index.shape
        phrases = gathered[:, offset:offset + count * size].reshape(
            groups * count, size, x.shape[-1])
        result = function(phrases, (index >= 0).reshape(groups * count, size))
        results.append(result.reshape(groups, count * size, 1, -1))
        offset += count * size
    values = jnp.concatenate(results, axis=1)
    out = jnp.zeros((*x.shape[:2], values.shape[-1]), values.dtype)
    return scatter_phrases(values, slots, out)

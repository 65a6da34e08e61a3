"""Packed phrases on device: gather a level's phrases by the host's plan, apply, scatter back.

The plan (jaxenc.data.packing) of one level is a few index arrays int32[G, N, L_c], one per
length class: slot (g, n) lists the tokens of one phrase as positions `row_in_group * L +
position` into group g's flattened [B/G * L] tokens, then -1. Groups are B/G consecutive rows, so
with the batch and the plan both split over "data" by their leading axis every gather and scatter
stays on its device. Pure jnp with static shapes.

Two ways to use a plan:
- `apply_packed`: any per-phrase function, called once per class on [G N_c, L_c, d] (a trace,
  and so a compile time, that grows with the number of classes);
- `phrase_attention`: PSA's multi-dimensional attention within phrases (PSAN eq. 1-2) as one
  fixed set of operations whatever the classes: the slots are laid out in tiles of a few
  positions (`tile_schedule`, from the plan's shapes alone) and attention runs over pairs of
  tiles, so the train step compiles in about the time of the dense [L, L] form.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.data.packing import level_prefix
from jaxenc.errors import ConfigError
from jaxenc.layers.masks import at_least_float32

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
    outside every phrase (padding, filler rows) are zero. The classes' slots are gathered in one
    gather and written back in one scatter (their indices concatenated, [G, sum_c N_c L_c]);
    `function` is traced once per class.
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


@dataclasses.dataclass(frozen=True, eq=False)
class TileSchedule:
    """One level's plan laid out in tiles of `tile` positions (numpy, from the plan's shapes
    alone: static for a bucket, built once per trace).

    The slots of the level's classes are placed in `level_plan` order (shortest class first): a
    slot of at most `tile` positions goes into the last tile while it fits there and opens the
    next tile otherwise; a longer slot fills ceil(L_c / tile) tiles of its own. Slots of one
    position get no tile: a one-word phrase has no key, so its output is zero without one.

    Attributes:
      positions: int32[T + 1, tile] each tile position's column in the level's plan arrays
        concatenated along their slots ([G, sum_c N_c L_c]), -1 where empty; tile T is empty
        (where padding pairs point).
      same: bool[T + 1, tile, tile] query position i and key position j of a tile lie in one
        slot and differ (PSA's diag-disabled mask within a tile).
      query_tiles, key_tiles: int32[P] the other tile pairs that attend each other: within a
        slot of k > 1 tiles, each tile with each of its k - 1 others, sorted by query tile.
    """

    positions: np.ndarray
    same: np.ndarray
    query_tiles: np.ndarray
    key_tiles: np.ndarray

    @property
    def num_tiles(self) -> int:
        """T + 1: the tiles, the empty one included."""
        return self.positions.shape[0]


@functools.lru_cache(maxsize=256)
def tile_schedule(shapes: tuple[tuple[int, int], ...], tile: int) -> TileSchedule:
    """The TileSchedule of a level whose plan arrays have the shapes [G, N_c, L_c] of `shapes`
    ((N_c, L_c) per class, `level_plan` order)."""
    tiles, offsets, columns, slot_ids = [], [], [], []
    query_tiles, key_tiles = [], []
    num_tiles = fill = column = slot = 0  # fill: positions taken in the last tile
    for count, length in shapes:
        if length == 1:
            column, slot = column + count, slot + count
            continue
        index = np.arange(count * length)
        within, number = index % length, index // length
        if length <= tile:
            fit = min(count, (tile - fill) // length) if num_tiles else 0
            rest = number - fit  # slot number among those that open tiles
            per_tile = tile // length
            tile_of = np.where(rest < 0, num_tiles - 1, num_tiles + rest // per_tile)
            offset = np.where(rest < 0, fill + number * length,
                              rest % per_tile * length) + within
            if count > fit:
                num_tiles += -(-(count - fit) // per_tile)
                fill = ((count - fit - 1) % per_tile + 1) * length
            else:
                fill += count * length
        else:
            parts = -(-length // tile)
            tile_of = num_tiles + number * parts + within // tile
            offset = within % tile
            first = num_tiles + parts * np.arange(count)[:, None, None]
            pair = np.nonzero(~np.eye(parts, dtype=bool))
            query_tiles.append((first + pair[0][None, :, None]).reshape(-1))
            key_tiles.append((first + pair[1][None, :, None]).reshape(-1))
            num_tiles += count * parts
            fill = tile  # a long slot's last tile takes no short slot
        tiles.append(tile_of)
        offsets.append(offset)
        columns.append(column + index)
        slot_ids.append(slot + number)
        column, slot = column + count * length, slot + count
    positions = np.full((num_tiles + 1, tile), -1, np.int32)
    slots = np.full((num_tiles + 1, tile), -1, np.int64)
    if tiles:
        where = (np.concatenate(tiles), np.concatenate(offsets))
        positions[where] = np.concatenate(columns)
        slots[where] = np.concatenate(slot_ids)
    same = ((slots[:, :, None] == slots[:, None, :]) & (slots[:, :, None] >= 0)
            & ~np.eye(tile, dtype=bool))
    pairs = [np.concatenate(side).astype(np.int32) if side else np.zeros(0, np.int32)
             for side in (query_tiles, key_tiles)]
    return TileSchedule(positions, same, *pairs)


def phrase_attention(queries: jax.Array, keys: jax.Array, values: jax.Array,
                     plan: Sequence[jax.Array], *, score_fn: Callable[[jax.Array], jax.Array],
                     tile: int, chunk: int) -> jax.Array:
    """Multi-dimensional token2token attention within the phrases of one level: [B, L, d].

    queries, keys (score bias included), values: [B, L, d]; plan: the level's class index
    arrays int32[G, N_c, L_c] (`level_plan`). Query j of a phrase attends the phrase's other
    tokens i: out_j = sum_i softmax_i(score_fn(q_j + k_i)) ⊙ v_i, per feature; a token without
    one (a one-word phrase) and every token outside the phrases get zeros: what
    `jaxenc.layers.multidim_attention` computes with a diag-disabled same-phrase mask (equal up
    to float rounding, in values and gradients).

    The slots go to tiles of `tile` positions (`tile_schedule`); every tile attends itself and,
    within a slot of several tiles, each of the slot's other tiles: T + 1 + P tile pairs of
    [tile, tile, d] scores each, whatever the number of classes, so the trace (and the compile
    time) does not grow with the classes. Each query keeps a running max and the sums
    sum_i e^(score - max) and sum_i e^(score - max) v_i over its pairs (rescaled when a later
    pair raises the max), as a softmax split over key blocks does. Scores cost
    (T + 1 + P) tile^2 d per group against (B / G) L^2 d for the dense [L, L] form: a short
    phrase pays up to `tile` keys per token, a long one its length rounded up to whole tiles.

    chunk = 0 takes every pair in one step; chunk = k > 0 loops over the pairs,
    ceil(k L^2 / tile^2) per step (the score tiles of k phrases of the bucket length L). A custom
    VJP keeps only each query's output and log-sum-exp, float32[G, T + 1, tile, d], and
    recomputes the scores step by step in the backward pass, so memory beyond one step's
    [G, C, tile, tile, d] scores is linear in the tokens. The loop keeps the group axis G, so a
    batch and plan split over devices by group stay on their devices.
    Mixed precision: scores in the inputs' dtype, exponentials and sums in float32, the result
    in the values' dtype.
    """
    if not plan:
        raise ConfigError("no packing plan for this level (fix: batch with a PackingConfig; "
                          "jaxenc.data.packing)")
    schedule = tile_schedule(tuple((int(index.shape[1]), int(index.shape[2])) for index in plan),
                             tile)
    groups = plan[0].shape[0]
    columns = jnp.concatenate([index.reshape(groups, -1) for index in plan], axis=1)
    index = jnp.where(schedule.positions >= 0,
                      columns[:, np.maximum(schedule.positions, 0)], -1)  # [G, T + 1, tile]
    per_step = -(-chunk * queries.shape[1] ** 2 // tile ** 2)  # chunk phrases of length L
    out = _tile_attention(score_fn, schedule, per_step)(queries, keys, values, index)
    return scatter_phrases(out, index, jnp.zeros(values.shape, values.dtype))


def _tile_pairs(schedule: TileSchedule, per_step: int) -> tuple[np.ndarray, np.ndarray]:
    """(query tiles, key tiles) int32[steps, C] of every pair: each tile with itself, then the
    schedule's other pairs, padded with the empty tile; C = per_step, or every pair in one step
    when per_step is 0 or at least their count."""
    own = np.arange(schedule.num_tiles, dtype=np.int32)
    query = np.concatenate([own, schedule.query_tiles])
    key = np.concatenate([own, schedule.key_tiles])
    chunk = min(per_step, len(query)) or len(query)
    padding = np.full(-len(query) % chunk, schedule.num_tiles - 1, np.int32)
    return (np.concatenate([query, padding]).reshape(-1, chunk),
            np.concatenate([key, padding]).reshape(-1, chunk))


def _gather_tiles(x: jax.Array, index: jax.Array, which: jax.Array) -> jax.Array:
    """[G, C, tile, d]: the token states x [B, L, d] at the positions of tiles `which` int[C]
    (index int32[G, T + 1, tile]; an empty position gets its group's first token)."""
    grouped = x.reshape(index.shape[0], -1, x.shape[-1])
    return jax.vmap(lambda tokens, slots: tokens[slots])(grouped, jnp.maximum(index[:, which], 0))


def _scatter_tiles(target: jax.Array, index: jax.Array, which: jax.Array,
                   update: jax.Array) -> jax.Array:
    """`target` [G, B/G * L, d] plus `update` [G, C, tile, d] added at the positions of tiles
    `which` int[C] (empty positions dropped)."""
    slots = jnp.where(index[:, which] >= 0, index[:, which], target.shape[1])
    return jax.vmap(lambda base, at, value: base.at[at].add(value, mode="drop"))(
        target, slots, update)


def _key_sum(x: jax.Array) -> jax.Array:
    """x [..., key, d] summed over its short (tile-sized) key axis as a chain of static slices.
    For the forward pass's weighted values sum: XLA:CPU hands that reduce of a broadcast product
    to a library call slower than its own loops on [C, tile, tile, d] tiles (the other
    reductions here stay reduce ops, which compile faster than chains)."""
    return functools.reduce(jnp.add, (x[..., i, :] for i in range(x.shape[-2])))


def _tile_attention(score_fn: Callable[[jax.Array], jax.Array], schedule: TileSchedule,
                    per_step: int) -> Callable:
    """(queries, keys, values [B, L, d], tile index int32[G, T + 1, tile]) -> the attention
    output of every tile position, values' dtype [G, T + 1, tile, d], with a custom VJP that
    keeps only each query's output and log-sum-exp and recomputes the scores
    (`phrase_attention`)."""
    query_tiles, key_tiles = _tile_pairs(schedule, per_step)
    same = schedule.same
    lowest = jnp.finfo(jnp.float32).min

    def step_scores(pair, queries, keys, index):
        """z [G, C, query, key, d] and the mask bool[G, C, query, key, 1] of a step's pairs."""
        query, key = pair
        z = (_gather_tiles(queries, index, query)[:, :, :, None, :]
             + _gather_tiles(keys, index, key)[:, :, None, :, :])
        allowed = jnp.where((query == key)[:, None, None], jnp.asarray(same)[query], True)
        return z, (allowed & (index[:, key] >= 0)[:, :, None, :])[..., None]

    def add_sums(sums, pair, masked, allowed, top, values, index):
        """`sums` (total, weighted) [G, T + 1, tile, d] plus the step's e^(score - top) sums."""
        query, key = pair
        weights = jnp.where(allowed, jnp.exp(masked - top[:, :, :, None, :]), 0.0)
        tile_values = at_least_float32(_gather_tiles(values, index, key))[:, :, None, :, :]
        return (sums[0].at[:, query].add(jnp.sum(weights, axis=-2)),
                sums[1].at[:, query].add(_key_sum(weights * tile_values)))

    def forward(queries, keys, values, index):
        shape = (*index.shape, values.shape[-1])
        zeros = jnp.zeros(shape, jnp.float32)

        def scores(pair):
            z, allowed = step_scores(pair, queries, keys, index)
            return jnp.where(allowed, at_least_float32(score_fn(z)), lowest), allowed

        if len(query_tiles) == 1:  # every pair at once: the max first, then the sums
            pair = (query_tiles[0], key_tiles[0])
            masked, allowed = scores(pair)
            best = jnp.full(shape, lowest).at[:, pair[0]].max(jnp.max(masked, axis=-2))
            total, weighted = add_sums((zeros, zeros), pair, masked, allowed,
                                       best[:, pair[0]], values, index)
        else:  # the sums so far rescaled to each query's new max at every step
            def step(carry, pair):
                best, total, weighted = carry
                query = pair[0]
                masked, allowed = scores(pair)
                before = best[:, query]
                best = best.at[:, query].max(jnp.max(masked, axis=-2))
                top = best[:, query]
                rescale = jnp.exp(before - top)  # equal for every pair of one query tile
                sums = (total.at[:, query].set(total[:, query] * rescale),
                        weighted.at[:, query].set(weighted[:, query] * rescale))
                return (best, *add_sums(sums, pair, masked, allowed, top, values, index)), None

            (best, total, weighted), _ = jax.lax.scan(
                step, (jnp.full(shape, lowest), zeros, zeros), (query_tiles, key_tiles))
        found = total > 0  # a query without a key outputs zeros
        out = weighted / jnp.where(found, total, 1.0)
        return out, jnp.where(found, best + jnp.log(jnp.where(found, total, 1.0)), 0.0)

    @jax.custom_vjp
    def attend(queries, keys, values, index):
        return forward(queries, keys, values, index)[0].astype(values.dtype)

    def attend_forward(queries, keys, values, index):
        out, log_total = forward(queries, keys, values, index)
        return out.astype(values.dtype), (queries, keys, values, index, out, log_total)

    def attend_backward(residuals, grad):
        queries, keys, values, index, out, log_total = residuals
        grad = at_least_float32(grad)
        shift = grad * out  # d out_j / d f_ji = p_ji (v_i - out_j), per feature

        def step(grads, pair):
            query, key = pair
            z, allowed = step_scores(pair, queries, keys, index)
            score, slope = jax.jvp(score_fn, (z,), (jnp.ones_like(z),))
            score, slope = at_least_float32(score), at_least_float32(slope)
            probs = jnp.where(allowed, jnp.exp(jnp.where(allowed, score, lowest)
                                               - log_total[:, query][:, :, :, None, :]), 0.0)
            weighted = probs * grad[:, query][:, :, :, None, :]
            tile_values = at_least_float32(_gather_tiles(values, index, key))[:, :, None, :, :]
            grad_z = slope * (weighted * tile_values - probs * shift[:, query][:, :, :, None, :])
            return (_scatter_tiles(grads[0], index, query, jnp.sum(grad_z, axis=-2)),
                    _scatter_tiles(grads[1], index, key, jnp.sum(grad_z, axis=-3)),
                    _scatter_tiles(grads[2], index, key, jnp.sum(weighted, axis=-3))), None

        groups, features = index.shape[0], values.shape[-1]
        zeros = jnp.zeros((groups, values.size // (groups * features), features), jnp.float32)
        if len(query_tiles) == 1:
            grads, _ = step((zeros, zeros, zeros), (query_tiles[0], key_tiles[0]))
        else:
            grads, _ = jax.lax.scan(step, (zeros, zeros, zeros), (query_tiles, key_tiles))
        return (*(grad.reshape(primal.shape).astype(primal.dtype) for grad, primal in zip(
            grads, (queries, keys, values), strict=True)), None)

    attend.defvjp(attend_forward, attend_backward)
    return attend

"""Greedy and beam-search decoding with static shapes and a key/value cache, and corpus BLEU
with sacrebleu.

Both decoders call `step_fn(tokens int32[N, T], t int32[], cache) -> (logits float32[N, V],
cache)`: tokens is the buffer of T = max_length positions [BOS, y_1, ..., y_t, PAD, ...], the
logits give y_{t+1}, and the cache (a pytree whose leaves have the N rows first) carries what the
model keeps of positions 0..t. A key/value-cached step (`jaxenc.tasks.seq2seq.translate`) reads
only tokens[:, t] and keeps each decoder self-attention's keys and values [N, max_length, H,
d_k], written at t: O(1) decoder positions per step. `full_buffer_step` reruns a causal
`logits_fn` over the whole buffer with an empty cache (O(T^2) per sequence), the reference the
cached decoders are tested against.

The cache never changes shape, so each function compiles once per (batch, source bucket); one
`lax.while_loop` stops once every row has produced EOS (or after max_length tokens). Outputs are
int32[B, max_length]: y_1 .. y_n, EOS, then PAD (0); a row without EOS is cut at max_length.
Rows marked `done` (a padded batch's filler rows) start finished and stay PAD.

Beam search keeps `beam_size` hypotheses per row, ranked by log P(y) / lp(y), lp = ((5 + |y|) /
6) ** length_penalty (Wu et al. 2016; 0 = no normalisation), |y| counting EOS. A finished
hypothesis stays in the beam, extended only by PAD at no cost; the result is the best-scoring
one. Cache rows follow their hypotheses (every leaf gathered by beam, as flax's wmt example's
`gather_beams`). beam_size=1 is exactly greedy decoding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import sacrebleu
from sacrebleu.metrics.bleu import BLEUScore
from sacremoses import MosesDetokenizer

from jaxenc.data.vocab import BOS, EOS, PAD

_MOSES = MosesDetokenizer(lang="en")  # the target language of Multi30k de -> en

Cache = Any
"""A pytree of arrays whose first axis is the N decoded rows (the empty tuple: no cache)."""
StepFn = Callable[[jax.Array, jax.Array, Cache], tuple[jax.Array, Cache]]
"""(tokens int32[N, T] the buffer so far, t int32[], cache) -> (logits float32[N, V]
predicting token t + 1, the cache with position t added)."""
LogitsFn = Callable[[jax.Array, jax.Array], jax.Array]
"""(tokens int32[N, T], position t int32[]) -> logits float32[N, V] predicting token t + 1."""


def full_buffer_step(logits_fn: LogitsFn) -> StepFn:
    """The uncached reference as a step function (its cache is the empty tuple): `logits_fn`
    over the whole token buffer at every step, all T positions recomputed, O(T^2) positions per
    sequence; the tests and bench/bench_decoding.py check and time the cached decoders
    against it."""
    return lambda tokens, t, cache: (logits_fn(tokens, t), cache)


def _buffer(rows: int, max_length: int) -> jax.Array:
    """int32[rows, max_length + 1]: BOS, then PAD."""
    return jnp.zeros((rows, max_length + 1), jnp.int32).at[:, 0].set(BOS)


def _not_decoded(done: jax.Array | None, batch_size: int) -> jax.Array:
    """bool[B]: the rows that `done` marks as needing no decoding (none when it is None)."""
    return (jnp.zeros(batch_size, bool) if done is None
            else jnp.broadcast_to(jnp.asarray(done, bool), (batch_size,)))


def greedy_decode(step_fn: StepFn, cache: Cache, batch_size: int, max_length: int,
                  done: jax.Array | None = None) -> jax.Array:
    """int32[B, max_length]: the most probable next token at every step, until EOS. `cache` is
    the step function's initial cache for the B rows; `done` bool[B] marks rows that need no
    decoding (a batch's filler rows): they start finished, stay PAD, and the loop ends once
    every other row has (the other rows' tokens are those of a call without `done`)."""

    def step(state):
        t, tokens, finished, cache = state
        logits, cache = step_fn(tokens[:, :max_length], t, cache)
        chosen = jnp.where(finished, PAD, jnp.argmax(logits, axis=-1).astype(jnp.int32))
        return t + 1, tokens.at[:, t + 1].set(chosen), finished | (chosen == EOS), cache

    def going(state):
        t, _, finished, _ = state
        return (t < max_length) & ~jnp.all(finished)

    state = (jnp.int32(0), _buffer(batch_size, max_length), _not_decoded(done, batch_size),
             cache)
    return jax.lax.while_loop(going, step, state)[1][:, 1:]


def length_penalty_factor(lengths: jax.Array, alpha: float) -> jax.Array:
    """lp(|y|) = ((5 + |y|) / 6) ** alpha."""
    return ((5.0 + lengths.astype(jnp.float32)) / 6.0) ** alpha


def gather_rows(cache: Cache, rows: jax.Array) -> Cache:
    """Every leaf [N, ...] of `cache` -> leaf[rows] (rows int32[N]): the cache of the chosen
    hypotheses, in their new order."""
    return jax.tree.map(lambda leaf: jnp.take(leaf, rows, axis=0), cache)


def beam_search(step_fn: StepFn, cache: Cache, batch_size: int, beam_size: int, max_length: int,
                length_penalty: float = 0.6,
                done: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """(int32[B, max_length] best hypothesis, float32[B] its normalised log-probability).

    `step_fn` and `cache` hold beam_size rows per example, example-major (rows b * beam_size +
    j), so the caller repeats the encoder memory `beam_size` times along the batch axis.
    `done` bool[B] marks examples that need no decoding (a batch's filler rows): their
    hypotheses start finished (all PAD, score 0) and the loop ends once every other example's
    have (the other examples' results are those of a call without `done`).
    """
    rows = batch_size * beam_size

    def step(state):
        t, tokens, scores, lengths, finished, cache = state  # [B, K, T+1], [B, K] x 3
        logits, cache = step_fn(tokens.reshape(rows, -1)[:, :max_length], t, cache)
        log_probs = jax.nn.log_softmax(logits.astype(jnp.float32)).reshape(
            batch_size, beam_size, -1)
        vocab = log_probs.shape[-1]
        only_pad = jnp.where(jnp.arange(vocab) == PAD, 0.0, -jnp.inf)
        log_probs = jnp.where(finished[..., None], only_pad, log_probs)
        candidate = scores[..., None] + log_probs  # [B, K, V]
        candidate_length = jnp.where(finished, lengths, t + 1)[..., None]
        ranked = candidate / length_penalty_factor(candidate_length, length_penalty)
        _, best = jax.lax.top_k(ranked.reshape(batch_size, -1), beam_size)  # [B, K]
        beam, token = best // vocab, (best % vocab).astype(jnp.int32)
        pick = lambda x: jnp.take_along_axis(x, beam, axis=1)
        tokens = jnp.take_along_axis(tokens, beam[..., None], axis=1).at[:, :, t + 1].set(token)
        scores = jnp.take_along_axis(candidate.reshape(batch_size, -1), best, axis=1)
        lengths = jnp.where(pick(finished), pick(lengths), t + 1)
        cache = gather_rows(cache, (jnp.arange(batch_size)[:, None] * beam_size + beam).reshape(-1))
        return t + 1, tokens, scores, lengths, pick(finished) | (token == EOS), cache

    def going(state):
        t, *_, finished, _ = state
        return (t < max_length) & ~jnp.all(finished)

    first_only = jnp.where(jnp.arange(beam_size) == 0, 0.0, -jnp.inf)  # no duplicate starts
    state = (jnp.int32(0), _buffer(rows, max_length).reshape(batch_size, beam_size, -1),
             jnp.broadcast_to(first_only, (batch_size, beam_size)),
             jnp.zeros((batch_size, beam_size), jnp.int32),
             jnp.broadcast_to(_not_decoded(done, batch_size)[:, None], (batch_size, beam_size)),
             cache)
    _, tokens, scores, lengths, _, _ = jax.lax.while_loop(going, step, state)
    normalised = scores / length_penalty_factor(lengths, length_penalty)
    best = jnp.argmax(normalised, axis=1)
    chosen = jnp.take_along_axis(tokens, best[:, None, None], axis=1)[:, 0, 1:]
    return chosen, jnp.take_along_axis(normalised, best[:, None], axis=1)[:, 0]


def strip_special(ids: Sequence[int]) -> list[int]:
    """A decoded row's ids up to (without) the first EOS, PAD and BOS dropped."""
    kept = []
    for token in ids:
        if token == EOS:
            break
        if token not in (PAD, BOS):
            kept.append(int(token))
    return kept


def detokenize(tokens: Sequence[str]) -> str:
    """Tokens -> text for BLEU: the Moses detokenizer for English (sacremoses), which undoes the
    tokenisation of Multi30k's `lc.norm.tok` files (spaces before punctuation, split clitics)."""
    return _MOSES.detokenize(list(tokens))


def corpus_bleu(hypotheses: Sequence[Sequence[str]],
                references: Sequence[Sequence[str]]) -> tuple[BLEUScore, str]:
    """(score, signature): sacrebleu's corpus BLEU (default 13a tokenisation, case-sensitive) of
    detokenised token lists against one reference each. `str(score)` is what sacrebleu prints,
    e.g. "BLEU = 34.61 65.1/41.2/27.9/19.3 (BP = 1.000 ratio = 1.003 hyp_len = ...)"."""
    bleu = sacrebleu.metrics.BLEU()
    score = bleu.corpus_score([detokenize(h) for h in hypotheses],
                              [[detokenize(r) for r in references]])
    return score, str(bleu.get_signature())

"""Greedy and beam decoding (static shapes, stop at </s>, length penalty) and sacrebleu BLEU."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.data.vocab import BOS, EOS, PAD
from jaxenc.tasks import decoding

VOCAB, MAX_LENGTH = 9, 7
A, B = 6, 7  # two ordinary tokens


def bigram_model(seed: int):
    """logits_fn of a random bigram model: the next token depends on the last one only."""
    table = jax.random.normal(jax.random.key(seed), (VOCAB, VOCAB)) * 3.0
    return lambda tokens, t: table[tokens[:, t]]  # [N, T], t -> [N, V]


def scripted(next_probs: dict[tuple[int, ...], dict[int, float]]):
    """logits_fn of a model given as {prefix after BOS: {token: probability}} (others ~0)."""
    table = np.full((VOCAB,) * 3, -30.0, np.float32)  # [t, token at t, previous-but-one]
    for prefix, probs in next_probs.items():
        for token, prob in probs.items():
            last = prefix[-1] if prefix else BOS
            before = prefix[-2] if len(prefix) > 1 else (BOS if prefix else PAD)
            table[last, before, token] = np.log(prob)
    table = jnp.asarray(table)

    def logits_fn(tokens, t):
        before = jnp.pad(tokens, ((0, 0), (1, 0)))[:, t]
        return table[tokens[:, t], before]

    return logits_fn


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_of_one_is_greedy(seed):
    logits_fn = bigram_model(seed)
    greedy = jax.jit(decoding.greedy_decode, static_argnums=(0, 1, 2))(logits_fn, 3, MAX_LENGTH)
    beam, score = jax.jit(decoding.beam_search, static_argnums=(0, 1, 2, 3))(
        logits_fn, 3, 1, MAX_LENGTH)
    chex.assert_shape(greedy, (3, MAX_LENGTH))
    chex.assert_type([greedy, beam], jnp.int32)
    np.testing.assert_array_equal(beam, greedy)
    chex.assert_tree_all_finite(score)


def test_decoding_stops_at_eos_and_pads_after_it():
    # after BOS: A, then EOS; a row never goes on after EOS
    logits_fn = scripted({(): {A: 0.9}, (A,): {EOS: 0.9}})
    for decoded in (decoding.greedy_decode(logits_fn, 2, MAX_LENGTH),
                    decoding.beam_search(logits_fn, 2, 3, MAX_LENGTH)[0]):
        np.testing.assert_array_equal(decoded, [[A, EOS] + [PAD] * (MAX_LENGTH - 2)] * 2)
    # a model that never says EOS is cut at max_length
    endless = scripted({(): {A: 0.9}, (A,): {A: 0.9}, (A, A): {A: 0.9}})
    np.testing.assert_array_equal(decoding.greedy_decode(endless, 1, MAX_LENGTH),
                                  [[A] * MAX_LENGTH])
    assert decoding.strip_special([A, B, EOS, A, PAD]) == [A, B]


def test_beam_finds_what_greedy_misses_and_length_penalty_prefers_longer():
    # greedy takes A (0.6) and ends with 0.6 * 0.3; the beam finds B EOS with 0.4 * 1.0
    trap = scripted({(): {A: 0.6, B: 0.4}, (A,): {EOS: 0.3, A: 0.25, B: 0.25},
                     (A, A): {EOS: 1.0}, (A, B): {EOS: 1.0}, (B,): {EOS: 1.0}})
    assert decoding.greedy_decode(trap, 1, MAX_LENGTH)[0, :2].tolist() == [A, EOS]
    tokens, score = decoding.beam_search(trap, 1, 2, MAX_LENGTH, length_penalty=0.0)
    assert tokens[0, :2].tolist() == [B, EOS]
    np.testing.assert_allclose(score, np.log(0.4), rtol=1e-5)
    # EOS now (0.55) or A then EOS (0.45): raw log-probability picks the short one, a strong
    # length penalty (alpha 2: lp(2) / lp(1) = (7/6)^2) the long one
    choice = scripted({(): {EOS: 0.55, A: 0.45}, (A,): {EOS: 1.0}})
    short = decoding.beam_search(choice, 1, 2, MAX_LENGTH, length_penalty=0.0)
    long = decoding.beam_search(choice, 1, 2, MAX_LENGTH, length_penalty=2.0)
    assert short[0][0, :1].tolist() == [EOS] and long[0][0, :2].tolist() == [A, EOS]
    np.testing.assert_allclose(long[1], np.log(0.45) / (7 / 6) ** 2, rtol=1e-5)


def test_bleu_of_a_perfect_hypothesis_is_100_and_text_is_detokenised():
    references = [("a", "man", "'s", "dog", ",", "running", "."), ("two", "kids", "play", "!")]
    score, signature = decoding.corpus_bleu(references, references)
    assert score.score == pytest.approx(100.0) and str(score).startswith("BLEU = 100.00 ")
    assert "tok:13a" in signature and "nrefs:1" in signature
    assert decoding.detokenize(references[0]) == "a man's dog, running."
    worse, _ = decoding.corpus_bleu([("a", "dog", "running", ".")] * 2, references)
    assert 0.0 <= worse.score < 100.0

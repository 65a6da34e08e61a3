"""Greedy and beam decoding (static shapes, stop at </s>, length penalty), the key/value-cached
decoders against the full-buffer reference (toy models, the Transformer and Mean-Max AAE
decoders: the same logits at every position, the same tokens), MultiHeadAttention's decode mode
against its full-sequence call (both cores, the training parameters), and sacrebleu BLEU."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.configs import model_config
from jaxenc.data.vocab import BOS, EOS, PAD
from jaxenc.layers import attention as attention_module
from jaxenc.layers.attention import MultiHeadAttention
from jaxenc.layers.masks import DirectionalMask, length_mask
from jaxenc.layers.transformer import TransformerDecoder
from jaxenc.models.registry import build_encoder, own_decoder
from jaxenc.tasks import decoding
from jaxenc.tasks.seq2seq import Seq2Seq, translate

VOCAB, MAX_LENGTH = 9, 7
A, B = 6, 7  # two ordinary tokens


def greedy(logits_fn, rows: int) -> jax.Array:
    """Greedy decoding of a full-buffer `logits_fn` (the uncached reference)."""
    return decoding.greedy_decode(decoding.full_buffer_step(logits_fn), (), rows, MAX_LENGTH)


def beam(logits_fn, batch_size: int, beam_size: int, **options) -> tuple[jax.Array, jax.Array]:
    """Beam search of a full-buffer `logits_fn` (the uncached reference)."""
    return decoding.beam_search(decoding.full_buffer_step(logits_fn), (), batch_size, beam_size,
                                MAX_LENGTH, **options)


def bigram_model(seed: int):
    """logits_fn of a random bigram model: the next token depends on the last one only."""
    table = jax.random.normal(jax.random.key(seed), (VOCAB, VOCAB)) * 3.0
    return lambda tokens, t: table[tokens[:, t]]  # [N, T], t -> [N, V]


def trigram_model(seed: int, sources: np.ndarray):
    """(logits_fn, step_fn) of one random model of the next token given the last two and the
    row's source id (sources int32[N], one per row). The step function's cache is (the token
    before the last one int32[N], PAD at the start; the source ids int32[N]), which beam search
    must reorder with the hypotheses."""
    table = jax.random.normal(jax.random.key(seed), (int(sources.max()) + 1,) + (VOCAB,) * 3)
    table = table * 3.0

    def logits_fn(tokens, t):  # [N, T], t -> [N, V]
        return table[sources, tokens[:, t], jnp.pad(tokens, ((0, 0), (1, 0)))[:, t]]

    def step_fn(tokens, t, cache):  # [N, T] (reads column t), t, ([N], [N]) -> [N, V], cache
        previous, source = cache
        return table[source, tokens[:, t], previous], (tokens[:, t], source)

    return logits_fn, step_fn


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
    step_fn = decoding.full_buffer_step(bigram_model(seed))
    greedy_tokens = jax.jit(decoding.greedy_decode, static_argnums=(0, 2, 3))(
        step_fn, (), 3, MAX_LENGTH)
    beam_tokens, score = jax.jit(decoding.beam_search, static_argnums=(0, 2, 3, 4))(
        step_fn, (), 3, 1, MAX_LENGTH)
    chex.assert_shape(greedy_tokens, (3, MAX_LENGTH))
    chex.assert_type([greedy_tokens, beam_tokens], jnp.int32)
    np.testing.assert_array_equal(beam_tokens, greedy_tokens)
    chex.assert_tree_all_finite(score)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_cache_reordered_with_the_beams_gives_the_full_buffer_result(seed):
    batch_size, ends = 6, set()
    for beam_size in (1, 3, 5):
        sources = np.repeat(np.arange(batch_size), beam_size)
        logits_fn, step_fn = trigram_model(seed, sources)
        cache = (jnp.zeros(len(sources), jnp.int32), jnp.asarray(sources))
        if beam_size == 1:
            tokens = decoding.greedy_decode(step_fn, cache, batch_size, MAX_LENGTH)
            np.testing.assert_array_equal(tokens, greedy(logits_fn, batch_size))
        tokens, scores = decoding.beam_search(step_fn, cache, batch_size, beam_size, MAX_LENGTH)
        reference_tokens, reference_scores = beam(logits_fn, batch_size, beam_size)
        np.testing.assert_array_equal(tokens, reference_tokens)
        np.testing.assert_allclose(scores, reference_scores, rtol=1e-6)
        ends |= {list(row).index(EOS) if EOS in row else MAX_LENGTH for row in np.asarray(tokens)}
    assert len(ends) > 1  # rows that finish at different steps


def test_decoding_stops_at_eos_and_pads_after_it():
    # after BOS: A, then EOS; a row never goes on after EOS
    logits_fn = scripted({(): {A: 0.9}, (A,): {EOS: 0.9}})
    for decoded in (greedy(logits_fn, 2), beam(logits_fn, 2, 3)[0]):
        np.testing.assert_array_equal(decoded, [[A, EOS] + [PAD] * (MAX_LENGTH - 2)] * 2)
    # a model that never says EOS is cut at max_length
    endless = scripted({(): {A: 0.9}, (A,): {A: 0.9}, (A, A): {A: 0.9}})
    np.testing.assert_array_equal(greedy(endless, 1), [[A] * MAX_LENGTH])
    assert decoding.strip_special([A, B, EOS, A, PAD]) == [A, B]


def test_beam_finds_what_greedy_misses_and_length_penalty_prefers_longer():
    # greedy takes A (0.6) and ends with 0.6 * 0.3; the beam finds B EOS with 0.4 * 1.0
    trap = scripted({(): {A: 0.6, B: 0.4}, (A,): {EOS: 0.3, A: 0.25, B: 0.25},
                     (A, A): {EOS: 1.0}, (A, B): {EOS: 1.0}, (B,): {EOS: 1.0}})
    assert greedy(trap, 1)[0, :2].tolist() == [A, EOS]
    tokens, score = beam(trap, 1, 2, length_penalty=0.0)
    assert tokens[0, :2].tolist() == [B, EOS]
    np.testing.assert_allclose(score, np.log(0.4), rtol=1e-5)
    # EOS now (0.55) or A then EOS (0.45): raw log-probability picks the short one, a strong
    # length penalty (alpha 2: lp(2) / lp(1) = (7/6)^2) the long one
    choice = scripted({(): {EOS: 0.55, A: 0.45}, (A,): {EOS: 1.0}})
    short = beam(choice, 1, 2, length_penalty=0.0)
    long = beam(choice, 1, 2, length_penalty=2.0)
    assert short[0][0, :1].tolist() == [EOS] and long[0][0, :2].tolist() == [A, EOS]
    np.testing.assert_allclose(long[1], np.log(0.45) / (7 / 6) ** 2, rtol=1e-5)


def test_rows_marked_done_stay_pad_and_end_the_loop_with_the_other_rows():
    # rows of source 0 say A, then EOS after any token; rows of source 1 (filler) never say EOS
    table = np.full((2, VOCAB, VOCAB), -30.0, np.float32)  # [source, last token, next]
    table[0, :, EOS] = table[0, BOS, A] = table[1, :, A] = 0.0
    table[0, BOS, EOS] = -30.0
    steps = []

    def step_fn(tokens, t, cache):  # counts the loop's steps
        jax.debug.callback(lambda: steps.append(1))
        return jnp.asarray(table)[cache, tokens[:, t]], cache

    done = np.array([False, True, False])
    for beam_size in (1, 3):
        sources = np.repeat(np.asarray(done, np.int32), beam_size)
        results = {}
        for marked in (None, done):
            steps.clear()
            if beam_size == 1:
                tokens = decoding.greedy_decode(step_fn, sources, 3, MAX_LENGTH, done=marked)
            else:
                tokens = decoding.beam_search(step_fn, sources, 3, beam_size, MAX_LENGTH,
                                              done=marked)[0]
            results[marked is None] = np.asarray(tokens), len(steps)
        (unmarked, unmarked_steps), (tokens, marked_steps) = results[True], results[False]
        np.testing.assert_array_equal(tokens[~done], unmarked[~done])  # the same real rows
        np.testing.assert_array_equal(tokens[~done], [[A, EOS] + [PAD] * (MAX_LENGTH - 2)] * 2)
        np.testing.assert_array_equal(unmarked[done], [[A] * MAX_LENGTH])
        np.testing.assert_array_equal(tokens[done], [[PAD] * MAX_LENGTH])
        assert unmarked_steps == MAX_LENGTH, beam_size
        # greedy: the real rows end after 2 steps; beam search: once all their hypotheses have
        assert marked_steps == 2 if beam_size == 1 else 2 <= marked_steps < MAX_LENGTH


# ----------------------------------------------------------------------------- real decoders

MODEL_VOCAB, SOURCE_LENGTH, ROWS, DECODE_LENGTH = 24, 7, 6, 12
# kind -> (factor on the EOS column of the output kernel, added to the EOS bias): makes rows of
# the noisy random models stop at different steps (checked by the test)
KINDS = {"transformer": (3.0, 4.0), "meanmax": (3.0, 6.0), "meanmax_learned": (1.0, 4.0)}


@functools.cache
def seq2seq(kind: str) -> Seq2Seq:
    """A small Seq2Seq: a Transformer encoder (memory width 12) + the 2-layer TransformerDecoder
    (width 16, so the memory is projected), or Mean-Max AAE with its own decoder (sinusoidal
    positions, or 8 learned rows: positions past 7 share the last)."""
    if kind == "transformer":
        encoder = build_encoder(model_config("transformer", embed_dim=8, model_dim=12,
                                             num_heads=2, ff_dim=16, num_layers=1),
                                MODEL_VOCAB)
        return Seq2Seq(encoder, TransformerDecoder(MODEL_VOCAB, model_dim=16, num_layers=2,
                                                   num_heads=2, ff_dim=24, dropout_rate=0.0))
    positions = dict(positions="learned", max_positions=8) if kind == "meanmax_learned" else {}
    encoder = build_encoder(model_config("meanmax_aae", embed_dim=8, model_dim=16, num_heads=2,
                                         ff_dim=24, **positions), MODEL_VOCAB)
    return Seq2Seq(encoder, own_decoder(encoder, MODEL_VOCAB), share_word_table=True)


def source_batch(seed: int) -> dict[str, np.ndarray]:
    """ROWS random sources of 1..SOURCE_LENGTH words (the target fields only size the init)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, SOURCE_LENGTH + 1, ROWS).astype(np.int32)
    words = rng.integers(6, MODEL_VOCAB, (ROWS, SOURCE_LENGTH))
    tokens = np.where(np.arange(SOURCE_LENGTH) < lengths[:, None], words, PAD).astype(np.int32)
    return {"source/tokens": tokens, "source/lengths": lengths, "target/tokens": tokens,
            "target/lengths": lengths, "weight": np.ones(ROWS, np.float32)}


def model_params(kind: str, seed: int, noisy_params) -> tuple[dict, dict]:
    """(batch, noisy parameters of `seq2seq(kind)` with KINDS' EOS boost)."""
    batch = source_batch(seed)
    params = noisy_params(seq2seq(kind), batch, seed=seed)
    scale, shift = KINDS[kind]
    out = params["decoder"]["logits"]
    out["kernel"] = out["kernel"].at[:, EOS].multiply(scale)
    out["bias"] = out["bias"].at[EOS].add(shift)
    return batch, params


@functools.cache
def jitted_translate(kind: str, beam_size: int, cached: bool):
    return jax.jit(functools.partial(translate, seq2seq(kind), max_length=DECODE_LENGTH,
                                     beam_size=beam_size, cached=cached))


@pytest.mark.parametrize("kind", KINDS)
def test_cached_decoder_steps_give_the_full_buffer_logits(kind, noisy_params):
    model = seq2seq(kind)
    batch, params = model_params(kind, 0, noisy_params)
    encoded = jax.jit(functools.partial(model.apply, method=Seq2Seq.encode))({"params": params},
                                                                             batch)
    memory, memory_mask = encoded["memory"], encoded["memory_mask"]
    shared = ({"word_table": params["encoder"]["embed"]["embedding"]}
              if model.share_word_table else {})
    variables = {"params": params["decoder"]}
    tokens = np.random.default_rng(1).integers(6, MODEL_VOCAB, (ROWS, DECODE_LENGTH))
    tokens[:, 0] = BOS
    full = jax.jit(functools.partial(model.decoder.apply, train=False))(
        variables, tokens, np.full(ROWS, DECODE_LENGTH), memory, memory_mask,
        **shared)  # [N, T, V]

    @jax.jit
    def decode(cache, inputs, position, memory):
        return model.decoder.apply({**variables, "cache": cache}, inputs, None, memory,
                                   memory_mask, train=False, position=position,
                                   cache_length=DECODE_LENGTH, mutable=["cache"], **shared)

    # the call that creates the cache writes three positions at once, then one per step
    logits, cache = decode({}, tokens[:, :3], 0, memory)
    np.testing.assert_allclose(logits, full[:, :3], rtol=1e-5, atol=1e-5)
    cache = cache["cache"]
    layers = [cache[f"layer_{i}"] for i in range(2)] if kind == "transformer" else [cache]
    for layer in layers:  # [N, T, H, d_k] and [N, S, H, d_k]
        own, other = layer["self_attention"], layer["memory_attention"]
        chex.assert_shape([own["cached_key"], own["cached_value"]], (ROWS, DECODE_LENGTH, 2, 8))
        chex.assert_shape([other["memory_key"], other["memory_value"]],
                          (ROWS, memory.shape[1], 2, 8))
    for t in range(3, DECODE_LENGTH):
        logits, updated = decode(cache, tokens[:, t:t + 1], t, memory)
        chex.assert_shape(logits, (ROWS, 1, MODEL_VOCAB))
        np.testing.assert_allclose(logits[:, 0], full[:, t], rtol=1e-5, atol=1e-5)
        # a step reads the memory's keys and values from the cache, not the memory
        np.testing.assert_array_equal(decode(cache, tokens[:, t:t + 1], t, memory + 100.0)[0],
                                      logits)
        cache = updated["cache"]


@pytest.mark.parametrize("kind", KINDS)
def test_cached_greedy_and_beam_search_give_the_full_buffer_tokens(kind, noisy_params):
    ends = []
    for seed in (0, 1, 2):
        batch, params = model_params(kind, seed, noisy_params)
        for beam_size in (1, 3):
            cached = np.asarray(jitted_translate(kind, beam_size, True)(params, batch))
            reference = np.asarray(jitted_translate(kind, beam_size, False)(params, batch))
            chex.assert_shape(cached, (ROWS, DECODE_LENGTH))
            np.testing.assert_array_equal(cached, reference, err_msg=f"seed {seed}, beam "
                                                                     f"{beam_size}")
            ends.append({list(row).index(EOS) if EOS in row else DECODE_LENGTH
                         for row in cached})
    # some batch has rows that stop at different steps, and rows that run to the end
    assert any(len(batch_ends) > 1 and DECODE_LENGTH in batch_ends for batch_ends in ends), ends
    for beam_size in (1, 3):
        assert jitted_translate(kind, beam_size, True)._cache_size() == 1


# ------------------------------------------------------------ MultiHeadAttention's decode mode

N, T, S, D, H = 3, 8, 5, 12, 2  # rows, cache length, memory slots, width, heads (d_k 6)
LENGTHS, SLOTS = np.array([8, 5, 0]), np.array([5, 2, 0])  # the last row sees nothing
ATTENTIONS = {  # a decoder's attention; Mean-Max AAE's (ReLU projections, heads concatenated)
    "transformer": {},
    "meanmax": dict(qkv_features=16, output_projection=False, projection_activation="relu"),
}


def attention_inputs(seed: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """queries [N, T, D], memory [N, S, D] and the memory's real slots bool[N, S]."""
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.normal(size=(N, T, D)), jnp.float32),
            jnp.asarray(rng.normal(size=(N, S, D)), jnp.float32), length_mask(SLOTS, S))


def counted_fused_calls(monkeypatch) -> list[int]:
    """A list that grows by one at every call of `jax.nn.dot_product_attention`."""
    calls, fused = [], jax.nn.dot_product_attention
    monkeypatch.setattr(attention_module.jax.nn, "dot_product_attention",
                        lambda *args, **kwargs: calls.append(1) or fused(*args, **kwargs))
    return calls


@pytest.mark.parametrize("options", ATTENTIONS.values(), ids=ATTENTIONS.keys())
@pytest.mark.parametrize("implementation", ["einsum", "fused"])
@pytest.mark.parametrize("padded", [False, True])
def test_decode_mode_steps_give_the_full_sequence_attention(implementation, options, padded,
                                                            monkeypatch):
    """Three positions at once, then one per step, with the cache: the outputs of the
    full-sequence call with the causal mask (and, `padded`, the padding rows' mask passed to
    every step), to float32 rounding (1e-5); rows with no valid key give zeros."""
    x, memory, slots = attention_inputs(0)
    module = MultiHeadAttention(H, implementation=implementation, **options)
    decoder = MultiHeadAttention(H, implementation=implementation, decode=True, **options)
    lengths = LENGTHS if padded else np.full(N, T)
    causal = DirectionalMask(lengths, "causal").matrix(T) & length_mask(lengths, T)[..., None]
    memory_rows = length_mask(lengths, T)[..., None] & slots[:, None, :]
    params = module.init(jax.random.key(0), x, x, causal, train=False)
    full_self = module.apply(params, x, x, causal, train=False)
    full_memory = module.apply(params, x, memory, memory_rows, train=False)
    if padded:
        assert not np.asarray(full_self)[2].any() and not np.asarray(full_memory)[2].any()
    calls = counted_fused_calls(monkeypatch)
    caches, spans = {"self": {}, "memory": {}}, [(0, 3)] + [(t, t + 1) for t in range(3, T)]
    for start, end in spans:
        rows = x[:, start:end]
        step_mask = causal[:, start:end] if padded else None
        out, state = decoder.apply({**params, "cache": caches["self"]}, rows, rows, step_mask,
                                   train=False, position=jnp.int32(start), cache_length=T,
                                   mutable=["cache"])
        np.testing.assert_allclose(out, full_self[:, start:end], rtol=1e-5, atol=1e-5)
        caches["self"] = state["cache"]
        # the memory is projected by the first call only: later steps read it from the cache
        read = memory if start == 0 else memory + 100.0
        out, state = decoder.apply({**params, "cache": caches["memory"]}, rows, read,
                                   memory_rows[:, start:end], train=False, mutable=["cache"])
        np.testing.assert_allclose(out, full_memory[:, start:end], rtol=1e-5, atol=1e-5)
        caches["memory"] = state["cache"]
    assert len(calls) == (2 * len(spans) if implementation == "fused" else 0)
    head_dim = options.get("qkv_features", D) // H
    chex.assert_shape([caches["self"]["cached_key"], caches["self"]["cached_value"]],
                      (N, T, H, head_dim))
    chex.assert_shape([caches["memory"]["memory_key"], caches["memory"]["memory_value"]],
                      (N, S, H, head_dim))


@pytest.mark.parametrize("options", ATTENTIONS.values(), ids=ATTENTIONS.keys())
def test_decode_mode_has_the_parameters_of_the_training_mode(options):
    """The same parameter names and shapes, so a module trained without the cache decodes with
    it; the cache is a collection of its own; sparse keys are refused."""
    x, memory, slots = attention_inputs(1)
    shapes = lambda variables: jax.tree.map(jnp.shape, variables["params"])
    training = MultiHeadAttention(H, **options).init(jax.random.key(0), x, memory,
                                                     slots[:, None, :], train=False)
    decoder = MultiHeadAttention(H, decode=True, **options)
    self_decoder = decoder.init(jax.random.key(0), x[:, :1], x[:, :1], None, train=False,
                                position=jnp.int32(0), cache_length=T)
    memory_decoder = decoder.init(jax.random.key(0), x[:, :1], memory, slots[:, None, :],
                                  train=False)
    expected = {"query", "key", "value"} | ({"out"} if "output_projection" not in options
                                            else set())
    assert set(training["params"]) == expected and set(training) == {"params"}
    assert shapes(self_decoder) == shapes(memory_decoder) == shapes(training)
    assert set(self_decoder["cache"]) == {"cached_key", "cached_value"}
    assert set(memory_decoder["cache"]) == {"memory_key", "memory_value"}
    with pytest.raises(ValueError, match="decode mode reads dense keys from the cache"):
        decoder.apply(memory_decoder, x[:, :1], memory, slots[:, None, :], train=False,
                      key_index=jnp.zeros((1, 2), jnp.int32), mutable=["cache"])


def test_bleu_of_a_perfect_hypothesis_is_100_and_text_is_detokenised():
    references = [("a", "man", "'s", "dog", ",", "running", "."), ("two", "kids", "play", "!")]
    score, signature = decoding.corpus_bleu(references, references)
    assert score.score == pytest.approx(100.0) and str(score).startswith("BLEU = 100.00 ")
    assert "tok:13a" in signature and "nrefs:1" in signature
    assert decoding.detokenize(references[0]) == "a man's dog, running."
    worse, _ = decoding.corpus_bleu([("a", "dog", "running", ".")] * 2, references)
    assert 0.0 <= worse.score < 100.0

"""DiSAN encoder against a loop reference of eqs. 12-20, padding, blocked vs dense, parameters."""

import functools

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxenc.errors import ConfigError
from jaxenc.models.registry import build_encoder

VOCAB, EMBED, HIDDEN, C = 20, 6, 5, 2.0
LENGTHS = [6, 3, 1, 0]  # full, padded, one token (no forward/backward key), empty filler row


def config(**overrides) -> ml_collections.ConfigDict:
    fields = dict(name="disan", embed_dim=EMBED, hidden=HIDDEN, c=C, activation="elu",
                  keep_prob=0.75, attention_impl="dense", block_size=4, blocked_threshold=32,
                  freeze_embeddings=False)
    return ml_collections.ConfigDict({**fields, **overrides})


def random_batch(lengths, max_len, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, VOCAB, size=(len(lengths), max_len))
    tokens[np.arange(max_len)[None, :] >= np.array(lengths)[:, None]] = 0
    return {"tokens": jnp.asarray(tokens, jnp.int32), "lengths": jnp.asarray(lengths, jnp.int32)}


@pytest.fixture(scope="module")
def reference_setup(noisy_params):
    """A batch with padding, an empty row and a one-token row, and parameters (any impl)."""
    batch = random_batch(LENGTHS, 6, seed=1)
    return batch, noisy_params(build_encoder(config(), VOCAB), batch, seed=2)


# ---- reference: eqs. 14-20 and 12-13 with explicit loops, for xp = numpy or jax.numpy ----------

def elu(xp, z):
    return xp.where(z > 0, z, xp.exp(xp.minimum(z, 0.0)) - 1.0)


def sigmoid(xp, z):
    return 1.0 / (1.0 + xp.exp(-z))


def softmax_weighted_sum(xp, scores, vectors):
    """sum_i softmax_i(scores_i) * vectors_i per feature; scores, vectors: lists of [d]."""
    top = functools.reduce(xp.maximum, scores)
    weights = [xp.exp(score - top) for score in scores]
    total = sum(weights)
    return sum(w * v for w, v in zip(weights, vectors, strict=True)) / total


def reference_direction(xp, p, x, length, direction):
    """One directional self-attention block on one sentence x [L, d_e] -> u [L, d_h]."""
    h = elu(xp, x @ p["hidden"]["kernel"] + p["hidden"]["bias"])  # eq. 14
    attention, fusion = p["attention"], p["fusion"]
    contexts = []
    for j in range(x.shape[0]):  # query j
        keys = [i for i in range(length) if (i < j if direction == "forward" else i > j)]
        if not keys:  # eq. 17-18 leave no key: zero context
            contexts.append(xp.zeros(h.shape[1]))
            continue
        scores = [C * xp.tanh((h[i] @ attention["key"]["kernel"]
                               + h[j] @ attention["query"]["kernel"]
                               + attention["score_bias"]) / C) for i in keys]  # eq. 15
        contexts.append(softmax_weighted_sum(xp, scores, [h[i] for i in keys]))  # eq. 11
    s = xp.stack(contexts)
    gate = sigmoid(xp, s @ fusion["context"]["kernel"] + fusion["context"]["bias"]
                   + h @ fusion["input"]["kernel"] + fusion["input"]["bias"]
                   + fusion["gate_bias"])  # eq. 19
    u = gate * h + (1.0 - gate) * s  # eq. 20
    return xp.stack([u[j] if j < length else xp.zeros_like(u[j]) for j in range(x.shape[0])])


def reference_disan(xp, params, tokens, lengths):
    """-> (u [B, L, 2 d_h], s [B, 2 d_h]) one sentence at a time."""
    token_states, sentences = [], []
    for b, length in enumerate(lengths):
        x = params["embed"]["embedding"][tokens[b]]
        u = xp.concatenate([reference_direction(xp, params[direction], x, length, direction)
                            for direction in ("forward", "backward")], axis=-1)
        p = params["source2token"]
        scores = [elu(xp, u[i] @ p["hidden"]["kernel"] + p["hidden"]["bias"])
                  @ p["score"]["kernel"] + p["score"]["bias"] for i in range(length)]  # eq. 12
        sentences.append(softmax_weighted_sum(xp, scores, [u[i] for i in range(length)])
                         if length else xp.zeros(u.shape[1]))  # eq. 13
        token_states.append(u)
    return xp.stack(token_states), xp.stack(sentences)


def scalar_loss(token_states, sentence):
    """A loss that weighs every output coordinate differently."""
    token_weights = jnp.sin(jnp.arange(token_states.size).reshape(token_states.shape))
    sentence_weights = jnp.cos(jnp.arange(sentence.size).reshape(sentence.shape))
    return jnp.sum(token_weights * token_states) + jnp.sum(sentence_weights * jnp.tanh(sentence))


# ---- tests ------------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["dense", "blocked", "directional"])
def test_outputs_match_loop_reference(reference_setup, impl):
    batch, params = reference_setup
    model = build_encoder(config(attention_impl=impl), VOCAB)
    out = model.apply({"params": params}, batch, train=False)
    chex.assert_shape(out["tokens"], (4, 6, 2 * HIDDEN))
    chex.assert_shape(out["sentence"], (4, 2 * HIDDEN))
    chex.assert_tree_all_finite(out)
    params64 = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    tokens, sentence = reference_disan(np, params64, np.asarray(batch["tokens"]), LENGTHS)
    np.testing.assert_allclose(out["tokens"], tokens, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["sentence"], sentence, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out["sentence"][3], 0.0)  # empty sentence


def test_gradients_match_loop_reference_for_every_impl(reference_setup):
    batch, params = reference_setup

    def model_loss(model, params):
        out = model.apply({"params": params}, batch, train=False)
        return scalar_loss(out["tokens"], out["sentence"])

    def reference_loss(params):
        return scalar_loss(*reference_disan(jnp, params, batch["tokens"], LENGTHS))

    expected = jax.grad(reference_loss)(params)
    for impl in ("dense", "blocked", "directional"):  # block 4 does not divide L = 6
        model = build_encoder(config(attention_impl=impl), VOCAB)
        grads = jax.jit(jax.grad(functools.partial(model_loss, model)))(params)
        chex.assert_tree_all_finite(grads)
        chex.assert_trees_all_close(grads, expected, rtol=2e-4, atol=2e-5)


def test_padding_does_not_change_the_encoding(reference_setup):
    _, params = reference_setup
    short = random_batch([5, 2], 5, seed=3)
    padded = {"tokens": jnp.pad(short["tokens"], ((0, 0), (0, 4))), "lengths": short["lengths"]}
    model = build_encoder(config(attention_impl="auto", blocked_threshold=8), VOCAB)
    out_short = model.apply({"params": params}, short, train=False)  # dense (5 < 8)
    out_padded = model.apply({"params": params}, padded, train=False)  # directional (9 >= 8)
    np.testing.assert_allclose(out_padded["tokens"][:, :5], out_short["tokens"], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(out_padded["sentence"], out_short["sentence"], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(out_padded["tokens"][:, 5:], 0.0)
    np.testing.assert_array_equal(out_short["tokens"][1, 2:], 0.0)


def test_parameter_count_of_the_snli_configuration():
    model = build_encoder(config(embed_dim=300, hidden=300, c=5.0), VOCAB)
    batch = random_batch([3], 4)
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), batch, train=False))["params"]

    def count(tree):
        return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(tree))

    encoder = count({name: part for name, part in shapes.items() if name != "embed"})
    assert count(shapes["forward"]) == count(shapes["backward"]) == 451_500
    assert count(shapes["source2token"]) == 721_200

    class NLIHead(nn.Module):  # [s_p, s_h, s_p - s_h, s_p * s_h] -> ELU(Dense 300) -> Dense 3
        @nn.compact
        def __call__(self, premise, hypothesis):
            features = jnp.concatenate(
                [premise, hypothesis, premise - hypothesis, premise * hypothesis], axis=-1)
            return nn.Dense(3)(nn.elu(nn.Dense(300)(features)))

    sentence = jnp.zeros((1, 600))
    head = jax.eval_shape(lambda: NLIHead().init(jax.random.key(0), sentence, sentence))
    assert count(head) == 720_300 + 903
    assert encoder + count(head) == 2_345_403


def test_dropout_is_stochastic_only_in_training(reference_setup):
    batch, params = reference_setup
    model = build_encoder(config(keep_prob=0.7), VOCAB)
    variables = {"params": params}

    @functools.partial(jax.jit, static_argnums=0)
    def run(train, seed):
        return model.apply(variables, batch, train=train, rngs={"dropout": jax.random.key(seed)})

    chex.assert_trees_all_equal(run(False, 1), run(False, 2))
    chex.assert_trees_all_equal(run(True, 1), run(True, 1))
    assert not np.allclose(run(True, 1)["sentence"], run(True, 2)["sentence"])
    np.testing.assert_array_equal(run(True, 3)["tokens"][1, 3:], 0.0)  # padding rows


def test_frozen_embeddings_get_no_gradient(reference_setup):
    batch, params = reference_setup
    model = build_encoder(config(freeze_embeddings=True), VOCAB)
    grads = jax.jit(jax.grad(
        lambda p: jnp.sum(model.apply({"params": p}, batch, train=False)["sentence"])))(params)
    np.testing.assert_array_equal(grads["embed"]["embedding"], 0.0)
    assert np.any(grads["forward"]["hidden"]["kernel"] != 0.0)


@pytest.mark.parametrize(("field", "value"), [
    ("attention_impl", "sparse"), ("activation", "swish"), ("block_size", 0), ("keep_prob", 0.0)])
def test_bad_configuration_is_a_config_error(field, value):
    with pytest.raises(ConfigError, match=field):
        build_encoder(config(**{field: value}), VOCAB)

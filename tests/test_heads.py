"""Heads, losses, metrics, attention and the two baseline encoders against numpy references."""

import itertools

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import scipy.stats

from jaxenc.data.vocab import PAD, ROOT, UNK
from jaxenc.errors import ConfigError
from jaxenc.layers.attention import MultiHeadAttention
from jaxenc.layers.masks import PaddingMask, length_mask
from jaxenc.layers.transformer import TransformerDecoder
from jaxenc.models import bag, transformer
from jaxenc.models.registry import build_encoder
from jaxenc.tasks import heads, losses, metrics
from jaxenc.tasks.classification import ClassificationTask
from jaxenc.tasks.factory import build_task
from jaxenc.tasks.tagging import TaggingTask
from train.configs import base

RNG = np.random.default_rng(0)


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


# ----------------------------------------------------------------------------- pair features


@pytest.mark.parametrize("spec", ["u,v,u-v,u*v", "u,v,|u-v|,u*v", "|u-v|,u*v"])
def test_pair_features_concatenate_the_named_parts(spec):
    u, v = RNG.normal(size=(3, 4)).astype(np.float32), RNG.normal(size=(3, 4)).astype(np.float32)
    reference = {"u": u, "v": v, "u-v": u - v, "|u-v|": np.abs(u - v), "u*v": u * v}
    got = heads.pair_features(u, v, heads.parse_pair_features(spec))
    expected = np.concatenate([reference[name] for name in spec.split(",")], axis=-1)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_unknown_pair_feature_is_a_config_error():
    with pytest.raises(ConfigError, match="u\\+v"):
        heads.parse_pair_features("u,v,u+v")


# ----------------------------------------------------------------------------- relatedness


def test_relatedness_target_matches_the_tai_et_al_formula():
    scores = np.array([1.0, 1.3, 2.5, 3.0, 4.99, 5.0], np.float32)
    got = np.asarray(losses.relatedness_target(jnp.asarray(scores), 5))
    for row, y in zip(got, scores, strict=True):
        expected = np.zeros(5)
        for k in range(1, 6):  # classes are the scores 1..5
            if k == np.floor(y):
                expected[k - 1] = np.floor(y) - y + 1
            elif k == np.floor(y) + 1:
                expected[k - 1] = y - np.floor(y)
        np.testing.assert_allclose(row, expected, atol=1e-6)
        assert abs(row @ np.arange(1, 6) - y) < 1e-5  # E_p[k] = y


def test_relatedness_target_with_scores_from_zero():
    got = np.asarray(losses.relatedness_target(jnp.asarray([0.0, 2.25, 5.0]), 6, min_score=0.0))
    np.testing.assert_allclose(got @ np.arange(6), [0.0, 2.25, 5.0], atol=1e-6)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-6)


def test_relatedness_head_matches_numpy():
    head = heads.RelatednessHead(num_classes=5, hidden_dim=7)
    u, v = RNG.normal(size=(4, 6)).astype(np.float32), RNG.normal(size=(4, 6)).astype(np.float32)
    params = head.init(jax.random.PRNGKey(0), u, v)["params"]
    log_probs = head.apply({"params": params}, u, v)
    chex.assert_shape(log_probs, (4, 5))
    p = {name: {k: np.asarray(a) for k, a in layer.items()} for name, layer in params.items()}
    assert "bias" not in p["distance"]  # one bias b for the two hidden maps (Tai et al.)
    h_s = 1 / (1 + np.exp(-(u * v @ p["product"]["kernel"] + p["product"]["bias"]
                            + np.abs(u - v) @ p["distance"]["kernel"])))
    probs = np_softmax(h_s @ p["logits"]["kernel"] + p["logits"]["bias"])
    np.testing.assert_allclose(np.exp(log_probs), probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(heads.expected_score(log_probs), probs @ np.arange(1, 6),
                               rtol=1e-5)


def test_kl_divergence_matches_a_loop_with_zero_log_zero():
    target = np.array([[0.0, 0.3, 0.7, 0.0], [1.0, 0.0, 0.0, 0.0]], np.float32)
    log_probs = np.log(np_softmax(RNG.normal(size=(2, 4)))).astype(np.float32)
    got = losses.kl_divergences(jnp.asarray(target), jnp.asarray(log_probs))
    expected = [sum(t * (np.log(t) - lp) for t, lp in zip(trow, lrow, strict=True) if t > 0)
                for trow, lrow in zip(target, log_probs, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=1e-5)


# ----------------------------------------------------------------------------- classification


def test_classifier_head_is_the_mlp_it_claims():
    head = heads.ClassifierHead(num_classes=3, hidden_dims=(5, 4), activation="elu")
    x = RNG.normal(size=(2, 6)).astype(np.float32)
    params = head.init(jax.random.PRNGKey(1), x, train=False)["params"]
    h = x
    for name in ("hidden_0", "hidden_1"):
        h = np_elu(h @ np.asarray(params[name]["kernel"]) + np.asarray(params[name]["bias"]))
    expected = h @ np.asarray(params["logits"]["kernel"]) + np.asarray(params["logits"]["bias"])
    np.testing.assert_allclose(head.apply({"params": params}, x, train=False), expected,
                               rtol=1e-5, atol=1e-6)


def _head_config(**overrides) -> ml_collections.ConfigDict:
    config = base.get_config("bag,trec").task
    config.head.update(overrides)
    return config


def test_classification_loss_is_the_weighted_mean_cross_entropy():
    task = build_task("single", _head_config(), num_classes=4)
    logits = RNG.normal(size=(5, 4)).astype(np.float32)
    labels = np.array([0, 3, 1, 1, 2], np.int32)
    weight = np.array([1, 1, 1, 0, 0], np.float32)  # two filler rows
    loss = task.loss({"logits": logits}, {"label": labels, "weight": weight})
    per_example = [-np.log(np_softmax(row)[label]) for row, label in zip(logits, labels,
                                                                           strict=True)]
    np.testing.assert_allclose(loss, np.mean(per_example[:3]), rtol=1e-5)


def test_binary_classification_reports_f1():
    task = build_task("pair", _head_config(), num_classes=2)
    assert isinstance(task, ClassificationTask)
    summary = task.summarize({"prediction": np.array([1, 1, 0, 0]), "label": np.array([1, 0, 1, 0]),
                              "loss": np.ones(4)})
    assert summary == {"accuracy": 0.5, "loss": 1.0, "f1": 0.5}


def test_tagging_ignores_prefix_and_padding_positions():
    task = build_task("tagging", _head_config(), num_tags=3)
    assert isinstance(task, TaggingTask)
    logits = RNG.normal(size=(2, 4, 3)).astype(np.float32)
    batch = {"tags": np.array([[-1, 2, 0, 0], [-1, 1, 1, 2]], np.int32),
             "sentence/tokens": np.array([[ROOT, 7, 8, PAD], [ROOT, 9, 10, 11]], np.int32),
             "sentence/lengths": np.array([3, 4], np.int32), "weight": np.ones(2, np.float32)}
    valid = [(0, 1), (0, 2), (1, 1), (1, 2), (1, 3)]
    expected = np.mean([-np.log(np_softmax(logits[b, i])[batch["tags"][b, i]]) for b, i in valid])
    np.testing.assert_allclose(task.loss({"logits": logits}, batch), expected, rtol=1e-5)
    outputs = task.eval_outputs({"logits": logits}, batch)
    np.testing.assert_array_equal(outputs["count"], [2, 3])


def test_tagging_scores_words_outside_the_training_vocabulary_apart():
    """unknown_word_accuracy against a loop over the tagged positions whose token is UNK (an
    UNK under padding, a filler row or an untagged position does not count)."""
    task = build_task("tagging", _head_config(), num_tags=4)
    logits = RNG.normal(size=(3, 6, 4)).astype(np.float32)
    tokens = np.array([[ROOT, UNK, 7, UNK, UNK, PAD],
                       [ROOT, 8, UNK, UNK, 9, UNK],
                       [ROOT, UNK, UNK, 5, PAD, PAD]], np.int32)
    tags = RNG.integers(0, 4, size=(3, 6)).astype(np.int32)
    tags[:, 0] = -1
    tags[1, 3] = -1  # a tag unseen in training
    batch = {"tags": tags, "sentence/tokens": tokens,
             "sentence/lengths": np.array([4, 6, 3], np.int32),
             "weight": np.array([1, 1, 0], np.float32)}
    right = wrong = 0
    for b in range(2):  # row 2 is filler
        for i in range(batch["sentence/lengths"][b]):
            if tokens[b, i] == UNK and tags[b, i] >= 0:
                hit = np.argmax(logits[b, i]) == tags[b, i]
                right, wrong = right + hit, wrong + (not hit)
    collected = {key: np.asarray(value)
                 for key, value in task.eval_outputs({"logits": logits}, batch).items()}
    assert collected["unknown_count"].sum() == right + wrong == 4
    summary = task.summarize(collected)
    assert summary["unknown_word_accuracy"] == pytest.approx(right / (right + wrong))
    known = {key: np.zeros_like(value) if key.startswith("unknown") else value
             for key, value in collected.items()}
    assert "unknown_word_accuracy" not in task.summarize(known)


def _smoothed_target(target: int, vocab: int, eps: float) -> np.ndarray:
    smoothed = np.full(vocab, eps / vocab)
    smoothed[target] += 1 - eps
    return smoothed


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_token_losses_and_their_gradient_match_a_loop(eps):
    logits = RNG.normal(size=(2, 3, 5)).astype(np.float32) * 3
    targets = np.array([[1, 4, 0], [2, 2, 3]], np.int32)
    got = losses.token_losses(jnp.asarray(logits), jnp.asarray(targets), label_smoothing=eps)
    grad = jax.grad(lambda x: losses.token_losses(x, jnp.asarray(targets), eps).sum())(
        jnp.asarray(logits))
    for b, t in itertools.product(range(2), range(3)):
        p = np_softmax(logits[b, t])
        smoothed = _smoothed_target(targets[b, t], 5, eps)
        np.testing.assert_allclose(got[b, t], -(smoothed * np.log(p)).sum(), rtol=1e-5)
        # d/dx of -sum_k q_k log softmax(x)_k is softmax(x) - q.
        np.testing.assert_allclose(grad[b, t], p - smoothed, atol=1e-6)


# ----------------------------------------------------------------------------- metrics


def test_correlations_and_f1_match_loops():
    x = np.array([1.0, 2.0, 2.0, 3.5, 0.5, 4.0])
    y = np.array([1.5, 1.0, 2.5, 3.0, 0.0, 5.0])
    mean_x, mean_y = sum(x) / len(x), sum(y) / len(y)
    cov = sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y, strict=True))
    norm = np.sqrt(sum((a - mean_x) ** 2 for a in x) * sum((b - mean_y) ** 2 for b in y))
    assert metrics.pearson(x, y) == pytest.approx(cov / norm)

    def average_ranks(values):
        return [sum(v < w for v in values) + (sum(v == w for v in values) + 1) / 2
                for w in values]

    rank_x, rank_y = average_ranks(x), average_ranks(y)  # the tie in x gets rank 2.5
    assert metrics.spearman(x, y) == pytest.approx(metrics.pearson(rank_x, rank_y))
    assert metrics.spearman(x, y) == pytest.approx(scipy.stats.spearmanr(x, y).statistic)
    assert metrics.mean_squared_error(x, y) == pytest.approx(np.mean([(a - b) ** 2 for a, b in
                                                                       zip(x, y, strict=True)]))
    predicted, gold = np.array([1, 1, 0, 1, 0]), np.array([1, 0, 0, 1, 1])
    tp, fp, fn = 2, 1, 1
    assert metrics.binary_f1(predicted, gold) == pytest.approx(2 * tp / (2 * tp + fp + fn))
    assert metrics.pearson(np.ones(3), np.arange(3)) == 0.0


# ----------------------------------------------------------------------------- attention


def test_multi_head_attention_matches_a_loop_and_zeroes_empty_rows():
    layer = MultiHeadAttention(num_heads=2, qkv_features=4, out_features=3)
    x = RNG.normal(size=(2, 5, 6)).astype(np.float32)
    lengths = np.array([3, 0], np.int32)  # the second sentence is empty: every row masked
    mask = PaddingMask(key_lengths=jnp.asarray(lengths), query_lengths=jnp.asarray(lengths))
    params = layer.init(jax.random.PRNGKey(2), x, x, mask, train=False)["params"]
    got = np.asarray(layer.apply({"params": params}, x, x, mask, train=False))
    p = jax.tree.map(np.asarray, params)
    out_bias = p["out"]["bias"]
    for b, i in itertools.product(range(2), range(5)):
        heads_out = []
        for h in range(2):
            def project(name, row, h=h):
                return row @ p[name]["kernel"][:, h] + p[name]["bias"][h]

            q = project("query", x[b, i])
            keys = range(lengths[b]) if i < lengths[b] else range(0)
            scores = [q @ project("key", x[b, j]) / np.sqrt(2) for j in keys]
            weights = np_softmax(np.array(scores)) if scores else []
            heads_out.append(sum((w * project("value", x[b, j]) for w, j in zip(weights, keys,
                                                                                 strict=True)),
                                 np.zeros(2)))
        expected = np.einsum("hd,hdo->o", np.stack(heads_out), p["out"]["kernel"]) + out_bias
        np.testing.assert_allclose(got[b, i], expected, rtol=1e-4, atol=1e-5)
    assert np.all(np.isfinite(got))


# ----------------------------------------------------------------------------- encoders


def _sentence(tokens: np.ndarray, lengths: np.ndarray) -> dict:
    return {"tokens": jnp.asarray(tokens), "lengths": jnp.asarray(lengths)}


def test_bag_sentence_vector_is_the_mean_of_real_word_vectors():
    encoder = build_encoder(base.model_config("bag", embed_dim=4), vocab_size=10)
    assert isinstance(encoder, bag.BagOfWords)
    tokens = np.array([[7, 8, 9, 0], [6, 0, 0, 0]], np.int32)
    sentence = _sentence(tokens, np.array([3, 1], np.int32))
    params = encoder.init(jax.random.PRNGKey(0), sentence, train=False)["params"]
    out = encoder.apply({"params": params}, sentence, train=False)
    table = np.asarray(params["embed"]["embedding"])
    np.testing.assert_allclose(out["sentence"][0], table[[7, 8, 9]].mean(0), rtol=1e-6)
    np.testing.assert_allclose(out["sentence"][1], table[6], rtol=1e-6)
    chex.assert_shape(out["tokens"], (2, 4, 4))


def test_transformer_ignores_padding_and_bucket_length():
    cfg = base.model_config("transformer", embed_dim=8, model_dim=8, num_layers=2, num_heads=2,
                            ff_dim=16)
    encoder = build_encoder(cfg, vocab_size=20)
    assert isinstance(encoder, transformer.TransformerEncoder)
    lengths = np.array([5, 2, 0], np.int32)
    short = RNG.integers(6, 20, size=(3, 8)).astype(np.int32)
    short[np.arange(8) >= lengths[:, None]] = 0
    long = np.concatenate([short, np.zeros((3, 8), np.int32)], axis=1)
    params = jax.jit(encoder.init, static_argnames="train")(
        jax.random.PRNGKey(0), _sentence(short, lengths), train=False)["params"]
    apply = jax.jit(lambda tokens: encoder.apply({"params": params}, _sentence(tokens, lengths),
                                                 train=False))
    out8, out16 = apply(short), apply(long)
    chex.assert_shape([out8["tokens"], out16["tokens"]], [(3, 8, 8), (3, 16, 8)])
    np.testing.assert_allclose(out8["sentence"], out16["sentence"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out8["tokens"], out16["tokens"][:, :8], rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(out16["tokens"])[np.arange(16) >= lengths[:, None]] == 0)
    assert np.all(np.isfinite(out16["sentence"])) and np.all(out16["sentence"][2] == 0)


def test_transformer_rejects_heads_that_do_not_divide_the_width():
    cfg = base.model_config("transformer", model_dim=10, num_heads=3)
    with pytest.raises(ConfigError, match="divisible"):
        build_encoder(cfg, vocab_size=10)


def test_unknown_model_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown model 'lstm'"):
        build_encoder(ml_collections.ConfigDict({"name": "lstm"}), vocab_size=10)


def test_decoder_is_causal():
    decoder = TransformerDecoder(vocab_size=12, model_dim=8, num_layers=1, num_heads=2,
                                       ff_dim=16, dropout_rate=0.0)
    inputs = RNG.integers(1, 12, size=(2, 6)).astype(np.int32)
    lengths, memory = np.array([6, 4], np.int32), RNG.normal(size=(2, 3, 5)).astype(np.float32)
    memory_lengths = length_mask(np.array([3, 2], np.int32), 3)  # the memory_mask
    params = jax.jit(decoder.init, static_argnames="train")(
        jax.random.PRNGKey(0), inputs, lengths, memory, memory_lengths, train=False)["params"]
    jitted = jax.jit(lambda tokens, mem: decoder.apply(
        {"params": params}, tokens, lengths, mem, memory_lengths, train=False))
    apply = lambda tokens, mem: np.asarray(jitted(tokens, mem))
    changed = inputs.copy()
    changed[:, 3:] = (changed[:, 3:] + 1) % 12
    np.testing.assert_allclose(apply(inputs, memory)[:, :3], apply(changed, memory)[:, :3],
                               rtol=1e-5, atol=1e-6)
    padded_memory = memory.copy()
    padded_memory[1, 2] = 100.0  # beyond the second source's length: must not matter
    np.testing.assert_allclose(apply(inputs, memory)[1], apply(inputs, padded_memory)[1],
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(apply(inputs, memory)[:, 3:], apply(changed, memory)[:, 3:])

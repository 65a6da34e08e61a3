"""jaxenc.viz: DiSAN's attention probabilities against a numpy loop, and what each plot draws."""

import chex
import jax
import numpy as np
import pytest

from jaxenc import viz
from jaxenc.errors import DataError
from jaxenc.models.disan import DiSAN, DiSANConfig
from jaxenc.training.report import MetricsLog

VOCAB, EMBED, HIDDEN, C = 20, 5, 4, 5.0
TOKENS = np.array([3, 7, 11, 2, 9, 0, 0], np.int32)  # 5 real tokens, 2 padding
LENGTH = 5


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


def _reference_probs(params: dict, tokens: np.ndarray, length: int, direction: str) -> np.ndarray:
    """float64[L, L]: mean over features of softmax_i(c tanh((q_j + k_i + b) / c)) over the keys
    i that query j may attend, written as loops."""
    p = jax.tree.map(lambda leaf: np.asarray(leaf, np.float64), params[direction])
    x = np.asarray(params["embed"]["embedding"], np.float64)[tokens] * (tokens != 0)[:, None]
    h = _elu(x @ p["hidden"]["kernel"] + p["hidden"]["bias"])
    queries = h @ p["attention"]["query"]["kernel"]
    keys = h @ p["attention"]["key"]["kernel"] + p["attention"]["score_bias"]
    n, d = h.shape
    probs = np.zeros((n, n))
    for j in range(length):
        allowed = [i for i in range(length) if (i < j if direction == "forward" else i > j)]
        for f in range(d):
            scores = {i: C * np.tanh((queries[j, f] + keys[i, f]) / C) for i in allowed}
            total = sum(np.exp(s) for s in scores.values())
            for i, s in scores.items():
                probs[j, i] += np.exp(s) / total / d
    return probs


@pytest.fixture(scope="module", params=["dense", "blocked"])
def disan(request):
    """(DiSAN module, params with every leaf random so that no bias is zero)."""
    model = DiSAN(vocab_size=VOCAB, config=DiSANConfig(
        embed_dim=EMBED, hidden=HIDDEN, c=C, keep_prob=1.0, attention_impl=request.param,
        block_size=3))
    sentence = {"tokens": TOKENS[None], "lengths": np.array([LENGTH], np.int32)}
    params = model.init(jax.random.key(0), sentence, train=False)["params"]
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    random = [jax.random.normal(key, leaf.shape) for key, leaf in zip(keys, leaves, strict=True)]
    return model, jax.tree.unflatten(treedef, random)


def test_disan_probs_match_numpy_loops(disan):
    model, params = disan
    probs = viz.disan_token2token_probs(model, params, TOKENS, LENGTH)
    assert set(probs) == {"forward", "backward"}
    for direction, weights in probs.items():
        chex.assert_shape(weights, (len(TOKENS), len(TOKENS)))
        chex.assert_type(weights, np.float32)
        np.testing.assert_allclose(weights, _reference_probs(params, TOKENS, LENGTH, direction),
                                   atol=1e-5, err_msg=direction)


def test_disan_probs_rows_sum_to_one_where_a_key_is_valid(disan):
    model, params = disan
    probs = viz.disan_token2token_probs(model, params, TOKENS, LENGTH)
    positions = np.arange(len(TOKENS))
    has_keys = {"forward": (positions >= 1) & (positions < LENGTH),  # first token: no earlier key
                "backward": positions < LENGTH - 1}                 # last token: no later key
    for direction, weights in probs.items():
        sums = np.asarray(weights).sum(axis=1)
        np.testing.assert_allclose(sums, has_keys[direction].astype(np.float32), atol=1e-5)
        assert np.all(np.asarray(weights)[:, LENGTH:] == 0.0)  # padding keys never attended


def test_disan_probs_default_length_is_the_whole_array(disan):
    model, params = disan
    real = TOKENS[:LENGTH]
    np.testing.assert_allclose(viz.disan_token2token_probs(model, params, real)["backward"],
                               viz.disan_token2token_probs(model, params, TOKENS, LENGTH)[
                                   "backward"][:LENGTH, :LENGTH], atol=1e-6)


def test_plot_attention_shows_the_weights(tmp_path):
    tokens = ["a", "b", "c", "d"]
    weights = np.random.default_rng(0).random((4, 4, 3)).astype(np.float32)
    path = tmp_path / "attention.png"
    figure = viz.plot_attention(tokens, weights, title="forward", path=path)
    assert len(figure.axes) == 2  # heat map + colour bar
    heat_map = figure.axes[0]
    assert len(heat_map.images) == 1
    np.testing.assert_allclose(heat_map.images[0].get_array(), weights.mean(axis=-1), rtol=1e-6)
    assert heat_map.get_title() == "forward"
    assert [label.get_text() for label in heat_map.get_xticklabels()] == tokens
    assert path.read_bytes().startswith(b"\x89PNG")

    two_d = viz.plot_attention(tokens, weights[..., 0])
    np.testing.assert_array_equal(two_d.axes[0].images[0].get_array(), weights[..., 0])
    with pytest.raises(DataError, match="do not match 3 tokens"):
        viz.plot_attention(tokens[:3], weights)


def test_plot_phrase_division_draws_one_span_per_phrase(tmp_path):
    tokens = ["w0", "w1", "w2", "w3", "w4", "w5"]
    segments = np.array([[0, 0, 0, 1, 1, -1],
                         [0, 1, 1, 2, 3, -1]], np.int32)  # the last token is padding
    figure = viz.plot_phrase_division(tokens, segments, path=tmp_path / "phrases.png")
    assert len(figure.axes) == 1
    axis = figure.axes[0]
    expected = []  # (level, first token, number of tokens) of every phrase, by loops
    for level in range(segments.shape[0]):
        for phrase in range(segments[level].max() + 1):
            members = [i for i in range(len(tokens)) if segments[level, i] == phrase]
            expected.append((level, members[0], len(members)))
    drawn = [(round(p.get_y() + 0.4), round(p.get_x() + 0.5), round(p.get_width()))
             for p in axis.patches]
    assert sorted(drawn) == sorted(expected)
    assert len(axis.get_yticks()) == 2
    assert (tmp_path / "phrases.png").is_file()
    with pytest.raises(DataError, match="do not match 5 tokens"):
        viz.plot_phrase_division(tokens[:5], segments)


def test_plot_curves_from_a_metrics_file(tmp_path):
    metrics = MetricsLog(tmp_path / "run" / "metrics.jsonl")
    for step, loss in [(10, 0.9), (20, 0.7), (30, 0.5), (20, 0.6)]:  # step 20 again: a resume
        metrics.write(step, "train", {"loss": loss})
    for step, accuracy in [(20, 0.55), (30, 0.6)]:
        metrics.write(step, "dev", {"accuracy": accuracy, "loss": 1.0})
    figure = viz.plot_curves(metrics.path, path=tmp_path / "curves.png")
    loss_axis, metric_axis = figure.axes
    (loss_line,), (metric_line,) = loss_axis.get_lines(), metric_axis.get_lines()
    np.testing.assert_array_equal(loss_line.get_xdata(), [10, 20, 30])
    np.testing.assert_allclose(loss_line.get_ydata(), [0.9, 0.6, 0.5])  # the latest record wins
    np.testing.assert_array_equal(metric_line.get_xdata(), [20, 30])
    np.testing.assert_allclose(metric_line.get_ydata(), [0.55, 0.6])
    assert metric_axis.get_ylabel() == "dev accuracy"
    assert loss_line.get_label() == "run"
    assert (tmp_path / "curves.png").is_file()

    dev_loss = viz.plot_curves(metrics.path, metric="loss").axes[1].get_lines()[0]
    np.testing.assert_allclose(dev_loss.get_ydata(), [1.0, 1.0])


def test_plot_curves_needs_a_dev_record(tmp_path):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    metrics.write(10, "train", {"loss": 0.9})
    with pytest.raises(DataError, match="no dev records"):
        viz.plot_curves(metrics.path)

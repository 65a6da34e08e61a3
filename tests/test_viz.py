"""jaxenc.viz: DiSAN's attention probabilities against a numpy loop, every encoder's attention
maps against the structure that masks them, and what each plot draws."""

import chex
import jax
import numpy as np
import pytest

from jaxenc import viz
from jaxenc.configs import model_config
from jaxenc.data.synthetic import generate
from jaxenc.encoding import Encoder
from jaxenc.errors import DataError
from jaxenc.models.disan import DiSAN, DiSANConfig
from jaxenc.models.registry import build_encoder
from jaxenc.structures.hypernodes import ngram_spans, spans_to_members
from jaxenc.structures.psan import segments as psan_segments
from jaxenc.structures.relations import NONE_ID
from jaxenc.structures.trees import tree_from_sentence
from jaxenc.training.run_report import MetricsLog

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


# The main job's runs: the top-level one and its baselines (train/configs/default.py).
MAIN_JOB_RUNS = ("disan", "psan", "dependency_transformer", "phrase_transformer", "meanmax_aae",
                 "tree_lstm", "transformer", "bag")


def _curve_records(seed: int) -> list[dict]:
    """Train loss and dev accuracy records that fill the axes corner to corner, as curves do
    (the upper right corner included, where a legend inside the axes would go)."""
    rng = np.random.default_rng(seed)
    steps = range(10, 310, 10)
    return ([{"step": s, "split": "train", "loss": float(v)}
             for s, v in zip(steps, rng.uniform(0.1, 1.0, len(steps)), strict=True)]
            + [{"step": s, "split": "dev", "accuracy": float(v)}
               for s, v in zip(steps, rng.uniform(0.4, 1.0, len(steps)), strict=True)])


@pytest.mark.parametrize("labels", [("run",), MAIN_JOB_RUNS,
                                    tuple(f"baseline_{i}_with_a_long_name" for i in range(20))])
def test_the_curves_legend_covers_no_axes(labels):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from jaxenc.training import run_report

    figure = run_report.curves_figure(
        {label: _curve_records(i) for i, label in enumerate(labels)}, "accuracy")
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)  # the constrained layout places axes and legend when drawn
    (legend,) = figure.legends
    assert not any(axis.get_legend() for axis in figure.axes)
    assert [text.get_text() for text in legend.get_texts()] == list(labels)
    box = legend.get_window_extent(renderer)
    for axis in figure.axes:
        data_area = axis.get_window_extent(renderer)
        assert not box.overlaps(data_area), (axis.get_title(), box, data_area)
    page = figure.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
    loss_lines, metric_lines = (axis.get_lines() for axis in figure.axes)
    assert [line.get_color() for line in loss_lines] == [
        line.get_color() for line in metric_lines]  # one legend serves both axes


def test_plot_curves_needs_a_dev_record(tmp_path):
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    metrics.write(10, "train", {"loss": 0.9})
    with pytest.raises(DataError, match="no dev records"):
        viz.plot_curves(metrics.path)


# ----------------------------------------------------------------------------- attention maps

# Tiny widths; PSAN and PhraseTransformer keep their default (packed, sparse) implementations, so
# the maps come from the dense twins of the modules that encode.
STRUCTURED = {
    "disan": dict(embed_dim=8, hidden=6),
    "psan": dict(embed_dim=8, model_dim=8, parser="gold", packing_scheme="pow2"),
    "dependency_transformer": dict(embed_dim=8, model_dim=8, num_layers=2, num_heads=2,
                                   ff_dim=16, relation_dim=3, parser="gold"),
    "phrase_transformer": dict(embed_dim=8, model_dim=8, num_layers=1, num_heads=2, ff_dim=16,
                               k=3),
}


@pytest.fixture(scope="module")
def synthetic_sentences():
    """Sentences with gold trees, and one of 9..14 words to look at."""
    sentences = [example.sentences[0] for example in generate(40, seed=3)]
    return sentences, next(s for s in sentences if 9 <= len(s.tokens) <= 14)


def _adjacency(members: np.ndarray, num_words: int) -> np.ndarray:
    """eq. 6 by loops: node s and t adjacent iff one's words contain the other's."""
    words = [{i} for i in range(num_words)] + [{m for m in row if m >= 0} for row in members]
    return np.array([[a <= b or b <= a for b in words] for a in words])


@pytest.mark.parametrize("name", sorted(STRUCTURED))
def test_attention_maps_follow_each_encoders_structure(name, synthetic_sentences):
    sentences, sentence = synthetic_sentences
    enc = Encoder.initialised(model_config(name, **STRUCTURED[name]), sentences, seed=1)
    assert set(sentence.tokens) <= set(enc.vocab.tokens)
    maps, labels = viz.attention_maps(enc, sentence), viz.node_labels(enc, sentence)
    (fields,) = enc.features([sentence])
    n = len(fields["tokens"])
    for key, weights in maps.items():
        assert np.isfinite(weights).all() and weights.dtype == np.float32, key
    # The dense twin computes what the encoder computes, with the same parameters.
    twin = viz._picture_module(enc.model_config, len(enc.vocab))
    batch = {key: value[None] for key, value in fields.items()}
    batch["lengths"] = np.array([n], np.int32)
    if name == "psan":
        batch["segments"] = viz._segments_of_blocks(fields["blocks"], n)[None]
        del batch["blocks"]
    vector = twin.apply({"params": enc.params}, batch, train=False)["sentence"][0]
    np.testing.assert_allclose(vector, enc.encode(sentence), rtol=1e-5, atol=1e-6)

    if name == "disan":
        assert set(maps) == {"forward/attention", "backward/attention"}
        expected = viz.disan_token2token_probs(build_encoder(enc.model_config, len(enc.vocab)),
                                               enc.params, fields["tokens"])
        for direction in ("forward", "backward"):
            np.testing.assert_allclose(maps[f"{direction}/attention"], expected[direction],
                                       atol=1e-6)
        assert labels == list(sentence.tokens)
    elif name == "psan":
        segments = psan_segments(tree_from_sentence(sentence))
        np.testing.assert_array_equal(viz._segments_of_blocks(fields["blocks"], n), segments)
        assert set(maps) == {f"psa_{level}/attention" for level in (1, 2, 3)}
        for level in (1, 2, 3):
            weights, ids = maps[f"psa_{level}/attention"], segments[level - 1]
            chex.assert_shape(weights, (n, n))
            same_phrase = (ids[:, None] == ids[None, :]) & ~np.eye(n, dtype=bool)
            assert np.all(weights[~same_phrase] == 0.0)  # nothing across a phrase boundary
            alone = same_phrase.sum(axis=1) == 0  # one-word phrases attend to nothing
            np.testing.assert_allclose(weights.sum(axis=1), np.where(alone, 0.0, 1.0), atol=1e-5)
    elif name == "dependency_transformer":
        assert labels == ["[root]", *sentence.tokens]
        assert len(enc.relation_vocab) > 2  # built from the sentences' gold trees
        assert set(maps) == {"layer_0/self_attention", "layer_1/self_attention",
                             "relation_bias_0", "relation_bias_1"}
        none = fields["relations"] == NONE_ID
        assert none.any() and (~none).any()
        for layer in (0, 1):
            bias = maps[f"relation_bias_{layer}"]
            chex.assert_shape(bias, (2, n, n))
            assert np.all(bias[:, none] == 0.0) and np.all(bias[:, ~none] != 0.0)
            np.testing.assert_allclose(maps[f"layer_{layer}/self_attention"].sum(-1), 1.0,
                                       rtol=1e-5)
    else:
        members = spans_to_members(ngram_spans(n, 3))
        nodes = n + len(members)
        assert len(labels) == nodes + 1 and labels[-1] == "[cls]"
        assert labels[n] == " ".join(sentence.tokens[:2])  # the first bigram
        chex.assert_shape(maps["layer_0/attention"], (2, nodes + 1, nodes + 1))
        phase2 = maps["layer_0/phrase_attention/attention"]
        chex.assert_shape(phase2, (2, nodes, nodes))
        outside = ~_adjacency(members, n)
        assert outside.any() and np.all(phase2[:, outside] == 0.0)  # attention within phrases
        np.testing.assert_allclose(phase2.sum(-1), 1.0, rtol=1e-5)


def test_initialised_encoders_depend_on_the_seed_only(synthetic_sentences):
    sentences, sentence = synthetic_sentences
    config = model_config("disan", **STRUCTURED["disan"])
    first, again, other = (Encoder.initialised(config, sentences, seed=seed) for seed in (0, 0, 1))
    np.testing.assert_array_equal(first.encode(sentence), again.encode(sentence))
    assert not np.allclose(first.encode(sentence), other.encode(sentence))
    with pytest.raises(DataError, match="no tokens"):
        viz.attention_maps(first, "")


# ----------------------------------------------------------------------------- more plots


def test_plot_heads_draws_each_head_on_one_scale(tmp_path):
    rng = np.random.default_rng(0)
    weights = rng.random((3, 4, 5)).astype(np.float32)
    queries, keys = ["q0", "q1", "q2", "q3"], ["k0", "k1", "k2", "k3", "k4"]
    figure = viz.plot_heads(queries, weights, key_tokens=keys, title="hypernodes", columns=2,
                            path=tmp_path / "heads.png")
    *maps, colour_bar = figure.axes
    assert len(maps) == 3 and colour_bar.get_label() == "<colorbar>"
    for head, axis in enumerate(maps):
        np.testing.assert_array_equal(axis.images[0].get_array(), weights[head])
        assert axis.get_title() == f"head {head}"
        assert [label.get_text() for label in axis.get_xticklabels()] == keys
        assert [label.get_text() for label in axis.get_yticklabels()] == queries
        assert axis.images[0].get_clim() == pytest.approx((0.0, weights.max()))
    assert figure.get_suptitle() == "hypernodes"
    assert (tmp_path / "heads.png").read_bytes().startswith(b"\x89PNG")

    scores = weights - 0.7  # negative and positive: a scale symmetric around 0
    centered = viz.plot_heads(queries, scores, key_tokens=keys, centered=True)
    bound = np.abs(scores).max()
    assert centered.axes[0].images[0].get_clim() == pytest.approx((-bound, bound))
    square = viz.plot_heads(keys, rng.random((5, 5)), titles=["level 1"])
    assert len(square.axes) == 2 and square.axes[0].get_title() == "level 1"  # one map
    with pytest.raises(DataError, match="2 titles for 3 maps"):
        viz.plot_heads(queries, weights, key_tokens=keys, titles=["a", "b"])
    with pytest.raises(DataError, match="do not match 4 query and 4 key tokens"):
        viz.plot_heads(queries, weights)


def test_plot_relations_shows_ids_and_names(tmp_path):
    tokens = ["[root]", "films", "move"]
    relations = np.array([[1, 0, 4],
                          [0, 1, 5],
                          [3, 2, 1]], np.int32)
    names = ["NONE", "SELF", "nsubj/UP", "root/UP", "root/DOWN", "nsubj/DOWN"]
    figure = viz.plot_relations(tokens, relations, names, path=tmp_path / "relations.png")
    (axis,) = figure.axes
    image = axis.images[0].get_array()
    np.testing.assert_array_equal(image.mask, relations == 0)  # NONE cells are blank
    np.testing.assert_array_equal(image.data, relations)
    drawn = {(round(text.get_position()[1]), round(text.get_position()[0])): text.get_text()
             for text in axis.texts}
    assert drawn == {(i, j): names[relations[i, j]] for i in range(3) for j in range(3)
                     if relations[i, j] != 0}
    assert [label.get_text() for label in axis.get_xticklabels()] == tokens
    assert [label.get_text() for label in axis.get_yticklabels()] == tokens
    assert (tmp_path / "relations.png").is_file()
    assert len(viz.plot_relations(tokens, relations).axes[0].texts) == 0  # no names, no texts
    with pytest.raises(DataError, match="do not match 2 tokens"):
        viz.plot_relations(tokens[:2], relations)


def test_plot_similarity_shows_the_cosines_of_the_vectors(tmp_path):
    labels = ["a film", "the same film", "another", "empty"]
    vectors = np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, -1.0, 3.0], [0.0, 0.0, 0.0]])
    expected = np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            norms = np.linalg.norm(vectors[i]) * np.linalg.norm(vectors[j])
            expected[i, j] = vectors[i] @ vectors[j] / norms if norms else 0.0
    figure = viz.plot_similarity(labels, vectors, path=tmp_path / "similarity.png")
    axis, _ = figure.axes
    np.testing.assert_allclose(axis.images[0].get_array(), expected, atol=1e-6)
    assert axis.images[0].get_clim() == (-1.0, 1.0)
    assert [text.get_text() for text in axis.texts] == [f"{v:.2f}" for v in expected.ravel()]
    assert [label.get_text() for label in axis.get_yticklabels()] == [
        f"{i}: {label}" for i, label in enumerate(labels)]
    assert [label.get_text() for label in axis.get_xticklabels()] == ["0", "1", "2", "3"]
    assert (tmp_path / "similarity.png").is_file()
    with pytest.raises(DataError, match="do not match 3 labels"):
        viz.plot_similarity(labels[:3], vectors)


def test_node_labels_of_a_phrase_transformer_with_boundary_tokens(synthetic_sentences):
    sentences, sentence = synthetic_sentences
    config = model_config("phrase_transformer", **STRUCTURED["phrase_transformer"],
                          boundary_tokens=True)
    enc = Encoder.initialised(config, sentences, seed=1)
    labels = viz.node_labels(enc, sentence)
    wrapped = ["<s>", *sentence.tokens, "</s>"]
    n = len(wrapped)
    ngrams = [" ".join(wrapped[start:start + size]) for size in (2, 3)
              for start in range(n - size + 1)]  # every 2- and 3-gram of the wrapped words
    assert labels[:n] == wrapped and labels[-1] == "[cls]"
    assert sorted(labels[n:-1]) == sorted(ngrams)
    maps = viz.attention_maps(enc, sentence)
    chex.assert_shape(maps["layer_0/attention"], (2, len(labels), len(labels)))

"""PhraseTransformer (spec phrase_transformer.md): the eq. 6 adjacency the model uses against a slow
reference (n-gram and dependency hypernodes, with padding), the sparse neighbour lists, sparse ==
dense phase 2 (values and gradients), phase 2 against a numpy loop of eq. 5-7 for both phrase
masks, hypernode init, dtype, config errors and the resolution of phase2="auto", the tagger on
its word states, and the POS and translation configs end to end on slices of the real data
(skipped without it).

The device-side adjacency functions themselves are checked against the subset definition in
tests/test_structure_properties.py; here they are checked as the model uses them."""

import itertools
import json
from pathlib import Path

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.data import registry as datasets
from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.data.featurize import Featurizer, tag_index
from jaxenc.data.synthetic import generate
from jaxenc.data.vocab import BOS, EOS, Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.layers.masks import HypernodeMask, span_adjacency
from jaxenc.layers.phrase_attention import WithinPhraseAttention, neighbour_mask
from jaxenc.models import registry
from jaxenc.models.phrase_transformer import (
    PhraseTransformer,
    PhraseTransformerConfig,
    PhraseTransformerLayer,
    source_nodes,
)
from jaxenc.models.registry import build_encoder, structure_spec
from jaxenc.records import Example
from jaxenc.structures import parsers
from jaxenc.structures.hypernodes import ngram_neighbours, ngram_spans
from jaxenc.tasks.factory import build_task
from jaxenc.training import experiment, run_files, run_report
from train.configs import base, phrase_transformer_multi30k_small, phrase_transformer_pos

TINY = dict(embed_dim=8, model_dim=8, num_layers=1, num_heads=2, ff_dim=16, dropout_rate=0.0)


def reference_adjacency(node_sets: list[set[int]], length: int) -> np.ndarray:
    """eq. 6 by its definition: A[s, t] iff words(s) ⊆ words(t) or words(t) ⊆ words(s), for real
    nodes (non-empty, every word before `length`)."""
    valid = [bool(words) and max(words) < length for words in node_sets]
    result = np.zeros((len(node_sets),) * 2, bool)
    for s, t in itertools.product(range(len(node_sets)), repeat=2):
        result[s, t] = valid[s] and valid[t] and (node_sets[s] <= node_sets[t]
                                                  or node_sets[t] <= node_sets[s])
    return result


def dense_neighbours(neighbours: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """The [N, N] adjacency a neighbour list int[N, D] (and its bool[N, D] mask) stands for."""
    size = neighbours.shape[0]
    keep = neighbours >= 0 if mask is None else mask
    adjacency = np.zeros((size, size), bool)
    rows = np.broadcast_to(np.arange(size)[:, None], neighbours.shape)
    adjacency[rows[keep], neighbours[keep]] = True
    return adjacency


# ----------------------------------------------------------------------------- neighbour lists


@pytest.mark.parametrize("k", [2, 3])
def test_ngram_neighbours_list_exactly_the_adjacency(k):
    for length in (k, k + 1, 8):
        neighbours = ngram_neighbours(length, k)
        spans = ngram_spans(length, k)
        chex.assert_shape(neighbours, (length + len(spans), {2: 3, 3: 6}[k]))
        real = [row[row >= 0] for row in neighbours]
        assert all(len(set(row)) == len(row) for row in real), "no neighbour twice"
        lengths = np.arange(length + 1)  # every padding amount, one row each
        masks = np.asarray(neighbour_mask(HypernodeMask(lengths, length, spans=spans), neighbours))
        expected = np.asarray(span_adjacency(spans, lengths, length))
        for row in lengths:
            np.testing.assert_array_equal(dense_neighbours(neighbours, masks[row]), expected[row])


# ----------------------------------------------------------------------------- the model's A


def featurized(model_cfg, kind="single", count=12, bucket=16):
    """(encoder, one batch of `count` synthetic sentences at `bucket`, examples, featurizer)."""
    examples = [e for e in generate(60, seed=4) if len(e.sentences[0].tokens) <= bucket][:count]
    vocab = Vocabulary.build(s.tokens for e in examples for s in e.sentences)
    needs = structure_spec(model_cfg)
    tags = tag_index(examples) if kind == "tagging" else None
    featurizer = Featurizer(kind=kind, vocab=vocab, model_cfg=model_cfg,
                            structure_fields=needs.fields, prefix=needs.prefix_tokens, tags=tags)
    batch = next(Batcher(featurizer.many(examples), batch_size=16, buckets=(bucket,),
                         shuffle=False).epoch(0))
    return build_encoder(model_cfg, len(vocab)), batch, examples, tags


def init(encoder, sentence):
    return jax.jit(lambda s: encoder.init(jax.random.key(0), s, train=False))(sentence)["params"]


def apply(encoder, params, sentence):
    return jax.jit(lambda p, s: encoder.apply({"params": p}, s, train=False))(params, sentence)


def phase2_weights(encoder, sentence):
    """The first layer's phase-2 attention weights [B, H, L+M, L+M] and the outputs."""
    params = jax.jit(lambda s: encoder.init(jax.random.key(0), s, train=False))(sentence)
    outputs, state = jax.jit(lambda p, s: encoder.apply(p, s, train=False, mutable=[
        "intermediates"]))(params, sentence)
    weights = state["intermediates"]["layer_0"]["phrase_attention"]["attention"]
    return np.asarray(weights["attention_weights"][0]), outputs


def reference_node_sets(words, length: int, hypernodes: str, k: int,
                        boundary_tokens: bool) -> tuple[list[set[int]], int]:
    """(the node sets of eq. 6 in the model's layout, the real word nodes) for a sentence padded
    to bucket `length`: word nodes (with <s> and </s> around the words under boundary_tokens),
    then every n-gram of 2..k word nodes by size and start, or one node per arc (dependent,
    head) padded to `length` rows."""
    extra = 2 if boundary_tokens else 0
    nodes = length + extra
    node_sets = [{i} for i in range(nodes)]
    if hypernodes == "ngram":
        node_sets += [set(range(start, start + size)) for size in range(2, k + 1)
                      for start in range(nodes - size + 1)]
    else:
        shift = 1 if boundary_tokens else 0
        arcs = [{i + shift, head - 1 + shift} for i, head in enumerate(words.heads) if head]
        node_sets += arcs + [set()] * (length - len(arcs))
    return node_sets, len(words.tokens) + extra


@pytest.mark.parametrize("hypernodes, k, boundary_tokens", [
    ("ngram", 2, False), ("ngram", 3, False), ("dependency", 2, False), ("ngram", 3, True),
    ("dependency", 2, True)])
def test_phase2_attends_exactly_eq6_with_padding(hypernodes, k, boundary_tokens):
    model_cfg = base.model_config("phrase_transformer", **TINY, hypernodes=hypernodes, k=k,
                                  phase2="dense", decoder_memory="nodes",
                                  boundary_tokens=boundary_tokens)
    encoder, batch, examples, _ = featurized(model_cfg)
    sentence = sentence_fields(batch, "sentence")
    weights, outputs = phase2_weights(encoder, sentence)
    length = sentence["tokens"].shape[1]
    for row, example in enumerate(examples):
        node_sets, real_words = reference_node_sets(example.sentences[0], length, hypernodes, k,
                                                    boundary_tokens)
        expected = reference_adjacency(node_sets, real_words)
        chex.assert_shape(weights[row], (2, len(node_sets), len(node_sets)))
        np.testing.assert_array_equal(weights[row] > 0,
                                      np.broadcast_to(expected, weights[row].shape))
        real = expected.any(axis=1)
        np.testing.assert_array_equal(np.asarray(outputs["memory_mask"])[row], real)
        assert not np.asarray(outputs["memory"])[row][~real].any(), "padding nodes are zero"


# ----------------------------------------------------------------------------- phase 2


def phase2_inputs(length=6, k=3, lengths=(6, 4, 1, 0), features=8, seed=0):
    spans = ngram_spans(length, k)
    nodes = jax.random.normal(jax.random.key(seed), (len(lengths), length + len(spans), features))
    return nodes, HypernodeMask(np.array(lengths), length, spans=spans), ngram_neighbours(length, k)


@pytest.mark.parametrize("nonlinear", [True, False])
def test_sparse_phase2_equals_dense_in_values_and_gradients(nonlinear):
    nodes, phrases, neighbours = phase2_inputs()
    layer = WithinPhraseAttention(num_heads=2, nonlinear=nonlinear)
    params = layer.init(jax.random.key(1), nodes, phrases, train=False)["params"]

    def apply(params, nodes, sparse):
        return layer.apply({"params": params}, nodes, phrases, train=False,
                           neighbours=neighbours if sparse else None)

    def loss(params, nodes, sparse):
        out = apply(params, nodes, sparse)
        return jnp.sum(jnp.sin(out) * jnp.arange(out.shape[-1]))

    dense_out, sparse_out = (jax.jit(apply, static_argnums=2)(params, nodes, sparse)
                             for sparse in (False, True))
    np.testing.assert_allclose(sparse_out, dense_out, rtol=1e-5, atol=1e-6)
    grads = [jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)(params, nodes, sparse)
             for sparse in (False, True)]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5), *grads)


def numpy_phase2(params, nodes, adjacency, valid, nonlinear, phrase_mask):
    """eq. 5-7 one node and one head at a time: softmax of the scaled scores over the phrase's
    nodes (additive) or of S ∘ A over all real nodes (hadamard), sigma, concat, W_O."""
    p = jax.tree.map(np.asarray, params["attention"])
    project = lambda name, x: np.einsum("nd,dhk->nhk", x, p[name]["kernel"]) + p[name]["bias"]
    out = np.zeros_like(nodes)
    for b in range(nodes.shape[0]):
        q, k, v = (project(name, nodes[b]) for name in ("query", "key", "value"))
        heads = np.zeros_like(q)
        for s, h in itertools.product(range(nodes.shape[1]), range(q.shape[1])):
            allowed = adjacency[b, s] if phrase_mask == "additive" else valid[b, s] & valid[b]
            keys = list(np.flatnonzero(allowed))
            if not keys:
                continue
            scores = np.array([q[s, h] @ k[t, h] / np.sqrt(q.shape[-1]) for t in keys])
            if phrase_mask == "hadamard":
                scores = scores * np.array([adjacency[b, s, t] for t in keys])
            weights = np.exp(scores - scores.max())
            weights /= weights.sum()
            heads[s, h] = sum(w * v[t, h] for w, t in zip(weights, keys, strict=True))
        if nonlinear:
            heads = 1.0 / (1.0 + np.exp(-heads))
        out[b] = np.einsum("nhk,hkd->nd", heads, p["out"]["kernel"]) + p["out"]["bias"]
    return out


@pytest.mark.parametrize("phrase_mask, nonlinear", [("additive", True), ("hadamard", True),
                                                    ("additive", False)])
def test_phase2_is_eq5_to_7(phrase_mask, nonlinear):
    nodes, phrases, _ = phase2_inputs(length=5, k=2, lengths=(5, 3, 0))
    layer = WithinPhraseAttention(num_heads=2, nonlinear=nonlinear, phrase_mask=phrase_mask)
    params = layer.init(jax.random.key(2), nodes, phrases, train=False)["params"]
    got = layer.apply({"params": params}, nodes, phrases, train=False)
    expected = numpy_phase2(params, np.asarray(nodes, np.float64),
                            np.asarray(phrases.adjacency()), np.asarray(phrases.valid()),
                            nonlinear, phrase_mask)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_additive_mask_gives_outside_nodes_nothing_and_hadamard_exp0():
    nodes, phrases, _ = phase2_inputs(length=5, k=2, lengths=(5,))
    weights = {}
    for phrase_mask in ("additive", "hadamard"):
        layer = WithinPhraseAttention(num_heads=2, phrase_mask=phrase_mask)
        params = layer.init(jax.random.key(3), nodes, phrases, train=False)["params"]
        out, state = layer.apply({"params": params}, nodes, phrases, train=False,
                                 mutable=["intermediates"])
        weights[phrase_mask] = np.asarray(
            state["intermediates"]["attention"]["attention_weights"][0])[0]  # [H, N, N]
        # perturb node 3 (word w3), outside the phrases of node 0 (w0: {w0, w0w1})
        moved = layer.apply({"params": params}, nodes.at[:, 3].add(1.0), phrases, train=False)
        same = np.allclose(moved[0, 0], out[0, 0])
        assert same == (phrase_mask == "additive"), phrase_mask
    adjacency = np.asarray(phrases.adjacency())[0]
    outside = ~np.broadcast_to(adjacency, weights["additive"].shape)
    assert np.all(weights["additive"][outside] == 0.0)
    np.testing.assert_allclose(weights["additive"].sum(-1), 1.0, rtol=1e-6)
    # hadamard: every node outside A has the score 0, so all of them share one weight per row
    hadamard = weights["hadamard"]
    for h, s in itertools.product(range(2), range(adjacency.shape[0])):
        off = hadamard[h, s][~adjacency[s]]
        assert off.size and np.all(off > 0) and np.ptp(off) < 1e-7
        # and the adjacent weights are the additive ones rescaled by one factor per row
        inside = adjacency[s]
        ratio = hadamard[h, s][inside] / weights["additive"][h, s][inside]
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-5)


# ----------------------------------------------------------------------------- the encoder


def test_mean_init_is_the_mean_of_member_words_and_zeros_is_zero():
    model_cfg = base.model_config("phrase_transformer", **TINY, k=3, decoder_memory="nodes")
    for how in ("mean", "zeros"):
        model_cfg.update(dict(num_layers=0, hypernode_init=how))
        encoder, batch, _, _ = featurized(model_cfg)
        sentence = sentence_fields(batch, "sentence")
        params = init(encoder, sentence)
        out = apply(encoder, params, sentence)
        words, memory = np.asarray(out["tokens"]), np.asarray(out["memory"])
        length = words.shape[1]
        spans = ngram_spans(length, 3)
        mask = np.asarray(out["memory_mask"])
        for row, (m, (start, end)) in itertools.product(range(4), enumerate(spans)):
            expected = words[row, start:end + 1].mean(0) if how == "mean" else 0.0
            if mask[row, length + m]:
                np.testing.assert_allclose(memory[row, length + m], expected, rtol=1e-5,
                                           atol=1e-6)


def test_flags_change_the_parameters_and_bfloat16_computes_in_bfloat16():
    variants = {"plain": {}, "no_residual": dict(residual=False),
                "no_ffn": dict(feed_forward=False), "linear": dict(nonlinear=False),
                "bf16": dict(dtype="bfloat16")}
    outputs = {}
    plain, batch, _, _ = featurized(base.model_config("phrase_transformer", **TINY))
    sentence = sentence_fields(batch, "sentence")
    for name, flags in variants.items():
        model_cfg = base.model_config("phrase_transformer", **TINY, **flags)
        encoder = build_encoder(model_cfg, plain.vocab_size)
        params = init(encoder, sentence)
        layer = set(params["layer_0"])
        assert ("ffn" in layer) == (name != "no_ffn")
        assert ("attention_norm" in layer) == (name != "no_residual")
        out = apply(encoder, params, sentence)
        chex.assert_type([out["tokens"], out["sentence"], out["memory"]], jnp.float32)
        chex.assert_tree_all_finite(out)
        outputs[name] = np.asarray(out["tokens"])
    assert not np.allclose(outputs["linear"], outputs["plain"])  # phase 2 reaches the words
    np.testing.assert_allclose(outputs["bf16"], outputs["plain"], atol=0.1)
    assert not np.array_equal(outputs["bf16"], outputs["plain"])
    hlo = jax.jit(lambda p, s: encoder.apply({"params": p}, s, train=False)).lower(
        params, sentence).as_text()
    assert "bf16" in hlo


# ----------------------------------------------------------------------------- decoder memory


def final_nodes(encoder, params, sentence):
    """(outputs, the last layer's node states [B, N, d]) of one forward pass."""
    outputs, state = jax.jit(lambda p, s: encoder.apply(
        {"params": p}, s, train=False, capture_intermediates=True, mutable=["intermediates"]))(
        params, sentence)
    last = f"layer_{encoder.config.num_layers - 1}"
    return outputs, np.asarray(state["intermediates"][last]["__call__"][0])


@pytest.mark.parametrize("boundary_tokens", [False, True])
def test_decoder_memory_words_is_the_word_nodes_and_nodes_adds_the_hypernodes(boundary_tokens):
    """"words" (Algorithm 1, line 6: H_k[:n]) hands the decoder the L' word nodes and their mask
    only; "nodes" the word nodes and the hypernodes (the last layer's states but [CLS]); the
    flag changes nothing else (same parameters, same token and sentence outputs)."""
    outputs, nodes, params = {}, None, None
    for memory in ("words", "nodes"):
        model_cfg = base.model_config("phrase_transformer", **TINY, k=3, decoder_memory=memory,
                                      boundary_tokens=boundary_tokens)
        encoder, batch, examples, _ = featurized(model_cfg)
        sentence = sentence_fields(batch, "sentence")
        params = init(encoder, sentence) if params is None else params
        outputs[memory], nodes = final_nodes(encoder, params, sentence)
    length = sentence["tokens"].shape[1]
    words = length + (2 if boundary_tokens else 0)
    chex.assert_shape(outputs["words"]["memory"], (sentence["tokens"].shape[0], words, 8))
    for row, example in enumerate(examples):
        node_sets, real_words = reference_node_sets(example.sentences[0], length, "ngram", 3,
                                                    boundary_tokens)
        real = reference_adjacency(node_sets, real_words).any(axis=1)
        np.testing.assert_array_equal(outputs["words"]["memory_mask"][row],
                                      np.arange(words) < real_words)
        np.testing.assert_array_equal(outputs["nodes"]["memory_mask"][row], real)
    np.testing.assert_allclose(outputs["nodes"]["memory"], nodes[:, :-1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(outputs["words"]["memory"], nodes[:, :words], rtol=1e-6,
                               atol=1e-7)
    for key in ("tokens", "sentence"):
        np.testing.assert_array_equal(outputs["words"][key], outputs["nodes"][key])


def translation_setup(decoder_memory: str):
    """(Seq2Seq model, params, batch): a one-layer PhraseTransformer (k=2) and a one-layer
    decoder on synthetic source/target pairs."""
    sentences = [e.sentences[0] for e in generate(24, seed=6)][:16]
    examples = [Example(sentences=(s,), target=t)
                for s, t in zip(sentences[::2], sentences[1::2], strict=True)]
    config = base.get_config("phrase_transformer,synthetic")
    config.model.update(dict(TINY, decoder_memory=decoder_memory))
    config.task.head.decoder.update(dict(model_dim=8, num_layers=1, num_heads=2, ff_dim=16,
                                         dropout_rate=0.0))
    vocab = Vocabulary.build(s.tokens for s in sentences)
    featurizer = Featurizer(kind="translation", vocab=vocab, model_cfg=config.model,
                            target_vocab=vocab)
    batch = next(Batcher(featurizer.many(examples), batch_size=8, buckets=(32,),
                         shuffle=False).epoch(0))
    task = build_task("translation", config.task, target_vocab_size=len(vocab))
    model = task.build_model(build_encoder(config.model, len(vocab)))
    return model, init(model, batch), batch


def moved_hypernodes(next_fun, args, kwargs, context):
    """An interceptor: adds 1 to the hypernode states the encoder's (only) layer returns."""
    out = next_fun(*args, **kwargs)
    if not isinstance(context.module, PhraseTransformerLayer) or (
            context.method_name != "__call__"):
        return out
    return out.at[:, args[2].num_words:-1].add(1.0)  # nodes: words, hypernodes, [CLS]


@pytest.mark.parametrize("decoder_memory", ["words", "nodes"])
def test_decoder_cross_attention_sees_exactly_the_memory_slots(decoder_memory):
    """The decoder's memory attention has one key per word node under "words" (its weights are
    positive exactly at the real words) and one per word or hypernode under "nodes"; moving the
    encoder's final hypernode states leaves the decoder's logits unchanged under "words" only."""
    model, params, batch = translation_setup(decoder_memory)

    def run(intercept):
        def forward(p, b):
            return model.apply({"params": p}, b, train=False, mutable=["intermediates"])
        if intercept:
            with nn.intercept_methods(moved_hypernodes):
                return forward(params, batch)
        return forward(params, batch)

    (logits, state), (moved, _) = run(False), run(True)
    weights = np.asarray(state["intermediates"]["decoder"]["layer_0"]["memory_attention"][
        "attention_weights"][0])  # [B, H, T, S]
    lengths = np.asarray(batch["source/lengths"])
    length = batch["source/tokens"].shape[1]
    spans = ngram_spans(length, 2)
    if decoder_memory == "words":
        slots = np.arange(length) < lengths[:, None]
    else:
        slots = np.concatenate([np.arange(length) < lengths[:, None],
                                spans[:, 1][None, :] < lengths[:, None]], axis=1)
    assert weights.shape[-1] == slots.shape[1]
    targets = np.arange(weights.shape[2]) < (np.asarray(batch["target/lengths"]) - 1)[:, None]
    for row in range(len(lengths)):
        seen = weights[row][:, targets[row]] > 0  # [H, T real, S]
        np.testing.assert_array_equal(seen, np.broadcast_to(slots[row], seen.shape))
    unchanged = np.allclose(logits["logits"], moved["logits"], rtol=0, atol=0)
    assert unchanged == (decoder_memory == "words")


# ----------------------------------------------------------------------------- boundary tokens


def brute_force_hypernodes(ids: list[int], k: int, boundary_tokens: bool):
    """(word node tokens, every n-gram of 2..k of them as a token tuple, by size then start)."""
    nodes = [BOS, *ids, EOS] if boundary_tokens else list(ids)
    grams = []
    for size in range(2, k + 1):
        for start in range(len(nodes)):
            if start + size <= len(nodes):
                grams.append(tuple(nodes[start:start + size]))
    return nodes, grams


@pytest.mark.parametrize("k, boundary_tokens", [(2, True), (3, True), (3, False)])
def test_boundary_tokens_give_the_ngrams_of_the_wrapped_sentence(k, boundary_tokens):
    """The hypernodes the model builds, read as token tuples, are a brute-force enumeration of
    the n-grams of <s> w_1 .. w_n </s> (boundary_tokens) or of w_1 .. w_n; the encoder's `tokens`
    output stays aligned with the words (<s> and </s> left out)."""
    model_cfg = base.model_config("phrase_transformer", **TINY, k=k,
                                  boundary_tokens=boundary_tokens)
    encoder, batch, examples, _ = featurized(model_cfg)
    sentence = sentence_fields(batch, "sentence")
    nodes = source_nodes(encoder.config, sentence)
    tokens, lengths = np.asarray(nodes.tokens), np.asarray(nodes.lengths)
    members, valid = np.asarray(nodes.members), np.asarray(nodes.phrases.valid())
    width = tokens.shape[1]
    for row in range(len(examples)):
        ids = [int(t) for t in sentence["tokens"][row][:sentence["lengths"][row]]]
        want_nodes, want_grams = brute_force_hypernodes(ids, k, boundary_tokens)
        assert tokens[row][:lengths[row]].tolist() == want_nodes
        assert not tokens[row][lengths[row]:].any()
        grams = [tuple(int(tokens[row][m]) for m in members[h] if m >= 0)
                 for h in range(members.shape[0]) if valid[row, width + h]]
        assert grams == want_grams
    params = init(encoder, sentence)
    outputs, final = final_nodes(encoder, params, sentence)
    first = 1 if boundary_tokens else 0
    real = np.arange(sentence["tokens"].shape[1]) < np.asarray(sentence["lengths"])[:, None]
    np.testing.assert_array_equal(np.asarray(outputs["tokens"])[real],
                                  final[:, first:first + real.shape[1]][real])
    assert not np.asarray(outputs["tokens"])[~real].any()


def test_boundary_tokens_keep_the_dependency_arcs():
    """Dependency hypernodes under boundary_tokens: the same arcs (dependent, head), on the word
    nodes shifted by <s>."""
    model_cfg = base.model_config("phrase_transformer", **TINY, hypernodes="dependency",
                                  boundary_tokens=True)
    encoder, batch, examples, _ = featurized(model_cfg)
    nodes = source_nodes(encoder.config, sentence_fields(batch, "sentence"))
    members = np.asarray(nodes.members)
    for row, example in enumerate(examples):
        arcs = [[i + 1, head] for i, head in enumerate(example.sentences[0].heads) if head]
        real = members[row][members[row, :, 0] >= 0]
        assert sorted(real.tolist()) == sorted(arcs)


@pytest.mark.parametrize("flags, phase2", [
    (dict(), "sparse"),
    (dict(k=3), "sparse"),
    (dict(hypernodes="dependency"), "dense"),
    (dict(phrase_mask="hadamard"), "dense"),
    (dict(hypernodes="dependency", phrase_mask="hadamard"), "dense"),
    (dict(phase2="dense"), "dense"),
])
def test_phase2_auto_resolves_to_the_kernel_the_other_options_allow(flags, phase2):
    model_cfg = base.model_config("phrase_transformer", **TINY, **flags)
    assert model_cfg.phase2 == flags.get("phase2", "auto")  # the section keeps "auto" until built
    assert build_encoder(model_cfg, 10).config.phase2 == phase2
    assert registry.resolved_auto(model_cfg) == ({} if "phase2" in flags else {"phase2": phase2})


def test_a_directly_built_module_resolves_auto_too():
    model_cfg = base.model_config("phrase_transformer", **TINY)
    encoder, batch, _, _ = featurized(model_cfg)
    sentence = sentence_fields(batch, "sentence")
    params = init(encoder, sentence)

    def program(phase2):
        module = PhraseTransformer(encoder.vocab_size, PhraseTransformerConfig(**TINY,
                                                                               phase2=phase2))
        return str(jax.make_jaxpr(lambda p: module.apply({"params": p}, sentence,
                                                          train=False))(params))

    assert program("auto") == program("sparse") != program("dense")


@pytest.mark.parametrize("flags, message", [
    (dict(hypernodes="dependency", phase2="sparse"),
     "model.phase2='sparse' has no fixed neighbour list.*fix: --config.model.phase2=dense"),
    (dict(phrase_mask="hadamard", phase2="sparse"),
     "phase2='sparse' cannot give phrase_mask='hadamard'.*fix: --config.model.phase2=dense"),
    (dict(phase2="gather"), "phase2='gather' is not one of auto, sparse, dense"),
    (dict(k=1), "model.k=1 is not an n-gram length >= 2"),
    (dict(hypernode_init="random"), "hypernode_init='random' is not one of zeros, mean"),
    (dict(decoder_memory="hypernodes"),
     "decoder_memory='hypernodes' is not one of words, nodes.*fix: --config.model.decoder_"),
    (dict(boundary_tokens="yes"), "boundary_tokens='yes' is not a bool"),
])
def test_bad_options_are_one_line_config_errors(flags, message):
    with pytest.raises(ConfigError, match=message) as error:
        build_encoder(base.model_config("phrase_transformer", **flags), 10)
    assert "\n" not in str(error.value) and "fix: --config.model." in str(error.value)


def test_tagger_predicts_for_real_words_only():
    model_cfg = base.model_config("phrase_transformer", **TINY)
    encoder, batch, examples, tags = featurized(model_cfg, kind="tagging")
    config = base.get_config("phrase_transformer,ud_ewt")
    task = build_task("tagging", config.task, num_tags=len(tags))
    model = task.build_model(encoder)
    params = model.init(jax.random.key(0), batch, train=False)["params"]
    outputs = model.apply({"params": params}, batch, train=False)
    tokens = batch["sentence/tokens"]
    chex.assert_shape(outputs["logits"], (*tokens.shape, len(tags)))  # words, no hypernode/[CLS]
    counted = np.asarray(task.eval_outputs(outputs, batch)["count"])
    np.testing.assert_array_equal(counted[: len(examples)],
                                  [len(e.sentences[0].tokens) for e in examples])
    assert not counted[len(examples):].any(), "filler rows count nothing"
    # the loss ignores every padding position, whatever the logits say there
    padding = np.arange(tokens.shape[1]) >= batch["sentence/lengths"][:, None]
    noisy = dict(outputs, logits=jnp.where(padding[..., None], 1e3, outputs["logits"]))
    np.testing.assert_allclose(task.loss(noisy, batch), task.loss(outputs, batch), rtol=1e-6)



# ----------------------------------------------------------------------------- end to end


def write_slice(source: Path, target: Path, lines: int) -> None:
    target.write_text("".join(source.read_text(encoding="utf-8").splitlines(True)[:lines]),
                      encoding="utf-8")


def shrink(config, decoder: bool = False) -> None:
    """Tiny widths for the model and its Transformer twin (the word vectors' size kept when the
    config reads vectors), a few steps."""
    embed_dim = config.model.embed_dim if config.data.embeddings else 16
    sizes = dict(embed_dim=embed_dim, model_dim=16, num_layers=1, num_heads=2, ff_dim=16)
    config.model.update(sizes)
    config.baselines.transformer.update(sizes)
    if decoder:
        config.task.head.decoder.update(dict(model_dim=16, num_layers=1, num_heads=2, ff_dim=16,
                                             beam_size=2, max_decode_length=12))
    config.data.update(dict(batch_size=8, eval_batch_size=16, max_length=32, bucket_step=32))
    config.train.update(dict(num_steps=4, eval_every=4, log_every=2, progress_bar=False))


def test_pos_config_trains_end_to_end_on_a_few_ud_sentences(data_root, tmp_path):
    folder = tmp_path / "data" / "ud_english_ewt"
    folder.mkdir(parents=True)
    blocks = (data_root / "ud_english_ewt" / "en_ewt-ud-dev.conllu").read_text(
        encoding="utf-8").split("\n\n")
    for split, part in (("train", blocks[:24]), ("dev", blocks[24:32]), ("test", blocks[32:40])):
        (folder / f"en_ewt-ud-{split}.conllu").write_text("\n\n".join(part) + "\n\n",
                                                          encoding="utf-8")
    config = phrase_transformer_pos.get_config()
    shrink(config)
    config.data.data_dir = str(tmp_path / "data")
    rows = experiment.run(config, tmp_path / "run")
    assert [row["model"] for row in rows] == ["phrase_transformer", "transformer"]
    for row in rows:
        assert row["steps"] == 4 and 0.0 <= row["test accuracy"] <= 1.0
    assert "| phrase_transformer | ud_ewt |" in (tmp_path / "run" / "results.md").read_text()


def test_semantic_variant_trains_with_the_defaults_and_records_dense_phase2(data_root, tmp_path):
    """--config.model.hypernodes=dependency alone (phase2 left "auto") trains, and config.json
    records the phase 2 it was trained with."""
    folder = tmp_path / "data" / "ud_english_ewt"
    folder.mkdir(parents=True)
    blocks = (data_root / "ud_english_ewt" / "en_ewt-ud-dev.conllu").read_text(
        encoding="utf-8").split("\n\n")
    for split, part in (("train", blocks[:16]), ("dev", blocks[16:24]), ("test", blocks[24:32])):
        (folder / f"en_ewt-ud-{split}.conllu").write_text("\n\n".join(part) + "\n\n",
                                                          encoding="utf-8")

    def semantic_config():
        config = phrase_transformer_pos.get_config()
        shrink(config)
        config = base.twin_option(config, "solo")
        config.model.hypernodes = "dependency"
        config.data.data_dir = str(tmp_path / "data")
        return config

    config = semantic_config()
    assert config.model.phase2 == "auto"
    rows = experiment.run(config, tmp_path / "run")
    assert rows[0]["steps"] == 4
    saved = json.loads((tmp_path / "run" / run_files.CONFIG_FILE).read_text())
    assert saved["model"]["phase2"] == "dense" and config.model.phase2 == "dense"
    assert experiment.run(semantic_config(), tmp_path / "run")[0]["steps"] == 4  # "auto" resumes it


def test_semantic_variant_reads_spacy_arcs_with_parser_spacy_and_gold_arcs_by_default(data_root):
    """The POS config's semantic variant: its dependency hypernodes are the (dependent, head) arcs
    of the gold UD trees by default and of spaCy's parse with --config.model.parser=spacy (a loop
    over each parse's heads), and the two differ on real sentences."""
    examples = datasets.load("ud_ewt", "dev", str(data_root))[:12]
    sentences = [example.sentences[0] for example in examples]
    vocab = Vocabulary.build([sentence.tokens for sentence in sentences])
    spacy_heads = [tree.heads for tree in parsers.SpacyParser().parse(sentences)]

    def members(**parser):
        config = base.twin_option(phrase_transformer_pos.get_config(), "solo")
        config.model.update(dict(hypernodes="dependency", phase2="dense", **parser))
        featurizer = Featurizer(kind="tagging", vocab=vocab, model_cfg=config.model,
                                structure_fields=structure_spec(config.model).fields,
                                tags=tag_index(examples))
        return [features["sentence/members"].tolist() for features in featurizer.many(examples)]

    def arcs(heads):  # 1-based heads, 0 the root; the root arc is no hypernode
        return [[dependent, head - 1] for dependent, head in enumerate(heads) if head != 0]

    assert members() == [arcs(sentence.heads) for sentence in sentences]
    spacy = members(parser="spacy")
    assert spacy == [arcs(heads) for heads in spacy_heads]
    assert sum(a != b for a, b in zip(spacy, members(), strict=True)) >= 3


@pytest.mark.parametrize("module", [phrase_transformer_pos, phrase_transformer_multi30k_small])
def test_solo_config_argument_drops_the_twin_and_keeps_the_rest(module):
    """`config.py:solo` trains the PhraseTransformer without its Transformer twin (the variants
    of the paper's tables); the default keeps the twin; any other argument is a one-line error."""
    twin, solo = module.get_config(), module.get_config("solo")
    assert list(twin.baselines) == ["transformer"] and not list(solo.baselines)
    twin.baselines = solo.baselines
    assert twin.to_dict() == solo.to_dict()
    with pytest.raises(ConfigError, match="expected 'twin' .* or 'solo'"):
        module.get_config("alone")


def test_translation_config_trains_decodes_and_reports_bleu(data_root, tmp_path):
    folder = tmp_path / "data" / "multi30k"
    folder.mkdir(parents=True)
    for prefix, lines in (("train", 48), ("val", 8), ("test_2016_flickr", 8)):
        for language in ("de", "en"):
            name = f"{prefix}.lc.norm.tok.{language}"
            write_slice(data_root / "multi30k" / name, folder / name, lines)
    config = phrase_transformer_multi30k_small.get_config()
    shrink(config, decoder=True)
    config.data.update(dict(data_dir=str(tmp_path / "data"), min_count=1))
    rows = experiment.run(config, tmp_path / "run")
    assert [row["model"] for row in rows] == ["phrase_transformer", "transformer"]
    for row in rows:
        assert 0.0 <= row["test bleu"] <= 100.0
    text = (tmp_path / "run" / "results.md").read_text()
    assert "test bleu" in text
    for model in ("phrase_transformer", "transformer"):
        assert f"{model}: sacrebleu (beam 2, length penalty 0.6, 8 test sentences): BLEU = " \
            in text
    test_record = run_report.read_metrics(tmp_path / "run" / run_report.METRICS_FILE, "test")[-1]
    assert test_record["bleu"] == rows[0]["test bleu"]


@pytest.mark.parametrize("kind", ["single", "pair", "relatedness", "tagging", "translation"])
def test_base_preset_serves_every_dataset_kind(kind):
    """`base.py:phrase_transformer,X`: the preset builds and trains (finite loss and gradients)
    as the encoder of every task kind."""
    sentences = [e.sentences[0] for e in generate(24, seed=6)][:16]
    pairs = list(zip(sentences[::2], sentences[1::2], strict=True))
    examples = {
        "single": [Example(sentences=(s,), label=i % 2) for i, s in enumerate(sentences)],
        "pair": [Example(sentences=p, label=i % 3) for i, p in enumerate(pairs)],
        "relatedness": [Example(sentences=p, score=1.0 + i % 5) for i, p in enumerate(pairs)],
        "tagging": [Example(sentences=(s,)) for s in sentences],
        "translation": [Example(sentences=(s,), target=t) for s, t in pairs],
    }[kind]
    config = base.get_config("phrase_transformer,synthetic")
    config.model.update(TINY)
    vocab = Vocabulary.build(s.tokens for s in sentences)
    tags = tag_index(examples) if kind == "tagging" else None
    featurizer = Featurizer(kind=kind, vocab=vocab, model_cfg=config.model, tags=tags,
                            target_vocab=vocab if kind == "translation" else None)
    batch = next(Batcher(featurizer.many(examples), batch_size=8, buckets=(32,),
                         shuffle=False).epoch(0))
    task = build_task(kind, config.task, num_classes=3 if kind == "pair" else 2 if kind ==
                      "single" else 5, num_tags=len(tags) if tags else None,
                      target_vocab_size=len(vocab))
    model = task.build_model(build_encoder(config.model, len(vocab)))
    params = init(model, batch)
    loss, grads = jax.jit(jax.value_and_grad(lambda p, b: task.loss(model.apply(
        {"params": p}, b, train=True, rngs={"dropout": jax.random.key(0)}), b)))(params, batch)
    chex.assert_tree_all_finite((loss, grads))
    assert float(loss) > 0.0

"""Child-Sum Tree-LSTM against a recursive reference of Tai et al.'s eqs. 2-8 on real UD English-EWT
trees (one deeper than the `levels` clip, and a chain as deep as its bucket), values and gradients;
`child_sum_levels` against a node-by-node float64 reference at every sweep count (a depth on a
count's boundary, one past it, a path through all L nodes), empty rows and batches, one compile
whatever the depths; padding, batch order, one compile per bucket, bfloat16, configuration errors,
every single/pair/relatedness dataset's base config, the SICK configs on real data, and
`train.main`."""

import functools
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxenc.data import registry
from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.data.featurize import Featurizer, input_roles
from jaxenc.data.vocab import ROOT, Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.models import tree_lstm
from jaxenc.models.registry import build_encoder, structure_spec
from jaxenc.records import Example, Sentence
from jaxenc.structures.arrays import DEFAULT_MAX_LEVEL
from jaxenc.structures.formats import read_conllu
from jaxenc.structures.relations import levels
from jaxenc.structures.trees import DependencyTree
from jaxenc.tasks.factory import build_task
from jaxenc.training import input_pipeline, preparation, run_report
from jaxenc.training.sharding import make_mesh, shard_batch
from jaxenc.training.steps import make_train_step
from train.configs import base

REPO = Path(__file__).resolve().parents[1]
EMBED, MEMORY = 8, 6
NUM_DEV = 12  # the first dev sentences: 1 to 31 words, one of a single word


def model_cfg(**overrides) -> ml_collections.ConfigDict:
    return base.model_config("tree_lstm", **{"embed_dim": EMBED, "memory_dim": MEMORY,
                                             "parser": "gold", **overrides})


def depth(sentence: Sentence) -> int:
    """Arcs from the deepest word up to the [root] node."""
    tree = DependencyTree(sentence.tokens, sentence.heads, sentence.deprels)
    return int(levels(tree, max_level=len(sentence.tokens)).max())


def chain(num_words: int) -> Sentence:
    """Word 1 is the root word and word k + 1 hangs from word k: depth num_words."""
    return Sentence(tokens=tuple(f"w{k}" for k in range(num_words)),
                    heads=tuple(range(num_words)), deprels=("dep",) * num_words)


@pytest.fixture(scope="module")
def dev_sentences(data_root) -> list[Sentence]:
    return [e.sentences[0] for e in registry.load("ud_ewt", "dev", data_root)[:NUM_DEV]]


@pytest.fixture(scope="module")
def deep_sentence(data_root) -> Sentence:
    """The deepest tree of at most 70 words in a train shard: deeper than `levels` can say."""
    shard = read_conllu(data_root / "ud_english_ewt" / "en_ewt-ud-train.part2of4.conllu")
    sentence = max((s for s in shard if len(s.tokens) <= 70), key=depth)
    assert depth(sentence) > DEFAULT_MAX_LEVEL
    return sentence


def featurize(sentences: list[Sentence], vocab: Vocabulary) -> list[dict[str, np.ndarray]]:
    needs = structure_spec(model_cfg())
    assert needs.fields == ("heads",) and needs.prefix_tokens == (ROOT,)
    featurizer = Featurizer(kind="single", vocab=vocab, model_cfg=model_cfg(),
                            structure_fields=needs.fields, prefix=needs.prefix_tokens)
    return featurizer.many([Example(sentences=(s,), label=0) for s in sentences])


def batch_of(features, bucket: int, batch_size: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(sentence fields, index) of all `features` in one batch padded to `bucket`."""
    (batch,) = Batcher(features, batch_size=batch_size, buckets=(bucket,), shuffle=False).epoch(0)
    return sentence_fields(batch, "sentence"), batch["index"]


# ---- reference: eqs. 2-8 by recursion over one tree (numpy, float64) ------------------------

def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def reference_tree(p, sentence: Sentence, vocab: Vocabulary) -> tuple[list, np.ndarray]:
    """(h of every node, [root] node first; h of the root word) from the sentence's own 1-based
    heads: node 0 is the [root] token, word k is node k."""
    x = p["embed"]["embedding"][[ROOT, *vocab.encode(sentence.tokens)]]
    head_of = (None, *sentence.heads)
    states = {}

    def visit(j):
        children = [k for k in range(1, len(head_of)) if head_of[k] == j]
        for k in children:
            visit(k)
        h_tilde = sum((states[k][0] for k in children), np.zeros(MEMORY))  # eq. 2
        gates = x[j] @ p["iou_x"]["kernel"] + p["iou_x"]["bias"] + h_tilde @ p["iou_h"]["kernel"]
        i = sigmoid(gates[:MEMORY])  # eq. 3
        o = sigmoid(gates[MEMORY:2 * MEMORY])  # eq. 5
        u = np.tanh(gates[2 * MEMORY:])  # eq. 6
        c = i * u
        for k in children:
            f = sigmoid(x[j] @ p["f_x"]["kernel"] + p["f_x"]["bias"]
                        + states[k][0] @ p["f_h"]["kernel"])  # eq. 4
            c = c + f * states[k][1]  # eq. 7
        states[j] = (o * np.tanh(c), c)  # eq. 8

    visit(0)
    return [states[j][0] for j in range(len(head_of))], states[sentence.heads.index(0) + 1][0]


def reference_batch(p, sentences, vocab, index, length) -> tuple[np.ndarray, np.ndarray]:
    """(tokens [B, L, d], sentence [B, d]) of the batch rows `index` (-1: filler, zeros)."""
    tokens, vectors = np.zeros((len(index), length, MEMORY)), np.zeros((len(index), MEMORY))
    for row, i in enumerate(index):
        if i >= 0:
            nodes, vectors[row] = reference_tree(p, sentences[i], vocab)
            tokens[row, :len(nodes)] = nodes
    return tokens, vectors


def scalar_loss(xp, tokens, sentence):
    """A loss that weighs every output coordinate differently (xp: numpy or jax.numpy)."""
    token_weights = xp.sin(xp.arange(tokens.size).reshape(tokens.shape))
    sentence_weights = xp.cos(xp.arange(sentence.size).reshape(sentence.shape))
    return xp.sum(token_weights * tokens) + xp.sum(sentence_weights * xp.tanh(sentence))


def float64(params):
    return jax.tree.map(lambda a: np.asarray(a, np.float64), params)


# ---- tests ------------------------------------------------------------------------------------

def test_outputs_equal_the_recursive_reference_on_real_trees(dev_sentences, deep_sentence,
                                                             noisy_params):
    bucket = 72
    sentences = [*dev_sentences, deep_sentence, chain(bucket - 1)]  # chain: depth = bucket - 1
    vocab = Vocabulary.build(s.tokens for s in sentences)
    fields, index = batch_of(featurize(sentences, vocab), bucket, batch_size=16)  # 2 filler rows
    model = build_encoder(model_cfg(), len(vocab))
    params = noisy_params(model, fields)
    out = jax.jit(functools.partial(model.apply, train=False))({"params": params}, fields)

    batch_size = len(index)
    chex.assert_shape([out["tokens"], out["memory"], out["sentence"], out["memory_mask"]],
                      [(batch_size, bucket, MEMORY)] * 2 + [(batch_size, MEMORY),
                                                            (batch_size, bucket)])
    chex.assert_type([out["tokens"], out["sentence"], out["memory_mask"]],
                     [jnp.float32, jnp.float32, jnp.bool_])
    assert set(out) == {"tokens", "sentence", "memory", "memory_mask"}
    tokens, sentence = reference_batch(float64(params), sentences, vocab, index, bucket)
    np.testing.assert_allclose(out["tokens"], tokens, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["sentence"], sentence, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out["memory"], out["tokens"])
    np.testing.assert_array_equal(out["memory_mask"],
                                  np.arange(bucket) < np.asarray(fields["lengths"])[:, None])
    assert np.all(np.abs(out["tokens"][np.asarray(out["memory_mask"])]).max(-1) > 0)
    assert list(index).count(-1) == 2


def test_gradients_match_the_reference_with_a_one_word_sentence_and_filler(dev_sentences,
                                                                           noisy_params):
    """Directional derivatives of the loss along random directions, one parameter at a time:
    the model's gradient against central differences of the float64 reference."""
    sentences = [s for s in dev_sentences if len(s.tokens) <= 20]
    assert len(sentences) == 7 and min(len(s.tokens) for s in sentences) == 1
    vocab = Vocabulary.build(s.tokens for s in sentences)
    fields, index = batch_of(featurize(sentences, vocab), 24, batch_size=8)  # one filler row
    model = build_encoder(model_cfg(), len(vocab))
    params = noisy_params(model, fields, seed=1)

    def model_loss(params):
        out = model.apply({"params": params}, fields, train=False)
        return scalar_loss(jnp, out["tokens"], out["sentence"])

    def reference_loss(params):
        return scalar_loss(np, *reference_batch(params, sentences, vocab, index, 24))

    grads = jax.jit(jax.grad(model_loss))(params)
    chex.assert_tree_all_finite(grads)
    assert np.all(np.abs(grads["f_h"]["kernel"]) > 0)  # every forget gate weight matters
    rng, eps = np.random.default_rng(3), 1e-5
    leaves, tree = jax.tree.flatten(float64(params))
    for position, (leaf, grad) in enumerate(zip(leaves, jax.tree.leaves(grads), strict=True)):
        direction = rng.normal(size=leaf.shape)

        def moved(step, position=position, leaf=leaf, direction=direction):
            changed = list(leaves)
            changed[position] = leaf + step * direction
            return jax.tree.unflatten(tree, changed)

        numeric = (reference_loss(moved(eps)) - reference_loss(moved(-eps))) / (2 * eps)
        np.testing.assert_allclose(np.sum(np.asarray(grad, np.float64) * direction), numeric,
                                   rtol=1e-4, atol=1e-5)


def test_padding_and_batch_order_do_not_change_a_sentence(dev_sentences, noisy_params):
    sentences = [*(s for s in dev_sentences if len(s.tokens) < 16), chain(15)]
    vocab = Vocabulary.build(s.tokens for s in sentences)
    features = featurize(sentences, vocab)
    short, _ = batch_of(features, 16, batch_size=8)
    long, _ = batch_of(features, 32, batch_size=8)
    model = build_encoder(model_cfg(), len(vocab))
    apply = jax.jit(functools.partial(model.apply, {"params": noisy_params(model, short)},
                                      train=False))
    out_short, out_long = apply(short), apply(long)
    np.testing.assert_allclose(out_long["tokens"][:, :16], out_short["tokens"], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(out_long["tokens"][:, 16:], 0.0)
    np.testing.assert_array_equal(out_long["memory_mask"][:, :16], out_short["memory_mask"])
    np.testing.assert_allclose(out_long["sentence"], out_short["sentence"], rtol=1e-5, atol=1e-6)

    order = np.arange(len(short["lengths"]))[::-1]
    out_reversed = apply(jax.tree.map(lambda a: a[order], short))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b[order], rtol=1e-5, atol=1e-6),
                 out_reversed, out_short)


def test_compiles_once_per_bucket_whatever_the_depths(noisy_params):
    """Depths 3, 15 (bucket 16) and 20, 31 (bucket 32): the depth loop has a static bound."""
    sentences = [[chain(3)], [chain(15), chain(2)], [chain(20)], [chain(31), chain(5)]]
    vocab = Vocabulary.build(s.tokens for group in sentences for s in group)
    batches = [batch_of(featurize(group, vocab), 16 if len(group[0].tokens) < 16 else 32,
                        batch_size=4)[0] for group in sentences]
    model = build_encoder(model_cfg(), len(vocab))
    variables = {"params": noisy_params(model, batches[0])}
    apply = jax.jit(functools.partial(model.apply, train=False))
    for fields in batches:
        chex.assert_tree_all_finite(apply(variables, fields))
    assert apply._cache_size() == 2


def test_bfloat16_follows_float32(dev_sentences, noisy_params):
    vocab = Vocabulary.build(s.tokens for s in dev_sentences)
    fields, _ = batch_of(featurize(dev_sentences, vocab), 32, batch_size=16)
    model = build_encoder(model_cfg(), len(vocab))
    variables = {"params": noisy_params(model, fields)}
    out32 = model.apply(variables, fields, train=False)
    out16 = build_encoder(model_cfg(dtype="bfloat16"), len(vocab)).apply(
        variables, fields, train=False)
    chex.assert_type(out16["tokens"], jnp.float32)  # computed in bfloat16, returned in float32
    np.testing.assert_allclose(np.asarray(out16["sentence"], np.float32), out32["sentence"],
                               atol=0.05)


def test_node_depths_are_exact_beyond_the_levels_clip(deep_sentence):
    n = len(deep_sentence.tokens)
    heads = np.full((2, n + 4), -1, np.int32)  # a padded row and a filler row
    heads[0, :n + 1] = (-1, *deep_sentence.heads)
    valid = np.arange(n + 4) < np.array([[n + 1], [0]])
    depths = tree_lstm.node_depths(jnp.asarray(heads), jnp.asarray(valid))
    expected = levels(DependencyTree(deep_sentence.tokens, deep_sentence.heads,
                                     deep_sentence.deprels), max_level=n)
    assert expected.max() > DEFAULT_MAX_LEVEL
    np.testing.assert_array_equal(depths[0, :n + 1], expected)
    np.testing.assert_array_equal(depths[0, n + 1:], -1)
    np.testing.assert_array_equal(depths[1], -1)


# ---- child_sum_levels against eqs. 2-8 node by node (numpy, float64) -----------------------------

SWEEP_LENGTH, D = 32, 5  # sweep counts 8, 16, 32


def tree_depths(heads: np.ndarray) -> np.ndarray:
    """Arcs from each node up to the [root] node, walking up; -1 for padding and empty rows."""
    depths = np.full(heads.shape, -1, np.int32)
    depths[np.any(heads >= 0, axis=1), 0] = 0
    for b, j in zip(*np.nonzero(heads >= 0), strict=True):
        k, depths[b, j] = j, 0
        while heads[b, k] >= 0:
            k, depths[b, j] = heads[b, k], depths[b, j] + 1
    return depths


def random_tree(num_words: int, max_depth: int, rng) -> tuple[int, ...]:
    """1-based heads of a random tree at most max_depth deep: words join in a random order, the
    first under the [root] node, each other under a word already in."""
    while True:
        order = rng.permutation(np.arange(1, num_words + 1))
        heads = np.zeros(num_words + 1, int)
        for i, k in enumerate(order[1:], start=1):
            heads[k] = rng.choice(order[:i])
        if tree_depths(np.array([[-1, *heads[1:]]])).max() <= max_depth:
            return tuple(int(head) for head in heads[1:])


def heads_batch(trees: list[tuple[int, ...]]) -> np.ndarray:
    """int32[len(trees), SWEEP_LENGTH]: [root] node 0 (head -1), word k at node k; an empty tree
    is a row of length 0."""
    heads = np.full((len(trees), SWEEP_LENGTH), -1, np.int32)
    for row, tree in enumerate(trees):
        if tree:
            heads[row, 1:len(tree) + 1] = tree
    return heads


def reference_states(x_iou, x_f, u_iou, u_f, heads) -> tuple[np.ndarray, np.ndarray]:
    """(h, c) [B, L, d] of eqs. 2-8, one node at a time after its children; zeros on padding."""
    h, c = np.zeros(x_f.shape), np.zeros(x_f.shape)
    for b in range(heads.shape[0]):

        def visit(j, b=b):
            children = np.flatnonzero(heads[b] == j)
            for k in children:
                visit(k)
            gates = x_iou[b, j] + h[b, children].sum(axis=0) @ u_iou  # eqs. 2, 3, 5, 6
            i, o, u = sigmoid(gates[:D]), sigmoid(gates[D:2 * D]), np.tanh(gates[2 * D:])
            c[b, j] = i * u
            for k in children:
                c[b, j] += sigmoid(x_f[b, k] + h[b, k] @ u_f) * c[b, k]  # eqs. 4, 7
            h[b, j] = o * np.tanh(c[b, j])  # eq. 8

        if np.any(heads[b] >= 0):
            visit(0)
    return h, c


@pytest.fixture(scope="module")
def sweep_batches() -> list[np.ndarray]:
    """heads int32[4, 32] of three batches whose deepest nodes lie 8, 9 and 31 arcs down: 8
    sweeps exactly, one more than 8, and a path through all 32 nodes; each has an empty row."""
    rng = np.random.default_rng(5)
    return [heads_batch([chain(8).heads, random_tree(12, 8, rng), (), random_tree(4, 8, rng)]),
            heads_batch([random_tree(20, 8, rng), (), chain(9).heads, random_tree(30, 9, rng)]),
            heads_batch([random_tree(25, 30, rng), chain(SWEEP_LENGTH - 1).heads, (),
                         random_tree(31, 30, rng)])]


def level_inputs(heads: np.ndarray, seed: int) -> list[np.ndarray]:
    """Random x_iou [B, L, 3d], x_f [B, L, d], u_iou [d, 3d], u_f [d, d] (float64)."""
    rng = np.random.default_rng(seed)
    nodes = heads.shape
    return [rng.normal(size=(*nodes, 3 * D)), rng.normal(size=(*nodes, D)),
            rng.normal(size=(D, 3 * D)) / np.sqrt(D), rng.normal(size=(D, D)) / np.sqrt(D)]


def state_loss(xp, h, c):
    """Weighs every coordinate of h and c differently (xp: numpy or jax.numpy)."""
    return xp.sum(xp.sin(xp.arange(h.size).reshape(h.shape)) * h) + xp.sum(
        xp.cos(xp.arange(c.size).reshape(c.shape)) * c)


def levels_loss(x_iou, x_f, u_iou, u_f, heads, depth):
    return state_loss(jnp, *tree_lstm.child_sum_levels(x_iou, x_f, u_iou, u_f, heads, depth))


def test_sweep_counts_double_from_eight_up_to_the_length():
    assert tree_lstm.sweep_counts(SWEEP_LENGTH) == (8, 16, 32)
    assert tree_lstm.sweep_counts(72) == (8, 16, 32, 64, 72)
    assert tree_lstm.sweep_counts(8) == (8,)
    assert tree_lstm.sweep_counts(5) == (5,)


def test_levels_equal_the_node_by_node_reference_at_every_sweep_count(sweep_batches):
    """Values and directional derivatives (central differences of the reference) in float64."""
    assert [tree_depths(heads).max() for heads in sweep_batches] == [8, 9, 31]
    with jax.enable_x64(True):
        value_and_grad = jax.jit(jax.value_and_grad(levels_loss, argnums=(0, 1, 2, 3)))
        for seed, heads in enumerate(sweep_batches):
            inputs = level_inputs(heads, seed)
            h, c = reference_states(*inputs, heads)
            depth = tree_depths(heads)
            out_h, out_c = tree_lstm.child_sum_levels(*inputs, heads, depth)
            np.testing.assert_allclose(out_h, h, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(out_c, c, rtol=1e-12, atol=1e-12)
            assert np.all(np.abs(h[depth >= 0]) > 0)

            value, grads = value_and_grad(*inputs, heads, depth)
            np.testing.assert_allclose(value, state_loss(np, h, c), rtol=1e-12)
            rng, eps = np.random.default_rng(seed), 1e-6
            for position, grad in enumerate(grads):
                direction = rng.normal(size=grad.shape)
                moved = [[*inputs[:position], inputs[position] + step * direction,
                          *inputs[position + 1:]] for step in (eps, -eps)]
                numeric = (state_loss(np, *reference_states(*moved[0], heads))
                           - state_loss(np, *reference_states(*moved[1], heads))) / (2 * eps)
                np.testing.assert_allclose(np.sum(grad * direction), numeric, rtol=1e-6)


def test_levels_compile_once_whatever_the_depths(sweep_batches):
    """8, 16 and 32 sweeps are branches of one compiled loop, chosen on device."""
    value_and_grad = jax.jit(jax.value_and_grad(levels_loss, argnums=(0, 1, 2, 3)))
    for seed, heads in enumerate(sweep_batches):
        inputs = [np.asarray(a, np.float32) for a in level_inputs(heads, seed)]
        chex.assert_tree_all_finite(value_and_grad(*inputs, heads, tree_depths(heads)))
    assert value_and_grad._cache_size() == 1


def test_empty_rows_and_an_empty_batch_give_zeros_and_finite_gradients(noisy_params):
    heads = np.array([[-1, 2, 0, 2], [-1, -1, -1, -1]], np.int32)
    fields = {"tokens": np.array([[ROOT, 5, 6, 7], [0, 0, 0, 0]], np.int32),
              "lengths": np.array([4, 0], np.int32), "heads": heads}
    empty = {"tokens": np.zeros((2, 4), np.int32), "lengths": np.zeros(2, np.int32),
             "heads": np.full((2, 4), -1, np.int32)}
    model = build_encoder(model_cfg(), 10)
    params = noisy_params(model, fields)

    def loss(params, fields):
        out = model.apply({"params": params}, fields, train=False)
        return scalar_loss(jnp, out["tokens"], out["sentence"]), out

    value_and_grad = jax.jit(jax.value_and_grad(loss, has_aux=True))
    (_, out), grads = value_and_grad(params, fields)
    chex.assert_tree_all_finite(grads)
    np.testing.assert_array_equal(out["tokens"][1], 0.0)
    np.testing.assert_array_equal(out["sentence"][1], 0.0)
    assert np.all(np.abs(out["tokens"][0]).max(-1) > 0)
    (value, out), grads = value_and_grad(params, empty)
    assert value == 0.0 and not np.any(out["memory_mask"])
    jax.tree.map(lambda a: np.testing.assert_array_equal(a, 0.0), (out, grads))

@pytest.mark.parametrize(("field", "value"), [
    ("memory_dim", 0), ("embed_dim", 2.5), ("dtype", "float64"), ("parser", "benepar"),
    ("hidden", 150)])
def test_bad_configuration_is_a_one_line_config_error(field, value):
    with pytest.raises(ConfigError, match=field) as error:
        build_encoder(model_cfg(**{field: value}), 10)
    assert "\n" not in str(error.value) and "fix:" in str(error.value)


def test_base_config_builds_for_every_sentence_and_pair_dataset():
    """`base.py:tree_lstm,X`: encoder + task head initialise on a batch of every input role."""
    preset = base.get_config("tree_lstm,trec").model
    assert preset.to_dict() == {"name": "tree_lstm", **tree_lstm.TreeLSTMConfig().to_dict()}
    assert (preset.memory_dim, preset.embed_dim, preset.parser) == (150, 300, "spacy")
    kinds = ("single", "pair", "relatedness")
    names = [name for name, info in registry.DATASETS.items()
             if info.kind in kinds and "train" in info.splits]  # STS12-16: transfer tests only
    assert {"sick_r", "sick_e", "mrpc", "sst2", "trec"} <= set(names)
    heads = np.array([[-1, 2, 0, 2], [-1, 0, -1, -1]], np.int32)
    role = {"tokens": np.array([[ROOT, 5, 6, 7], [ROOT, 8, 0, 0]], np.int32),
            "lengths": np.array([4, 2], np.int32), "heads": heads}
    for name in names:
        config = base.get_config(f"tree_lstm,{name}")
        config.model.update(dict(embed_dim=EMBED, memory_dim=MEMORY))
        info = registry.DATASETS[name]
        task = build_task(info.kind, config.task, num_classes=info.num_classes,
                          min_score=info.score_range[0] if info.score_range else 1.0)
        model = task.build_model(build_encoder(config.model, 10))
        batch = {f"{r}/{key}": value for r in input_roles(info.kind) for key, value in role.items()}
        batch.update(label=np.zeros(2, np.int32), score=np.ones(2, np.float32))
        shapes = jax.eval_shape(lambda m=model, b=batch: m.init(jax.random.key(0), b,
                                                                train=False))
        assert shapes["params"]["encoder"]["f_h"]["kernel"].shape == (MEMORY, MEMORY), name


@pytest.mark.parametrize("name", ["tree_lstm_sick_r", "tree_lstm_sick_e"])
def test_sick_config_trains_one_step_on_real_data_with_spacy_trees(name, tiny_data_dir,
                                                                   tmp_path):
    config = importlib.import_module(f"train.configs.{name}").get_config()
    assert (config.model.name, config.model.memory_dim, config.model.parser) == (
        "tree_lstm", 150, "spacy")
    assert (config.optim.name, config.optim.learning_rate, config.optim.weight_decay) == (
        "adagrad", 0.05, 1e-4)
    assert config.data.batch_size == 25 and config.data.freeze_embeddings
    assert config.model.freeze_embeddings  # follows data.freeze_embeddings
    assert config.data.embeddings == ""  # the ONE override that gives the paper setting
    if name.endswith("sick_r"):
        assert config.task.head.relatedness_hidden_dim == 50
    else:
        assert (tuple(config.task.head.hidden_dims), config.task.head.activation) == (
            (50,), "sigmoid")

    config.data.update(dict(data_dir=str(tiny_data_dir(config.task.dataset, 10)),
                            batch_size=8, eval_batch_size=8))
    mesh = make_mesh(jax.devices()[:1])
    setup = preparation.prepare(config, tmp_path / "run", mesh, input_pipeline.load_splits(config))
    batch = next(setup.batchers["train"].epoch(0))
    assert np.all(batch["first/heads"][:, 0] == -1)
    assert np.all(np.sum(batch["first/heads"] == 0, axis=1) == (batch["weight"] > 0))
    before = jax.device_get(setup.state.params)
    state, stats = make_train_step(setup.model, setup.task, setup.tx, mesh)(
        setup.state, shard_batch(batch, mesh))
    assert np.isfinite(float(stats["loss"])) and float(stats["loss"]) > 0.0
    after = jax.device_get(state.params)
    assert not np.allclose(after["encoder"]["f_h"]["kernel"], before["encoder"]["f_h"]["kernel"])
    np.testing.assert_array_equal(after["encoder"]["embed"]["embedding"],
                                  before["encoder"]["embed"]["embedding"])  # held fixed


def test_train_main_runs_a_tiny_tree_lstm_job(tmp_path):
    workdir = tmp_path / "run"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    result = subprocess.run(
        [sys.executable, "-m", "train.main", "--config=train/configs/base.py:tree_lstm,synthetic",
         f"--workdir={workdir}", "--config.model.embed_dim=8", "--config.model.memory_dim=8",
         "--config.task.head.hidden_dims=(8,)",
         "--config.data.batch_size=16", "--config.data.max_length=32",
         "--config.data.bucket_step=32", "--config.train.num_steps=6",
         "--config.train.eval_every=3", "--config.train.log_every=3",
         "--config.train.progress_bar=False"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    records = run_report.read_metrics(workdir / run_report.METRICS_FILE)
    assert [r["step"] for r in records if r["split"] == "dev"] == [3, 6]
    test = [r for r in records if r["split"] == "test"][-1]
    assert 0.0 <= test["accuracy"] <= 1.0
    model = json.loads((workdir / "config.json").read_text())["model"]
    assert (model["memory_dim"], model["parser"]) == (8, "gold")  # synthetic ships gold trees
    assert "| tree_lstm | synthetic |" in (workdir / run_report.RESULTS_FILE).read_text()

"""Dependency-Transformer: the reduced relation scores against the literal eq. 3-4 with an
explicit [L, L, d_r] tensor, no such tensor in the traced gradient, the [root] node on a
hand-parsed sentence, the plain-Transformer ablation against the Transformer encoder, the
ablation flags, the relation-table capacity check, and the relation ids of both arc directions
("split", "none") against a brute-force computation from the head array."""

import functools

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jaxenc.data.featurize import Featurizer, relation_vocabulary
from jaxenc.data.vocab import ROOT, Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.layers.relation_bias import GatedRelationBias, RelationTable
from jaxenc.models.registry import build_encoder, structure_spec
from jaxenc.records import Example, Sentence
from jaxenc.structures.relations import NONE_ID, RelationVocabulary, relations
from jaxenc.structures.trees import DependencyTree
from train.configs import base

L, D, D_R, H, R = 11, 10, 7, 2, 13  # distinct sizes: an [L, L, d_r] tensor is recognisable


def random_inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, L, D)).astype(np.float32)
    rel = rng.integers(0, R, size=(2, L, L)).astype(np.int32)
    rel[:, :, :3] = NONE_ID  # NONE columns
    rel[1, 8:, :] = -1  # padding of the second sentence
    rel[1, :, 8:] = -1
    return x, rel


def literal_scores(params, x, rel, table, gated=True):
    """eq. 3-4 as printed, with r_ij = E[rel_ij] as an explicit [B, L, L, d_r] tensor."""
    r = jnp.where((rel >= 0)[..., None], table[jnp.maximum(rel, 0)], 0.0)  # [B, L, L, d_r]
    out = []
    for h in range(H):
        score = r @ params["score_vector"][h]  # r_ij · V_r
        if gated:
            gate_in = (x @ params["gate_input"][h])[:, :, None, :] + r @ params["gate_relation"][h]
            score = jax.nn.sigmoid(gate_in @ params["gate_vector"][h]) * score
        out.append(score)
    return jnp.stack(out, axis=1)  # [B, H, L, L]


@pytest.fixture(scope="module")
def bias_setup():
    x, rel = random_inputs()
    table_module = RelationTable(R, D_R)
    table_params = table_module.init(jax.random.key(0))["params"]
    bias = GatedRelationBias(H)
    table = table_module.apply({"params": table_params})
    params = bias.init(jax.random.key(1), x, rel, table)["params"]
    return x, rel, table_module, table_params, bias, params


@pytest.mark.parametrize("gated", [True, False])
def test_reduced_relation_scores_equal_the_literal_equations(bias_setup, gated):
    x, rel, table_module, table_params, _, params = bias_setup
    bias = GatedRelationBias(H, gated=gated)
    params = params if gated else {"score_vector": params["score_vector"]}

    def reduced(p, tp, x):
        return bias.apply({"params": p}, x, rel, table_module.apply({"params": tp}))

    def literal(p, tp, x):
        return literal_scores(p, x, rel, table_module.apply({"params": tp}), gated)

    got, want = reduced(params, table_params, x), literal(params, table_params, x)
    chex.assert_shape(got, (2, H, L, L))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    none_or_pad = (rel == NONE_ID) | (rel < 0)
    assert np.all(np.asarray(got).transpose(0, 2, 3, 1)[none_or_pad] == 0.0)  # exactly zero
    weights = np.random.default_rng(3).normal(size=got.shape).astype(np.float32)
    grad = lambda fn: jax.grad(lambda *a: jnp.sum(fn(*a) * weights), argnums=(0, 1, 2))(
        params, table_params, x)
    got_grads, want_grads = grad(reduced), grad(literal)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
                 got_grads, want_grads)
    assert np.all(np.asarray(got_grads[1]["embedding"][NONE_ID]) == 0.0)  # NONE is no parameter


def test_no_l_by_l_by_d_r_tensor_in_forward_or_backward(bias_setup):
    x, rel, table_module, table_params, bias, params = bias_setup

    def loss(p, tp, x):
        return jnp.sum(bias.apply({"params": p}, x, rel, table_module.apply({"params": tp})) ** 2)

    text = str(jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2)))(params, table_params, x))
    assert f"{L},{L},{D_R}]" not in text.replace(" ", "") and "f32[2,11,11,7]" not in text
    literal_text = str(jax.make_jaxpr(jax.grad(
        lambda p, tp, x: jnp.sum(literal_scores(p, x, rel, table_module.apply(
            {"params": tp})) ** 2), argnums=(0, 1, 2)))(params, table_params, x))
    assert f"{L},{L},{D_R}]" in literal_text.replace(" ", "")  # the check can see one


def hand_parsed() -> Example:
    # "dogs chase cats": chase is the root; dogs nsubj, cats obj
    return Example(sentences=(Sentence(tokens=("dogs", "chase", "cats"), text="dogs chase cats",
                                       heads=(2, 0, 2), deprels=("nsubj", "root", "obj")),),
                   label=0, uid="hand:1")


def dt_config(**overrides) -> ml_collections.ConfigDict:
    return base.model_config("dependency_transformer", **{
        **dict(embed_dim=8, model_dim=8, num_layers=2, num_heads=2, ff_dim=12, relation_dim=3,
               parser="gold"), **overrides})


def test_root_node_and_its_relations_on_a_hand_parsed_sentence(tmp_path):
    example = hand_parsed()
    model_cfg = dt_config()
    needs = structure_spec(model_cfg)
    assert needs.prefix_tokens == (ROOT,) and needs.fields == ("relations", "levels")
    vocab = Vocabulary.build([example.sentences[0].tokens])
    rel_vocab = relation_vocabulary(tmp_path, model_cfg, needs.fields, [example])
    features = Featurizer(kind="single", vocab=vocab, model_cfg=model_cfg,
                          structure_fields=needs.fields, prefix=needs.prefix_tokens,
                          relation_vocab=rel_vocab)(example)
    tokens, rel = features["sentence/tokens"], features["sentence/relations"]
    assert tokens[0] == ROOT and len(tokens) == 4
    names = [[rel_vocab.names[i] for i in row] for row in rel]
    assert names[0] == ["SELF", "(0,2)", "root/DOWN", "(0,2)"]  # [root] -> chase is the root arc
    assert names[2] == ["root/UP", "nsubj/DOWN", "SELF", "obj/DOWN"]
    assert names[1][3] == "(1,1)"  # dogs and cats are siblings
    np.testing.assert_array_equal(features["sentence/levels"], [0, 2, 1, 2])
    encoder = build_encoder(model_cfg, len(vocab))
    batch = {"tokens": tokens[None], "lengths": np.array([4], np.int32),
             "relations": rel[None], "levels": features["sentence/levels"][None]}
    params = encoder.init(jax.random.key(0), batch, train=False)["params"]
    out = encoder.apply({"params": params}, batch, train=False)
    np.testing.assert_array_equal(out["sentence"], out["tokens"][:, 0])


def test_plain_transformer_ablation_equals_the_transformer_encoder():
    sizes = dict(embed_dim=8, model_dim=8, num_layers=2, num_heads=2, ff_dim=12)
    dt = build_encoder(dt_config(variant="transformer", **sizes), 30)
    plain = build_encoder(base.model_config("transformer", **sizes), 30)
    rng = np.random.default_rng(0)
    lengths = np.array([6, 3, 1], np.int32)
    tokens = np.where(np.arange(8) < lengths[:, None], rng.integers(6, 30, (3, 8)), 0)
    tokens[:, 0] = ROOT
    batch = {"tokens": tokens.astype(np.int32), "lengths": lengths}
    params = plain.init(jax.random.key(0), batch, train=False)["params"]
    assert jax.tree.structure(params) == jax.tree.structure(
        dt.init(jax.random.key(0), batch, train=False)["params"])
    got = dt.apply({"params": params}, batch, train=False)
    want = plain.apply({"params": params}, batch, train=False)
    np.testing.assert_allclose(got["tokens"], want["tokens"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["sentence"], want["tokens"][:, 0], rtol=1e-5, atol=1e-6)


def test_mean_sentence_vector_averages_the_word_nodes_and_is_zero_without_words():
    """sentence_vector="mean": per sentence, the numpy mean of the word nodes' outputs (nodes 1
    .. length-1: [root] and padding left out); a sentence of [root] alone gives zeros. The
    default is the [root] node's output."""
    sizes = dict(embed_dim=8, model_dim=8, num_layers=2, num_heads=2, ff_dim=12)
    root, mean = (build_encoder(dt_config(sentence_vector=vector, **sizes), 30)
                  for vector in ("root", "mean"))
    rng = np.random.default_rng(1)
    lengths = np.array([6, 3, 1], np.int32)
    tokens = np.where(np.arange(8) < lengths[:, None], rng.integers(6, 30, (3, 8)), 0)
    tokens[:, 0] = ROOT
    batch = {"tokens": tokens.astype(np.int32), "lengths": lengths,
             "relations": rng.integers(0, 5, (3, 8, 8)).astype(np.int32),
             "levels": rng.integers(0, 4, (3, 8)).astype(np.int32)}
    params = root.init(jax.random.key(0), batch, train=False)["params"]
    by_root = root.apply({"params": params}, batch, train=False)
    by_mean = mean.apply({"params": params}, batch, train=False)
    np.testing.assert_array_equal(by_root["tokens"], by_mean["tokens"])
    np.testing.assert_array_equal(by_root["sentence"], by_root["tokens"][:, 0])
    nodes = np.asarray(by_mean["tokens"])
    for row, length in enumerate(lengths):
        want = nodes[row, 1:length].mean(axis=0) if length > 1 else np.zeros(8, np.float32)
        np.testing.assert_allclose(by_mean["sentence"][row], want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match="sentence_vector"):
        build_encoder(dt_config(sentence_vector="first"), 30)


@functools.cache
def ablation_outputs(variant: str) -> np.ndarray:
    example = hand_parsed()
    model_cfg = dt_config(variant=variant)
    needs = structure_spec(model_cfg)
    vocab = Vocabulary.build([example.sentences[0].tokens])
    rel_vocab = RelationVocabulary(("nsubj", "obj", "root"))
    features = Featurizer(kind="single", vocab=vocab, model_cfg=model_cfg,
                          structure_fields=needs.fields, prefix=needs.prefix_tokens,
                          relation_vocab=rel_vocab)(example)
    batch = {key.split("/")[1]: value[None] for key, value in features.items() if "/" in key}
    batch["lengths"] = np.array([len(features["sentence/tokens"])], np.int32)
    encoder = build_encoder(model_cfg, len(vocab))
    params = encoder.init(jax.random.key(0), batch, train=False)["params"]
    return params, np.asarray(encoder.apply({"params": params}, batch, train=False)["sentence"])


def test_ablation_flags_change_the_parameters_as_table_3_says():
    full, rg, lr, plain = (ablation_outputs(v)[0] for v in ("full", "rg", "lr", "transformer"))
    assert "levels" in full and "levels" not in rg and "levels" not in lr
    assert "gate_input" in rg["relation_bias_0"] and "gate_input" not in lr["relation_bias_0"]
    assert "relations" in full and not any(key.startswith("relation") for key in plain)
    outputs = [ablation_outputs(v)[1] for v in ("full", "rg", "lr", "transformer")]
    for i in range(len(outputs)):
        for j in range(i + 1, len(outputs)):
            assert not np.allclose(outputs[i], outputs[j])


def test_per_layer_relation_tables():
    shared = build_encoder(dt_config(), 10)
    separate = build_encoder(dt_config(share_relations=False), 10)
    batch = {"tokens": np.array([[ROOT, 7, 8]], np.int32), "lengths": np.array([3], np.int32),
             "relations": np.ones((1, 3, 3), np.int32), "levels": np.zeros((1, 3), np.int32)}
    keys = lambda model: set(model.init(jax.random.key(0), batch, train=False)["params"])
    assert "relations" in keys(shared) and "relations_1" not in keys(shared)
    assert {"relations_0", "relations_1"} <= keys(separate)


def test_relation_vocabulary_must_fit_the_table(tmp_path):
    with pytest.raises(ConfigError, match="num_relations=3"):
        relation_vocabulary(tmp_path, dt_config(num_relations=3), ("relations",),
                            [hand_parsed()])


def test_a_training_run_saves_its_relations_and_encodes_with_them(tmp_path):
    from jaxenc.data.synthetic import generate
    from jaxenc.evaluation.encoders import CheckpointEncoder
    from jaxenc.training import experiment

    config = base.get_config("dependency_transformer,synthetic")
    config.model.update(dict(embed_dim=16, model_dim=16, num_layers=1, num_heads=2, ff_dim=16,
                             relation_dim=4))
    config.task.head.hidden_dims = (16,)
    config.data.update(dict(batch_size=16, max_length=32, bucket_step=16))
    config.optim.update(dict(name="adagrad", learning_rate=0.05))
    config.train.update(dict(num_steps=20, eval_every=10, progress_bar=False))
    rows = experiment.run(config, tmp_path)
    assert rows[0]["model"] == "dependency_transformer" and 0 <= rows[0]["test accuracy"] <= 1
    saved = RelationVocabulary.load(tmp_path / "relations.json")
    assert "nsubj" in saved.labels  # gold synthetic trees
    sentences = [e.sentences[0] for e in generate(5, seed=11)]
    vectors = CheckpointEncoder(tmp_path, progress=False).encode(sentences)
    chex.assert_shape(vectors, (5, 16))
    chex.assert_tree_all_finite(vectors)


# ----------------------------------------------------------------------------- arc directions


def random_tree(rng: np.random.Generator, size: int) -> DependencyTree:
    """A random valid tree: each word's head is the root or a word placed before it in a random
    order; labels with and without subtypes."""
    order = rng.permutation(size)
    heads = [0] * size
    for rank, word in enumerate(order[1:], start=1):
        heads[word] = int(order[rng.integers(0, rank)]) + 1
    labels = rng.choice(["nsubj", "obj", "det", "nmod:poss", "nmod", "amod"], size)
    return DependencyTree(tuple(f"w{i}" for i in range(size)), tuple(heads),
                          tuple(str(label) for label in labels))


def brute_force_relation_ids(heads, labels, known, max_distance: int, direction: str):
    """int32[n+1, n+1] by walking the head array node by node ([root] = node 0, word i = node
    i + 1): NONE 0, SELF 1, then the arc ids of <unk> and the sorted known labels (two per label,
    UP then DOWN, with "split"; one with "none"), then the ordered pairs (a, b) of 2..max_distance
    by total, a from total down to 0."""
    size = len(heads) + 1
    parent = [-1] + list(heads)
    label_index = {label: i + 1 for i, label in enumerate(sorted(known))}
    per_label = 2 if direction == "split" else 1
    pairs = [(a, total - a) for total in range(2, max_distance + 1) for a in range(total, -1, -1)]
    first_pair = 2 + per_label * (len(known) + 1)
    result = np.zeros((size, size), np.int32)
    for i in range(size):
        for j in range(size):
            up_i, up_j = [i], [j]
            while parent[up_i[-1]] >= 0:
                up_i.append(parent[up_i[-1]])
            while parent[up_j[-1]] >= 0:
                up_j.append(parent[up_j[-1]])
            lca = next(node for node in up_i if node in up_j)
            a, b = up_i.index(lca), up_j.index(lca)
            if (a, b) == (0, 0):
                result[i, j] = 1
            elif (a, b) in ((1, 0), (0, 1)):
                dependent = i if a else j
                label = labels[dependent - 1].split(":")[0]
                arc = 2 + per_label * label_index.get(label, 0)
                down = direction == "split" and (a, b) == (0, 1)
                result[i, j] = arc + 1 if down else arc
            elif a + b <= max_distance:
                result[i, j] = first_pair + pairs.index((a, b))
    return result


@pytest.mark.parametrize("direction", ["split", "none"])
@pytest.mark.parametrize("max_distance", [1, 2, 3])
def test_relation_ids_equal_a_brute_force_walk_of_the_heads(direction, max_distance):
    rng = np.random.default_rng(max_distance)
    trees = [random_tree(rng, size) for size in (1, 2, 3, 5, 8, 12) for _ in range(3)]
    vocab = RelationVocabulary.build(trees[::2], max_distance=max_distance, direction=direction)
    for tree in trees:  # the odd trees' labels may be unseen: <unk>
        np.testing.assert_array_equal(
            relations(tree, vocab),
            brute_force_relation_ids(tree.heads, tree.labels, vocab.labels, max_distance,
                                     direction))
    arcs = len(vocab.labels) + 1
    assert len(vocab) == 2 + (2 if direction == "split" else 1) * arcs + sum(
        total + 1 for total in range(2, max_distance + 1))


def test_direction_free_relations_merge_up_and_down_and_keep_the_rest():
    """"none" is "split" with each (label, DOWN) merged into (label, UP), renamed "label", and
    the other ids renumbered; the matrix is symmetric on the arcs."""
    rng = np.random.default_rng(7)
    trees = [random_tree(rng, size) for size in (4, 9)]
    split = RelationVocabulary.build(trees)
    free = RelationVocabulary.build(trees, direction="none")
    for tree in trees:
        names_split = [[split.names[r] for r in row] for row in relations(tree, split)]
        names_free = [[free.names[r] for r in row] for row in relations(tree, free)]
        merged = [[name.split("/")[0] for name in row] for row in names_split]
        assert names_free == merged
        for i, j in zip(*np.nonzero([[("/" in name) for name in row] for row in names_split]),
                        strict=True):
            assert names_free[i][j] == names_free[j][i]
    assert free.names[:2] == ("NONE", "SELF") and "<unk>" in free.names


def test_relation_direction_is_saved_checked_and_configured(tmp_path):
    free = RelationVocabulary(("nsubj", "obj", "root"), direction="none")
    free.save(tmp_path / "relations.json")
    assert RelationVocabulary.load(tmp_path / "relations.json") == free
    old = tmp_path / "old"
    old.mkdir()  # a vocabulary saved before the option: no "direction" key, the split layout
    (old / "relations.json").write_text('{"labels": ["obj"], "max_distance": 2, '
                                        '"keep_subtypes": false}')
    assert RelationVocabulary.load(old / "relations.json").direction == "split"
    built = relation_vocabulary(tmp_path / "new", dt_config(relation_direction="none"),
                                ("relations",), [hand_parsed()])
    assert built.direction == "none" and built.labels == ("nsubj", "obj", "root")
    with pytest.raises(ConfigError, match="has 'split' relations but the config says model."
                       "relation_direction='none'.*fix: --config.model.relation_direction=split"
                       ) as error:
        relation_vocabulary(old, dt_config(relation_direction="none"), ("relations",),
                            [hand_parsed()])
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="relation_direction='both' is not one of split, none"
                       ".*fix: --config.model.relation_direction=split"):
        build_encoder(dt_config(relation_direction="both"), 10)


def test_direction_free_model_on_a_hand_parsed_sentence(tmp_path):
    example = hand_parsed()
    model_cfg = dt_config(relation_direction="none")
    needs = structure_spec(model_cfg)
    vocab = Vocabulary.build([example.sentences[0].tokens])
    rel_vocab = relation_vocabulary(tmp_path, model_cfg, needs.fields, [example])
    features = Featurizer(kind="single", vocab=vocab, model_cfg=model_cfg,
                          structure_fields=needs.fields, prefix=needs.prefix_tokens,
                          relation_vocab=rel_vocab)(example)
    rel = features["sentence/relations"]
    names = [[rel_vocab.names[i] for i in row] for row in rel]
    assert names[0] == ["SELF", "(0,2)", "root", "(0,2)"]
    assert names[2] == ["root", "nsubj", "SELF", "obj"]
    assert names[1][2] == "nsubj" and names[3][2] == "obj" and names[1][3] == "(1,1)"
    encoder = build_encoder(model_cfg, len(vocab))
    batch = {"tokens": features["sentence/tokens"][None], "lengths": np.array([4], np.int32),
             "relations": rel[None], "levels": features["sentence/levels"][None]}
    params = encoder.init(jax.random.key(0), batch, train=False)["params"]
    chex.assert_tree_all_finite(encoder.apply({"params": params}, batch, train=False))

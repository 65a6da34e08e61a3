"""One contract for every registered encoder, present and future (docs/ARCHITECTURE.md,
"Encoders"): the output contract's keys, shapes and dtypes; padded == unpadded and bucket
independence; batch-order independence; finite gradients with an empty (filler) row and a
one-token sentence; one compilation per bucket; 8 devices == 1 device.

Inputs come from the embedded synthetic dataset (gold constituency and dependency trees), through
the real featurizer and batcher, so each encoder gets exactly the structure fields it declares in
its `structure_spec`. A new encoder joins by adding its small test widths to TINY.
"""

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.data.featurize import Featurizer, relation_vocabulary
from jaxenc.data.synthetic import generate
from jaxenc.data.vocab import Vocabulary
from jaxenc.models.registry import ENCODERS, build_encoder, structure_spec
from jaxenc.records import Example, Sentence
from jaxenc.training.sharding import make_mesh, replicated, shard_batch
from train.configs import base

# Small widths for each registered encoder (dropout stays configured: train=False must ignore it).
TINY = {
    "bag": dict(embed_dim=8),
    "transformer": dict(embed_dim=8, model_dim=8, num_layers=2, num_heads=2, ff_dim=16),
    "disan": dict(embed_dim=8, hidden=6, block_size=4, blocked_threshold=16),
    "psan": dict(embed_dim=8, model_dim=8, parser="gold", keep_prob=0.8),
    "dependency_transformer": dict(embed_dim=8, model_dim=8, num_layers=2, num_heads=2,
                                   ff_dim=16, relation_dim=3, parser="gold"),
    "tree_lstm": dict(embed_dim=8, memory_dim=6, parser="gold"),
    "phrase_transformer": dict(embed_dim=8, model_dim=8, num_layers=2, num_heads=2, ff_dim=16,
                               k=3),
    "meanmax_aae": dict(embed_dim=8, model_dim=8, ff_dim=16, num_heads=2, positions="learned"),
}
BATCH = 8
ONE_TOKEN = Example(sentences=(Sentence(tokens=("good",), text="good", tree="(S (JJ good))",
                                        heads=(0,), deprels=("root",), tags=("JJ",)),),
                    label=1, uid="contract:one-token")


def test_every_registered_encoder_has_test_widths():
    assert set(TINY) == set(ENCODERS), "add the new encoder's small widths to TINY"


@functools.cache
def setup(name: str):
    """(encoder, params, batches at bucket 16 and the same batches at bucket 32, and a function
    batching any list of the featurized examples at bucket 16)."""
    model_cfg = base.model_config(name, **TINY[name])
    examples = [e for e in generate(3 * BATCH, seed=3) if len(e.sentences[0].tokens) <= 14]
    examples = [ONE_TOKEN, *examples[: 2 * BATCH - 2]]  # 15 examples: the last batch has filler
    vocab = Vocabulary.build(s.tokens for e in examples for s in e.sentences)
    needs = structure_spec(model_cfg)
    relations = relation_vocabulary("/nonexistent", model_cfg, needs.fields, examples)
    featurizer = Featurizer(kind="single", vocab=vocab, model_cfg=model_cfg,
                            structure_fields=needs.fields, prefix=needs.prefix_tokens,
                            relation_vocab=relations)
    features = featurizer.many(examples)
    def batched(chosen, length=16, groups=1):
        packing = needs.packing and dataclasses.replace(needs.packing, groups=groups)
        return [sentence_fields(batch, "sentence") for batch in Batcher(
            chosen, batch_size=BATCH, buckets=(length,), shuffle=False,
            packing=packing).epoch(0)]

    batches = {length: batched(features, length) for length in (16, 32)}
    encoder = build_encoder(model_cfg, len(vocab))
    params = jax.jit(functools.partial(encoder.init, train=False))(
        jax.random.key(0), batches[16][0])["params"]
    return encoder, params, batches, lambda order, groups=1: batched(
        [features[i] for i in order], groups=groups)


def apply_fn(encoder):
    return jax.jit(lambda params, sentence: encoder.apply({"params": params}, sentence,
                                                          train=False))


@pytest.mark.parametrize("name", sorted(TINY))
def test_output_contract(name):
    encoder, params, batches, _ = setup(name)
    sentence = batches[16][0]
    outputs = apply_fn(encoder)(params, sentence)
    assert set(outputs) == {"tokens", "sentence", "memory", "memory_mask"}
    tokens, memory = outputs["tokens"], outputs["memory"]
    chex.assert_rank([tokens, outputs["sentence"], memory, outputs["memory_mask"]], [3, 2, 3, 2])
    chex.assert_equal_shape_prefix([tokens, sentence["tokens"]], 2)  # word-aligned
    assert outputs["sentence"].shape[0] == BATCH and memory.shape[0] == BATCH
    assert outputs["memory_mask"].shape == memory.shape[:2]
    chex.assert_type([tokens, outputs["sentence"], memory], jnp.float32)
    chex.assert_type(outputs["memory_mask"], bool)
    chex.assert_tree_all_finite(outputs)
    lengths = np.asarray(sentence["lengths"])
    memory_mask = np.asarray(outputs["memory_mask"])
    assert np.all(memory_mask[lengths > 0].any(axis=1))  # a sentence has a real memory slot
    if memory.shape[1] >= tokens.shape[1]:  # word states first (all but pooled-slot memories):
        real = np.arange(tokens.shape[1]) < lengths[:, None]  # every real word has a real slot
        assert np.all(memory_mask[:, : real.shape[1]][real])


@pytest.mark.parametrize("name", sorted(TINY))
def test_padded_equals_unpadded_and_bucket_independent(name):
    encoder, params, batches, _ = setup(name)
    apply = apply_fn(encoder)
    for short, long in zip(batches[16], batches[32], strict=True):
        out16, out32 = apply(params, short), apply(params, long)
        np.testing.assert_allclose(out16["sentence"], out32["sentence"], rtol=1e-5, atol=1e-6)
        real = np.arange(16) < np.asarray(short["lengths"])[:, None]
        np.testing.assert_allclose(np.asarray(out16["tokens"])[real],
                                   np.asarray(out32["tokens"])[:, :16][real], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(TINY))
def test_batch_order_does_not_change_a_sentence(name):
    encoder, params, _, batch_examples = setup(name)
    order = np.random.default_rng(0).permutation(BATCH)
    apply = apply_fn(encoder)
    (in_order,), (permuted,) = batch_examples(range(BATCH)), batch_examples(order)
    np.testing.assert_allclose(apply(params, permuted)["sentence"],
                               np.asarray(apply(params, in_order)["sentence"])[order],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(TINY))
def test_gradients_are_finite_with_empty_and_one_token_sentences(name):
    encoder, params, batches, _ = setup(name)
    first, last = batches[16][0], batches[16][-1]
    assert np.asarray(first["lengths"])[0] == 1 + len(structure_spec(
        base.model_config(name)).prefix_tokens), "row 0 is the one-token sentence"
    assert np.any(np.asarray(last["lengths"]) == 0), "the last batch has an empty filler row"

    def loss(params, sentence, train):
        outputs = encoder.apply({"params": params}, sentence, train=train,
                                rngs={"dropout": jax.random.key(1)})
        return jnp.sum(jnp.sin(outputs["sentence"])) + jnp.sum(outputs["tokens"] ** 2)

    gradient = jax.jit(jax.grad(loss), static_argnums=2)
    for sentence in (first, last):
        for train in (False, True):
            chex.assert_tree_all_finite(gradient(params, sentence, train))
        outputs = apply_fn(encoder)(params, sentence)
        empty = np.asarray(sentence["lengths"]) == 0
        np.testing.assert_array_equal(np.asarray(outputs["sentence"])[empty], 0.0)


@pytest.mark.parametrize("name", sorted(TINY))
def test_one_compilation_per_bucket(name):
    encoder, params, batches, _ = setup(name)
    apply = apply_fn(encoder)
    for sentence in batches[16] + batches[32]:
        apply(params, sentence)
    assert apply._cache_size() == 2


@pytest.mark.parametrize("name", sorted(TINY))
def test_eight_devices_equal_one(name):
    assert jax.device_count() == 8, "tests/conftest.py should give 8 CPU devices"
    encoder, params, _, batch_examples = setup(name)
    (sentence,) = batch_examples(range(BATCH), groups=8)  # a packing plan shards with its rows
    results = []
    for devices in (1, 8):
        mesh = make_mesh(jax.devices()[:devices])
        sharded = shard_batch(sentence, mesh)
        placed = jax.device_put(params, replicated(mesh))
        results.append(jax.device_get(apply_fn(encoder)(placed, sharded)))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), *results)


def test_configs_are_frozen_and_hashable():
    for name in TINY:
        config = build_encoder(base.model_config(name), 10).config
        assert dataclasses.is_dataclass(config)
        assert hash(config) == hash(dataclasses.replace(config))
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.embed_dim = 1

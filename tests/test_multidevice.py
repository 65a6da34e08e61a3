"""Data parallelism: steps on 2, 4 and 8 (fake CPU) devices equal the same steps on one device,
for a Transformer, the Tree-LSTM (structure fields, a loop whose length depends on the batch) and
DiSAN's blocked attention (a loop over the batch); and each device computes its own rows only:
the compiled step gathers nothing across devices (it all-reduces gradients and scalars). The
multi-process version is tests/test_multihost.py."""

import functools
import logging
import operator

import chex
import jax
import numpy as np
import pytest

from jaxenc.data.batching import Batcher
from jaxenc.data.featurize import Featurizer, relation_vocabulary
from jaxenc.data.synthetic import generate
from jaxenc.data.vocab import Vocabulary
from jaxenc.models.registry import build_encoder, structure_spec
from jaxenc.tasks.factory import build_task
from jaxenc.training.optim import build_optimizer
from jaxenc.training.sharding import check_loop_settings, make_mesh, replicated, shard_batch
from jaxenc.training.state import create_train_state, init_params
from jaxenc.training.steps import make_eval_step, make_train_step, to_host
from train.configs import base

GLOBAL_BATCH = 32
# model -> (small hyperparameters, path of an encoder weight the two steps must change)
MODELS = {
    # dropout on: the RNG must not depend on sharding
    "transformer": (dict(embed_dim=16, model_dim=16, num_layers=1, num_heads=2, ff_dim=16,
                         dropout_rate=0.2), ("layer_0", "ffn", "hidden", "kernel")),
    # structure fields and the [root] prefix; the depth loop's bound is the batch's global depth
    "tree_lstm": (dict(embed_dim=16, memory_dim=16), ("f_h", "kernel")),
    # relation ids and levels (the synthetic trees' relations), dropout on
    "dependency_transformer": (dict(embed_dim=16, model_dim=16, num_layers=1, num_heads=2,
                                    ff_dim=16, relation_dim=4, dropout_rate=0.2),
                               ("relations", "embedding")),
    # the blocked loop over the whole batch at once (examples_per_step=0: the batch axis that
    # the devices split is vmapped, never stepped through)
    "disan": (dict(embed_dim=16, hidden=16, keep_prob=0.8, attention_impl="blocked",
                   block_size=8, examples_per_step=0), ("forward", "hidden", "kernel")),
}


@functools.cache
def prepared(name: str):
    """(model, task, optimiser config, two training batches, initial params) of `name`."""
    small, _ = MODELS[name]
    config = base.get_config(f"{name},synthetic")
    config.model.update(small)
    config.task.head.hidden_dims = (16,)
    config.optim.update(dict(name="adadelta", learning_rate=0.5, weight_decay=1e-4,
                             clip_norm=1.0))
    examples = generate(2 * GLOBAL_BATCH, seed=1)
    vocab = Vocabulary.build(e.sentences[0].tokens for e in examples)
    encoder = build_encoder(config.model, len(vocab))
    task = build_task("single", config.task, num_classes=2)
    model = task.build_model(encoder)
    needs = structure_spec(config.model)
    features = Featurizer(kind="single", vocab=vocab, model_cfg=config.model,
                          structure_fields=needs.fields, prefix=needs.prefix_tokens,
                          relation_vocab=relation_vocabulary("/nonexistent", config.model,
                                                             needs.fields, examples)
                          ).many(examples)
    batches = list(Batcher(features, batch_size=GLOBAL_BATCH, buckets=(32,), shuffle=True,
                           seed=0).epoch(0))
    params = jax.device_get(init_params(model, batches[0], seed=0))
    return model, task, config.optim, batches, params


@functools.cache
def trained(name: str, num_devices: int):
    """(losses, params, eval outputs, compiled train step's HLO) of two train steps of `name` on
    the first `num_devices` devices, from the same initial params and batches whatever the
    number."""
    model, task, optim_cfg, batches, params = prepared(name)
    mesh = make_mesh(jax.devices()[:num_devices])
    tx = build_optimizer(optim_cfg, params)
    state = create_train_state(params, tx, seed=0, sharding=replicated(mesh))
    train_step = make_train_step(model, task, tx, mesh).jitted.lower(
        state, shard_batch(batches[0], mesh)).compile()
    losses = []
    for batch in batches:  # two steps: the second uses the optimiser state of the first
        sharded = shard_batch(batch, mesh)
        shards = sharded["sentence/tokens"].addressable_shards
        assert len(shards) == num_devices
        chex.assert_shape([s.data for s in shards], [(GLOBAL_BATCH // num_devices, 32)]
                          * num_devices)
        state, stats = train_step(state, sharded)
        losses.append(float(stats["loss"]))
    assert all(leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(state.params))
    outputs = to_host(make_eval_step(model, task, mesh)(state.params,
                                                        shard_batch(batches[0], mesh)))
    return losses, jax.device_get(state.params), outputs, train_step.as_text()


@pytest.mark.parametrize("num_devices", [2, 4, 8])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_steps_on_several_devices_equal_one_device(name, num_devices):
    assert jax.device_count() == 8, "tests/conftest.py should give 8 CPU devices"
    (losses_1, params_1, outputs_1, _), (losses_n, params_n, outputs_n, hlo) = (
        trained(name, 1), trained(name, num_devices))
    assert "all-reduce(" in hlo and "all-gather(" not in hlo, "a device computed others' rows"
    np.testing.assert_allclose(losses_n, losses_1, rtol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
                 params_n, params_1)
    initial, weight = prepared(name)[-1], MODELS[name][1]
    assert not np.allclose(functools.reduce(operator.getitem, weight, params_1["encoder"]),
                           functools.reduce(operator.getitem, weight, initial["encoder"]))
    np.testing.assert_array_equal(outputs_n["prediction"], outputs_1["prediction"])
    np.testing.assert_allclose(outputs_n["loss"], outputs_1["loss"], rtol=1e-5)


CPU1, CPU2, GPU1 = (1, "cpu"), (2, "cpu"), (1, "gpu")


@pytest.mark.parametrize(("name", "overrides", "warned"), [
    ("disan", dict(attention_impl="blocked", examples_per_step=1), {CPU2, GPU1}),
    ("disan", dict(attention_impl="blocked", examples_per_step=0), set()),
    ("disan", dict(attention_impl="blocked", examples_per_step="auto"), {CPU2}),
    ("disan", dict(attention_impl="dense", examples_per_step=1), set()),
    ("psan", dict(psa_impl="packed", packed_chunk=1), {CPU2, GPU1}),
    ("psan", dict(psa_impl="packed", packed_chunk=0), set()),
    ("psan", dict(psa_impl="packed", packed_chunk="auto"), {CPU2}),
    ("psan", dict(psa_impl="streaming", examples_per_step=2), {CPU2, GPU1}),
    ("psan", dict(psa_impl="dense", examples_per_step=2), set()),
])
def test_a_loop_through_the_batch_on_several_devices_or_an_accelerator_is_warned(
        caplog, monkeypatch, name, overrides, warned):
    config = base.model_config(name, **overrides)
    field, setting = next((key, value) for key, value in overrides.items()
                          if key in ("examples_per_step", "packed_chunk"))
    for devices, backend in (CPU1, CPU2, GPU1):
        monkeypatch.setattr(jax, "default_backend", lambda backend=backend: backend)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="jaxenc.training.sharding"):
            check_loop_settings(config, make_mesh(jax.devices()[:devices]))
        if (devices, backend) in warned:
            assert f"model.{field}={setting} on {devices} {backend}" in caplog.text
        else:
            assert not caplog.records

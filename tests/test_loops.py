"""Loop settings chosen per platform (jaxenc.layers.loops): "auto" lowers to one item per loop
step for a CPU and to the whole batch for an accelerator, in the programs DiSAN and PSAN train
with; explicit settings are kept and parsed from the command line's strings."""

import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.data.batching import Batcher, sentence_fields
from jaxenc.data.featurize import Featurizer
from jaxenc.data.synthetic import generate
from jaxenc.data.vocab import Vocabulary
from jaxenc.errors import ConfigError
from jaxenc.layers.loops import AUTO, loop_setting, with_loop_setting
from jaxenc.models.registry import build_encoder, encoder_config, structure_spec
from tests.test_encoder_contract import TINY
from train.configs import base

# Each model with the loop that a loop setting steers (at bucket 16: blocked from 16 tokens on).
LOOPS = {"disan": dict(attention_impl="blocked"),
         "psan_streaming": dict(psa_impl="streaming", block_size=4),
         "psan_packed": dict(psa_impl="packed")}
FIELD = {"disan": "examples_per_step", "psan_streaming": "examples_per_step",
         "psan_packed": "packed_chunk"}


@pytest.mark.parametrize(("value", "expected"), [(AUTO, AUTO), (0, 0), (3, 3), ("0", 0),
                                                 ("12", 12)])
def test_a_setting_is_auto_or_a_count(value, expected):
    assert loop_setting(value, "examples_per_step") == expected


@pytest.mark.parametrize("value", [-1, "-1", "fast", 1.5, True, None])
def test_a_bad_setting_is_one_line_naming_the_field(value):
    with pytest.raises(ConfigError, match=r"^model\.packed_chunk=.* \(fix: "):
        loop_setting(value, "packed_chunk")


def test_a_command_line_string_becomes_the_count_in_the_config():
    config = encoder_config(base.model_config("disan", examples_per_step="0",
                                              **TINY["disan"]))
    assert config.examples_per_step == 0
    assert encoder_config(base.model_config("psan", packed_chunk="2")).packed_chunk == 2


def test_auto_runs_one_item_per_step_on_a_cpu_in_an_export_for_both_platforms():
    def per_step() -> jax.Array:
        return with_loop_setting(AUTO, lambda count: jnp.full((2,), count, jnp.int32))

    exported = jax.export.export(jax.jit(per_step), platforms=["cpu", "cuda"])()
    np.testing.assert_array_equal(exported.call(), [1, 1])
    np.testing.assert_array_equal(with_loop_setting(5, lambda count: count), 5)


@functools.cache
def batch_and_vocab(name: str) -> tuple[dict, int]:
    model = name.split("_")[0]
    model_cfg = base.model_config(model, **TINY[model], **LOOPS[name])
    examples = [e for e in generate(64, seed=5) if len(e.sentences[0].tokens) <= 15][:8]
    vocab = Vocabulary.build(s.tokens for e in examples for s in e.sentences)
    needs = structure_spec(model_cfg)
    featurizer = Featurizer(kind="single", vocab=vocab, model_cfg=model_cfg,
                            structure_fields=needs.fields, prefix=needs.prefix_tokens)
    packing = needs.packing and dataclasses.replace(needs.packing, epochs=1)
    batch = next(iter(Batcher(featurizer.many(examples), batch_size=8, buckets=(16,),
                              shuffle=False, packing=packing).epoch(0)))
    return sentence_fields(batch, "sentence"), len(vocab)


def while_loops(name: str, setting: int | str, platform: str) -> list[str]:
    """The first operand's type of every while loop (what the loop steps through) in the
    train-step gradient of `name`'s encoder with this loop setting, lowered for `platform`
    (sorted)."""
    model = name.split("_")[0]
    sentence, vocab_size = batch_and_vocab(name)
    model_cfg = base.model_config(model, **TINY[model], **LOOPS[name], **{FIELD[name]: setting})
    encoder = build_encoder(model_cfg, vocab_size)
    rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
    params = encoder.init(rngs, sentence, train=False)["params"]

    def loss(params):
        out = encoder.apply({"params": params}, sentence, train=True,
                            rngs={"dropout": jax.random.key(2)})
        return jnp.sum(out["sentence"] ** 2)

    text = jax.jit(jax.grad(loss)).trace(params).lower(lowering_platforms=(platform,)).as_text()
    return sorted(re.findall(r"stablehlo\.while\(.*\) : (tensor<[^>]*>)", text))


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_auto_lowers_the_cpu_loop_for_a_cpu_and_the_whole_batch_for_a_gpu(name):
    per_item, whole_batch = while_loops(name, 1, "cuda"), while_loops(name, 0, "cuda")
    assert per_item != whole_batch, "the setting should change the program"
    assert while_loops(name, AUTO, "cuda") == whole_batch
    assert while_loops(name, AUTO, "cpu") == while_loops(name, 1, "cpu")

"""Dropout with 2 / 4 / 8 / 16 random bits per decision (jaxenc/layers/dropout.py) against a numpy
reference, flax's nn.Dropout at 32 bits, and the statistics dropout must have."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.errors import ConfigError
from jaxenc.layers.dense import DropoutDense
from jaxenc.layers.dropout import AUTO_BITS, Dropout, quantized_keep_prob, resolve_mask_bits
from jaxenc.models.registry import build_encoder
from train.configs import base


def dropped(x, keep_prob, bits, seed=0):
    return Dropout(rate=1.0 - keep_prob, mask_bits=bits).apply(
        {}, x, deterministic=False, rngs={"dropout": jax.random.key(seed)})


def numpy_reference(x, keep_prob, bits, seed=0):
    """Each uint32 word of the module's stream cut into little-endian bits-wide integers, one per
    element along the last axis; kept when below round(keep_prob * 2^bits)."""
    module_rng = nn.Dropout(rate=0.5).apply(  # the rng a module at the top gets from "dropout"
        {}, method=lambda module: module.make_rng("dropout"),
        rngs={"dropout": jax.random.key(seed)})
    per_word = 32 // bits
    features = x.shape[-1]
    words = np.asarray(jax.random.bits(module_rng, (*x.shape[:-1], -(-features // per_word)),
                                       jnp.uint32))
    draws = np.zeros(x.shape, np.int64)
    for index in np.ndindex(*x.shape[:-1]):
        for feature in range(features):
            word = int(words[index][feature // per_word])
            draws[index][feature] = (word >> (bits * (feature % per_word))) & (2 ** bits - 1)
    threshold = round(keep_prob * 2 ** bits)
    return np.where(draws < threshold, np.asarray(x) * (2 ** bits / threshold), 0.0)


@pytest.mark.parametrize("bits", [2, 4, 8, 16])
@pytest.mark.parametrize("features", [7, 12, 17])
def test_masks_equal_the_numpy_reference(bits, features):
    x = jax.random.normal(jax.random.key(3), (3, 5, features))
    np.testing.assert_allclose(dropped(x, 0.7, bits), numpy_reference(x, 0.7, bits), rtol=1e-6)


def test_32_bits_is_flax_dropout_bit_for_bit():
    x = jax.random.normal(jax.random.key(1), (4, 9, 30))
    ours = dropped(x, 0.75, 32, seed=5)
    theirs = nn.Dropout(rate=0.25).apply({}, x, deterministic=False,
                                         rngs={"dropout": jax.random.key(5)})
    np.testing.assert_array_equal(ours, theirs)


def test_dropout_dense_at_32_bits_keeps_the_random_stream_of_nn_dropout():
    """Same module path ("Dropout_0") as the nn.Dropout DropoutDense used before: runs with
    dropout_bits=32 reproduce the numbers of runs made with nn.Dropout."""

    class Before(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dropout(rate=0.3, deterministic=False)(x)
            kernel = self.param("kernel", nn.initializers.glorot_uniform(), (x.shape[-1], 6))
            return x @ kernel + self.param("bias", nn.initializers.zeros, (6,))

    x = jax.random.normal(jax.random.key(2), (5, 8))
    params = Before().init({"params": jax.random.key(0), "dropout": jax.random.key(1)}, x)
    rngs = {"dropout": jax.random.key(9)}
    now = DropoutDense(6, keep_prob=0.7, dropout_bits=32).apply(params, x, train=True, rngs=rngs)
    np.testing.assert_array_equal(now, Before().apply(params, x, rngs=rngs))


@pytest.mark.parametrize("bits", [2, 8, 16])
@pytest.mark.parametrize("keep_prob", [0.75, 0.7, 0.5])
def test_keep_rate_scale_and_independence(bits, keep_prob):
    x = jnp.ones((400, 2500))  # 1M decisions: the keep rate's std is < 5e-4
    out = np.asarray(dropped(x, keep_prob, bits, seed=7))
    p = quantized_keep_prob(keep_prob, bits)
    assert abs(p - keep_prob) <= 2 ** -(bits + 1)
    kept = out != 0
    assert abs(kept.mean() - p) < 2.5e-3
    np.testing.assert_allclose(out[kept], 1.0 / p, rtol=1e-6)  # E[out] = x
    # decisions drawn from one random word (neighbours along the last axis) are independent
    both = (kept[:, 0::2] & kept[:, 1::2]).mean()
    assert abs(both - p * p) < 2.5e-3
    # and another seed gives another mask
    assert (np.asarray(dropped(x, keep_prob, bits, seed=8)) != out).mean() > 0.1


@pytest.mark.parametrize("bits", [2, 8, 16])
def test_gradient_is_the_mask_over_the_keep_prob(bits):
    x = jax.random.normal(jax.random.key(4), (6, 33))
    grad = jax.grad(lambda v: jnp.sum(dropped(v, 0.75, bits)))(x)
    expected = np.where(np.asarray(dropped(x, 0.75, bits)) != 0, 1.0 / 0.75, 0.0)
    np.testing.assert_allclose(grad, expected, rtol=1e-6)


def test_edges_deterministic_keep_all_and_keep_none():
    x = jax.random.normal(jax.random.key(0), (3, 10))
    module = Dropout(rate=0.25, mask_bits=8)
    np.testing.assert_array_equal(module.apply({}, x, deterministic=True), x)
    np.testing.assert_array_equal(dropped(x, 0.999, 8), x)  # rounds to 256/256: keep all
    np.testing.assert_array_equal(dropped(x, 0.001, 8), np.zeros_like(x))  # rounds to 0
    assert dropped(x.astype(jnp.bfloat16), 0.5, 8).dtype == jnp.bfloat16


@pytest.mark.parametrize("model", ["disan", "psan"])
def test_models_validate_dropout_bits(model):
    with pytest.raises(ConfigError, match="dropout_bits"):
        build_encoder(base.model_config(model, dropout_bits=3), 10)


@pytest.mark.parametrize("keep_prob, bits", [(0.75, 2), (0.5, 2), (0.8125, 4), (0.25, 2),
                                             (0.7, 8), (0.9, 8), (0.6992, 8), (1, 2)])
def test_auto_bits_are_the_fewest_that_hold_the_keep_prob_exactly(keep_prob, bits):
    assert resolve_mask_bits(keep_prob, AUTO_BITS) == bits
    assert resolve_mask_bits(keep_prob, 16) == 16  # an explicit width is kept
    x = jax.random.normal(jax.random.key(5), (4, 6, 40))
    np.testing.assert_array_equal(dropped(x, keep_prob, AUTO_BITS), dropped(x, keep_prob, bits))
    if bits < 8:
        assert quantized_keep_prob(keep_prob, AUTO_BITS) == keep_prob


def test_models_default_to_auto_bits():
    """DiSAN's 0.75 draws 2 bits per decision, the default config's 0.9 draws 8 (as before)."""
    assert build_encoder(base.model_config("disan"), 10).config.dropout_bits == AUTO_BITS
    assert resolve_mask_bits(base.model_config("disan").keep_prob, AUTO_BITS) == 2

"""The fused attention path (`jax.nn.dot_product_attention`) computes what the einsum path
computes: values and gradients, with a score bias and with query rows that have no valid key,
in float32 (to 1e-5) and bfloat16 (to a few bfloat16 steps of the output's scale); the encoders
that use it by default give the same vectors and gradients as with `attention="einsum"`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.configs import model_config
from jaxenc.data.synthetic import generate
from jaxenc.encoding import Encoder
from jaxenc.errors import ConfigError
from jaxenc.layers import attention as attention_module
from jaxenc.layers.attention import MultiHeadAttention
from jaxenc.models.registry import encoder_config

B, L, D, H = 3, 7, 24, 4  # head width 6: the scale 1/sqrt(6) is not exact in binary
LENGTHS = np.array([7, 3, 0])  # the last sentence is empty: its rows have no valid key


def _inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(B, L, D)), jnp.float32)
    valid = np.arange(L)[None, :] < LENGTHS[:, None]
    mask = jnp.asarray(valid[:, :, None] & valid[:, None, :])
    bias = jnp.asarray(rng.normal(size=(B, H, L, L)), jnp.float32)
    return x, mask, bias


def _value_and_grads(implementation: str, dtype, with_bias: bool, **options):
    x, mask, bias = _inputs()
    module = MultiHeadAttention(H, implementation=implementation, dtype=dtype, **options)
    params = module.init(jax.random.PRNGKey(0), x, x, mask, train=False)

    def apply(params, x):
        return module.apply(params, x, x, mask, train=False,
                            score_bias=(lambda query: bias) if with_bias else None)

    out = apply(params, x)
    grads = jax.grad(lambda p, x: jnp.sum(apply(p, x).astype(jnp.float32) ** 2),
                     argnums=(0, 1))(params, x)
    return np.asarray(out, np.float32), [np.asarray(g, np.float32) for g in jax.tree.leaves(grads)]


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_fused_values_and_gradients_equal_the_einsum_path(dtype, with_bias):
    fused, fused_grads = _value_and_grads("fused", dtype, with_bias)
    einsum, einsum_grads = _value_and_grads("einsum", dtype, with_bias)
    assert not fused[2].any() and not einsum[2].any()  # the empty sentence: zeros, not mean(V)
    if dtype == jnp.float32:
        np.testing.assert_allclose(fused, einsum, rtol=1e-5, atol=1e-5)
        for got, want in zip(fused_grads, einsum_grads, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    else:  # bfloat16 keeps 8 bits: a few steps of 2^-8 of the output's and the gradients'
        # scale (the key bias's gradient is 0 in exact arithmetic: rounding noise in both paths)
        np.testing.assert_allclose(fused, einsum, atol=4 * 2**-8 * np.abs(einsum).max())
        scale = max(np.abs(want).max() for want in einsum_grads)
        for got, want in zip(fused_grads, einsum_grads, strict=True):
            np.testing.assert_allclose(got, want, atol=8 * 2**-8 * scale)


def test_auto_takes_the_fused_path_unless_weights_are_asked_for_or_dropped(monkeypatch):
    calls = []
    fused = jax.nn.dot_product_attention
    monkeypatch.setattr(attention_module.jax.nn, "dot_product_attention",
                        lambda *args, **kwargs: calls.append(1) or fused(*args, **kwargs))
    x, mask, _ = _inputs()
    module = MultiHeadAttention(H)
    params = module.init(jax.random.PRNGKey(0), x, x, mask, train=False)
    calls.clear()  # (flax's init leaves "intermediates" immutable: it may take either path)
    module.apply(params, x, x, mask, train=False)
    assert calls == [1]
    _, state = module.apply(params, x, x, mask, train=False, mutable=["intermediates"])
    assert calls == [1]  # weights for jaxenc.viz: computed on demand, by the einsum path
    assert state["intermediates"]["attention_weights"][0].shape == (B, H, L, L)
    dropped = MultiHeadAttention(H, dropout_rate=0.1)
    dropped.apply(params, x, x, mask, train=True, rngs={"dropout": jax.random.PRNGKey(1)})
    assert calls == [1]  # dropout on the weights: the einsum path
    with pytest.raises(ValueError, match="implementation='fused' needs the masked softmax"):
        MultiHeadAttention(H, dropout_rate=0.1, implementation="fused").apply(
            params, x, x, mask, train=True, rngs={"dropout": jax.random.PRNGKey(1)})


@pytest.mark.parametrize("name, sizes", [
    ("transformer", dict(model_dim=24, num_heads=4, ff_dim=32, dropout_rate=0.0)),
    ("dependency_transformer", dict(model_dim=24, num_heads=4, ff_dim=32, dropout_rate=0.0,
                                    relation_dim=8, parser="gold")),
    ("meanmax_aae", dict(model_dim=24, num_heads=4, ff_dim=32, dropout_rate=0.0)),
])
def test_encoders_give_the_same_vectors_and_gradients_fused_by_default(name, sizes):
    sentences = [example.sentences[0] for example in generate(12, seed=5)]
    encoders = {implementation: Encoder.initialised(
        model_config(name, embed_dim=16, attention=implementation, **sizes), sentences, seed=3)
        for implementation in ("auto", "einsum")}
    assert model_config(name).attention == "auto"  # the default
    (batch,) = encoders["auto"].featurize(sentences)
    outputs = {}
    for implementation, encoder in encoders.items():
        loss = lambda params, encoder=encoder: jnp.sum(encoder.apply(params, batch) ** 2)
        outputs[implementation] = (encoder.apply(encoder.params, batch),
                                   jax.grad(loss)(encoder.params))
    np.testing.assert_allclose(outputs["auto"][0], outputs["einsum"][0], rtol=1e-5, atol=1e-5)
    for got, want in zip(jax.tree.leaves(outputs["auto"][1]),
                         jax.tree.leaves(outputs["einsum"][1]), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["transformer", "dependency_transformer", "meanmax_aae"])
def test_an_unknown_attention_implementation_is_a_config_error(name):
    with pytest.raises(ConfigError, match=r"model.attention='flash' is not one of auto, fused, "
                                          r"einsum \(fix: --config.model.attention=auto\)"):
        encoder_config(model_config(name, attention="flash"))

"""The Transformer encoder, post-norm (Vaswani et al.) and pre-norm (`layer_norm="pre"`), against
a numpy loop over each sentence, token by token, of the equations in
jaxenc.layers.transformer.EncoderBlock; padded rows give the unpadded sentence's result."""

import jax
import numpy as np
import pytest

from jaxenc.configs import model_config
from jaxenc.errors import ConfigError
from jaxenc.models.registry import build_encoder

D, HEADS, FF, VOCAB = 8, 2, 12, 20


def np_layer_norm(x, p, eps=1e-6):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * p["scale"] + p["bias"]


def np_attention(x, p):
    """One sentence x [n, D]: every token attends every token of the sentence."""
    out = np.zeros_like(x)
    d_k = D // HEADS
    for i in range(len(x)):
        heads = []
        for h in range(HEADS):
            q = x[i] @ p["query"]["kernel"][:, h] + p["query"]["bias"][h]
            keys = [x[j] @ p["key"]["kernel"][:, h] + p["key"]["bias"][h] for j in range(len(x))]
            values = [x[j] @ p["value"]["kernel"][:, h] + p["value"]["bias"][h]
                      for j in range(len(x))]
            scores = np.array([q @ k for k in keys]) / np.sqrt(d_k)
            weights = np.exp(scores - scores.max())
            weights /= weights.sum()
            heads.append(sum(w * v for w, v in zip(weights, values, strict=True)))
        out[i] = np.einsum("hd,hdo->o", np.stack(heads), p["out"]["kernel"]) + p["out"]["bias"]
    return out


def np_ffn(x, p):
    hidden = np.maximum(0.0, x @ p["hidden"]["kernel"] + p["hidden"]["bias"])
    return hidden @ p["output"]["kernel"] + p["output"]["bias"]


def np_encoder(params, tokens, layer_norm):
    """The sentence vector (mean over tokens) of one unpadded sentence."""
    n = len(tokens)
    positions = np.arange(n)[:, None] / (10000.0 ** (np.arange(0, D, 2) / D))
    pe = np.zeros((n, D))
    pe[:, 0::2], pe[:, 1::2] = np.sin(positions), np.cos(positions)
    x = params["embed"]["embedding"][tokens] + pe
    for layer in range(2):
        p = params[f"layer_{layer}"]
        if layer_norm == "pre":
            x = x + np_attention(np_layer_norm(x, p["attention_norm"]), p["self_attention"])
            x = x + np_ffn(np_layer_norm(x, p["ffn_norm"]), p["ffn"])
        else:
            x = np_layer_norm(x + np_attention(x, p["self_attention"]), p["attention_norm"])
            x = np_layer_norm(x + np_ffn(x, p["ffn"]), p["ffn_norm"])
    if layer_norm == "pre":
        x = np_layer_norm(x, params["final_norm"])
    return x.mean(0)


@pytest.mark.parametrize("layer_norm", ["post", "pre"])
def test_encoder_equals_the_loop_reference(layer_norm, noisy_params):
    model = build_encoder(model_config("transformer", embed_dim=D, model_dim=D, num_layers=2,
                                       num_heads=HEADS, ff_dim=FF, dropout_rate=0.0,
                                       layer_norm=layer_norm), VOCAB)
    rng = np.random.default_rng(0)
    lengths = np.array([5, 3, 1, 0], np.int32)
    tokens = np.zeros((4, 6), np.int32)
    for row, n in enumerate(lengths):
        tokens[row, :n] = rng.integers(2, VOCAB, n)
    batch = {"tokens": tokens, "lengths": lengths}
    params = noisy_params(model, batch)
    assert ("final_norm" in params) == (layer_norm == "pre")
    got = np.asarray(jax.jit(lambda p, b: model.apply({"params": p}, b, train=False))(
        params, batch)["sentence"])
    numpy_params = jax.tree.map(lambda leaf: np.asarray(leaf, np.float64), params)
    for row, n in enumerate(lengths[:3]):
        want = np_encoder(numpy_params, tokens[row, :n], layer_norm)
        np.testing.assert_allclose(got[row], want, rtol=2e-4, atol=2e-5)
    np.testing.assert_array_equal(got[3], 0.0)  # an empty row gives zeros, not NaN


def test_pre_and_post_norm_differ_and_bad_values_are_refused(noisy_params):
    batch = {"tokens": np.array([[3, 4, 5]], np.int32), "lengths": np.array([3], np.int32)}
    outputs = []
    for layer_norm in ("post", "pre"):
        model = build_encoder(model_config("transformer", embed_dim=D, model_dim=D,
                                           num_heads=HEADS, ff_dim=FF, layer_norm=layer_norm),
                              VOCAB)
        params = noisy_params(model, batch)
        outputs.append(model.apply({"params": params}, batch, train=False)["sentence"])
    assert not np.allclose(outputs[0], outputs[1])
    with pytest.raises(ConfigError, match="model.layer_norm='middle'"):
        build_encoder(model_config("transformer", layer_norm="middle"), VOCAB)

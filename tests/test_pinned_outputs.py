"""The attention-core refactor changed no number: outputs of the bag, the Transformer,
DiSAN (dense and blocked) and the seq2seq decoder equal those the code produced before it.

tests/data/pinned_encoders.npz was written by the code at commit 2b6e5cc (the last commit before
the refactor): for each model its parameters (flattened "a/b/c" paths), a batch with padding, a
one-token and an empty sentence, and its outputs. Parameter paths are unchanged by the refactor,
so the stored parameters load into today's modules as they are.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.traverse_util import unflatten_dict

from jaxenc.layers.masks import length_mask
from jaxenc.layers.transformer import TransformerDecoder
from jaxenc.models.registry import build_encoder
from train.configs import base

PINNED = np.load(Path(__file__).parent / "data" / "pinned_encoders.npz")
VOCAB = 23
MODELS = {
    "bag": base.model_config("bag", embed_dim=8),
    "transformer": base.model_config("transformer", embed_dim=8, model_dim=12, num_layers=2,
                                     num_heads=3, ff_dim=16),
    "disan_dense": base.model_config("disan", embed_dim=8, hidden=6, keep_prob=0.8,
                                     attention_impl="dense", block_size=4),
    "disan_blocked": base.model_config("disan", embed_dim=8, hidden=6, keep_prob=0.8,
                                       attention_impl="blocked", block_size=5),
}


def pinned_params(name: str) -> dict:
    prefix = f"{name}/params/"
    return unflatten_dict({key[len(prefix):]: jnp.asarray(PINNED[key]) for key in PINNED.files
                           if key.startswith(prefix)}, sep="/")


def test_the_pinned_batch_has_padding_a_one_token_and_an_empty_sentence():
    np.testing.assert_array_equal(PINNED["inputs/lengths"], [7, 12, 1, 0])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_encoder_outputs_equal_the_pinned_ones(name):
    encoder = build_encoder(MODELS[name], VOCAB)
    batch = {"tokens": PINNED["inputs/tokens"], "lengths": PINNED["inputs/lengths"]}
    outputs = jax.jit(lambda params: encoder.apply({"params": params}, batch, train=False))(
        pinned_params(name))
    for key in ("tokens", "sentence"):
        np.testing.assert_allclose(outputs[key], PINNED[f"{name}/outputs/{key}"], rtol=1e-5,
                                   atol=1e-6, err_msg=f"{name} {key}")


def test_directional_disan_equals_the_pinned_outputs():
    """The directional kernel (written after the pinning) computes the same DiSAN: blocks of 5
    of the 12 tokens, 3 blocks (a lone middle step) and a partial last one."""
    name = "disan_dense"
    encoder = build_encoder(base.model_config("disan", embed_dim=8, hidden=6, keep_prob=0.8,
                                              attention_impl="directional", block_size=5),
                            VOCAB)
    batch = {"tokens": PINNED["inputs/tokens"], "lengths": PINNED["inputs/lengths"]}
    outputs = jax.jit(lambda params: encoder.apply({"params": params}, batch, train=False))(
        pinned_params(name))
    for key in ("tokens", "sentence"):
        np.testing.assert_allclose(outputs[key], PINNED[f"{name}/outputs/{key}"], rtol=1e-5,
                                   atol=1e-6, err_msg=f"{name} {key}")


def test_decoder_logits_equal_the_pinned_ones():
    decoder = TransformerDecoder(vocab_size=VOCAB, model_dim=8, num_layers=2, num_heads=2,
                                 ff_dim=16)
    lengths = PINNED["inputs/lengths"]
    targets, target_lengths = PINNED["inputs/tokens"][:, :9], np.minimum(lengths, 9)
    memory = PINNED["decoder/inputs/memory"]
    logits = decoder.apply({"params": pinned_params("decoder")}, targets, target_lengths, memory,
                           length_mask(lengths, memory.shape[1]), train=False)
    np.testing.assert_allclose(logits, PINNED["decoder/outputs/logits"], rtol=1e-5, atol=1e-5)


def test_scale_embeddings_multiplies_the_word_vectors_by_sqrt_d():
    """Vaswani et al.'s sqrt(d_model) scaling (model.scale_embeddings) equals the unscaled model
    with a word table sqrt(d) times larger (no input projection when embed_dim == model_dim)."""
    sizes = dict(embed_dim=12, model_dim=12, num_layers=1, num_heads=3, ff_dim=16)
    scaled = build_encoder(base.model_config("transformer", scale_embeddings=True, **sizes), VOCAB)
    plain = build_encoder(base.model_config("transformer", **sizes), VOCAB)
    batch = {"tokens": PINNED["inputs/tokens"], "lengths": PINNED["inputs/lengths"]}
    params = plain.init(jax.random.key(0), batch, train=False)["params"]
    bigger = {**params, "embed": {"embedding": params["embed"]["embedding"] * np.sqrt(12.0)}}
    np.testing.assert_allclose(scaled.apply({"params": params}, batch, train=False)["sentence"],
                               plain.apply({"params": bigger}, batch, train=False)["sentence"],
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(plain.apply({"params": params}, batch, train=False)["sentence"],
                           plain.apply({"params": bigger}, batch, train=False)["sentence"])

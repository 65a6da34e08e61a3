"""Mixed precision (model.dtype="bfloat16") for every registered encoder: parameters stay float32,
the encoder computes in bfloat16 (softmax, LayerNorm statistics, means and losses in float32), its
outputs are float32 and close to the float32 model's, its gradients point the same way, empty rows
stay zeros, each bucket compiles once, and a short bfloat16 training run learns.

The inputs, widths and parameters are the contract test's (tests/test_encoder_contract.py), so a
new encoder is covered as soon as it has its TINY widths there.

Tolerances: bfloat16 keeps 8 significant bits, a relative rounding error of up to 2^-9 ~ 0.2% per
operation. Through the tens of roundings between the word table and the sentence vector, which
partly average out, the bfloat16 sentence vectors of these models differ from the float32 ones by
0.3-1.4% (relative L2 error per sentence, measured); the bound 3% leaves room for other inputs
and XLA versions. Gradients are compared by direction: the cosine of the flattened float32 and
bfloat16 gradients is above 0.9999 for every encoder (measured), required > 0.999. Where the
normalisers run is checked on the traced program instead (the last test): at these sizes a softmax
or a mean summed in bfloat16 moves the outputs by less than the tolerance.
"""

import collections
import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jax_core
from test_encoder_contract import TINY, setup

from jaxenc.training import experiment, run_report
from train.configs import default

RELATIVE_TOLERANCE = 3e-2
MIN_COSINE = 0.999
# No LLVM optimisation of the generated CPU code: half the compile time (PSAN's packed gradient
# takes 13 s otherwise); the HLO, and so every number, is the same.
FAST_COMPILE = {"xla_backend_optimization_level": 0}


@functools.cache
def outputs_and_gradient(name: str, dtype: str):
    """jit((params, sentence) -> (outputs, gradient)) of the contract test's encoder of `name` in
    `dtype` (same parameter tree in both dtypes); the loss is the contract test's."""
    encoder = setup(name)[0]
    encoder = type(encoder)(vocab_size=encoder.vocab_size,
                            config=dataclasses.replace(encoder.config, dtype=dtype))

    def loss(params, sentence):
        outputs = encoder.apply({"params": params}, sentence, train=False)
        return jnp.sum(jnp.sin(outputs["sentence"])) + jnp.sum(outputs["tokens"] ** 2), outputs

    gradient = jax.grad(loss, has_aux=True)
    return encoder, jax.jit(lambda params, sentence: gradient(params, sentence)[::-1],
                            compiler_options=FAST_COMPILE)


def relative_errors(approximate: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per row: ||approximate - exact|| / ||exact|| (rows whose exact vector is zero left out)."""
    norms = np.linalg.norm(exact, axis=-1)
    keep = norms > 0
    return np.linalg.norm(approximate - exact, axis=-1)[keep] / norms[keep]


def cosine(a, b) -> float:
    """The cosine of two parameter trees, each flattened into one vector."""
    a, b = (np.concatenate([np.ravel(leaf) for leaf in jax.tree.leaves(tree)]) for tree in (a, b))
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", sorted(TINY))
def test_bfloat16_follows_float32(name):
    _, params, batches, _ = setup(name)
    encoder16, step16 = outputs_and_gradient(name, "bfloat16")
    _, step32 = outputs_and_gradient(name, "float32")
    shapes = jax.eval_shape(functools.partial(encoder16.init, train=False), jax.random.key(0),
                            batches[16][0])["params"]
    chex.assert_trees_all_equal_structs(shapes, params)
    chex.assert_trees_all_equal_dtypes(shapes, params)  # parameters stay float32
    assert {leaf.dtype for leaf in jax.tree.leaves(params)} == {jnp.dtype(jnp.float32)}

    # bucket 16: the one-token sentence first, the empty filler rows last
    for sentence in batches[16]:
        (out16, grad16), (out32, grad32) = step16(params, sentence), step32(params, sentence)
        chex.assert_type([out16["tokens"], out16["sentence"], out16["memory"]], jnp.float32)
        chex.assert_tree_all_finite((out16, grad16))
        chex.assert_trees_all_equal_dtypes(grad16, params)
        empty = np.asarray(sentence["lengths"]) == 0
        np.testing.assert_array_equal(np.asarray(out16["sentence"])[empty], 0.0)
        worst = relative_errors(np.asarray(out16["sentence"]), np.asarray(out32["sentence"])).max()
        assert worst < RELATIVE_TOLERANCE, f"sentence vectors off by {worst:.2%} in bfloat16"
        similarity = cosine(grad16, grad32)
        assert similarity > MIN_COSINE, f"gradient cosine {similarity:.4f} in bfloat16"
    assert step16._cache_size() == 1, "the second batch of a bucket compiled again"


@pytest.mark.parametrize("name", sorted(TINY))
def test_bfloat16_products_with_float32_normalisers(name):
    """In the traced bfloat16 forward pass, the matrix products take bfloat16 operands while
    every exponential (softmax), float sum (means, softmax totals, LayerNorm statistics) and
    inverse square root (LayerNorm, L2 norms) takes float32 ones: the tolerance of
    `test_bfloat16_follows_float32` cannot tell a normaliser run in bfloat16 at these sizes."""
    _, params, batches, _ = setup(name)
    encoder16, _ = outputs_and_gradient(name, "bfloat16")
    jaxpr = jax.make_jaxpr(lambda params, sentence: encoder16.apply(
        {"params": params}, sentence, train=False))(params, batches[16][0])
    operand_dtypes = collections.defaultdict(set)
    for equation in equations(jaxpr.jaxpr):
        floats = {v.aval.dtype for v in equation.invars
                  if jnp.issubdtype(getattr(v.aval, "dtype", jnp.int32), jnp.floating)}
        operand_dtypes[equation.primitive.name] |= floats
    for primitive in ("exp", "log", "reduce_sum", "rsqrt"):
        assert operand_dtypes[primitive] <= {jnp.dtype(jnp.float32)}, (primitive, operand_dtypes)
    if name != "bag":  # the bag has nothing to compute in bfloat16 (BagConfig)
        assert jnp.dtype(jnp.bfloat16) in operand_dtypes["dot_general"], "computes in bfloat16"


def equations(jaxpr: jax_core.Jaxpr):
    """Every equation of `jaxpr` and of the jaxprs nested in it (jit, scan, cond, remat, ...)."""
    for equation in jaxpr.eqns:
        yield equation
        for value in equation.params.values():
            for inner in value if isinstance(value, tuple | list) else (value,):
                if isinstance(inner, jax_core.ClosedJaxpr):
                    yield from equations(inner.jaxpr)
                elif isinstance(inner, jax_core.Jaxpr):
                    yield from equations(inner)


def test_a_short_bfloat16_training_run_learns(tmp_path):
    """The main job's DiSAN (train/configs/default.py) at the contract's widths, in bfloat16,
    on the synthetic sentences of up to 8 tokens (675, mostly "the film is not good ."): the
    training loss falls within two epochs, and the train step compiles once (one bucket, 32
    tokens, for training and evaluation; the blocked attention, over the 8 test devices)."""
    config = default.get_config()
    config.model.update(dict(TINY["disan"], dtype="bfloat16", keep_prob=1.0,
                             examples_per_step=0))
    config.baselines = type(config.baselines)()
    config.task.head.hidden_dims = (8,)
    config.data.update(dict(batch_size=32, eval_batch_size=512, max_length=8, bucket_step=32))
    config.optim.update(dict(learning_rate=1e-2, warmup_steps=0))  # 40 steps: no warm-up
    config.train.update(dict(num_steps=40, eval_every=40, log_every=10, progress_bar=False))
    config.checkpoint.every = 40
    (row,) = experiment.run(config, tmp_path)
    losses = [record["loss"] for record in run_report.read_metrics(
        tmp_path / run_report.METRICS_FILE, "train")]
    assert len(losses) == 4 and all(np.isfinite(losses))
    assert losses[-1] < losses[0] - 0.03, losses
    assert row["compiled shapes"] == 1

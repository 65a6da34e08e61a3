"""Multi-dimensional token2token / source2token attention against loop references in numpy."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.errors import ConfigError
from jaxenc.layers.fusion import FusionGate
from jaxenc.layers.masks import DenseMask, DirectionalMask, SegmentMask
from jaxenc.layers.multidim_attention import (
    Source2Token,
    Token2TokenAttention,
    Token2TokenOptions,
    _triangle_plan,
    multidim_token2token,
    resolve_impl,
    score_function,
)

C = 5.0


def np_scaled_tanh(z):
    return C * np.tanh(z / C)


def np_elu(z):
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0.0)))


NP_SCORES = {"scaled_tanh": np_scaled_tanh, "elu": np_elu}


def reference_token2token(queries, keys, values, mask, score):
    """out_j = sum_i softmax_i(score(q_j + k_i)) * v_i over keys i with mask[j, i], per feature."""
    n, d = queries.shape
    out = np.zeros((n, d))
    for j in range(n):
        valid = [i for i in range(n) if mask[j, i]]
        if not valid:
            continue
        scores = np.stack([score(queries[j] + keys[i]) for i in valid])  # [valid, d]
        weights = np.exp(scores - scores.max(axis=0))
        weights /= weights.sum(axis=0)
        for weight, i in zip(weights, valid, strict=True):
            out[j] += weight * values[i]
    return out


def reference_mask(direction, length, n):
    """Loop version of the directional masks: M[j, i] for query j, key i."""
    allowed = {"forward": lambda j, i: i < j, "backward": lambda j, i: i > j,
               "diag": lambda j, i: i != j, "causal": lambda j, i: i <= j,
               "none": lambda j, i: True}[direction]
    return np.array([[allowed(j, i) and i < length for i in range(n)] for j in range(n)])


def random_inputs(seed, batch, n, d):
    rng = np.random.default_rng(seed)
    queries, keys, values = (rng.normal(scale=2.0, size=(batch, n, d)).astype(np.float32)
                             for _ in range(3))
    return queries, keys, values


def test_directional_masks_on_four_tokens():
    # 4 positions, the last one is padding (length 3); rows are queries j, columns keys i.
    expected = {
        "forward": [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]],
        "backward": [[0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
        "diag": [[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 0], [1, 1, 1, 0]],
        "none": [[1, 1, 1, 0]] * 4,
    }
    for direction, rows in expected.items():
        mask = DirectionalMask(jnp.array(3), direction)
        np.testing.assert_array_equal(mask.matrix(4), np.array(rows, bool), err_msg=direction)
        np.testing.assert_array_equal(mask.matrix(4), reference_mask(direction, 3, 4))
        # rows of a block, including positions past the end (padded query blocks)
        np.testing.assert_array_equal(mask.rows(jnp.array([2, 3, 5]), 4),
                                      reference_mask(direction, 3, 6)[[2, 3, 5], :4])


def test_directional_mask_batches_over_lengths():
    lengths = jnp.array([4, 2, 0])
    matrix = DirectionalMask(lengths, "backward").matrix(4)
    chex.assert_shape(matrix, (3, 4, 4))
    for b, length in enumerate([4, 2, 0]):
        np.testing.assert_array_equal(matrix[b], reference_mask("backward", length, 4))


def test_unknown_direction_and_impl_are_config_errors():
    with pytest.raises(ConfigError, match="direction"):
        DirectionalMask(jnp.array(3), "sideways")
    with pytest.raises(ConfigError, match="attention_impl"):
        resolve_impl("sparse", 10, 32)
    assert resolve_impl("auto", 31, 32) == "dense"
    assert resolve_impl("auto", 32, 32) == "blocked"
    assert resolve_impl("dense", 512, 32) == "dense"


@pytest.mark.parametrize("score", ["scaled_tanh", "elu"])
@pytest.mark.parametrize("impl", ["dense", "blocked"])
def test_token2token_matches_loop_reference_with_any_mask(score, impl):
    batch, n, d = 2, 7, 5
    queries, keys, values = random_inputs(0, batch, n, d)
    mask = np.random.default_rng(1).random((batch, n, n)) < 0.5
    mask[0, 2] = False  # a query with no valid key
    mask[1, 4] = True
    score_fn, bound = score_function(score, C)
    out = multidim_token2token(queries, keys, values, jnp.asarray(mask), score_fn=score_fn,
                               score_bound=bound,
                               options=Token2TokenOptions(attention_impl=impl, block_size=3))
    chex.assert_shape(out, (batch, n, d))
    chex.assert_type(out, jnp.float32)
    for b in range(batch):
        expected = reference_token2token(queries[b].astype(np.float64), keys[b], values[b],
                                         mask[b], NP_SCORES[score])
        np.testing.assert_allclose(out[b], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[0, 2], 0.0)


def attention_loss(impl, mask, score, block_size, examples_per_step=1):
    score_fn, bound = score_function(score, C)
    options = Token2TokenOptions(attention_impl=impl, block_size=block_size,
                                 examples_per_step=examples_per_step)

    def loss(queries, keys, values):
        out = multidim_token2token(queries, keys, values, mask, score_fn=score_fn,
                                   score_bound=bound, options=options)
        return jnp.sum(jnp.sin(out) * jnp.arange(out.shape[-1]))

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))


@pytest.mark.parametrize(("n", "block_size", "direction", "score"), [
    (5, 4, "forward", "scaled_tanh"),
    (13, 4, "backward", "scaled_tanh"),
    (11, 3, "diag", "elu"),
    (6, 16, "forward", "scaled_tanh"),  # a sentence shorter than one block
])
def test_blocked_equals_dense_values_and_grads(n, block_size, direction, score):
    batch, d = 3, 4
    inputs = random_inputs(n, batch, n, d)
    mask = DirectionalMask(jnp.array([n, n - 2, 1]), direction)
    dense_loss, dense_grads = attention_loss("dense", mask, score, block_size)(*inputs)
    blocked_loss, blocked_grads = attention_loss("blocked", mask, score, block_size)(*inputs)
    np.testing.assert_allclose(blocked_loss, dense_loss, rtol=1e-5)
    for blocked, dense in zip(blocked_grads, dense_grads, strict=True):
        chex.assert_tree_all_finite(blocked)
        np.testing.assert_allclose(blocked, dense, rtol=1e-4, atol=1e-5)


def test_blocked_with_several_examples_per_step_equals_dense():
    batch, n, d = 3, 7, 4  # 2 examples per step: one full step and a remainder
    inputs = random_inputs(2, batch, n, d)
    mask = DirectionalMask(jnp.array([7, 5, 2]), "forward")
    dense = attention_loss("dense", mask, "scaled_tanh", 4)(*inputs)
    blocked = attention_loss("blocked", mask, "scaled_tanh", 4, examples_per_step=2)(*inputs)
    chex.assert_trees_all_close(blocked, dense, rtol=1e-4, atol=1e-5)


def test_blocked_accepts_an_explicit_mask_matrix():
    batch, n, d = 2, 9, 3
    inputs = random_inputs(3, batch, n, d)
    mask = jnp.asarray(np.random.default_rng(4).random((batch, n, n)) < 0.4)
    dense = attention_loss("dense", mask, "scaled_tanh", 4)(*inputs)
    blocked = attention_loss("blocked", mask, "scaled_tanh", 4)(*inputs)
    chex.assert_trees_all_close(blocked, dense, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("impl", ["dense", "blocked", "directional"])
def test_rows_without_keys_give_zeros_and_finite_grads(impl):
    batch, n, d = 2, 5, 3
    inputs = random_inputs(5, batch, n, d)
    # empty sentence; one-token sentence, backward: no query has a later real key
    mask = DirectionalMask(jnp.array([0, 1]), "backward")
    score_fn, bound = score_function("scaled_tanh", C)
    out = multidim_token2token(*inputs, mask, score_fn=score_fn, score_bound=bound,
                               options=Token2TokenOptions(attention_impl=impl, block_size=2))
    np.testing.assert_array_equal(out, 0.0)
    _, grads = attention_loss(impl, mask, "scaled_tanh", 2)(*inputs)
    chex.assert_tree_all_finite(grads)
    chex.assert_trees_all_equal(grads, jax.tree.map(jnp.zeros_like, grads))


def test_blocked_memory_is_far_below_dense():
    batch, n, d = 2, 96, 32
    inputs = random_inputs(6, batch, n, d)
    mask = DirectionalMask(jnp.array([n, n // 2]), "forward")
    temp = {impl: attention_loss(impl, mask, "scaled_tanh", 16).lower(*inputs).compile()
            .memory_analysis().temp_size_in_bytes for impl in ("dense", "blocked")}
    score_tensor = batch * n * n * d * 4
    assert temp["dense"] >= score_tensor  # dense keeps at least one [B, n, n, d] tensor
    assert temp["blocked"] * 8 <= temp["dense"], temp


# ---- the directional kernel: only the key blocks on the allowed side --------------------------

@pytest.mark.parametrize("num_blocks", range(1, 8))
@pytest.mark.parametrize("triangle", ["lower", "upper"])
def test_triangle_plan_covers_each_allowed_block_pair_once(num_blocks, triangle):
    query_blocks, key_blocks, owner, order = _triangle_plan(num_blocks, triangle)
    pairs = [(query_blocks[step, side], key)
             for step in range(len(owner)) for side, key in zip(owner[step], key_blocks[step],
                                                                strict=True) if side >= 0]
    allowed = [(q, k) for q in range(num_blocks) for k in range(num_blocks)
               if (k <= q if triangle == "lower" else k >= q)]
    assert sorted(pairs) == sorted(allowed)  # each allowed pair once, diagonal included
    assert owner.shape[1] == (num_blocks + 1 if num_blocks > 1 else 1)  # balanced steps
    np.testing.assert_array_equal(query_blocks.reshape(-1)[order], np.arange(num_blocks))


@pytest.mark.parametrize(("n", "block_size", "direction"), [
    (13, 4, "forward"),  # 4 blocks, the last one partial
    (13, 4, "backward"),
    (21, 8, "backward"),  # 3 blocks: an odd count, the middle block alone in its step
    (11, 16, "causal"),  # shorter than one block
    (10, 4, "diag"),  # not one-sided: computed by the blocked kernel
])
def test_directional_equals_dense_and_loop_reference_values_and_grads(n, block_size, direction):
    batch, d = 4, 3
    lengths = [n, n - 3, 1, 0]  # padding, a one-token and an empty sentence
    queries, keys, values = random_inputs(n + 100, batch, n, d)
    mask = DirectionalMask(jnp.array(lengths), direction)
    dense_loss, dense_grads = attention_loss("dense", mask, "scaled_tanh", block_size)(
        queries, keys, values)
    loss, grads = attention_loss("directional", mask, "scaled_tanh", block_size)(
        queries, keys, values)
    np.testing.assert_allclose(loss, dense_loss, rtol=1e-5)
    for grad, dense_grad in zip(grads, dense_grads, strict=True):
        chex.assert_tree_all_finite(grad)
        np.testing.assert_allclose(grad, dense_grad, rtol=1e-4, atol=1e-5)
    score_fn, bound = score_function("scaled_tanh", C)
    options = Token2TokenOptions(attention_impl="directional", block_size=block_size)
    out = jax.jit(lambda *inputs: multidim_token2token(
        *inputs, mask, score_fn=score_fn, score_bound=bound, options=options))(
        queries, keys, values)
    for b, length in enumerate(lengths):
        expected = reference_token2token(queries[b].astype(np.float64), keys[b], values[b],
                                         reference_mask(direction, length, n), np_scaled_tanh)
        np.testing.assert_allclose(out[b], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[3], 0.0)  # the empty sentence: no query has a key
    if direction == "forward":
        np.testing.assert_array_equal(out[:, 0], 0.0)  # the first token has no earlier key
    if direction == "backward":
        np.testing.assert_array_equal(out[2], 0.0)  # one token: no later key anywhere


def test_directional_with_the_whole_batch_per_step_equals_dense():
    batch, n, d = 3, 9, 4  # examples_per_step=0: the accelerator setting, the kernel vmapped
    inputs = random_inputs(7, batch, n, d)
    mask = DirectionalMask(jnp.array([9, 6, 0]), "backward")
    dense = attention_loss("dense", mask, "scaled_tanh", 4)(*inputs)
    directional = attention_loss("directional", mask, "scaled_tanh", 4,
                                 examples_per_step=0)(*inputs)
    chex.assert_trees_all_close(directional, dense, rtol=1e-4, atol=1e-5)


def test_directional_parameter_gradients_equal_dense():
    x = jnp.asarray(np.random.default_rng(10).normal(size=(2, 10, 6)), jnp.float32)
    mask = DirectionalMask(jnp.array([10, 7]), "backward")  # DiSAN's: tests/test_disan.py

    def make_loss(impl):
        module = Token2TokenAttention(options=Token2TokenOptions(attention_impl=impl,
                                                                 block_size=4))

        def loss(params, x):
            return jnp.sum(jnp.sin(module.apply(params, x, mask, train=False)))

        return module, jax.jit(jax.grad(loss, argnums=(0, 1)))

    module, dense_grad = make_loss("dense")
    params = module.init(jax.random.key(3), x, mask, train=False)
    params = jax.tree.map(lambda p: p + 0.3, params)  # a non-zero score bias too
    _, directional_grad = make_loss("directional")
    expected, grads = dense_grad(params, x), directional_grad(params, x)
    chex.assert_tree_all_finite(grads)
    chex.assert_trees_all_close(grads, expected, rtol=1e-4, atol=1e-5)


def primitive_elements(jaxpr, name: str) -> int:
    """Output elements of every `name` equation of a jaxpr, scan bodies times their length."""
    count = 0
    for eqn in jaxpr.eqns:
        repeat = eqn.params["length"] if eqn.primitive.name == "scan" else 1
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", value)
            if hasattr(inner, "eqns"):
                count += repeat * primitive_elements(inner, name)
        if eqn.primitive.name == name:
            count += int(np.prod(eqn.outvars[0].aval.shape))
    return count


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_directional_computes_only_the_allowed_key_blocks(direction):
    n, d, size = 64, 8, 16  # 4 blocks: 10 of the 16 block pairs lie on the allowed side
    inputs = random_inputs(8, 1, n, d)
    mask = DirectionalMask(jnp.array([n]), direction)
    tanh = {impl: primitive_elements(jax.make_jaxpr(attention_loss(impl, mask, "scaled_tanh",
                                                                   size))(*inputs).jaxpr, "tanh")
            for impl in ("blocked", "directional")}
    # forward + the backward pass's recomputation: each allowed 16 x 16 block twice, nothing else
    assert tanh["directional"] == 2 * 10 * size * size * d
    assert tanh["blocked"] == 2 * n * n * d  # every score, masked or not
    assert tanh["directional"] / tanh["blocked"] == (4 + 1) / (2 * 4)


def test_directional_transcendentals_in_xla_cost_analysis():
    n, d = 32, 8  # blocks of 16: one step, 3 of the 4 block pairs
    inputs = random_inputs(9, 1, n, d)
    mask = DirectionalMask(jnp.array([n]), "forward")
    score_fn, bound = score_function("scaled_tanh", C)

    def transcendentals(impl):
        options = Token2TokenOptions(attention_impl=impl, block_size=16)
        compiled = jax.jit(lambda q, k, v: multidim_token2token(
            q, k, v, mask, score_fn=score_fn, score_bound=bound, options=options)).lower(
            *inputs).compile()
        return compiled.cost_analysis()["transcendentals"]

    # tanh and exp per computed score: all n^2 for dense, the 3 allowed blocks for directional
    assert transcendentals("dense") >= 2 * n * n * d
    assert transcendentals("directional") == pytest.approx(2 * 3 * 16 * 16 * d, rel=0.01)


def test_directional_memory_is_linear_in_length():
    batch, d = 2, 32

    def temp(n):
        inputs = random_inputs(6, batch, n, d)
        mask = DirectionalMask(jnp.array([n, n // 2]), "forward")
        return (attention_loss("directional", mask, "scaled_tanh", 16).lower(*inputs).compile()
                .memory_analysis().temp_size_in_bytes)

    short, long = temp(64), temp(128)
    assert long <= 2.6 * short, (short, long)  # linear: 2x; quadratic would be 4x
    assert long * 3 <= batch * 128 * 128 * d * 4  # below a third of one [B, n, n, d] tensor


def test_auto_picks_directional_only_for_one_sided_masks_and_bounded_scores():
    lengths = jnp.array([5])
    _, tanh_bound = score_function("scaled_tanh", C)
    _, elu_bound = score_function("elu", C)
    for direction in ("forward", "backward", "causal"):
        mask = DirectionalMask(lengths, direction)
        assert resolve_impl("auto", 32, 16, mask, tanh_bound) == "directional"
        assert resolve_impl("auto", 8, 16, mask, tanh_bound) == "dense"  # below the threshold
        assert resolve_impl("directional", 8, 16, mask, tanh_bound) == "directional"
        assert resolve_impl("blocked", 32, 16, mask, tanh_bound) == "blocked"
        assert resolve_impl("auto", 32, 16, mask, elu_bound) == "blocked"  # unbounded score
    others = [DirectionalMask(lengths, "diag"), DirectionalMask(lengths, "none"),
              SegmentMask(jnp.zeros((1, 5), jnp.int32)), DenseMask(jnp.ones((1, 5, 5), bool))]
    for mask in others:
        assert resolve_impl("auto", 32, 16, mask, tanh_bound) == "blocked"
        assert resolve_impl("directional", 32, 16, mask, tanh_bound) == "blocked"


def test_source2token_matches_loop_reference():
    batch, n, d = 3, 6, 4
    x = np.random.default_rng(7).normal(size=(batch, n, d)).astype(np.float32)
    lengths = np.array([6, 2, 0])
    valid = np.arange(n)[None, :] < lengths[:, None]
    module = Source2Token(activation="elu")
    params = module.init(jax.random.key(0), x, valid, train=False)["params"]
    out = module.apply({"params": params}, x, valid, train=False)
    chex.assert_shape(out, (batch, d))
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    for b in range(batch):
        expected = np.zeros(d)
        scores = [np_elu(x[b, i] @ p["hidden"]["kernel"] + p["hidden"]["bias"])
                  @ p["score"]["kernel"] + p["score"]["bias"] for i in range(lengths[b])]
        if scores:
            weights = np.exp(np.stack(scores) - np.max(scores, axis=0))
            weights /= weights.sum(axis=0)
            for i in range(lengths[b]):
                expected += weights[i] * x[b, i]
        np.testing.assert_allclose(out[b], expected, rtol=1e-5, atol=1e-6)


def test_fusion_gate_matches_equations_19_20():
    h, s = np.random.default_rng(8).normal(size=(2, 3, 5)).astype(np.float32)
    gate = FusionGate()
    params = gate.init(jax.random.key(1), h, s, train=False)["params"]
    params = jax.tree.map(lambda a: a + 0.1, params)  # non-zero biases
    out = gate.apply({"params": params}, h, s, train=False)
    p = jax.tree.map(np.asarray, params)
    for t in range(3):
        logits = (s[t] @ p["context"]["kernel"] + p["context"]["bias"]
                  + h[t] @ p["input"]["kernel"] + p["input"]["bias"] + p["gate_bias"])
        f = 1.0 / (1.0 + np.exp(-logits))
        np.testing.assert_allclose(out[t], f * h[t] + (1 - f) * s[t], rtol=1e-5, atol=1e-6)
    # 2 d^2 + 3 d parameters: two biased linears and the extra gate bias
    assert sum(a.size for a in jax.tree.leaves(params)) == 2 * 25 + 3 * 5


def test_dropout_only_in_training_and_never_on_the_summed_values():
    x = jnp.asarray(np.random.default_rng(9).normal(size=(2, 4, 8)), jnp.float32)
    valid = jnp.ones((2, 4), bool)
    module = Source2Token(keep_prob=0.5)
    variables = module.init(jax.random.key(0), x, valid, train=False)

    def run(inputs, train, seed):
        return module.apply(variables, inputs, valid, train=train,
                            rngs={"dropout": jax.random.key(seed)})

    chex.assert_trees_all_equal(run(x, False, 1), run(x, False, 2))
    chex.assert_trees_all_equal(run(x, True, 1), run(x, True, 1))
    assert not np.allclose(run(x, True, 1), run(x, True, 2))
    # the same vector at every position: any attention weights return it, if values are undropped
    same = jnp.broadcast_to(x[:, :1], x.shape)
    np.testing.assert_allclose(run(same, True, 3), same[:, 0], rtol=1e-6)

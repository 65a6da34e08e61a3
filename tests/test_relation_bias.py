"""Relation bias of the Dependency-Transformer: values and gradients (every parameter, the table
and x) against numpy loops over eq. 1 and eq. 3-4 with NONE and padding ids, `take_rows` in
chunks against a loop of row additions, and no scatter in the backward off a CPU."""

import collections
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenc.layers.relation_bias import GatedRelationBias, RelationTable, take_rows
from jaxenc.structures.relations import NONE_ID

B, L, D, D_R, H, R = 2, 9, 5, 4, 3, 11


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, L, D)).astype(np.float32)
    rel = rng.integers(0, R, size=(B, L, L)).astype(np.int32)
    rel[:, 1, :] = NONE_ID  # a NONE row
    rel[0, :, -1] = R - 1  # the last table row
    rel[1, 6:, :] = -1  # padding of the second sentence
    rel[1, :, 6:] = -1
    weights = rng.normal(size=(B, H, L, L)).astype(np.float32)
    return x, rel, weights


def build(gated):
    x, rel, _ = inputs()
    table_module, bias = RelationTable(R, D_R), GatedRelationBias(H, gated=gated)
    table_params = table_module.init(jax.random.key(0))["params"]
    table = table_module.apply({"params": table_params})
    params = bias.init(jax.random.key(1), x, rel, table)["params"]
    # A non-zero NONE row in the stored parameter: the layer must still ignore it.
    table_params = {"embedding": table_params["embedding"].at[NONE_ID].set(5.0)}

    def scores(params, table_params, x, rel):
        return bias.apply({"params": params}, x, rel, table_module.apply({"params": table_params}))

    return params, table_params, scores


def numpy_reference(params, embedding, x, rel, weights, gated):
    """S [B, H, L, L] and the gradients of sum(weights * S), by loops over b, i, j, h.

    r_ij = E[rel_ij] (zero for NONE and padding); eq. 1: S = r_ij · V_r; eq. 3-4:
    S = sigmoid((x_i W_ge + r_ij W_gr) · V_g) * (r_ij · V_r).
    """
    p = {name: np.asarray(value, np.float64) for name, value in params.items()}
    table, x = np.asarray(embedding, np.float64), np.asarray(x, np.float64)
    scores = np.zeros((B, H, L, L))
    grads = {name: np.zeros_like(value) for name, value in p.items()}
    d_table, d_x = np.zeros_like(table), np.zeros_like(x)
    for b in range(B):
        for i in range(L):
            for j in range(L):
                rid = rel[b, i, j]
                r = table[rid] if rid > NONE_ID else np.zeros(D_R)
                d_r = np.zeros(D_R)
                for h in range(H):
                    w = weights[b, h, i, j]
                    u = r @ p["score_vector"][h]
                    if not gated:
                        scores[b, h, i, j] = u
                        grads["score_vector"][h] += w * r
                        d_r += w * p["score_vector"][h]
                        continue
                    gate_in = x[b, i] @ p["gate_input"][h] + r @ p["gate_relation"][h]
                    g = 1.0 / (1.0 + np.exp(-(gate_in @ p["gate_vector"][h])))
                    scores[b, h, i, j] = g * u
                    dz = w * u * g * (1.0 - g)
                    grads["score_vector"][h] += w * g * r
                    grads["gate_vector"][h] += dz * gate_in
                    grads["gate_input"][h] += dz * np.outer(x[b, i], p["gate_vector"][h])
                    grads["gate_relation"][h] += dz * np.outer(r, p["gate_vector"][h])
                    d_x[b, i] += dz * p["gate_input"][h] @ p["gate_vector"][h]
                    d_r += w * g * p["score_vector"][h] + dz * p["gate_relation"][h] @ p[
                        "gate_vector"][h]
                if rid > NONE_ID:
                    d_table[rid] += d_r
    return scores, grads, d_table, d_x


@pytest.mark.parametrize("gated", [True, False])
def test_values_and_gradients_equal_numpy_loops_over_the_equations(gated):
    x, rel, weights = inputs()
    params, table_params, scores = build(gated)
    loss = lambda p, tp, x: jnp.sum(scores(p, tp, x, rel) * weights)
    got = scores(params, table_params, x, rel)
    got_grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(params, table_params, x)
    want, want_grads, want_d_table, want_d_x = numpy_reference(
        params, table_params["embedding"], x, rel, weights, gated)
    assert set(params) == ({"score_vector", "gate_input", "gate_relation", "gate_vector"}
                           if gated else {"score_vector"})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    none_or_pad = np.broadcast_to(((rel == NONE_ID) | (rel < 0))[:, None], got.shape)
    assert np.all(np.asarray(got)[none_or_pad] == 0.0)  # exactly zero, not merely small
    for name in params:
        np.testing.assert_allclose(got_grads[0][name], want_grads[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    np.testing.assert_allclose(got_grads[1]["embedding"], want_d_table, rtol=1e-4, atol=1e-5)
    assert np.all(np.asarray(got_grads[1]["embedding"][NONE_ID]) == 0.0)
    np.testing.assert_allclose(got_grads[2], want_d_x, rtol=1e-4, atol=1e-5)
    assert np.any(want_d_table[R - 1] != 0.0) and (np.any(want_d_x != 0.0) or not gated)


@pytest.mark.parametrize("chunk_elements", [R, 3 * R, 7 * R, None])
def test_take_rows_gradient_in_chunks_equals_a_loop_of_row_additions(chunk_elements):
    """45 ids in chunks of 1, 3, 7 (the last chunk padded) and 45 (the platform default)."""
    rng = np.random.default_rng(1)
    table = rng.normal(size=(R, 6)).astype(np.float32)
    ids = rng.integers(0, R, size=(5, 9)).astype(np.int32)
    grad = rng.normal(size=(5, 9, 6)).astype(np.float32)
    args = () if chunk_elements is None else (chunk_elements,)
    got_rows = take_rows(table, ids, *args)
    got = jax.jit(jax.grad(lambda t: jnp.sum(take_rows(t, ids, *args) * grad)))(table)
    want = np.zeros((R, 6), np.float64)
    for n, row in enumerate(ids.reshape(-1)):
        want[row] += grad.reshape(-1, 6)[n]
    np.testing.assert_array_equal(got_rows, table[ids])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


HLO_OPCODE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][a-z0-9\-]*)\(")


def compiled_opcodes(fn, *args) -> collections.Counter:
    """Opcodes of the optimized HLO of jit(fn) (instruction lines; names and metadata, which
    still say "scatter" where a gather was differentiated, are not opcodes)."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    return collections.Counter(match.group(1) for line in text.splitlines()
                               if (match := HLO_OPCODE.match(line)))


def lowered_scatters(fn, platform: str, *args) -> int:
    """stablehlo.scatter ops of jit(fn) lowered for `platform` (no device of it needed)."""
    return jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,)).as_text().count(
        "stablehlo.scatter")


@pytest.mark.parametrize("gated", [True, False])
def test_backward_has_no_scatter_off_a_cpu(gated):
    x, rel, weights = inputs()
    params, table_params, scores = build(gated)
    grad = jax.grad(lambda p, tp, x: jnp.sum(scores(p, tp, x, rel) * weights), argnums=(0, 1, 2))
    assert lowered_scatters(grad, "cuda", params, table_params, x) == 0
    assert lowered_scatters(grad, "cpu", params, table_params, x) > 0  # cheap on a CPU
    table, ids = jnp.ones((R, 2 * H)), jnp.asarray(np.maximum(rel, 0))
    chunked = jax.grad(lambda t: jnp.sum(take_rows(t, ids, 3 * R) ** 2))
    assert "scatter" not in compiled_opcodes(chunked, table)
    gather_grad = jax.grad(lambda t: jnp.sum(jnp.take(t, ids, axis=0) ** 2))
    assert compiled_opcodes(gather_grad, table)["scatter"] == 1  # the check can see one

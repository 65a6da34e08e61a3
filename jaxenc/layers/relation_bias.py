"""Gated relation scores of the Dependency-Transformer (Ma et al. 2022, eq. 1, 3-4), reduced.

For head h, query node i, key node j with relation id rel_ij and relation vector r_ij = E[rel_ij]
(E [R, d_r], row NONE fixed at zero). The ids come from the run's relation vocabulary
(jaxenc/structures/relations.py): SELF, the arc labels (split into UP / DOWN by which end
attends, or one per label with model.relation_direction="none"; docs/models.md), the distance pairs
(a, b) and NONE. This layer only gathers rows of E, whatever the layout:

    eq. 1:  S^r_ij = r_ij · V_r                                   (ungated)
    eq. 3:  S^r_ij = g_ij * (r_ij · V_r)                          V_g, V_r [d_r]
    eq. 4:  g_ij = sigmoid((x_i W_ge + r_ij W_gr) · V_g)          W_ge [d, d_r], W_gr [d_r, d_r]

added to the attention scores by eq. 2 (S_ij = S^e_ij + S^r_ij).
Because V_g and V_r are vectors, eq. 3-4 reduce to gathers from R-vectors: alpha_i = x_i ·
(W_ge V_g), beta = E (W_gr V_g), gamma = E V_r, and g_ij = sigmoid(alpha_i + beta[rel_ij]),
S^r_ij = g_ij * gamma[rel_ij]. No [L, L, d_r] tensor exists in the forward or the backward pass
(tests/test_dependency_transformer.py checks the jaxpr). NONE (id 0) and padding (-1) contribute
exactly zero. Without the gate (`gated=False`, Table 3's DT_lr) S^r_ij = gamma[rel_ij], eq. 1.

gamma and beta are gathered together as one [R, 2H] table by `take_rows`. Off a CPU its backward
is a one-hot matmul, d_table = onehot(rel)^T g, built in chunks of at most 2^25 elements: the
scatter-add that differentiating a gather gives is B L^2 2H atomic adds onto R 2H addresses,
serialised where they collide. A CPU keeps the scatter-add, which is cheaper there.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from jaxenc.structures.relations import NONE_ID

GLOROT = nn.initializers.glorot_uniform()
ACCELERATOR_CHUNK_ELEMENTS = 2**25  # 128 MiB: few sequential loop steps on a GPU / TPU


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def take_rows(table: jax.Array, ids: jax.Array, chunk_elements: int | None = None) -> jax.Array:
    """table [R, K], ids int[...] -> table[ids] [..., K]; ids outside [0, R) give NaN rows
    (`jnp.take`'s fill) and no gradient.

    The gradient w.r.t. the table is onehot(ids)^T g [R, K]: float32 matmuls (HIGHEST precision:
    no TF32 rounding of g) over chunks of ids whose [R, chunk] one-hot has at most
    `chunk_elements` elements, so the backward has no scatter. None: the scatter-add on a CPU,
    chunks of ACCELERATOR_CHUNK_ELEMENTS elsewhere (module docstring).
    """
    return jnp.take(table, ids, axis=0)


def _take_rows_forward(table: jax.Array, ids: jax.Array, chunk_elements: int | None):
    return take_rows(table, ids, chunk_elements), (table, ids)


def _take_rows_backward(chunk_elements: int | None, residuals, grad: jax.Array):
    table, ids = residuals
    if chunk_elements is not None:
        return _table_gradient(chunk_elements, table, ids, grad), None
    return lax.platform_dependent(
        table, ids, grad, cpu=_scattered_gradient,
        default=functools.partial(_table_gradient, ACCELERATOR_CHUNK_ELEMENTS)), None


def _scattered_gradient(table: jax.Array, ids: jax.Array, grad: jax.Array) -> jax.Array:
    """The table gradient as a gather's own: grad's rows added at `ids` [R, K]."""
    return jnp.zeros(table.shape, grad.dtype).at[ids.reshape(-1)].add(
        grad.reshape(-1, table.shape[1]), mode="drop").astype(table.dtype)


def _table_gradient(chunk_elements: int, table: jax.Array, ids: jax.Array,
                    grad: jax.Array) -> jax.Array:
    """onehot(ids)^T grad [R, K] for table [R, K], ids int[...], grad [..., K]."""
    rows, width = table.shape
    flat_ids, flat_grad = ids.reshape(-1), grad.reshape(-1, width)
    chunk = max(1, min(flat_ids.size, chunk_elements // rows))
    padding = -flat_ids.size % chunk  # padded rows have zero gradient: they add nothing
    flat_ids = jnp.pad(flat_ids, (0, padding)).reshape(-1, chunk)
    flat_grad = jnp.pad(flat_grad, ((0, padding), (0, 0))).reshape(-1, chunk, width)

    def add_chunk(total: jax.Array, chunk_ids_grad: tuple[jax.Array, jax.Array]):
        chunk_ids, chunk_grad = chunk_ids_grad
        onehot = (jnp.arange(rows)[:, None] == chunk_ids).astype(chunk_grad.dtype)  # [R, chunk]
        return total + jnp.matmul(onehot, chunk_grad, precision=lax.Precision.HIGHEST,
                                  preferred_element_type=jnp.float32), None

    total, _ = lax.scan(add_chunk, jnp.zeros((rows, width), jnp.float32), (flat_ids, flat_grad))
    return total.astype(table.dtype)


take_rows.defvjp(_take_rows_forward, _take_rows_backward)


class RelationTable(nn.Module):
    """E: relation id -> r [R, d_r]; the NONE row is fixed at zero (not a parameter)."""

    num_relations: int
    features: int

    @nn.compact
    def __call__(self) -> jax.Array:
        table = self.param("embedding", nn.initializers.normal(0.1),
                           (self.num_relations, self.features))
        return jnp.where((jnp.arange(self.num_relations) == NONE_ID)[:, None], 0.0, table)


class GatedRelationBias(nn.Module):
    """Per-head relation scores added to the attention scores: -> [B, H, L, L].

    Parameters per head: `gate_input` W_ge [H, d, d_r], `gate_relation` W_gr [H, d_r, d_r],
    `gate_vector` V_g [H, d_r], `score_vector` V_r [H, d_r] (the literal eq. 3-4 parameters; only
    their products are ever multiplied with activations).
    """

    num_heads: int
    gated: bool = True

    @nn.compact
    def __call__(self, x: jax.Array, relations: jax.Array, table: jax.Array) -> jax.Array:
        """x [B, L, d] (the layer input), relations int32[B, L, L] (-1 padding), table [R, d_r]
        -> scores [B, H, L, L]."""
        heads, (d_model, d_rel) = self.num_heads, (x.shape[-1], table.shape[-1])
        score_vector = self.param("score_vector", GLOROT, (heads, d_rel))
        ids = jnp.where(relations >= 0, relations, NONE_ID)
        gamma = table @ score_vector.T  # [R, H]
        if not self.gated:
            return jnp.transpose(take_rows(gamma, ids), (0, 3, 1, 2))
        gate_input = self.param("gate_input", GLOROT, (heads, d_model, d_rel))
        gate_relation = self.param("gate_relation", GLOROT, (heads, d_rel, d_rel))
        gate_vector = self.param("gate_vector", GLOROT, (heads, d_rel))
        alpha = jnp.einsum("bld,hd->blh", x,
                           jnp.einsum("hdr,hr->hd", gate_input, gate_vector))  # [B, L, H]
        beta = table @ jnp.einsum("hsr,hr->hs", gate_relation, gate_vector).T  # [R, H]
        gamma_beta = take_rows(jnp.concatenate([gamma, beta], axis=1), ids)  # [B, L, L, 2H]
        scores = gamma_beta[..., :heads] * nn.sigmoid(alpha[:, :, None, :]
                                                      + gamma_beta[..., heads:])
        return jnp.transpose(scores, (0, 3, 1, 2))

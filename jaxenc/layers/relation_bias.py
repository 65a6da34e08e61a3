"""Gated relation scores of the Dependency-Transformer (Ma et al. 2022, eq. 1, 3-4), reduced.

For head h, query node i, key node j with relation id rel_ij and relation vector r_ij = E[rel_ij]
(E [R, d_r], row NONE fixed at zero). The ids come from the run's relation vocabulary
(jaxenc/structures/relations.py): SELF, the arc labels (split into UP / DOWN by which end
attends, or one per label with model.relation_direction="none"; both, and SELF, are
interpretations: the paper only says adjacent nodes get "the arc labels"), the distance pairs
(a, b) and NONE. This layer only gathers rows of E, whatever the layout:

    eq. 1:  S^r_ij = r_ij · V_r                                   (ungated)
    eq. 3:  S^r_ij = g_ij * (r_ij · V_r)                          V_g, V_r [d_r]
    eq. 4:  g_ij = sigmoid((x_i W_ge + r_ij W_gr) · V_g)          W_ge [d, d_r], W_gr [d_r, d_r]

added to the attention scores by eq. 2 (S_ij = S^e_ij + S^r_ij).
Because V_g and V_r are vectors, eq. 3-4 reduce to gathers from R-vectors (spec
dependency_transformer.md): alpha_i = x_i · (W_ge V_g), beta = E (W_gr V_g), gamma = E V_r, and
g_ij = sigmoid(alpha_i + beta[rel_ij]), S^r_ij = g_ij * gamma[rel_ij]. No [L, L, d_r] tensor
exists in the forward or the backward pass (tests/test_dependency_transformer.py checks the
jaxpr). NONE (id 0) and padding (-1) contribute exactly zero. Without the gate (`gated=False`,
Table 3's DT_lr) S^r_ij = gamma[rel_ij], eq. 1.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.structures.relations import NONE_ID

GLOROT = nn.initializers.glorot_uniform()


class RelationTable(nn.Module):
    """E: relation id -> r [R, d_r]; the NONE row is fixed at zero (not a parameter)."""

    num_relations: int
    features: int

    @nn.compact
    def __call__(self) -> jax.Array:
        table = self.param("embedding", nn.initializers.normal(0.1),
                           (self.num_relations, self.features))
        return table.at[NONE_ID].set(0.0)


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
        scores = jnp.take(gamma, ids, axis=0)  # [B, L, L, H]
        if self.gated:
            gate_input = self.param("gate_input", GLOROT, (heads, d_model, d_rel))
            gate_relation = self.param("gate_relation", GLOROT, (heads, d_rel, d_rel))
            gate_vector = self.param("gate_vector", GLOROT, (heads, d_rel))
            alpha = jnp.einsum("bld,hd->blh", x,
                               jnp.einsum("hdr,hr->hd", gate_input, gate_vector))  # [B, L, H]
            beta = table @ jnp.einsum("hsr,hr->hs", gate_relation, gate_vector).T  # [R, H]
            scores = scores * nn.sigmoid(alpha[:, :, None, :] + jnp.take(beta, ids, axis=0))
        return jnp.transpose(scores, (0, 3, 1, 2))

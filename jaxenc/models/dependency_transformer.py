"""Dependency-Transformer (Ma et al., ICASSP 2022).

Input: [root] + words (the featurizer prepends ROOT; node 0 is [root], word i is node i+1), with
`relations` int32[L, L] and `levels` int32[L] from the sentence's dependency tree
(jaxenc/structures/relations.py).
    input (Section 2.1, unnumbered): h^0_k = e_k + p_k + l_k     word, position (sinusoidal)
             and level embeddings
    eq. 2-4: S_ij = q_i · k_j / sqrt(d_k) + S^r_ij,  S^r_ij = g_ij (r_ij · V_r)  (eq. 3),
             g_ij = sigmoid((h_i W_ge + r_ij W_gr) · V_g)  (eq. 4)     per head, per layer
             computed by gathers from per-relation vectors (jaxenc/layers/relation_bias.py: no
             [L, L, d_r] tensor), NONE relations contribute exactly zero, padding keys masked;
    then the Transformer layer (residual + LayerNorm around attention and the FFN), `num_layers`
    times. The sentence vector is the output of the [root] node (`sentence_vector="root"`, the
    paper's); "mean" averages the word nodes' outputs (the [root] node left out), a departure.
Table 3 ablations (`variant`): "transformer" (no relations, no levels: the plain Transformer
encoder with the [root] output), "lr" (relation scores without the gate, no level embedding),
"rg" (gated relation scores, no level embedding), "full" (everything).
Flags where the paper is open (docs/models.md): `share_relations` (one relation table for all
layers, the default, or one per layer); the gate reads the layer's input h_i, not the per-head
query projection; `positions`; `relation_direction` ("split": (label, UP) and (label, DOWN) per
label; "none": one relation per label for both ends); SELF is the diagonal's relation.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.data.vocab import ROOT
from jaxenc.layers.attention import ScoreBias
from jaxenc.layers.masks import length_mask, masked_mean
from jaxenc.layers.relation_bias import GatedRelationBias, RelationTable
from jaxenc.layers.transformer import POSITIONS, input_stage
from jaxenc.models.config import StructureNeeds, require
from jaxenc.models.registry import EncoderSpec, encoder_outputs
from jaxenc.models.transformer import TransformerSizes, encoder_stack
from jaxenc.structures.arrays import DEFAULT_MAX_LEVEL, PARSER_NAMES
from jaxenc.structures.relations import DEFAULT_MAX_DISTANCE, DIRECTIONS

VARIANTS = ("transformer", "lr", "rg", "full")
SENTENCE_VECTORS = ("root", "mean")


@dataclasses.dataclass(frozen=True)
class DependencyTransformerConfig(TransformerSizes):
    """The paper's setting: 3 layers, 6 heads, hidden 300, FFN 300, relation vectors d_r 30.

    Attributes (besides the Transformer's sizes, jaxenc.models.transformer.TransformerSizes):
      relation_dim: d_r.
      num_relations: rows of the relation table; the run's relation vocabulary must fit
        (checked when it is built: jaxenc.data.featurize.relation_vocabulary).
      variant: Table 3's ablation, one of VARIANTS.
      share_relations: one relation table for all layers (True) or one per layer.
      positions: "sinusoidal" (default), "learned" (max_positions rows) or "none".
      max_positions: rows of the learned position table, the longest sentence it encodes.
      parser, max_distance, max_level, keep_subtypes: the structure options (spaCy trees by
        default; "gold" where the data has dependency trees).
      relation_direction: "split" (an arc label is two relations, UP and DOWN, by which end
        attends) or "none" (one relation per arc label); an interpretation either way
        (docs/models.md). Saved with the relation vocabulary (its `direction`).
      sentence_vector: "root" (the paper: the [root] node's output) or "mean" (the mean of the
        word nodes' outputs; zeros for a sentence without words).
    """

    num_layers: int = 3
    ff_dim: int = 300
    relation_dim: int = 30
    num_relations: int = 128
    variant: str = "full"
    share_relations: bool = True
    positions: str = "sinusoidal"
    max_positions: int = 512
    parser: str = "spacy"
    max_distance: int = DEFAULT_MAX_DISTANCE
    max_level: int = DEFAULT_MAX_LEVEL
    keep_subtypes: bool = False
    relation_direction: str = "split"
    sentence_vector: str = "root"

    def validate(self) -> None:
        require(self.variant in VARIANTS, "variant", self.variant,
                f"is not one of {', '.join(VARIANTS)}", "full")
        require(self.relation_direction in DIRECTIONS, "relation_direction",
                self.relation_direction, f"is not one of {', '.join(DIRECTIONS)}", "split")
        require(self.sentence_vector in SENTENCE_VECTORS, "sentence_vector", self.sentence_vector,
                f"is not one of {', '.join(SENTENCE_VECTORS)}", "root")
        require(self.positions in POSITIONS, "positions", self.positions,
                f"is not one of {', '.join(POSITIONS)}", "sinusoidal")
        require(self.parser in PARSER_NAMES and self.parser != "benepar", "parser", self.parser,
                "gives no dependency trees", "spacy")
        require(self.num_relations >= 3, "num_relations", self.num_relations,
                "leaves no room for NONE, SELF and arcs", 128)
        super().validate()

    @property
    def uses_relations(self) -> bool:
        return self.variant != "transformer"

    @property
    def uses_levels(self) -> bool:
        return self.variant == "full"


def structure_spec(config: DependencyTransformerConfig) -> StructureNeeds:
    """[root] first; relation ids and levels unless the plain-Transformer ablation."""
    fields = (("relations",) if config.uses_relations else ()) + (
        ("levels",) if config.uses_levels else ())
    return StructureNeeds(fields=fields, prefix_tokens=(ROOT,))


class DependencyTransformer(nn.Module):
    """sentence {tokens int32[B, L] ([root] first), lengths int32[B], relations int32[B, L, L],
    levels int32[B, L]} -> {"tokens": [B, L, d], "sentence": [B, d] ([root] output),
    "memory": [B, L, d], "memory_mask": bool[B, L]}."""

    vocab_size: int
    config: DependencyTransformerConfig = DependencyTransformerConfig()

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        cfg = self.config
        tokens, lengths = sentence["tokens"], sentence["lengths"]
        mask = length_mask(lengths, tokens.shape[1])
        x = input_stage(tokens, vocab_size=self.vocab_size, embed_dim=cfg.embed_dim,
                        model_dim=cfg.model_dim, dropout_rate=0.0, train=train,
                        positions=cfg.positions, max_positions=cfg.max_positions,
                        trainable_embeddings=not cfg.freeze_embeddings,
                        embedding_scale=cfg.embedding_scale, dtype=cfg.compute_dtype)
        if cfg.uses_levels:  # h^0_k = e_k + p_k + l_k
            levels = nn.Embed(cfg.max_level + 1, cfg.model_dim, dtype=cfg.compute_dtype,
                              name="levels")
            x = x + levels(jnp.clip(sentence["levels"], 0, cfg.max_level))
        x = nn.Dropout(cfg.dropout_rate)(x, deterministic=not train)
        score_bias = None
        if cfg.uses_relations:
            if cfg.share_relations:
                tables = [RelationTable(cfg.num_relations, cfg.relation_dim,
                                        name="relations")] * cfg.num_layers
            else:
                tables = [RelationTable(cfg.num_relations, cfg.relation_dim,
                                        name=f"relations_{layer}")
                          for layer in range(cfg.num_layers)]

            def score_bias(layer: int, h: jax.Array) -> ScoreBias:
                """eq. 3-4 for `layer`, its gate reading the layer input h (not the queries)."""
                bias = GatedRelationBias(cfg.num_heads, gated=cfg.variant != "lr",
                                         name=f"relation_bias_{layer}")
                return lambda query_heads: bias(h.astype(jnp.float32), sentence["relations"],
                                                tables[layer]())

        x = encoder_stack(x, lengths, cfg, train=train, score_bias=score_bias)
        if cfg.sentence_vector == "root":
            vector = x[:, 0]
        else:  # the word nodes: every real node after [root]
            vector = masked_mean(x, mask & (jnp.arange(x.shape[1]) > 0))
        return encoder_outputs(tokens=x, sentence=vector, memory=x, memory_mask=mask)


SPEC = EncoderSpec(config=DependencyTransformerConfig, module=DependencyTransformer,
                   structure_spec=structure_spec)

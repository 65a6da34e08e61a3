"""PSAN: Phrase-level Self-Attention Network (Wu et al., EMNLP 2018).

Memory M^(0) = the word embeddings [n, d]. For each division level t (the finest, T, first):
    eq. 1:  a_ij = sigma(W_a1 p_i + W_a2 p_j + b_a) + M_ij, M_ii = -inf       within a phrase P
    eq. 2:  p~_i = sum_j softmax_j(a_ij) ⊙ p_j     (per feature; a one-word phrase gives zeros)
    eq. 3:  c_i = sigma(W_c [|p_i - p~_i| ; p_i ⊙ p~_i] + b_c)               C = PSA_t(M^(t-1))
    eq. 4:  G = sigmoid(W_g [M; C] + b_g), M^(t) = G ⊙ sigma(W_m [M; C] + b_m)  (shared by levels)
    eq. 5:  e_i = W_e2 sigma(W_e1 m_i + b_e1) + b_e2, v = sum_i softmax_i(e_i) ⊙ m_i   -> v [d]
sigma = ELU. PSA (eq. 1-2) is DiSAN's token2token attention with ELU scores and a diag-disabled
same-phrase mask, computed three ways (`psa_impl`) that agree, sharing parameters and dropout
masks: "dense" (an [L, L] SegmentMask), "streaming" (DiSAN's query-blocked loop) and "packed"
(the default: the phrases of a level packed across the batch into length classes,
jaxenc.data.packing, attended in tiles, about sum_c N_c L_c^2 score elements instead of B L^2).
Dropout (keep_prob) acts on the inputs of the linear maps.

Flags (Table 4 ablations and what the paper leaves open, docs/models.md):
- `division`: "syntactic" (the parse tree's, jaxenc.structures.psan), "equal" (w/o syntactic
  division: equal phrases, same counts), "sentence" (w/o PSA: sentence-level attention, one
  phrase per level).
- `single_level`: 0 = PSA on every level; k = on level k only (the other levels are skipped).
- `memory`: "gated" (eq. 4 exactly as printed: no (1 - G) ⊙ M term), "highway" (M^(t) = G ⊙
  sigma(W_m [M; C] + b_m) + (1 - G) ⊙ M), "concat" (w/o gated memory: the levels' PSA outputs of
  M^(0) concatenated, then sigma(W [C_1; ..; C_T] + b)).
- `level_order`: "fine_to_coarse" (level T first, the paper) or "coarse_to_fine".
- `memory_norm`: "none" (the paper) or "layer", a deviation for the pair heads: a LayerNorm (shared
  by the levels) on every updated memory M^(t) (the combined one under "concat"). Eq. 3-4 give every
  token a large common component, so different sentences' vectors point almost the same way; the
  norm removes it.
- `model_dim`: d; narrower embeddings are projected to it by W_in first (a deviation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.data.packing import PackingConfig
from jaxenc.layers.dense import DropoutDense, get_activation
from jaxenc.layers.dropout import AUTO_BITS, Dropout, check_mask_bits
from jaxenc.layers.embed import WordEmbed
from jaxenc.layers.loops import loop_setting, with_loop_setting
from jaxenc.layers.masks import SegmentMask, length_mask
from jaxenc.layers.multidim_attention import (
    Source2Token,
    Token2TokenAttention,
    Token2TokenOptions,
    score_function,
)
from jaxenc.layers.packed_attention import level_plan, phrase_attention
from jaxenc.models.config import AUTO, EncoderConfig, StructureNeeds, require
from jaxenc.models.registry import EncoderSpec, encoder_outputs
from jaxenc.structures.arrays import DIVISIONS, PARSER_NAMES

PSA_IMPLS = ("packed", "dense", "streaming")
MEMORIES = ("gated", "highway", "concat")
LEVEL_ORDERS = ("fine_to_coarse", "coarse_to_fine")
MEMORY_NORMS = ("none", "layer")
# What parser="auto" reads where the data ships no phrase trees: spaCy's dependency parse derived
# into phrases (jaxenc.structures.derive).
TEXT_PARSER = "spacy-constituency"


@dataclasses.dataclass(frozen=True)
class PSANConfig(EncoderConfig):
    """The paper's sizes: d = 300, ELU, T = 3 levels, min split length 4, dropout 0.5, GloVe fixed.

    Attributes (besides EncoderConfig's; module docstring for the flags):
      model_dim: d (the embeddings are projected to it when narrower).
      activation: sigma.
      keep_prob: dropout keep probability on the inputs of the linear maps.
      dropout_bits: random bits per dropout decision (jaxenc/layers/dropout.py).
      psa_impl: one of PSA_IMPLS. "packed" needs the batcher's plan (StructureNeeds.packing).
      block_size: queries per block of the "streaming" implementation.
      packed_chunk: "packed" computes all tile pairs of a level in one step (0) or loops over
        them, ceil(packed_chunk L^2 / packed_tile^2) pairs per step (the score tiles of
        packed_chunk phrases of the bucket length L). Either way the backward pass recomputes
        the scores and keeps only each token's output and log-sum-exp, so one step's scores
        bound the attention's memory. 1 suits a CPU (the smallest working set, and the steps
        stay in cache), 0 accelerators; "auto", the default, picks per platform
        (jaxenc.layers.loops). The loop keeps the plan's group axis, so on several devices each
        computes its own groups, with no traffic between them (tests/test_packing.py).
      examples_per_step: the examples per step of the "streaming" implementation's loop
        (jaxenc.layers.multidim_attention.Token2TokenOptions).
      packed_tile: positions per tile of "packed" (jaxenc.layers.packed_attention.tile_schedule):
        phrases of up to packed_tile tokens share tiles, a longer one takes
        ceil(length / packed_tile) tiles of its own and their pairs; smaller tiles waste less on
        short phrases and make more pairs.
      packing_scheme, packing_capacity: the plan's length classes and capacity policy
        (jaxenc.data.packing.PackingConfig).
      division, single_level, memory, level_order: Table 4's ablations and the paper's order.
      memory_norm: one of MEMORY_NORMS (a deviation, module docstring).
      parser: where the phrase trees come from: "auto" (gold trees where the dataset ships
        them, spaCy-derived phrase trees elsewhere), "gold", "spacy-constituency" or "benepar".
        "auto" depends on the dataset, which the model config does not know: a training run's
        config check (`jaxenc.training.validation.check_config`) makes it "gold" where
        task.dataset ships phrase trees (`jaxenc.configs.GOLD_TREES`) and `resolved()` makes it
        TEXT_PARSER elsewhere, so config.json records which trees were read. Never "benepar" by
        itself: whether benepar is installed would change what a config trains.
      num_levels, min_split_len, binarize: the structure options (gold trees where the data has
        them, spaCy-derived phrase trees elsewhere).
    """

    freeze_embeddings: bool = True
    model_dim: int = 300
    activation: str = "elu"
    keep_prob: float = 0.5
    # 0 (AUTO_BITS): the fewest random bits per dropout decision that hold keep_prob exactly
    # (2 for 0.5: fewer random words on a CPU, as DiSANConfig.dropout_bits); 8: one byte per
    # decision; 32: flax's nn.Dropout bit for bit.
    dropout_bits: int = AUTO_BITS
    psa_impl: str = "packed"
    block_size: int = 16
    packed_chunk: int | str = AUTO
    examples_per_step: int | str = AUTO
    packed_tile: int = 4
    packing_scheme: str = "exact"
    packing_capacity: str = "planned"
    division: str = "syntactic"
    single_level: int = 0
    memory: str = "gated"
    level_order: str = "fine_to_coarse"
    memory_norm: str = "none"
    parser: str = AUTO
    num_levels: int = 3
    min_split_len: int = 4
    binarize: bool = True

    def validate(self) -> None:
        get_activation(self.activation)
        for field, options, fix in (("psa_impl", PSA_IMPLS, "packed"),
                                    ("division", DIVISIONS, "syntactic"),
                                    ("memory", MEMORIES, "gated"),
                                    ("level_order", LEVEL_ORDERS, "fine_to_coarse"),
                                    ("memory_norm", MEMORY_NORMS, "none")):
            value = getattr(self, field)
            require(value in options, field, value, f"is not one of {', '.join(options)}", fix)
        require(0.0 < self.keep_prob <= 1.0, "keep_prob", self.keep_prob, "is not in (0, 1]",
                "0.5 (1.0 for no dropout)")
        check_mask_bits(self.dropout_bits)
        require(0 <= self.single_level <= self.num_levels, "single_level", self.single_level,
                f"is not a level in 0..{self.num_levels} (0: every level)", 0)
        require(self.parser == AUTO or (self.parser in PARSER_NAMES and self.parser != "spacy"),
                "parser", self.parser, "gives no phrase trees for PSAN", AUTO)
        require(self.block_size >= 1, "block_size", self.block_size, "is not positive", 16)
        for field in ("packed_chunk", "examples_per_step"):  # "0" from a command line is 0
            object.__setattr__(self, field, loop_setting(getattr(self, field), field))
        require(self.packed_tile >= 1, "packed_tile", self.packed_tile, "is not positive", 4)
        self.packing()  # one-line ConfigError for a bad scheme or policy
        super().validate()

    def resolved(self) -> PSANConfig:
        """`parser="auto"` that the dataset has not made "gold" (class docstring) resolved:
        TEXT_PARSER, the phrase trees of any text."""
        return self if self.parser != AUTO else dataclasses.replace(self, parser=TEXT_PARSER)

    def packing(self) -> PackingConfig:
        return PackingConfig(scheme=self.packing_scheme, capacity=self.packing_capacity)

    def levels(self) -> list[int]:
        """The levels (1-based) PSA runs on, in memory-updating order."""
        levels = [self.single_level] if self.single_level else list(range(1, self.num_levels + 1))
        return levels[::-1] if self.level_order == "fine_to_coarse" else levels


def structure_spec(config: PSANConfig) -> StructureNeeds:
    """Segment ids (dense / streaming PSA) or phrase lists and their packing plan (packed)."""
    if config.psa_impl == "packed":
        return StructureNeeds(fields=("blocks",), packing=config.packing())
    return StructureNeeds(fields=("segments",))


def _dense(cfg: PSANConfig, features: int, name: str) -> DropoutDense:
    """A linear map of PSAN: dropout keep_prob on its input, computed in the config's dtype."""
    return DropoutDense(features, keep_prob=cfg.keep_prob, dropout_bits=cfg.dropout_bits,
                        dtype=cfg.compute_dtype, name=name)


class PackedPhraseAttention(nn.Module):
    """PSA's eq. 1-2 over the phrases of one level's packing plan: x [B, L, d] -> p~ [B, L, d].

    The parameters and the dropout are Token2TokenAttention's, under the same names ("key",
    "query", "score_bias", the input dropout "Dropout_0"), and act on the tokens [B, L, d] as
    there: the dense and packed forms share checkpoints and, in training, dropout masks. The
    attention within phrases is `jaxenc.layers.packed_attention.phrase_attention` (`tile`, `chunk`).
    """

    score: str = "elu"
    keep_prob: float = 1.0
    dropout_bits: int = 32  # random bits per dropout decision (jaxenc/layers/dropout.py)
    tile: int = 4
    chunk: int | str = 0  # phrases per loop step (phrase_attention); "auto": jaxenc.layers.loops
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, plan: Sequence[jax.Array], *, train: bool) -> jax.Array:
        """x [B, L, d]; plan: the level's arrays int32[G, N_c, L_c] (`level_plan`)."""
        features, x = x.shape[-1], x.astype(self.dtype)
        dropped = Dropout(rate=1.0 - self.keep_prob, mask_bits=self.dropout_bits,
                          deterministic=not train)(x)
        project = lambda name: DropoutDense(features, use_bias=False, dtype=self.dtype,
                                            name=name)(dropped, train=train)
        keys, queries = project("key"), project("query")
        keys = keys + self.param("score_bias", nn.initializers.zeros, (features,)).astype(
            self.dtype)
        score_fn, _ = score_function(self.score)
        return with_loop_setting(self.chunk, lambda chunk: phrase_attention(
            queries, keys, x, plan, score_fn=score_fn, tile=self.tile, chunk=chunk))


class PhraseSelfAttention(nn.Module):
    """PSA of one level (eq. 1-3): memory [B, L, d] -> C [B, L, d], the within-phrase context
    p~ (eq. 1-2) from the chosen implementation."""

    config: PSANConfig

    @nn.compact
    def __call__(self, memory: jax.Array, sentence: dict[str, jax.Array], level: int, *,
                 train: bool) -> jax.Array:
        cfg = self.config
        shared = dict(score=cfg.activation, keep_prob=cfg.keep_prob,
                      dropout_bits=cfg.dropout_bits, dtype=cfg.compute_dtype, name="attention")
        if cfg.psa_impl == "packed":
            context = PackedPhraseAttention(tile=cfg.packed_tile, chunk=cfg.packed_chunk,
                                            **shared)(memory, level_plan(sentence, level),
                                                      train=train)
        else:
            attention = Token2TokenAttention(options=Token2TokenOptions(
                attention_impl="blocked" if cfg.psa_impl == "streaming" else "dense",
                block_size=cfg.block_size, examples_per_step=cfg.examples_per_step), **shared)
            segments = sentence["segments"][:, level - 1]
            context = attention(memory, SegmentMask(segments, include_self=False), train=train)
        features = jnp.concatenate([jnp.abs(memory - context), memory * context], axis=-1)
        fused = _dense(cfg, memory.shape[-1], "fuse")(features, train=train)
        return get_activation(cfg.activation)(fused)  # eq. 3


class MemoryUpdate(nn.Module):
    """Gated memory updating (eq. 4; `memory` flag): M, C [B, L, d] -> M' [B, L, d]."""

    config: PSANConfig

    @nn.compact
    def __call__(self, memory: jax.Array, context: jax.Array, *, train: bool) -> jax.Array:
        cfg = self.config
        both = jnp.concatenate([memory, context], axis=-1)
        dense = lambda name: _dense(cfg, memory.shape[-1], name)
        gate = nn.sigmoid(dense("gate")(both, train=train))
        candidate = get_activation(cfg.activation)(dense("candidate")(both, train=train))
        if cfg.memory == "highway":
            return gate * candidate + (1.0 - gate) * memory
        return gate * candidate


class PSAN(nn.Module):
    """PSAN encoder (eq. 1-5).

    sentence {tokens int32[B, L], lengths int32[B], and segments int32[B, T, L] (dense /
    streaming) or the packing plan `pack_t{t}_len{L_c}` int32[G, N, L_c] (packed)}
      -> {"tokens": M^(T) [B, L, d], "sentence": v [B, d], "memory": M^(T), "memory_mask"}.
    """

    vocab_size: int
    config: PSANConfig = PSANConfig()

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        cfg = self.config
        tokens, lengths = sentence["tokens"], sentence["lengths"]
        valid = length_mask(lengths, tokens.shape[1])
        keep = valid[..., None].astype(cfg.compute_dtype)
        memory = WordEmbed(self.vocab_size, cfg.embed_dim, trainable=not cfg.freeze_embeddings,
                           name="embed")(tokens).astype(cfg.compute_dtype)
        if cfg.embed_dim != cfg.model_dim:
            memory = _dense(cfg, cfg.model_dim, "input_projection")(memory, train=train)
        psa = {level: PhraseSelfAttention(cfg, name=f"psa_{level}") for level in cfg.levels()}
        normalize = (nn.LayerNorm(dtype=cfg.compute_dtype, name="memory_norm")
                     if cfg.memory_norm == "layer" else lambda x: x)  # shared by the levels
        if cfg.memory == "concat":  # w/o gated memory: PSA of M^(0) at every level, concatenated
            contexts = [psa[level](memory, sentence, level, train=train) for level in psa]
            memory = normalize(get_activation(cfg.activation)(_dense(
                cfg, cfg.model_dim, "combine")(jnp.concatenate(contexts, axis=-1), train=train)))
        else:
            update = MemoryUpdate(cfg, name="memory_update")  # shared by the levels
            for level in psa:
                context = psa[level](memory, sentence, level, train=train)
                memory = normalize(update(memory, context, train=train)) * keep
        memory = memory * keep
        vector = Source2Token(activation=cfg.activation, keep_prob=cfg.keep_prob,
                              dropout_bits=cfg.dropout_bits,
                              dtype=cfg.compute_dtype, name="summarize")(
            memory, valid, train=train)  # eq. 5
        return encoder_outputs(tokens=memory, sentence=vector, memory=memory, memory_mask=valid)


SPEC = EncoderSpec(config=PSANConfig, module=PSAN, structure_spec=structure_spec)

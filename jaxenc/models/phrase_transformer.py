"""PhraseTransformer (ICLR 2020 submission "Attention over phrases").

Nodes of a sentence in bucket length L (hypernode layout: jaxenc.structures.hypernodes):
    [ L' word nodes | M hypernodes | [CLS] ]                                    N = L' + M + 1
L' = L, or L + 2 with `boundary_tokens` (<s> w_1 .. w_n </s>, BOS / EOS, as word nodes);
- word nodes: h^0 = Dropout(W_in e(w) + PE) (`jaxenc.layers.transformer.input_stage`);
- hypernodes (eq. 1): every n-gram of 2..k words (`hypernodes="ngram"`, static spans per bucket
  length) or one per dependency arc (`"dependency"`, eq. 8, the "semantic PhraseTransformer",
  from the `members` field); they start as zeros (Algorithm 1 line 2; `hypernode_init`);
- [CLS] (Fig. 2): a learned vector after the hypernodes (no token, no position), in phase 1 only.
Each layer (Algorithm 1, lines 4-5, with the Transformer's sublayer wrapping, `residual`):
    phase 1 (eq. 2-3): H <- LN(H + Drop(MultiHead(H)))       over all real node pairs
    phase 2 (eq. 5-7): G <- LN(G + Drop(MultiHead'(G, A)))   G = the word and hypernodes
    FFN:               H <- LN(H + Drop(FFN(H)))             (`feed_forward`)
with A the eq. 6 adjacency built on device (`jaxenc.layers.masks.HypernodeMask`), phase 2 dense
or sparse (`jaxenc.layers.phrase_attention`). Padding nodes are masked as keys and zeroed after
every layer; an empty row is all zeros, [CLS] included.
Outputs (B batch, L' word nodes, M hypernodes):
- `tokens` [B, L, d]: the words' states, aligned with the input tokens, zero past the length;
- `sentence` [B, d]: [CLS];
- `memory` / `memory_mask` for a seq2seq decoder (`decoder_memory`): "words" = Algorithm 1,
  line 6, H_k[:n]: [B, L', d], bool[B, L']; "nodes" = words and hypernodes [B, L' + M, d],
  bool[B, L' + M].
What the paper leaves open ([CLS], boundary tokens, the eq. 5 mask): docs/models.md.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxenc.data.vocab import BOS, EOS, PAD
from jaxenc.layers.attention import MultiHeadAttention, gather_rows
from jaxenc.layers.masks import HypernodeMask, length_mask, masked_mean
from jaxenc.layers.phrase_attention import PHRASE_MASKS, WithinPhraseAttention
from jaxenc.layers.transformer import FeedForward, input_stage
from jaxenc.models.config import AUTO, StructureNeeds, require
from jaxenc.models.registry import EncoderSpec, encoder_outputs
from jaxenc.models.transformer import TransformerSizes
from jaxenc.structures.hypernodes import ngram_neighbours, ngram_spans, spans_to_members

HYPERNODES = ("ngram", "dependency")
PHASE2 = (AUTO, "sparse", "dense")
HYPERNODE_INITS = ("zeros", "mean")
DECODER_MEMORIES = ("words", "nodes")


@dataclasses.dataclass(frozen=True)
class PhraseTransformerConfig(TransformerSizes):
    """The paper's POS tagger (d 300, 6 heads of 50, 2 layers); Multi30k uses d 512, 8 heads, 6
    layers (train/configs/phrase_transformer_multi30k.py).

    Attributes (besides the Transformer's sizes, jaxenc.models.transformer.TransformerSizes):
      hypernodes: "ngram" (eq. 1) or "dependency" (eq. 8, one hypernode per arc).
      k: the longest n-gram (eq. 1: j - i < k); the paper uses 2 and 3. n-gram hypernodes only.
      parser: where dependency trees come from ("gold" UD trees or "spacy", as the paper).
      nonlinear: the sigmoid of eq. 5; False = the paper's "linear PhraseTransformer".
      phrase_mask: "additive" (-inf outside A: attention stays within phrases, as the text says)
        or "hadamard" (eq. 5 literally: S ∘ A, non-adjacent nodes keep the score 0).
      phase2: "auto" (sparse for n-gram hypernodes with the additive mask, else dense; resolved
        when the encoder is built and recorded in config.json), "sparse" (gather over the
        static n-gram neighbour lists, O(k^2) per node) or "dense" (the masked [N, N] scores).
        Sparse needs n-gram hypernodes and the additive mask: a head word has one dependency
        hypernode per dependent (no fixed bound), and the literal Hadamard form weighs every
        node.
      hypernode_init: "zeros" (Algorithm 1: "pad m x d zeros") or "mean" of the members' h^0.
      residual: the Transformer's residual + LayerNorm around each sublayer (Algorithm 1 shows
        the bare attentions, which residual=False gives).
      feed_forward: a position-wise FFN sublayer after phase 2 (not in Algorithm 1).
      decoder_memory: what a seq2seq decoder attends (module docstring): "words" (Algorithm 1,
        line 6: H_k[:n], the word nodes) or "nodes" (the word nodes and the hypernodes).
      boundary_tokens: wrap the source in <s> ... </s> before the nodes are built, so n-gram
        hypernodes include the boundary tokens (Fig. 3). False: the words only (eq. 1).
    """

    BEFORE_OPTION = {**TransformerSizes.BEFORE_OPTION, "decoder_memory": "nodes"}

    hypernodes: str = "ngram"
    k: int = 2
    parser: str = "gold"
    nonlinear: bool = True
    phrase_mask: str = "additive"
    phase2: str = AUTO
    hypernode_init: str = "zeros"
    residual: bool = True
    feed_forward: bool = True
    decoder_memory: str = "words"
    boundary_tokens: bool = False

    def validate(self) -> None:
        for field, choices in (("hypernodes", HYPERNODES), ("phrase_mask", PHRASE_MASKS),
                               ("phase2", PHASE2), ("hypernode_init", HYPERNODE_INITS),
                               ("decoder_memory", DECODER_MEMORIES)):
            value = getattr(self, field)
            require(value in choices, field, value, f"is not one of {', '.join(choices)}",
                    choices[0])
        require(isinstance(self.k, int) and self.k >= 2, "k", self.k,
                "is not an n-gram length >= 2", 2)
        require(isinstance(self.boundary_tokens, bool), "boundary_tokens", self.boundary_tokens,
                "is not a bool", False)
        require(self.phase2 != "sparse" or self.hypernodes == "ngram", "phase2", self.phase2,
                "has no fixed neighbour list for dependency hypernodes (a head word has one "
                "per dependent)", "dense")
        require(self.phase2 != "sparse" or self.phrase_mask == "additive", "phase2",
                self.phase2, "cannot give phrase_mask='hadamard', which weighs every real node",
                "dense")
        require(self.layer_norm == "post", "layer_norm", self.layer_norm,
                "is not available for the PhraseTransformer's phases (post-norm only)", "post")
        super().validate()

    def resolved(self) -> PhraseTransformerConfig:
        """`phase2="auto"` resolved: sparse for n-gram hypernodes with the additive mask (the
        cheaper kernel), dense otherwise (the only one that computes the other forms)."""
        if self.phase2 != AUTO:
            return self
        sparse = self.hypernodes == "ngram" and self.phrase_mask == "additive"
        return dataclasses.replace(self, phase2="sparse" if sparse else "dense")


class PhraseTransformerLayer(nn.Module):
    """One layer (module docstring): nodes [B, N, D] -> [B, N, D], N = L' + M + 1 ([CLS] last)."""

    config: PhraseTransformerConfig

    @nn.compact
    def __call__(self, nodes: jax.Array, valid: jax.Array, phrases: HypernodeMask, *,
                 train: bool, neighbours: np.ndarray | None) -> jax.Array:
        """nodes [B, N, D]; valid bool[B, N]; phrases: eq. 6 over the first N - 1 nodes;
        neighbours int32[N - 1, D] for the sparse phase 2, else None."""
        cfg = self.config
        drop = nn.Dropout(cfg.dropout_rate, deterministic=not train)

        def sublayer(inputs: jax.Array, update: jax.Array, name: str) -> jax.Array:
            if not cfg.residual:
                return drop(update)
            return nn.LayerNorm(dtype=cfg.compute_dtype, name=name)(inputs + drop(update))

        pairs = valid[..., :, None] & valid[..., None, :]
        attended = MultiHeadAttention(cfg.num_heads, dropout_rate=cfg.attention_dropout_rate,
                                      implementation=cfg.attention, dtype=cfg.compute_dtype,
                                      name="attention")(
            nodes, nodes, pairs, train=train)  # phase 1, eq. 2-3
        nodes = sublayer(nodes, attended, "attention_norm")
        graph, cls = nodes[:, :-1], nodes[:, -1:]
        within = WithinPhraseAttention(
            cfg.num_heads, nonlinear=cfg.nonlinear, phrase_mask=cfg.phrase_mask,
            dropout_rate=cfg.attention_dropout_rate, dtype=cfg.compute_dtype,
            name="phrase_attention")(graph, phrases, train=train, neighbours=neighbours)
        nodes = jnp.concatenate([sublayer(graph, within, "phrase_norm"), cls], axis=1)
        if cfg.feed_forward:
            transformed = FeedForward(cfg.ff_dim, cfg.dropout_rate, cfg.compute_dtype,
                                      name="ffn")(nodes, train=train)
            nodes = sublayer(nodes, transformed, "ffn_norm")
        return nodes * valid[..., None].astype(nodes.dtype)


def wrap_boundaries(tokens: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
    """tokens int32[B, L], lengths int[B] -> (<s> w_1 .. w_n </s> int32[B, L + 2] PAD-padded,
    lengths + 2); an empty row (length 0) stays empty."""
    length = tokens.shape[1]
    wrapped_lengths = jnp.where(lengths > 0, lengths + 2, 0).astype(lengths.dtype)
    position = jnp.arange(length + 2)[None, :]
    words = jnp.pad(tokens, ((0, 0), (1, 1)))  # w_i at position i (1-based)
    wrapped = jnp.where(position == 0, BOS,
                        jnp.where(position == lengths[:, None] + 1, EOS, words))
    return (jnp.where(position < wrapped_lengths[:, None], wrapped, PAD).astype(tokens.dtype),
            wrapped_lengths)


class SourceNodes(NamedTuple):
    """The node layout of a batch (module docstring), before any state is computed.

    Attributes:
      tokens: int32[B, L'] the word nodes' token ids (<s> w_1 .. w_n </s> with boundary_tokens).
      lengths: int[B] the real word nodes (n + 2 with boundary_tokens, 0 for an empty row).
      phrases: eq. 6 over the L' word nodes and the M hypernodes (`valid()` marks real nodes).
      members: int32[(B,) M, K] each hypernode's word nodes (indices into `tokens`), -1 padded.
    """

    tokens: jax.Array
    lengths: jax.Array
    phrases: HypernodeMask
    members: jax.Array


def source_nodes(config: PhraseTransformerConfig, sentence: dict[str, jax.Array]) -> SourceNodes:
    """The word nodes and hypernodes of `sentence` {tokens int32[B, L], lengths int32[B],
    members int32[B, L, 2] for dependency hypernodes}: n-grams (eq. 1) of the word nodes, or one
    hypernode per arc (eq. 8); with boundary_tokens, over <s> w_1 .. w_n </s>."""
    tokens, lengths = sentence["tokens"], sentence["lengths"]
    if config.boundary_tokens:
        tokens, lengths = wrap_boundaries(tokens, lengths)
    length = tokens.shape[1]
    if config.hypernodes == "ngram":
        spans = ngram_spans(length, config.k)
        return SourceNodes(tokens, lengths,
                           HypernodeMask(lengths, length, spans=jnp.asarray(spans)),
                           jnp.asarray(spans_to_members(spans)))
    members = sentence["members"]
    if config.boundary_tokens:  # word i is node i + 1, after <s>
        members = jnp.where(members >= 0, members + 1, members)
    return SourceNodes(tokens, lengths, HypernodeMask(lengths, length, members=members), members)


class PhraseTransformer(nn.Module):
    """{tokens int32[B, L], lengths int32[B], members int32[B, L, 2] (dependency hypernodes)}
    -> {"tokens": [B, L, d], "sentence": [CLS] [B, d], "memory": [B, L', d] ("words") or
        [B, L' + M, d] ("nodes"), "memory_mask": bool[B, L'] or bool[B, L' + M]}, L' = L + 2
    with boundary_tokens, else L (module docstring; float32 outputs whatever the compute
    dtype)."""

    vocab_size: int
    config: PhraseTransformerConfig = PhraseTransformerConfig()

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        cfg = self.config.resolved()  # a config built directly may still say phase2="auto"
        batch, num_tokens = sentence["tokens"].shape
        first = 1 if cfg.boundary_tokens else 0  # the node of the first word
        tokens, lengths, phrases, members = source_nodes(cfg, sentence)
        length = tokens.shape[1]  # word nodes, L'
        words = input_stage(tokens, vocab_size=self.vocab_size, embed_dim=cfg.embed_dim,
                            model_dim=cfg.model_dim, dropout_rate=cfg.dropout_rate, train=train,
                            trainable_embeddings=not cfg.freeze_embeddings,
                            embedding_scale=cfg.embedding_scale, dtype=cfg.compute_dtype)
        if cfg.hypernode_init == "mean":
            hyper = masked_mean(gather_rows(words, members), members >= 0).astype(words.dtype)
        else:
            hyper = jnp.zeros((batch, members.shape[-2], cfg.model_dim), words.dtype)
        cls = self.param("cls", nn.initializers.normal(1.0), (cfg.model_dim,))
        nodes = jnp.concatenate(
            [words, hyper, jnp.broadcast_to(cls.astype(words.dtype), (batch, 1, cfg.model_dim))],
            axis=1)
        valid = jnp.concatenate([phrases.valid(), (lengths > 0)[:, None]], axis=1)  # [B, N]
        nodes = nodes * valid[..., None].astype(nodes.dtype)
        neighbours = ngram_neighbours(length, cfg.k) if cfg.phase2 == "sparse" else None
        for layer in range(cfg.num_layers):
            nodes = PhraseTransformerLayer(cfg, name=f"layer_{layer}")(
                nodes, valid, phrases, train=train, neighbours=neighbours)
        word_states = nodes[:, first:first + num_tokens]
        if cfg.boundary_tokens:  # </s> sits at the length: zero it with the padding
            word_states = word_states * length_mask(sentence["lengths"], num_tokens)[
                ..., None].astype(nodes.dtype)
        memory = length if cfg.decoder_memory == "words" else nodes.shape[1] - 1
        return encoder_outputs(tokens=word_states, sentence=nodes[:, -1],
                               memory=nodes[:, :memory], memory_mask=valid[:, :memory])


def structure_needs(config: PhraseTransformerConfig) -> StructureNeeds:
    """Dependency hypernodes read the `members` field; n-grams need nothing from the host."""
    return StructureNeeds(fields=("members",) if config.hypernodes == "dependency" else ())


SPEC = EncoderSpec(config=PhraseTransformerConfig, module=PhraseTransformer,
                   structure_spec=structure_needs)

"""Child-Sum Tree-LSTM over dependency trees (Tai et al. 2015, sec. 3.1), computed level by level.

Nodes use the [root]-prefixed layout of jaxenc.structures: node 0 is the [root] token, word i
(1-based) is node i, `heads[k]` is the head node of node k (-1 for node 0 and padding), and
C(j) = {k : heads[k] = j} are the children of node j. With x_j the embedding of node j's token:
    (2)  h~_j = sum_{k in C(j)} h_k
    (3)  i_j  = sigmoid(W^(i) x_j + U^(i) h~_j + b^(i))
    (4)  f_jk = sigmoid(W^(f) x_j + U^(f) h_k + b^(f))         one forget gate per child k
    (5)  o_j  = sigmoid(W^(o) x_j + U^(o) h~_j + b^(o))
    (6)  u_j  = tanh(W^(u) x_j + U^(u) h~_j + b^(u))
    (7)  c_j  = i_j ⊙ u_j + sum_{k in C(j)} f_jk ⊙ c_k
    (8)  h_j  = o_j ⊙ tanh(c_j)
A leaf has h~_j = 0 and c_j = i_j ⊙ u_j. The [root] node gets a state too (its only child is the
sentence's root word), so every real node has one. The sentence vector is h of the sentence's
root word (the node whose head is the [root] node), the root of the dependency tree as in Tai
et al.; the [root] node's own state is only in `tokens` / `memory`.

Level by level: depth(k) = the number of arcs from k up to the [root] node, computed on device
from `heads` by pointer doubling (exact for any depth; the `levels` field is clipped). Every
child of a node of depth d has depth d + 1, so updating depth D (the batch's deepest), then
D - 1, ..., 0 computes each node once, after all its children. One level is one batched update
of all [B, L] nodes, masked to that depth: two scatter-adds over `heads` (h~ and sum f ⊙ c) and
two matmuls; the x-projections W x + b of all nodes are computed once, before the loop. The loop
is a `lax.scan` over the static bound L (depth < L) whose step t handles depth D - t; steps past
depth 0 are skipped by `lax.cond`, so the work follows the batch's depth, not the bucket length.
The step is rematerialised (`jax.checkpoint`): the backward pass keeps only (h, c) per step.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxenc.data.vocab import ROOT
from jaxenc.layers.dense import Kernel
from jaxenc.layers.embed import WordEmbed
from jaxenc.layers.masks import length_mask
from jaxenc.models.config import EncoderConfig, StructureNeeds, require
from jaxenc.models.registry import EncoderSpec, encoder_outputs
from jaxenc.structures.arrays import PARSER_NAMES


@dataclasses.dataclass(frozen=True)
class TreeLSTMConfig(EncoderConfig):
    """Hyperparameters of the Child-Sum Tree-LSTM; defaults: Tai et al.'s SICK relatedness model
    (300-d GloVe words, EncoderConfig's embed_dim).

    Attributes (besides EncoderConfig's):
      memory_dim: size d of the cell and hidden states (150).
      parser: where the dependency trees come from (jaxenc.structures.arrays): spaCy by
        default, "gold" where the data has dependency trees.
    """

    memory_dim: int = 150
    parser: str = "spacy"

    def validate(self) -> None:
        require(isinstance(self.memory_dim, int) and self.memory_dim >= 1, "memory_dim",
                self.memory_dim, "is not a positive integer", 150)
        require(self.parser in PARSER_NAMES and self.parser != "benepar", "parser", self.parser,
                "gives no dependency trees", "spacy")
        super().validate()


def node_depths(heads: jax.Array, valid: jax.Array) -> jax.Array:
    """int32[B, L] depth of every node (arcs up to the node without a head), -1 where not valid.

    heads: int32[B, L] head node of each node, -1 for none; valid: bool[B, L]. Pointer doubling:
    after round r, `up` is each node's 2^r-th ancestor (-1 past the top) and `depth` its distance,
    so ceil(log2 L) rounds reach the top from any node.
    """
    up = heads
    depth = (heads >= 0).astype(jnp.int32)
    for _ in range(max(1, (heads.shape[1] - 1).bit_length())):
        has_up = up >= 0
        above = jnp.maximum(up, 0)
        depth = depth + jnp.where(has_up, jnp.take_along_axis(depth, above, axis=1), 0)
        up = jnp.where(has_up, jnp.take_along_axis(up, above, axis=1), -1)
    return jnp.where(valid, depth, -1)


def sum_into_heads(values: jax.Array, heads: jax.Array) -> jax.Array:
    """[B, L, D]: row j = the sum of values[k] over the nodes k with heads[k] = j (scatter-add).

    values: [B, L, D]; heads: int32[B, L], rows with head -1 are dropped. One scatter per row
    (vmapped: the batch is a batching dimension of the scatter), so a batch split over devices
    is scattered where it lies; indexing [rows, heads] made XLA all-reduce full [B, L, D] arrays
    at every level.
    """
    target = jnp.where(heads >= 0, heads, heads.shape[1])  # out of range: dropped
    return jax.vmap(lambda row, into: jnp.zeros_like(row).at[into].add(row, mode="drop"))(
        values, target)


def child_sum_levels(x_iou: jax.Array, x_f: jax.Array, u_iou: jax.Array, u_f: jax.Array,
                     heads: jax.Array, depth: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Eqs. (2)-(8) over whole batches of trees, one masked update per depth (module docstring).

    Args:
      x_iou: [B, L, 3d] W^(i,o,u) x_j + b^(i,o,u) of every node j.
      x_f: [B, L, d] W^(f) x_{heads[k]} + b^(f): the x part of node k's forget gate in its head.
      u_iou: [d, 3d] U^(i,o,u); u_f: [d, d] U^(f).
      heads: int32[B, L] head node of each node, -1 for none.
      depth: int32[B, L] `node_depths`, -1 for nodes to leave at zero (padding).
    Returns:
      (h, c): [B, L, d] hidden and cell states, zeros where depth is -1.
    """
    d = u_f.shape[0]
    length = heads.shape[1]
    deepest = jnp.max(depth)
    at_depth = depth[..., None]

    def update(level: jax.Array, state: tuple[jax.Array, jax.Array]):
        h, c = state
        iou = x_iou + sum_into_heads(h, heads) @ u_iou  # eqs. 3, 5, 6 with h~ of eq. 2
        forget = jax.nn.sigmoid(x_f + h @ u_f)  # eq. 4, stored at the child k
        c_new = (jax.nn.sigmoid(iou[..., :d]) * jnp.tanh(iou[..., 2 * d:])
                 + sum_into_heads(forget * c, heads))  # eq. 7
        h_new = jax.nn.sigmoid(iou[..., d:2 * d]) * jnp.tanh(c_new)  # eq. 8
        here = at_depth == level
        return jnp.where(here, h_new, h), jnp.where(here, c_new, c)

    @jax.checkpoint
    def step(state, t):
        level = deepest - t
        return jax.lax.cond(level >= 0, update, lambda _, s: s, level, state), None

    zeros = jnp.zeros(heads.shape + (d,), x_iou.dtype)
    (h, c), _ = jax.lax.scan(step, (zeros, zeros), jnp.arange(length))
    return h, c


class TreeLSTM(nn.Module):
    """Child-Sum Tree-LSTM encoder (eqs. 2-8).

    sentence {tokens int32[B, L] ([root] token first), lengths int32[B], heads int32[B, L]}
      -> {"tokens": h [B, L, d] node states, "sentence": h of the root word [B, d],
          "memory": h [B, L, d], "memory_mask": bool[B, L] real nodes}.
    Padding nodes and rows of length 0 are zeros.
    """

    vocab_size: int
    config: TreeLSTMConfig = TreeLSTMConfig()

    @nn.compact
    def __call__(self, sentence: dict[str, jax.Array], *, train: bool) -> dict[str, jax.Array]:
        del train  # nothing stochastic
        cfg = self.config
        dtype, d = cfg.compute_dtype, cfg.memory_dim
        tokens, heads = sentence["tokens"], sentence["heads"]
        valid = length_mask(sentence["lengths"], tokens.shape[1])
        x = WordEmbed(self.vocab_size, cfg.embed_dim, trainable=not cfg.freeze_embeddings,
                      name="embed")(tokens)
        x_iou = nn.Dense(3 * d, dtype=dtype, name="iou_x")(x)
        x_f = jnp.take_along_axis(nn.Dense(d, dtype=dtype, name="f_x")(x),
                                  jnp.maximum(heads, 0)[..., None], axis=1)
        u_iou = Kernel(d, 3 * d, name="iou_h")().astype(dtype)
        u_f = Kernel(d, d, name="f_h")().astype(dtype)
        h, _ = child_sum_levels(x_iou, x_f, u_iou, u_f, heads, node_depths(heads, valid))
        root_word = (heads == 0)[..., None]
        return encoder_outputs(tokens=h, sentence=jnp.sum(jnp.where(root_word, h, 0), axis=1),
                               memory=h, memory_mask=valid)


def _structures(config: TreeLSTMConfig) -> StructureNeeds:
    del config
    return StructureNeeds(fields=("heads",), prefix_tokens=(ROOT,))


SPEC = EncoderSpec(config=TreeLSTMConfig, module=TreeLSTM, structure_spec=_structures)

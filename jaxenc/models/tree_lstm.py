"""Child-Sum Tree-LSTM over dependency trees (Tai et al. 2015, sec. 3.1), by whole-batch sweeps.

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

Sweeps: one sweep F applies eqs. 2-8 at every node of the batch at once from its children's
current states (h~ and eq. 7's sum: one matmul with A[b, j, k] = [heads[b, k] = j]; padding
states zero). From zero states the s-th sweep makes exact every node whose subtree is less than
s levels deep, so deepest + 1 sweeps suffice (deepest: the batch's largest depth, by pointer
doubling in `node_depths`, exact where the `levels` field is clipped); the count is the
smallest of `sweep_counts(L)` (8, 16, 32, ..., then L) that suffices, one `lax.switch` over
loops of static length. Backward: the states are the fixed point S = F(S) and J = dF/dS is
nilpotent, so the cotangent sum_{m <= deepest} (J^T)^m S_bar takes as many sweeps of J^T; only
the final (h, c) and one sweep's residuals are kept, whatever the depth.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

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

State = tuple[jax.Array, jax.Array]  # (h, c) or their cotangents, [B, L, d] each


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


def sweep_counts(length: int) -> tuple[int, ...]:
    """The static sweep counts for trees of `length` nodes: 8, 16, 32, ... below `length`, then
    `length` (a tree of L nodes is at most L - 1 deep). Doubling keeps the wasted sweeps under
    half past 8 and the compiled loops few (log2(L / 8) + 1); real trees, 10-15 deep, take 16."""
    return (*(2 ** k for k in range(3, length.bit_length()) if 2 ** k < length), length)


def _sweep(x_iou: jax.Array, x_f: jax.Array, u_iou: jax.Array, u_f: jax.Array,
           children: jax.Array, valid: jax.Array, h: jax.Array, c: jax.Array) -> State:
    """One sweep F: eqs. 2-8 at every node from its children's (h, c), zeros where not valid."""
    d = u_f.shape[0]
    forget = jax.nn.sigmoid(x_f + h @ u_f)  # eq. 4, stored at the child k
    sums = children @ jnp.concatenate([h, forget * c], axis=-1)  # eq. 2 | eq. 7's sum
    iou = x_iou + sums[..., :d] @ u_iou  # eqs. 3, 5, 6
    c_new = jax.nn.sigmoid(iou[..., :d]) * jnp.tanh(iou[..., 2 * d:]) + sums[..., d:]  # eq. 7
    h_new = jax.nn.sigmoid(iou[..., d:2 * d]) * jnp.tanh(c_new)  # eq. 8
    return jnp.where(valid, h_new, 0), jnp.where(valid, c_new, 0)


def _repeat(body: Callable[[State], State], init: State, depth: jax.Array) -> State:
    """`body` applied to `init` deepest + 1 times or more (module docstring): one `lax.switch`
    over loops of the static `sweep_counts`."""
    counts = sweep_counts(depth.shape[1])
    index = jnp.sum(jnp.asarray(counts) < jnp.max(depth) + 1)  # the first count >= deepest + 1
    return jax.lax.switch(index, [
        functools.partial(jax.lax.fori_loop, 0, n, lambda _, state: body(state)) for n in counts],
        init)


@jax.custom_vjp
def _tree_states(x_iou: jax.Array, x_f: jax.Array, u_iou: jax.Array, u_f: jax.Array,
                 children: jax.Array, depth: jax.Array) -> State:
    """(h, c) [B, L, d]: sweeps of `_sweep` from zero states; children: A [B, L, L]."""
    valid = depth[..., None] >= 0
    zeros = jnp.zeros(x_iou.shape[:-1] + u_f.shape[:1], x_iou.dtype)
    return _repeat(lambda state: _sweep(x_iou, x_f, u_iou, u_f, children, valid, *state),
                   (zeros, zeros), depth)


def _tree_states_fwd(x_iou, x_f, u_iou, u_f, children, depth):
    states = _tree_states(x_iou, x_f, u_iou, u_f, children, depth)
    return states, (x_iou, x_f, u_iou, u_f, children, depth, states)


def _tree_states_bwd(residuals, states_bar: State):
    """Cotangents of x_iou, x_f, u_iou, u_f from the fixed point (module docstring)."""
    *weights, children, depth, states = residuals
    valid = depth[..., None] >= 0
    _, pullback = jax.vjp(lambda *args: _sweep(*args[:4], children, valid, *args[4:]),
                          *weights, *states)
    cotangent = _repeat(lambda bar: jax.tree.map(jnp.add, states_bar, pullback(bar)[4:]),
                        states_bar, depth)
    return (*pullback(cotangent)[:4], None, None)


_tree_states.defvjp(_tree_states_fwd, _tree_states_bwd)


def child_sum_levels(x_iou: jax.Array, x_f: jax.Array, u_iou: jax.Array, u_f: jax.Array,
                     heads: jax.Array, depth: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Eqs. (2)-(8) over whole batches of trees by sweeps (module docstring).

    Args:
      x_iou: [B, L, 3d] W^(i,o,u) x_j + b^(i,o,u) of every node j.
      x_f: [B, L, d] W^(f) x_{heads[k]} + b^(f): the x part of node k's forget gate in its head.
      u_iou: [d, 3d] U^(i,o,u); u_f: [d, d] U^(f).
      heads: int32[B, L] head node of each node, -1 for none.
      depth: int32[B, L] `node_depths`, -1 for nodes to leave at zero (padding).
    Returns:
      (h, c): [B, L, d] hidden and cell states, zeros where depth is -1.
    """
    nodes = jnp.arange(heads.shape[1])
    children = (heads[:, None, :] == nodes[:, None]).astype(x_iou.dtype)  # A[b, j, k]
    return _tree_states(x_iou, x_f, u_iou, u_f, children, depth)


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

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

Sweeps: one sweep applies eqs. 2-8 at every node of the batch at once from its children's
current states. It carries the children sums S = [h~ U^(i,o,u) | eq. 7's sum] [B, L, 4d]: from
S, eqs. 3, 5-8 give every node's (h, c) elementwise, and the next S is one matmul of the
children matrix A[b, j, k] = [heads[b, k] = j] with the children's [h U^(i,o,u) | f ⊙ c]
(h~ U = A h U), so a sweep is two matmuls. S = 0 makes every leaf exact (it is the first sweep
from zero states) and each sweep makes exact the nodes one level higher, so `deepest` sweeps
suffice (deepest: the batch's largest depth, by pointer doubling in `node_depths`, exact where
the `levels` field is clipped); the count is the smallest of `sweep_counts(L)` (8, 16, 32, ...,
then L) that suffices, one `lax.switch` over loops of static length. Backward: S is the fixed
point S = G(S) and J = dG/dS is nilpotent, so the cotangent sum_{m <= deepest} (J^T)^m S_bar
takes as many sweeps of J^T; only the final S and one sweep's residuals are kept, whatever the
depth.
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

State = tuple[jax.Array, jax.Array]  # (h, c), [B, L, d] each


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


def _states(x_iou: jax.Array, sums: jax.Array) -> State:
    """(h, c) [B, L, d] of eqs. 3, 5-8 from the children sums S [B, L, 4d]."""
    d = sums.shape[-1] // 4
    iou = x_iou + sums[..., :3 * d]  # eqs. 3, 5, 6
    c = jax.nn.sigmoid(iou[..., :d]) * jnp.tanh(iou[..., 2 * d:]) + sums[..., 3 * d:]  # eq. 7
    return jax.nn.sigmoid(iou[..., d:2 * d]) * jnp.tanh(c), c  # eq. 8


def _sweep(x_iou: jax.Array, x_f: jax.Array, u: jax.Array, children: jax.Array,
           sums: jax.Array) -> jax.Array:
    """One sweep G: the children sums of every node from its children's states (eqs. 2, 4, 7).

    u: [d, 4d] U^(i,o,u) | U^(f); children: A [B, L, L]; sums: S [B, L, 4d]."""
    d = x_f.shape[-1]
    h, c = _states(x_iou, sums)
    hu = h @ u
    forget = jax.nn.sigmoid(x_f + hu[..., 3 * d:])  # eq. 4, stored at the child k
    return children @ jnp.concatenate([hu[..., :3 * d], forget * c], axis=-1)


def _repeat(body: Callable[[jax.Array], jax.Array], init: jax.Array,
            depth: jax.Array) -> jax.Array:
    """`body` applied to `init` deepest times or more (module docstring): one `lax.switch` over
    loops of the static `sweep_counts`."""
    counts = sweep_counts(depth.shape[1])
    index = jnp.sum(jnp.asarray(counts) < jnp.max(depth))  # the first count >= deepest
    return jax.lax.switch(index, [
        functools.partial(jax.lax.fori_loop, 0, n, lambda _, sums: body(sums)) for n in counts],
        init)


@jax.custom_vjp
def _children_sums(x_iou: jax.Array, x_f: jax.Array, u: jax.Array, children: jax.Array,
                   depth: jax.Array) -> jax.Array:
    """S [B, L, 4d] at the fixed point: sweeps of `_sweep` from S = 0."""
    zeros = jnp.zeros(x_iou.shape[:-1] + u.shape[-1:], x_iou.dtype)
    return _repeat(lambda sums: _sweep(x_iou, x_f, u, children, sums), zeros, depth)


def _children_sums_fwd(x_iou, x_f, u, children, depth):
    sums = _children_sums(x_iou, x_f, u, children, depth)
    return sums, (x_iou, x_f, u, children, depth, sums)


def _children_sums_bwd(residuals, sums_bar: jax.Array):
    """Cotangents of x_iou, x_f and u from the fixed point (module docstring)."""
    x_iou, x_f, u, children, depth, sums = residuals
    _, pullback = jax.vjp(lambda *args: _sweep(*args[:3], children, args[3]), x_iou, x_f, u, sums)
    cotangent = _repeat(lambda bar: sums_bar + pullback(bar)[3], sums_bar, depth)
    return (*pullback(cotangent)[:3], None, None)


_children_sums.defvjp(_children_sums_fwd, _children_sums_bwd)


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
    valid = depth >= 0
    nodes = jnp.arange(heads.shape[1])
    children = ((heads[:, None, :] == nodes[:, None])  # A[b, j, k]
                & valid[:, None, :]).astype(x_iou.dtype)
    sums = _children_sums(x_iou, x_f, jnp.concatenate([u_iou, u_f], axis=1), children, depth)
    return tuple(jnp.where(valid[..., None], state, 0) for state in _states(x_iou, sums))


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

"""Pictures for people: attention maps (one map, or one per head), PSAN phrase divisions,
Dependency-Transformer relation matrices, sentence-vector similarities, training curves, and what
to draw them from: DiSAN's token2token attention probabilities, and every attention map (and the
Dependency-Transformer's relation score bias) an encoder computes for a sentence.

The plots use matplotlib's object-oriented API (`matplotlib.figure.Figure`, no pyplot): they work
under any backend, headless (Agg) included, leave pyplot's global state alone, and are shown by
Jupyter as the value of a cell. Each returns its Figure and, given `path`, also writes a PNG.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from jaxenc.data.vocab import BOS, EOS, SPECIAL_TOKENS
from jaxenc.errors import DataError
from jaxenc.layers.masks import length_mask
from jaxenc.layers.relation_bias import GatedRelationBias
from jaxenc.models.disan import DiSAN
from jaxenc.training import run_report

DISAN_DIRECTIONS = ("forward", "backward")
_DPI = 100
PHRASE_COLOURS = matplotlib.colormaps["tab10"].colors  # phrase p gets colour p mod 10


def _save(figure: Figure, path: str | os.PathLike | None) -> Figure:
    """Writes `figure` as a PNG at `path` (when given) and returns it."""
    if path is not None:
        figure.savefig(path, dpi=_DPI)
    return figure


def _set_token_ticks(axis: Any, which: str, tokens: Sequence[str]) -> None:
    """One tick per token on the "x" or "y" axis of `axis`, labelled with the token."""
    positions = np.arange(len(tokens))
    if which == "x":
        axis.set_xticks(positions, labels=list(tokens), rotation=90)
    else:
        axis.set_yticks(positions, labels=list(tokens))


# ----------------------------------------------------------------------------- attention


def disan_token2token_probs(encoder: DiSAN, params: Mapping[str, Any],
                            tokens: np.ndarray | jax.Array,
                            length: int | None = None) -> dict[str, jax.Array]:
    """DiSAN's token2token attention probabilities for one sentence, averaged over features.

    Runs `encoder` (deterministic, train=False) once with the "intermediates" collection
    mutable and reads the probabilities each direction's attention sows (DiSAN eq. 15-18:
    P^j_i = softmax_i(c tanh((q_j + k_i + b) / c) + M_ji), per feature, then averaged). Queries
    past `length` get no weight: the model zeroes their outputs (eq. 20).

    Args:
      encoder: a DiSAN module (e.g. from `jaxenc.training.checkpointing.load_trained_encoder`).
      params: its parameters (the `params` collection, without the {"params": ...} wrapper).
      tokens: int32[L] token ids of the sentence (PAD=0 after its `length` tokens).
      length: the number of real tokens (default: L).

    Returns:
      {"forward": float32[L, L], "backward": float32[L, L]}: row j (query) holds the mean over
      features of P^j_i for every key i. A row with a valid key sums to 1 over the keys; a row
      without one (the first token forward, the last backward, padding) is all zeros.
    """
    tokens = jnp.asarray(tokens, jnp.int32)
    num_tokens = tokens.shape[0]
    lengths = jnp.asarray([num_tokens if length is None else length], jnp.int32)
    _, state = encoder.apply({"params": params}, {"tokens": tokens[None], "lengths": lengths},
                             train=False, mutable=["intermediates"])
    real_queries = length_mask(lengths, num_tokens)[0][:, None]
    return {direction: jnp.where(real_queries,
                                 state["intermediates"][direction]["attention"][
                                     "attention_weights"][0][0], 0.0)
            for direction in DISAN_DIRECTIONS}


def plot_attention(tokens: Sequence[str], weights: np.ndarray | jax.Array, title: str = "",
                   path: str | os.PathLike | None = None) -> Figure:
    """A heat map of attention weights: row j = query token j, column i = key token i.

    Args:
      tokens: the n tokens (tick labels of both axes).
      weights: float[n, n], or float[n, n, d] (multi-dimensional attention), averaged over d.
      title: the figure's title.
      path: where to write a PNG, if anywhere.

    Returns:
      The figure: one heat map axis (its image holds the [n, n] weights) and a colour bar axis.
    """
    weights = np.asarray(weights, np.float32)
    if weights.ndim == 3:
        weights = weights.mean(axis=-1)
    if weights.shape != (len(tokens), len(tokens)):
        raise DataError(f"attention weights of shape {weights.shape} do not match "
                        f"{len(tokens)} tokens", fix="pass float[n, n] or [n, n, d] weights")
    size = 2.0 + 0.35 * len(tokens)
    figure = Figure(figsize=(size + 1.0, size), layout="constrained")
    axis = figure.add_subplot()
    image = axis.imshow(weights, cmap="viridis", vmin=0.0, interpolation="nearest")
    _set_token_ticks(axis, "x", tokens)
    _set_token_ticks(axis, "y", tokens)
    axis.set(xlabel="key", ylabel="query", title=title)
    figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    return _save(figure, path)


# Dense variants of the implementation options whose attention weights are not over all [n, n]
# pairs (same parameters, same outputs): PSAN's packed phrases, PhraseTransformer's sparse
# neighbour lists.
_DENSE_PATHS = {"psan": {"psa_impl": "dense"}, "phrase_transformer": {"phase2": "dense"}}


def _picture_module(model_config: Mapping[str, Any], vocab_size: int) -> Any:
    """The encoder module of `model_config` with its dense attention paths (_DENSE_PATHS)."""
    from jaxenc.models.registry import build_encoder

    config = {**model_config, **_DENSE_PATHS.get(model_config["name"], {})}
    return build_encoder(config, vocab_size)


def _captured(module: Any, method_name: str) -> bool:
    """What `capture_intermediates` keeps: the Dependency-Transformer's relation score bias."""
    return isinstance(module, GatedRelationBias) and method_name == "__call__"


def attention_maps(encoder: Any, sentence: Any) -> dict[str, np.ndarray]:
    """Every attention map an encoder computes for one sentence, by the module that made it.

    Runs the encoder (deterministic, train=False) on the sentence at its natural length with the
    "intermediates" collection mutable: the shared attention core (jaxenc.layers.attention) and
    the multi-dimensional token2token attention (jaxenc.layers.multidim_attention) sow their
    weights there; the Dependency-Transformer's gated relation score bias (eq. 3-4, added to the
    attention scores) is captured from its `GatedRelationBias` modules. PSAN and PhraseTransformer
    run their dense attention paths (same parameters and outputs), so every map covers all node
    pairs.

    Args:
      encoder: a `jaxenc.encoding.Encoder` (`jaxenc.load(EXPORT)`, `Encoder.from_workdir(RUN)`,
        `Encoder.initialised(...)`).
      sentence: a string, a token list or a `jaxenc.records.Sentence`.

    Returns:
      module path -> weights, e.g. "forward/attention" (DiSAN) or "psa_1/attention" (PSAN):
      float32[n, n] (feature-averaged multi-dimensional attention); "layer_0/self_attention"
      (Dependency-Transformer), "layer_0/attention" (PhraseTransformer phase 1, all nodes) or
      "layer_0/phrase_attention/attention" (phase 2, words and hypernodes): float32[H, q, k];
      "relation_bias_0": float32[H, n, n] scores. Row = query node, column = key node, in the
      order of `node_labels`. A module that ran twice gets "#0", "#1" suffixes.
    """
    (fields,) = encoder.features([sentence])
    if fields is None:
        raise DataError("the sentence has no tokens to attend", fix="pass a non-empty sentence")
    if "blocks" in fields and "segments" not in fields:  # PSAN packed: the dense path's ids
        fields = {**fields, "segments": _segments_of_blocks(fields["blocks"],
                                                            len(fields["tokens"]))}
        del fields["blocks"]
    table = encoder.params["embed"]["embedding"]
    module = _picture_module(encoder.model_config, int(table.shape[0]))
    batch = {key: jnp.asarray(value)[None] for key, value in fields.items()}
    batch["lengths"] = jnp.asarray([len(fields["tokens"])], jnp.int32)
    _, state = jax.jit(functools.partial(
        module.apply, train=False, mutable=["intermediates"], capture_intermediates=_captured))(
        {"params": encoder.params}, batch)
    maps = {}
    for path, values in _sown(state["intermediates"]):
        for index, value in enumerate(values):
            suffix = f"#{index}" if len(values) > 1 else ""
            maps[path + suffix] = np.asarray(value[0], np.float32)
    return maps


def _segments_of_blocks(blocks: np.ndarray, length: int) -> np.ndarray:
    """PSAN's int32[T, n] phrase ids from its int32[T, P, 2] (start, length) phrase lists."""
    segments = np.full((blocks.shape[0], length), -1, np.int32)
    for level, phrases in enumerate(np.asarray(blocks)):
        for phrase, (start, size) in enumerate(phrases):
            if size > 0:
                segments[level, start:start + size] = phrase
    return segments


def _sown(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, tuple]]:
    """(module path, sown values) of every "attention_weights" / captured "__call__" entry."""
    found = []
    for key, value in tree.items():
        if key in ("attention_weights", "__call__"):
            found.append((prefix.rstrip("/"), tuple(value)))
        elif isinstance(value, Mapping):
            found.extend(_sown(value, f"{prefix}{key}/"))
    return found


def node_labels(encoder: Any, sentence: Any) -> list[str]:
    """The labels of the nodes `attention_maps` orders its rows and columns by: the prefix tokens
    (the Dependency-Transformer's "[root]"), the words and, for PhraseTransformer, its hypernodes
    (their words joined by spaces) then "[cls]" (phase 2 maps leave [cls] out: the labels but the
    last). A word dropped by the vocabulary (data.oov="drop") is not a node."""
    from jaxenc.structures.hypernodes import ngram_spans, spans_to_members

    (item,) = encoder.sentences([sentence])
    (fields,) = encoder.features([item])
    if fields is None:
        return []
    prefix = [SPECIAL_TOKENS[token] for token in encoder.prefix_tokens]
    words = list(item.tokens)
    if len(fields["tokens"]) != len(prefix) + len(words):  # words dropped: the kept ones' ids
        words = encoder.vocab.decode(fields["tokens"][len(prefix):])
    labels = prefix + words
    config = encoder.model_config
    if config["name"] == "phrase_transformer":
        members = fields.get("members")
        if config.get("boundary_tokens"):  # the model wraps the words in <s> ... </s>
            labels = [SPECIAL_TOKENS[BOS], *labels, SPECIAL_TOKENS[EOS]]
            if members is not None:  # dependency hypernodes: word i is node i + 1
                members = np.where(np.asarray(members) >= 0, np.asarray(members) + 1, -1)
        if members is None:  # n-gram hypernodes: a function of the length
            members = spans_to_members(ngram_spans(len(labels), config["k"]))
        labels += [" ".join(labels[m] for m in row if m >= 0) for row in np.asarray(members)]
        labels.append(SPECIAL_TOKENS[3])  # [cls]
    return labels


def plot_heads(tokens: Sequence[str], weights: np.ndarray | jax.Array,
               key_tokens: Sequence[str] | None = None, title: str = "", centered: bool = False,
               columns: int = 4, titles: Sequence[str] | None = None,
               path: str | os.PathLike | None = None) -> Figure:
    """One heat map per attention head, on one colour scale: row = query, column = key.

    Args:
      tokens: the q query labels (y ticks).
      weights: float[H, q, k] (or float[q, k]: one head).
      key_tokens: the k key labels (x ticks); default: `tokens` (square maps).
      title: the figure's title.
      centered: a diverging colour scale symmetric around 0 (scores that may be negative, e.g.
        relation score biases), else from 0 (attention weights) to the largest value.
      columns: maps per row.
      titles: the H maps' titles (default "head h"), e.g. PSAN's levels stacked as heads.
      path: where to write a PNG, if anywhere.

    Returns:
      The figure: H heat map axes (axis h's image holds weights[h]) and one colour bar axis.
    """
    weights = np.asarray(weights, np.float32)
    if weights.ndim == 2:
        weights = weights[None]
    key_tokens = list(tokens if key_tokens is None else key_tokens)
    if weights.ndim != 3 or weights.shape[1:] != (len(tokens), len(key_tokens)):
        raise DataError(f"head weights of shape {weights.shape} do not match {len(tokens)} "
                        f"query and {len(key_tokens)} key tokens",
                        fix="pass float[H, q, k] weights")
    heads = weights.shape[0]
    titles = [f"head {head}" for head in range(heads)] if titles is None else list(titles)
    if len(titles) != heads:
        raise DataError(f"{len(titles)} titles for {heads} maps", fix="pass one title per map")
    columns = min(columns, heads)
    rows = -(-heads // columns)
    width, height = 1.5 + 0.3 * len(key_tokens), 1.5 + 0.3 * len(tokens)
    figure = Figure(figsize=(columns * width + 1.0, rows * height + 0.5), layout="constrained")
    if centered:
        bound = float(np.abs(weights).max()) or 1.0
        limits, cmap = (-bound, bound), "RdBu_r"
    else:
        limits, cmap = (0.0, float(weights.max()) or 1.0), "viridis"
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for head, axis in enumerate(axes):
        if head >= heads:
            figure.delaxes(axis)
            continue
        image = axis.imshow(weights[head], cmap=cmap, vmin=limits[0], vmax=limits[1],
                            interpolation="nearest")
        _set_token_ticks(axis, "x", key_tokens)
        _set_token_ticks(axis, "y", tokens)
        axis.set(title=titles[head], xlabel="key", ylabel="query")
    figure.colorbar(image, ax=list(axes[:heads]), fraction=0.046, pad=0.04)
    if title:
        figure.suptitle(title)
    return _save(figure, path)


# ----------------------------------------------------------------------------- phrases


def plot_phrase_division(tokens: Sequence[str], segments: np.ndarray,
                         title: str = "PSAN phrase division",
                         path: str | os.PathLike | None = None) -> Figure:
    """PSAN's phrase division: one row per level, one coloured span per phrase.

    Args:
      tokens: the n tokens (x tick labels).
      segments: int32[T, n], the phrase id of every token per level
        (`jaxenc.structures.psan.segments`); ids of -1 (padding) are not drawn.
      title: the figure's title.
      path: where to write a PNG, if anywhere.

    Returns:
      The figure: one axis with one Rectangle patch per phrase of every level (level 1 on top).
    """
    segments = np.asarray(segments)
    if segments.ndim != 2 or segments.shape[1] != len(tokens):
        raise DataError(f"segments of shape {segments.shape} do not match {len(tokens)} tokens",
                        fix="pass the int[T, n] array of jaxenc.structures.psan.segments")
    num_levels = segments.shape[0]
    figure = Figure(figsize=(2.0 + 0.45 * len(tokens), 1.2 + 0.6 * num_levels),
                    layout="constrained")
    axis = figure.add_subplot()
    for level, row in enumerate(segments):
        for phrase in np.unique(row[row >= 0]):
            positions = np.flatnonzero(row == phrase)
            start, width = positions[0], positions[-1] + 1 - positions[0]
            axis.add_patch(Rectangle((start - 0.5, level - 0.4), width, 0.8,
                                     facecolor=PHRASE_COLOURS[phrase % len(PHRASE_COLOURS)],
                                     alpha=0.6, edgecolor="black"))
    axis.set_xlim(-0.5, len(tokens) - 0.5)
    axis.set_ylim(num_levels - 0.5, -0.5)
    _set_token_ticks(axis, "x", tokens)
    axis.set_yticks(np.arange(num_levels), labels=[f"level {t + 1}" for t in range(num_levels)])
    axis.set_title(title)
    return _save(figure, path)


# ----------------------------------------------------------------------------- relations


def plot_relations(tokens: Sequence[str], relations: np.ndarray,
                   names: Sequence[str] | None = None,
                   title: str = "Dependency-Transformer relations",
                   path: str | os.PathLike | None = None) -> Figure:
    """The Dependency-Transformer's relation matrix: cell (i, j) = the relation id of node i
    attending to node j (`jaxenc.structures.relations`), one colour per id, NONE (0) and
    padding (-1) left blank.

    Args:
      tokens: the n node labels ("[root]" first, as the featurizer lays the nodes out).
      relations: int[n, n] relation ids (a featurized sentence's `relations`).
      names: the relation vocabulary's `names` (id -> name); given, each non-blank cell is
        written with its name.
      title: the figure's title.
      path: where to write a PNG, if anywhere.

    Returns:
      The figure: one axis whose image holds the ids (masked where NONE or padding) and, with
      `names`, one text per non-blank cell.
    """
    relations = np.asarray(relations)
    if relations.shape != (len(tokens), len(tokens)):
        raise DataError(f"relations of shape {relations.shape} do not match {len(tokens)} "
                        "tokens", fix="pass the int[n, n] relation ids of one sentence")
    blank = relations <= 0
    size = 2.0 + 0.5 * len(tokens)
    figure = Figure(figsize=(size, size), layout="constrained")
    axis = figure.add_subplot()
    colours = matplotlib.colormaps["tab20"].resampled(max(int(relations.max()) + 1, 2))
    axis.imshow(np.ma.masked_array(relations, blank), cmap=colours, vmin=0,
                vmax=max(int(relations.max()), 1), interpolation="nearest")
    if names is not None:
        for i, j in zip(*np.nonzero(~blank), strict=True):
            axis.text(j, i, names[relations[i, j]], ha="center", va="center", fontsize=6)
    _set_token_ticks(axis, "x", tokens)
    _set_token_ticks(axis, "y", tokens)
    axis.set(xlabel="key node", ylabel="query node", title=title)
    return _save(figure, path)


# ----------------------------------------------------------------------------- similarity


def cosine_similarities(vectors: np.ndarray | jax.Array) -> np.ndarray:
    """float32[N, N] cosine similarities of the rows of `vectors` float[N, D]; a zero vector's
    similarity to every vector is 0."""
    vectors = np.asarray(vectors, np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return (unit @ unit.T).astype(np.float32)


def plot_similarity(labels: Sequence[str], vectors: np.ndarray | jax.Array,
                    title: str = "cosine similarity of the sentence vectors",
                    path: str | os.PathLike | None = None) -> Figure:
    """A heat map of the cosine similarities of N sentence vectors, each cell written with its
    value: row i is labelled "i: labels[i]", column i "i".

    Args:
      labels: the N sentences (or any names of the vectors).
      vectors: float[N, D], e.g. `Encoder.encode(labels)`.
      title: the figure's title.
      path: where to write a PNG, if anywhere.

    Returns:
      The figure: one heat map axis (its image holds `cosine_similarities(vectors)`, scale
      -1..1, and N * N texts) and a colour bar axis.
    """
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or vectors.shape[0] != len(labels):
        raise DataError(f"vectors of shape {vectors.shape} do not match {len(labels)} labels",
                        fix="pass float[N, D] vectors, one row per label")
    similarity = cosine_similarities(vectors)
    count = len(labels)
    longest = max(map(len, labels), default=0)
    figure = Figure(figsize=(2.0 + 0.6 * count + 0.07 * longest, 1.5 + 0.6 * count),
                    layout="constrained")
    axis = figure.add_subplot()
    image = axis.imshow(similarity, cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
    for i in range(count):
        for j in range(count):
            axis.text(j, i, f"{similarity[i, j]:.2f}", ha="center", va="center", fontsize=8,
                      color="white" if abs(similarity[i, j]) > 0.6 else "black")
    positions = np.arange(count)
    axis.set_xticks(positions, labels=[str(i) for i in positions])
    axis.set_yticks(positions, labels=[f"{i}: {label}" for i, label in enumerate(labels)])
    axis.set_title(title)
    figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04)
    return _save(figure, path)


# ----------------------------------------------------------------------------- curves


def plot_curves(metrics_path: str | os.PathLike, metric: str | None = None,
                path: str | os.PathLike | None = None) -> Figure:
    """The curves of one run from its metrics.jsonl (`jaxenc.training.run_report.MetricsLog`).

    Args:
      metrics_path: a run's metrics.jsonl (resumed runs: the last record of each step counts).
      metric: the dev metric to plot; default: the first one in the dev records besides "loss"
        (classification: "accuracy").
      path: where to write a PNG, if anywhere.
    """
    metrics_path = Path(metrics_path)
    records = run_report.read_metrics(metrics_path)
    dev = [r for r in records if r["split"] == "dev"]
    if not dev:
        raise DataError("no dev records to plot", path=metrics_path,
                        fix="train until at least one evaluation has run")
    if metric is None:
        metric = next(key for key in dev[0] if key not in ("step", "split", "loss"))
    return _save(run_report.curves_figure({metrics_path.parent.name: records}, metric), path)

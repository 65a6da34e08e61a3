"""Pictures for people: attention maps, PSAN phrase divisions, training curves, and DiSAN's
token2token attention probabilities to draw them from.

The plots use matplotlib's object-oriented API (`matplotlib.figure.Figure`, no pyplot): they work
under any backend, headless (Agg) included, leave pyplot's global state alone, and are shown by
Jupyter as the value of a cell. Each returns its Figure and, given `path`, also writes a PNG.
"""

from __future__ import annotations

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

from jaxenc.errors import DataError
from jaxenc.layers.masks import length_mask
from jaxenc.models.disan import DiSAN
from jaxenc.training import report

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


# ----------------------------------------------------------------------------- curves


def plot_curves(metrics_path: str | os.PathLike, metric: str | None = None,
                path: str | os.PathLike | None = None) -> Figure:
    """The curves of one run from its metrics.jsonl (`jaxenc.training.report.MetricsLog`).

    Args:
      metrics_path: a run's metrics.jsonl (resumed runs: the last record of each step counts).
      metric: the dev metric to plot; default: the first one in the dev records besides "loss"
        (classification: "accuracy").
      path: where to write a PNG, if anywhere.
    """
    metrics_path = Path(metrics_path)
    records = report.read_metrics(metrics_path)
    dev = [r for r in records if r["split"] == "dev"]
    if not dev:
        raise DataError("no dev records to plot", path=metrics_path,
                        fix="train until at least one evaluation has run")
    if metric is None:
        metric = next(key for key in dev[0] if key not in ("step", "split", "loss"))
    return _save(report.curves_figure({metrics_path.parent.name: records}, metric), path)

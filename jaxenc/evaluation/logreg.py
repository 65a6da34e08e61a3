"""Logistic regression on frozen sentence vectors, and SentEval's three ways of choosing its L2.

The classifier is multinomial logistic regression on standardised features, fitted full-batch with
L-BFGS (optax's direction, a batched backtracking line search) until the gradient norm is below
GRAD_TOL or MAX_STEPS steps. A whole grid of fits (folds x L2 strengths) is one jitted call that
advances all fits together: every fit sees all N rows and a 0/1 mask saying which rows it trains
on, so every fold has the same shape and the function compiles once per (N, D, folds) shape.
(Vmapping a per-fit optax.lbfgs instead batches its while loops and conds into selects, slower
on a CPU than the fits one after another.)

Objective of one fit, on the rows with mask 1 (mean / scale are those rows' statistics):
    mean_i CE(softmax(W^T (x_i - mean) / scale + b), y_i) + l2 / 2 * ||W||^2     (b not penalised)
This is the coupled weight decay l2 of SentEval's PyTorch classifier (a C-column linear layer) and
scikit-learn's LogisticRegression(C) with C = 1 / (l2 * n_train) (C = 2 / (l2 * n_train) for two
classes, where sklearn keeps one column). The grid is SentEval's 10^-5 .. 10^-1.

Protocols (all deterministic for a seed, accuracies in percent):
- `nested_cross_validation`: MR, CR, SUBJ, MPQA (outer stratified k folds test, inner k folds on
  each outer training part choose L2).
- `cross_validate_then_test`: TREC, MRPC (k folds on train choose L2, refit on train, test once).
- `select_on_dev`: SST-2, SST-5, SICK-E (fit on train, L2 chosen on dev, test once).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxenc.evaluation.folds import held_out_masks, stratified_fold_ids

L2_GRID = tuple(10.0**exponent for exponent in range(-5, 0))
SEED = 1111
MAX_STEPS = 100
GRAD_TOL = 1e-4
MIN_STEP = 2.0**-10  # smallest backtracking step tried


class LinearClassifier(NamedTuple):
    """Parameters of one fit (or a grid of fits, with leading axes on every field).

    weights: float32[..., D, C] and bias: float32[..., C] act on standardised features
    (x - mean) / scale, with mean, scale: float32[..., D] the training rows' statistics.
    """

    weights: jax.Array
    bias: jax.Array
    mean: jax.Array
    scale: jax.Array


def logits(classifier: LinearClassifier, features: jax.Array) -> jax.Array:
    """float32[..., M, C] for features float32[M, D] (standardisation folded into the weights)."""
    weights = classifier.weights / classifier.scale[..., :, None]
    offset = classifier.bias - jnp.einsum("...d,...dc->...c", classifier.mean, weights)
    return jnp.einsum("md,...dc->...mc", features, weights) + offset[..., None, :]


def _weighted_moments(features: jax.Array, weights: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean and standard deviation float32[F, D] of each fit's rows (constant columns: scale 1).

    features [N, D], weights [F, N] in {0, 1}. Two passes per fit, one fit at a time (`lax.map`),
    so no [F, N, D] tensor is built; it runs once per call, not per step.
    """

    def moments(weight: jax.Array) -> tuple[jax.Array, jax.Array]:
        count = jnp.sum(weight)
        mean = weight @ features / count
        variance = weight @ jnp.square(features - mean) / count
        return mean, jnp.where(variance > 1e-12, jnp.sqrt(variance), 1.0)

    return jax.lax.map(moments, weights)


def _fit_batch(features: jax.Array, one_hot: jax.Array, weights: jax.Array, l2s: jax.Array,
               max_steps: int) -> LinearClassifier:
    """F independent fits advanced together by L-BFGS; every array op is batched over F.

    features [N, D], one_hot [N, C], weights [F, N] in {0, 1}, l2s [F]. The standardisation is
    folded into the affine map, so features should be roughly centred (float32 round-off).
    Logits are affine in the parameters, so a step costs two matrix products: the gradient (the
    transposed map applied to dLoss/dlogits) and the logits of the L-BFGS direction d; objective
    values along logits - t * logits(d) are then cheap. The step size t is found by backtracking
    from 1 (Armijo), all fits in one loop that runs until every fit has its step. The outer loop
    stops when every gradient norm is below GRAD_TOL, or after `max_steps`.
    """
    num_fits, num_classes = weights.shape[0], one_hot.shape[1]
    counts = jnp.sum(weights, axis=1)
    mean, scale = _weighted_moments(features, weights)
    params = (jnp.zeros((num_fits, features.shape[1], num_classes)),
              jnp.zeros((num_fits, num_classes)))

    def affine(params):  # (W [F, D, C], b [F, C]) -> logits [F, N, C]
        return logits(LinearClassifier(*params, mean, scale), features)

    transpose = jax.linear_transpose(affine, params)
    lbfgs = optax.scale_by_lbfgs()

    def objective(z, w):  # logits [F, N, C], W [F, D, C] -> [F]
        data = -jnp.einsum("fnc,nc,fn->f", jax.nn.log_softmax(z), one_hot, weights) / counts
        return data + 0.5 * l2s * jnp.sum(w * w, axis=(1, 2))

    def gradient(params, z):
        d_logits = weights[..., None] * (jax.nn.softmax(z) - one_hot) / counts[:, None, None]
        d_weights, d_bias = transpose(d_logits)[0]
        return d_weights + l2s[:, None, None] * params[0], d_bias

    def per_fit(values, like):  # [F] -> broadcastable against `like` [F, ...]
        return values.reshape((-1,) + (1,) * (like.ndim - 1))

    def backtrack(z, z_direction, params, direction, value, slope):
        """Step sizes t [F]: the first of 1, 1/2, ..., MIN_STEP with f(x - t d) <= f(x) -
        1e-4 t <g, d> (up to float32 round-off of f); 0 where none is (no progress left)."""

        def value_at(t):
            return objective(z - per_fit(t, z) * z_direction,
                             params[0] - per_fit(t, direction[0]) * direction[0])

        tolerance = 1e-6 * jnp.abs(value)

        def failing(t, value_t):
            return (value_t > value - 1e-4 * t * slope + tolerance) & (t > MIN_STEP)

        def halve(carry):
            t, value_t = carry
            t = jnp.where(failing(t, value_t), 0.5 * t, t)
            return t, value_at(t)

        t = jnp.ones(num_fits)
        t, value_t = jax.lax.while_loop(lambda c: jnp.any(failing(*c)), halve, (t, value_at(t)))
        accepted = value_t <= value + tolerance
        return jnp.where(accepted, t, 0.0), jnp.where(accepted, value_t, value)

    def step(carry):
        params, z, value, grad, state, count = carry
        direction, state = jax.vmap(lbfgs.update)(grad, state, params)
        z_direction = affine(direction)
        slope = sum(jnp.sum(g * d, axis=tuple(range(1, g.ndim)))
                    for g, d in zip(grad, direction, strict=True))
        t, value = backtrack(z, z_direction, params, direction, value, slope)
        params = jax.tree.map(lambda p, d: p - per_fit(t, d) * d, params, direction)
        z = z - per_fit(t, z) * z_direction
        return params, z, value, gradient(params, z), state, count + 1

    def not_converged(carry) -> jax.Array:
        grad = carry[3]
        grad_norms = jnp.sqrt(jnp.sum(grad[0] ** 2, (1, 2)) + jnp.sum(grad[1] ** 2, 1))
        return (carry[5] < max_steps) & (jnp.max(grad_norms) > GRAD_TOL)

    z = affine(params)
    init = (params, z, objective(z, params[0]), gradient(params, z),
            jax.vmap(lbfgs.init)(params), jnp.asarray(0))
    (w, b), *_ = jax.lax.while_loop(not_converged, step, init)
    return LinearClassifier(w, b, mean, scale)


@functools.partial(jax.jit, static_argnames=("num_classes", "max_steps"))
def fit_predict(features: jax.Array, labels: jax.Array, train_masks: jax.Array, l2s: jax.Array,
                *, num_classes: int, max_steps: int = MAX_STEPS) -> jax.Array:
    """Fits one classifier per (training mask, L2) and predicts every row with each.

    Args:
      features: float32[N, D].
      labels: int32[N] in [0, num_classes); rows outside a mask are never seen by that fit.
      train_masks: bool[F, N], the training rows of each fit.
      l2s: float32[R] L2 strengths.
    Returns:
      int32[F, R, N] predicted class of every row under every fit.
    """
    num_masks, num_l2 = train_masks.shape[0], l2s.shape[0]
    seen = jnp.any(train_masks, axis=0).astype(features.dtype)  # rows some fit trains on
    features = features - seen @ features / jnp.sum(seen)
    weights = jnp.repeat(train_masks.astype(features.dtype), num_l2, axis=0)  # [F * R, N]
    classifiers = _fit_batch(features, jax.nn.one_hot(labels, num_classes), weights,
                             jnp.tile(l2s, num_masks), max_steps)
    predictions = jnp.argmax(logits(classifiers, features), axis=-1).astype(jnp.int32)
    return predictions.reshape(num_masks, num_l2, -1)


@dataclasses.dataclass(frozen=True)
class ClassifierScore:
    """Outcome of one protocol. Accuracies in percent.

    dev_accuracy: validation accuracy of the chosen L2 (mean over folds for cross-validation).
    test_accuracy: accuracy on the test examples.
    l2: the chosen L2 strength (one per outer fold for nested cross-validation).
    test_predictions: int32[M] predicted class of every test example, in input order.
    """

    dev_accuracy: float
    test_accuracy: float
    l2: tuple[float, ...]
    test_predictions: np.ndarray


def _accuracy(predictions: np.ndarray, labels: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Percent correct over `rows` (bool[..., N]) of predictions int[..., N] (broadcasting)."""
    correct = (predictions == labels) & rows
    return 100.0 * correct.sum(-1) / rows.sum(-1)


def _choose_l2_and_test(features: np.ndarray, labels: np.ndarray, train_rows: np.ndarray,
                        test_rows: np.ndarray, *, num_classes: int, num_folds: int, seed: int,
                        l2_grid: tuple[float, ...]) -> tuple[float, float, np.ndarray]:
    """k-fold CV on `train_rows` chooses L2, a refit on all of them predicts `test_rows`.

    One `fit_predict` call: F = num_folds validation fits plus the refit. Returns
    (validation accuracy of the chosen L2, chosen L2, predictions on test_rows).
    """
    inner_ids = stratified_fold_ids(labels[train_rows], num_folds, seed)
    validation_rows = np.zeros((num_folds, len(labels)), bool)
    validation_rows[:, train_rows] = held_out_masks(inner_ids, num_folds)
    train_masks = np.concatenate([train_rows & ~validation_rows, train_rows[None]])
    predictions = np.asarray(fit_predict(features, labels, train_masks,
                                         np.asarray(l2_grid, np.float32), num_classes=num_classes))
    fold_accuracy = _accuracy(predictions[:num_folds], labels, validation_rows[:, None, :])
    mean_accuracy = fold_accuracy.mean(axis=0)  # [R]
    best = int(np.argmax(mean_accuracy))  # ties: the weakest L2, as SentEval
    return float(mean_accuracy[best]), l2_grid[best], predictions[num_folds, best, test_rows]


def nested_cross_validation(features: np.ndarray, labels: np.ndarray, *, num_classes: int,
                            num_folds: int = 10, seed: int = SEED,
                            l2_grid: tuple[float, ...] = L2_GRID) -> ClassifierScore:
    """Outer stratified k-fold test accuracy; inner k folds of each outer training part pick L2.

    features: float32[N, D]; labels: int[N]. `test_predictions` are the out-of-fold predictions
    of all N examples.
    """
    labels = np.asarray(labels)
    outer_test = held_out_masks(stratified_fold_ids(labels, num_folds, seed), num_folds)
    predictions = np.empty(len(labels), np.int32)
    dev_accuracies, chosen = [], []
    for test_rows in outer_test:
        dev_accuracy, l2, fold_predictions = _choose_l2_and_test(
            features, labels, ~test_rows, test_rows, num_classes=num_classes,
            num_folds=num_folds, seed=seed, l2_grid=l2_grid)
        predictions[test_rows] = fold_predictions
        dev_accuracies.append(dev_accuracy)
        chosen.append(l2)
    test_accuracy = _accuracy(predictions, labels, np.ones(len(labels), bool))
    return ClassifierScore(float(np.mean(dev_accuracies)), float(test_accuracy), tuple(chosen),
                           predictions)


def cross_validate_then_test(train_features: np.ndarray, train_labels: np.ndarray,
                             test_features: np.ndarray, test_labels: np.ndarray, *,
                             num_classes: int, num_folds: int = 10, seed: int = SEED,
                             l2_grid: tuple[float, ...] = L2_GRID) -> ClassifierScore:
    """Stratified k-fold CV on train chooses L2, refit on all of train, test once."""
    features = np.concatenate([train_features, test_features])
    labels = np.concatenate([train_labels, test_labels])
    test_rows = np.arange(len(labels)) >= len(train_labels)
    dev_accuracy, l2, predictions = _choose_l2_and_test(
        features, labels, ~test_rows, test_rows, num_classes=num_classes, num_folds=num_folds,
        seed=seed, l2_grid=l2_grid)
    test_accuracy = _accuracy(predictions, np.asarray(test_labels), np.ones(len(test_labels), bool))
    return ClassifierScore(dev_accuracy, float(test_accuracy), (l2,), predictions)


def select_on_dev(train: tuple[np.ndarray, np.ndarray], dev: tuple[np.ndarray, np.ndarray],
                  test: tuple[np.ndarray, np.ndarray], *, num_classes: int,
                  l2_grid: tuple[float, ...] = L2_GRID) -> ClassifierScore:
    """Fits on train for every L2, keeps the best on dev, tests once.

    Each split is (features float32[N, D], labels int[N]).
    """
    features = np.concatenate([train[0], dev[0], test[0]])
    labels = np.concatenate([train[1], dev[1], test[1]])
    split = np.repeat(np.arange(3), [len(train[1]), len(dev[1]), len(test[1])])
    predictions = np.asarray(fit_predict(features, labels, (split == 0)[None],
                                         np.asarray(l2_grid, np.float32), num_classes=num_classes))
    dev_accuracy = _accuracy(predictions[0], labels, split == 1)  # [R]
    best = int(np.argmax(dev_accuracy))
    test_predictions = predictions[0, best, split == 2]
    test_accuracy = _accuracy(test_predictions, np.asarray(test[1]), np.ones(len(test[1]), bool))
    return ClassifierScore(float(dev_accuracy[best]), float(test_accuracy), (l2_grid[best],),
                           test_predictions)

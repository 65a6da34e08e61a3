"""The JAX logistic regression against scikit-learn, and the three L2-selection protocols."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from jaxenc.evaluation.folds import held_out_masks, stratified_fold_ids
from jaxenc.evaluation.logreg import (
    L2_GRID,
    cross_validate_then_test,
    fit_predict,
    nested_cross_validation,
    select_on_dev,
)

# Tests share these (examples, features) shapes so that fit_predict compiles few times.
SHAPE = (400, 6)
CV_SHAPE = (240, 10)


def make_dataset(num_examples, num_features, num_classes, noise, seed):
    """Gaussian features with very different column scales and offsets, linear-ish labels."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(num_examples, num_features))
    directions = rng.normal(size=(num_features, num_classes))
    labels = np.argmax(features @ directions + noise * rng.normal(size=(num_examples, num_classes)),
                       axis=1)
    scales = 10.0 ** rng.uniform(-2, 2, size=num_features)
    return (features * scales + rng.normal(size=num_features) * 5).astype(np.float32), labels


def sklearn_accuracy(train, test, l2):
    """Percent test accuracy of sklearn's LogisticRegression with the same objective.

    Ours is a softmax over C columns with l2/2 * ||W||^2; sklearn's binary model has one column
    w = w_1 - w_0, whose optimum spends half the penalty: C = 2 / (l2 n) there, 1 / (l2 n) else.
    """
    (x_train, y_train), (x_test, y_test) = train, test
    penalty_columns = 2.0 if len(np.unique(y_train)) == 2 else 1.0
    model = make_pipeline(StandardScaler(), LogisticRegression(
        C=penalty_columns / (l2 * len(y_train)), tol=1e-8, max_iter=10_000))
    return 100.0 * model.fit(x_train, y_train).score(x_test, y_test)


@pytest.mark.parametrize("num_classes, noise", [(2, 0.0), (2, 1.5), (3, 1.0)],
                         ids=["separable", "unseparable", "three-class"])
def test_fit_matches_sklearn_for_every_l2(num_classes, noise):
    features, labels = make_dataset(*SHAPE, num_classes, noise, seed=num_classes)
    train = np.arange(400) < 250
    predictions = np.asarray(fit_predict(features, labels, train[None],
                                         np.asarray(L2_GRID, np.float32),
                                         num_classes=num_classes))
    assert predictions.shape == (1, len(L2_GRID), 400) and predictions.dtype == np.int32
    for r, l2 in enumerate(L2_GRID):
        ours = 100.0 * np.mean(predictions[0, r, ~train] == labels[~train])
        theirs = sklearn_accuracy((features[train], labels[train]),
                                  (features[~train], labels[~train]), l2)
        assert abs(ours - theirs) <= 1.0, (l2, ours, theirs)
    if noise == 0.0:  # weak L2 on separable data: the training rows are all classified right
        np.testing.assert_array_equal(predictions[0, 0, train], labels[train])


def test_masked_rows_are_not_seen():
    """A fit on a mask equals a fit on the masked rows alone, whatever the other rows hold."""
    features, labels = make_dataset(*SHAPE, 2, 1.0, seed=5)
    mask = np.arange(len(labels)) % 3 != 0
    garbage = features.copy()
    garbage[~mask] = 1e3
    flipped = np.where(mask, labels, 1 - labels)
    l2s = np.asarray(L2_GRID, np.float32)
    clean = fit_predict(features, labels, mask[None], l2s, num_classes=2)
    noisy = fit_predict(garbage, flipped, mask[None], l2s, num_classes=2)
    np.testing.assert_array_equal(np.asarray(clean)[..., mask], np.asarray(noisy)[..., mask])


def reference_choose_and_test(train, test, num_folds, seed):
    """Loops: sklearn fits per (fold, L2) on our folds, best mean fold accuracy, refit, test."""
    (x_train, y_train) = train
    held = held_out_masks(stratified_fold_ids(y_train, num_folds, seed), num_folds)
    mean_accuracy = []
    for l2 in L2_GRID:
        fold_accuracy = []
        for rows in held:
            fold_accuracy.append(sklearn_accuracy((x_train[~rows], y_train[~rows]),
                                                  (x_train[rows], y_train[rows]), l2))
        mean_accuracy.append(np.mean(fold_accuracy))
    best = int(np.argmax(mean_accuracy))
    return mean_accuracy[best], sklearn_accuracy(train, test, L2_GRID[best])


def test_cross_validate_then_test_matches_reference():
    features, labels = make_dataset(*CV_SHAPE, 3, 1.5, seed=7)
    train, test = slice(0, 160), slice(160, 240)
    score = cross_validate_then_test(features[train], labels[train], features[test], labels[test],
                                     num_classes=3, num_folds=4, seed=1111)
    dev, accuracy = reference_choose_and_test((features[train], labels[train]),
                                              (features[test], labels[test]), 4, 1111)
    assert abs(score.dev_accuracy - dev) <= 1.25 and abs(score.test_accuracy - accuracy) <= 1.25
    assert score.test_predictions.shape == (80,) and score.l2[0] in L2_GRID
    assert score.test_accuracy == pytest.approx(
        100 * np.mean(score.test_predictions == labels[test]))


def test_nested_cross_validation_matches_reference():
    features, labels = make_dataset(*CV_SHAPE, 3, 1.5, seed=3)
    score = nested_cross_validation(features, labels, num_classes=3, num_folds=4, seed=1111)
    outer = held_out_masks(stratified_fold_ids(labels, 4, 1111), 4)
    correct = 0
    for rows in outer:
        _, accuracy = reference_choose_and_test((features[~rows], labels[~rows]),
                                                (features[rows], labels[rows]), 4, 1111)
        correct += accuracy * rows.sum() / 100
    assert abs(score.test_accuracy - 100 * correct / len(labels)) <= 1.5
    assert len(score.l2) == 4
    assert score.test_accuracy == pytest.approx(100 * np.mean(score.test_predictions == labels))


def test_select_on_dev_picks_the_best_dev_l2():
    features, labels = make_dataset(*SHAPE, 2, 2.0, seed=11)
    train, dev, test = slice(0, 200), slice(200, 300), slice(300, 400)
    score = select_on_dev((features[train], labels[train]), (features[dev], labels[dev]),
                          (features[test], labels[test]), num_classes=2)
    dev_accuracy = [sklearn_accuracy((features[train], labels[train]),
                                     (features[dev], labels[dev]), l2) for l2 in L2_GRID]
    best = int(np.argmax(dev_accuracy))
    assert abs(score.dev_accuracy - dev_accuracy[best]) <= 1.25
    test_accuracy = sklearn_accuracy((features[train], labels[train]),
                                     (features[test], labels[test]), L2_GRID[best])
    assert abs(score.test_accuracy - test_accuracy) <= 1.25

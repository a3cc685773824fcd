"""Classification metrics against hand-computed cases and Guo et al.'s explicit binning loop."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from uqcal import metrics as M

# Four queries, two classes; 5 bins with edges 0 .2 .4 .6 .8 1 and bins (lo, hi].
HAND_PROBS = np.array([[0.9, 0.1], [0.7, 0.3], [0.3, 0.7], [0.55, 0.45]])
HAND_LABELS = np.array([0, 1, 1, 0])
# conf .9 correct -> bin 4; conf .7 wrong -> bin 3; conf .7 correct -> bin 3; conf .55 correct -> bin 2
# bin 2: n=1 acc 1   conf .55 gap .45
# bin 3: n=2 acc .5  conf .7  gap .20
# bin 4: n=1 acc 1   conf .9  gap .10
# ECE = .45/4 + 2 * .2/4 + .1/4 = .1125 + .1 + .025 = .2375 ; MCE = .45


def test_hand_case():
    assert M.accuracy(HAND_PROBS, HAND_LABELS) == pytest.approx(0.75)
    assert M.classification_nll(HAND_PROBS, HAND_LABELS) == pytest.approx(
        -(math.log(0.9) + math.log(0.3) + math.log(0.7) + math.log(0.55)) / 4
    )
    assert M.classification_ece(HAND_PROBS, HAND_LABELS, n_bins=5) == pytest.approx(0.2375)
    assert M.classification_mce(HAND_PROBS, HAND_LABELS, n_bins=5) == pytest.approx(0.45)


def test_reliability_bins_hand_case():
    bins = M.reliability_bins(HAND_PROBS, HAND_LABELS, n_bins=5)
    assert isinstance(bins, pd.DataFrame)
    assert list(bins.columns) == ["bin", "lower", "upper", "count", "accuracy", "confidence"]
    assert bins["count"].tolist() == [0, 0, 1, 2, 1]
    np.testing.assert_allclose(bins["lower"], [0.0, 0.2, 0.4, 0.6, 0.8])
    np.testing.assert_allclose(bins["upper"], [0.2, 0.4, 0.6, 0.8, 1.0])
    np.testing.assert_allclose(bins["accuracy"].iloc[2:], [1.0, 0.5, 1.0])
    np.testing.assert_allclose(bins["confidence"].iloc[2:], [0.55, 0.7, 0.9])
    assert bins["accuracy"].iloc[:2].isna().all() and bins["confidence"].iloc[:2].isna().all()


def test_bin_edges_are_right_closed():
    # 2 bins (0, .5], (.5, 1]: conf exactly .5 goes to bin 0, conf 1.0 to bin 1
    probs = np.array([[0.5, 0.5], [1.0, 0.0]])
    bins = M.reliability_bins(probs, [1, 0], n_bins=2)
    assert bins["count"].tolist() == [1, 1]
    # bin 0: argmax of [.5, .5] is class 0, label 1 -> wrong: |0 - .5| = .5 ; bin 1: |1 - 1| = 0
    assert M.classification_ece(probs, [1, 0], n_bins=2) == pytest.approx(0.25)


def _guo_loop(probs, labels, n_bins):
    """Guo et al. (2017) binning written out: bin m = (m/M, (m+1)/M]."""
    conf = probs.max(axis=1)
    pred = probs.argmax(axis=1)
    ece, mce = 0.0, 0.0
    for m in range(n_bins):
        lo, hi = m / n_bins, (m + 1) / n_bins
        members = [i for i in range(len(conf)) if lo < conf[i] <= hi]
        if not members:
            continue
        acc = sum(pred[i] == labels[i] for i in members) / len(members)
        avg_conf = sum(conf[i] for i in members) / len(members)
        ece += len(members) / len(conf) * abs(acc - avg_conf)
        mce = max(mce, abs(acc - avg_conf))
    return ece, mce


@pytest.mark.parametrize("n_bins", [15, 7])
def test_matches_explicit_loop(n_bins):
    rng = np.random.default_rng(7)
    probs = rng.dirichlet(np.full(5, 0.6), size=600)
    labels = rng.integers(0, 5, size=600)
    ece, mce = _guo_loop(probs, labels, n_bins)
    assert M.classification_ece(probs, labels, n_bins) == pytest.approx(ece, abs=1e-12)
    assert M.classification_mce(probs, labels, n_bins) == pytest.approx(mce, abs=1e-12)


def test_confident_correct_classifier_has_zero_error():
    labels = np.array([0, 2, 1, 3, 3])
    probs = np.eye(4)[labels]
    assert M.accuracy(probs, labels) == 1.0
    assert M.classification_ece(probs, labels) == 0.0
    assert M.classification_mce(probs, labels) == 0.0
    assert M.classification_nll(probs, labels) == pytest.approx(0.0, abs=1e-12)


def test_confident_wrong_classifier_nll_is_clipped():
    probs = np.array([[1.0, 0.0]])
    assert M.classification_nll(probs, [1]) == pytest.approx(-math.log(1e-12))
    assert M.classification_ece(probs, [1]) == pytest.approx(1.0)


def test_calibrated_classifier_ece_is_small():
    # Confidence c uniform on (.5, 1) and correct with probability c -> ECE -> 0 as n grows.
    rng = np.random.default_rng(3)
    n = 100_000
    conf = rng.uniform(0.5, 1.0, size=n)
    correct = rng.uniform(size=n) < conf
    probs = np.column_stack([conf, 1 - conf])
    labels = np.where(correct, 0, 1)
    assert M.classification_ece(probs, labels) < 0.01


def test_classification_metrics_bundle():
    out = M.classification_metrics(HAND_PROBS, HAND_LABELS, n_bins=5)
    expected_nll = M.classification_nll(HAND_PROBS, HAND_LABELS)
    assert out == pytest.approx({"accuracy": 0.75, "nll": expected_nll, "ece": 0.2375, "mce": 0.45})


def test_float_integer_labels_accepted():
    assert M.accuracy(HAND_PROBS, HAND_LABELS.astype(float)) == pytest.approx(0.75)


def test_probs_within_tolerance_accepted():
    probs = HAND_PROBS + 1e-6 * np.array([1, -2])[None, :]  # rows sum to 1 - 1e-6
    assert M.accuracy(probs, HAND_LABELS) == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("probs", "labels", "name"),
    [
        (np.array([[0.6, 0.6]]), [0], "sum to 1"),
        (np.array([0.4, 0.6]), [1], "probs"),
        (np.array([[1.2, -0.2]]), [0], "probs"),
        (np.array([[np.nan, 1.0]]), [0], "probs"),
        (np.array([[0.4, 0.6]]), [2], "labels"),
        (np.array([[0.4, 0.6]]), [-1], "labels"),
        (np.array([[0.4, 0.6]]), [0.5], "labels"),
        (np.array([[0.4, 0.6]]), [0, 1], "labels"),
    ],
)
def test_bad_inputs_raise(probs, labels, name):
    with pytest.raises(ValueError, match=name):
        M.classification_ece(probs, labels)


def test_bad_n_bins():
    with pytest.raises(ValueError, match="n_bins"):
        M.classification_ece(HAND_PROBS, HAND_LABELS, n_bins=0)

"""The recalibrators of predictive objects (uqcal.core.recalibration) and the PIT map they build on
(uqcal.core.calibration.IsotonicPITMap): against brute-force minimisers, a KS tolerance and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from uqcal.core.calibration import IsotonicPITMap, isotonic_knots
from uqcal.core.predictive import (
    CategoricalPredictive,
    GaussianPredictive,
    NotFittedError,
    QuantilePredictive,
    RecalibratedPredictive,
)
from uqcal.core.recalibration import IsotonicRecalibrator, TemperatureScaling, VarianceScaling, variance_scale


def _overconfident(rng, n: int, shrink: float = 0.5) -> tuple[GaussianPredictive, np.ndarray]:
    """Targets N(mu, sigma^2) predicted as N(mu, (shrink sigma)^2)."""
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    return GaussianPredictive(mean, shrink * std), mean + std * rng.normal(size=n)


# ------------------------------------------------------------------------------------------ the PIT map
@pytest.mark.parametrize("use", [lambda m: m(np.array([0.5])), lambda m: m.inverse(np.array([0.5])),
                                 lambda m: m.knots, lambda m: m.is_identity],
                         ids=["call", "inverse", "knots", "is_identity"])
def test_an_unfitted_pit_map_refuses_to_be_used(use):
    with pytest.raises(NotFittedError, match="IsotonicPITMap is not fitted"):
        use(IsotonicPITMap())


def test_a_pit_map_fitted_on_too_few_points_is_the_identity():
    pit_map = IsotonicPITMap(min_points=3).fit(np.array([0.2, 0.9]))
    assert pit_map.is_identity
    np.testing.assert_array_equal(pit_map(np.array([0.1, 0.7])), [0.1, 0.7])


def test_pit_map_bad_arguments_are_named():
    with pytest.raises(ValueError, match="levels 'i/m'"):
        IsotonicPITMap(levels="i/m")
    with pytest.raises(ValueError, match="min_points"):
        IsotonicPITMap(min_points=0)


def test_pit_map_of_sorted_distinct_pits_is_their_empirical_cdf():
    # Increasing pairs (p_(i), i/n) are already isotonic: R interpolates them, with (0, 0) and (1, 1) pinned.
    pit = np.array([0.3, 0.1, 0.7, 0.4])
    pit_map = IsotonicPITMap().fit(pit)
    np.testing.assert_allclose(pit_map(np.array([0.1, 0.3, 0.4, 0.7])), [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(pit_map(np.array([0.05, 0.2])), [0.125, 0.375])  # linear between knots
    np.testing.assert_allclose(pit_map.inverse(np.array([0.5, 0.625])), [0.3, 0.35])
    u, r = isotonic_knots(pit)
    assert u[0] == 0.0 and r[0] == 0.0


# ------------------------------------------------------------------------------------------ isotonic
def test_isotonic_recalibration_makes_held_out_pits_uniform():
    rng = np.random.default_rng(0)
    calibration, y_calibration = _overconfident(rng, 3000)
    test, y_test = _overconfident(rng, 3000)
    recalibrated = IsotonicRecalibrator().fit(calibration, y_calibration).transform(test)
    assert isinstance(recalibrated, RecalibratedPredictive)
    n = len(y_test)
    # Both the map (fitted on n PITs) and the test PITs carry sampling error, so the statistic follows the
    # two-sample KS law: its 1 % bound, 1.63 sqrt(2 / n), is the tolerance (over 200 seeds, 0.5 % exceed it).
    tolerance = 1.63 * np.sqrt(2.0 / n)
    assert stats.kstest(test.pit(y_test), "uniform").statistic > 3 * tolerance  # miscalibrated before
    assert stats.kstest(recalibrated.pit(y_test), "uniform").statistic < tolerance


def test_isotonic_recalibrated_quantiles_invert_its_cdf():
    rng = np.random.default_rng(1)
    prediction, y = _overconfident(rng, 500)
    recalibrated = IsotonicRecalibrator(levels="i/(n+1)").fit(prediction, y).transform(prediction)
    levels = np.array([0.1, 0.5, 0.9])
    quantiles = recalibrated.ppf(levels)
    for j, level in enumerate(levels):
        np.testing.assert_allclose(recalibrated.cdf(quantiles[:, j]), level, atol=1e-9)


def test_isotonic_recalibrator_takes_a_quantile_predictive():
    rng = np.random.default_rng(2)
    levels = np.linspace(0.01, 0.99, 99)

    def overconfident(n):  # N(0, 0.5^2) quantiles for N(0, 1) targets
        return QuantilePredictive(levels, np.tile(0.5 * stats.norm.ppf(levels), (n, 1))), rng.normal(size=n)

    (calibration, y_calibration), (test, y_test) = overconfident(2000), overconfident(2000)
    recalibrated = IsotonicRecalibrator().fit(calibration, y_calibration).transform(test)
    # Inside the predicted level range the held-out frequencies match the levels within the two-sample KS
    # bound at 1 %; the raw predictive misses them by more.
    inner = np.linspace(0.2, 0.8, 7)
    tolerance = 1.63 * np.sqrt(2.0 / 2000)
    raw_gap = np.abs(np.mean(test.pit(y_test)[:, None] <= inner, axis=0) - inner)
    recalibrated_gap = np.abs(np.mean(recalibrated.pit(y_test)[:, None] <= inner, axis=0) - inner)
    assert raw_gap.max() > 2 * tolerance and recalibrated_gap.max() < tolerance


def test_isotonic_recalibrator_refuses_misuse():
    prediction = GaussianPredictive(np.zeros(3), np.ones(3))
    with pytest.raises(NotFittedError, match="IsotonicRecalibrator is not fitted"):
        IsotonicRecalibrator().transform(prediction)
    with pytest.raises(TypeError, match="RegressionPredictive, got CategoricalPredictive"):
        IsotonicRecalibrator().fit(CategoricalPredictive(np.full((3, 2), 0.5)), np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="y has 2 values for 3 predicted points"):
        IsotonicRecalibrator().fit(prediction, [0.0, 1.0])
    with pytest.raises(ValueError, match="levels"):
        IsotonicRecalibrator(levels="n")


# ------------------------------------------------------------------------------------------ variance scaling
def test_variance_scale_is_the_nll_minimiser_of_a_grid_search():
    rng = np.random.default_rng(2)
    mean, std = rng.normal(size=300), rng.uniform(0.5, 2.0, size=300)
    y = mean + 1.7 * std * rng.normal(size=300)
    grid = np.linspace(0.5, 4.0, 35001)  # step 1e-4
    z2 = ((y - mean) / std) ** 2
    nll = [np.mean(np.log(s * std) + z2 / (2 * s**2)) for s in grid]
    assert variance_scale(y, mean, std) == pytest.approx(grid[int(np.argmin(nll))], abs=2e-4)


def test_variance_scaling_scales_the_std_and_keeps_the_mean():
    # z-scores 1, -3 -> s = sqrt((1 + 9) / 2) = sqrt(5)
    calibration = GaussianPredictive(np.array([0.0, 1.0]), np.array([1.0, 1.0]))
    scaling = VarianceScaling().fit(calibration, np.array([1.0, -2.0]))
    assert scaling.scale_ == pytest.approx(np.sqrt(5.0))
    out = scaling.transform(GaussianPredictive(np.array([3.0]), np.array([2.0])))
    assert isinstance(out, GaussianPredictive)
    np.testing.assert_allclose(out.mean, [3.0])
    np.testing.assert_allclose(out.std, [2.0 * np.sqrt(5.0)])


def test_variance_scaling_refuses_misuse():
    prediction = GaussianPredictive(np.zeros(2), np.ones(2))
    with pytest.raises(NotFittedError, match="VarianceScaling is not fitted"):
        VarianceScaling().transform(prediction)
    with pytest.raises(TypeError, match="GaussianPredictive, got QuantilePredictive"):
        VarianceScaling().fit(QuantilePredictive([0.1, 0.9], [[0.0, 1.0]]), [0.5])
    with pytest.raises(ValueError, match="y has shape"):
        VarianceScaling().fit(prediction, [0.0])
    with pytest.raises(ValueError, match="every z-score is 0"):
        variance_scale([1.0, 2.0], [1.0, 2.0], [1.0, 1.0])


# ------------------------------------------------------------------------------------------ temperature
def _categorical_problem(rng, n: int = 600, classes: int = 4, sharpen: float = 3.0):
    """Labels drawn from softmax(z); predicted probabilities softmax(sharpen * z): overconfident for sharpen > 1."""
    logits = rng.normal(scale=1.5, size=(n, classes))
    truth = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = np.array([rng.choice(classes, p=row) for row in truth])
    sharp = np.exp(sharpen * logits)
    return CategoricalPredictive(sharp / sharp.sum(axis=1, keepdims=True)), labels


def test_temperature_is_the_nll_minimiser_of_a_brute_force_search():
    rng = np.random.default_rng(3)
    prediction, labels = _categorical_problem(rng)
    log_p = np.log(prediction.probs)
    grid = np.linspace(0.5, 6.0, 55001)  # step 1e-4

    def nll(t):
        z = log_p / t
        z = z - z.max(axis=1, keepdims=True)
        return np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(labels)), labels])

    best = grid[int(np.argmin([nll(t) for t in grid]))]
    scaling = TemperatureScaling().fit(prediction, labels)
    assert scaling.temperature_ == pytest.approx(best, abs=2e-4)
    assert scaling.temperature_ > 2.0  # the predictions were sharpened 3x: T undoes most of it


def test_temperature_scaling_is_softmax_of_log_p_over_t():
    scaling = TemperatureScaling()
    scaling.temperature_ = 2.0
    out = scaling.transform(CategoricalPredictive(np.array([[0.8, 0.2]]), classes=np.array([3, 7])))
    # softmax(log p / 2) = sqrt(p) / sum sqrt(p)
    np.testing.assert_allclose(out.probs, [[np.sqrt(0.8), np.sqrt(0.2)]] / (np.sqrt(0.8) + np.sqrt(0.2)))
    np.testing.assert_array_equal(out.classes, [3, 7])


def test_temperature_scaling_refuses_misuse():
    prediction = CategoricalPredictive(np.array([[0.7, 0.3], [0.4, 0.6]]))
    with pytest.raises(NotFittedError, match="TemperatureScaling is not fitted"):
        TemperatureScaling().transform(prediction)
    with pytest.raises(ValueError, match="class labels must be integers, got dtype float64"):
        TemperatureScaling().fit(prediction, np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match="CategoricalPredictive, got GaussianPredictive"):
        TemperatureScaling().fit(GaussianPredictive(np.zeros(2), np.ones(2)), np.array([0, 1]))
    with pytest.raises(ValueError, match="temperature_bounds"):
        TemperatureScaling(temperature_bounds=(1.0, 0.5))


def _gaussian_nb_on_digits():
    """GaussianNB's probabilities on scikit-learn's digits: a third of them exactly 0 (issue 51)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB

    X, y = load_digits(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, test_size=0.5, random_state=0)
    X_cal, X_test, y_cal, y_test = train_test_split(X_rest, y_rest, test_size=0.5, random_state=0)
    model = GaussianNB().fit(X_train, y_train)
    return model.predict_proba(X_cal), y_cal, model.predict_proba(X_test), y_test


def test_temperature_on_exact_zeros_is_the_brute_force_optimum_of_the_clipped_logits():
    probs, labels, _, _ = _gaussian_nb_on_digits()
    assert (probs == 0).mean() > 0.2
    eps = np.finfo(np.float64).eps
    log_p = np.log(np.clip(probs, eps, 1 - eps))  # netcal's logits of probabilities (clip at float64's eps)
    grid = np.exp(np.linspace(np.log(1.0), np.log(30.0), 20001))

    def nll(t):
        z = log_p / t
        z = z - z.max(axis=1, keepdims=True)
        return np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(labels)), labels])

    best = grid[int(np.argmin([nll(t) for t in grid]))]
    temperature = TemperatureScaling().fit(CategoricalPredictive(probs), labels).temperature_
    assert temperature == pytest.approx(best, rel=2e-4)
    assert 5.0 < temperature < 10.0  # not 41: zeros at log(tiny) = -708 made T squash them


def test_temperature_on_exact_zeros_agrees_with_netcal():
    netcal_scaling = pytest.importorskip("netcal.scaling")
    from uqcal.metrics import classification_ece

    probs, labels, test_probs, test_labels = _gaussian_nb_on_digits()
    ours = TemperatureScaling().fit(CategoricalPredictive(probs), labels)
    theirs = netcal_scaling.TemperatureScaling()
    theirs.fit(probs, labels)
    assert ours.temperature_ == pytest.approx(1.0 / float(np.ravel(theirs.temperature)[0]), rel=1e-3)
    recalibrated = ours.transform(CategoricalPredictive(test_probs)).probs
    theirs_probs = theirs.transform(test_probs)
    assert classification_ece(recalibrated, test_labels, 15) == pytest.approx(
        classification_ece(theirs_probs / theirs_probs.sum(axis=1, keepdims=True), test_labels, 15), abs=1e-4)
    assert classification_ece(recalibrated, test_labels, 15) < classification_ece(test_probs, test_labels, 15)

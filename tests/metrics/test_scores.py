"""all_metrics: every metric of a predictive object under a name that says which definition it is, and the
searchsorted empirical frequencies behind the PIT metrics against the brute-force comparison matrix."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from uqcal import metrics as M
from uqcal.core.predictive import CategoricalPredictive, GaussianPredictive, QuantilePredictive, RecalibratedPredictive
from uqcal.metrics import all_metrics

PIT_KEYS = {"mse", "rmse", "ece_iwata", "ce_qr_percent", "calibration_score_kuleshov", "miscalibration_area"}
REGRESSION_KEYS = PIT_KEYS | {"coverage_95", "coverage_90", "coverage_68", "interval_score_90", "pinball_loss_05",
                              "pinball_loss_50", "pinball_loss_95"}
GAUSSIAN_KEYS = REGRESSION_KEYS | {"nlpd", "crps", "sharpness_variance"}
CLASSIFICATION_KEYS = {"accuracy", "nll_categorical", "ece_guo_15bins", "mce_15bins", "brier_score"}


# ------------------------------------------------------------------------------------------ empirical frequencies
def _brute_force_frequencies(pit, levels):
    return np.mean(np.asarray(pit)[None, :] <= np.asarray(levels)[:, None], axis=1)


@pytest.mark.parametrize("seed", range(5))
def test_searchsorted_frequencies_equal_the_comparison_matrix(seed):
    rng = np.random.default_rng(seed)
    levels = np.round(np.arange(1, 1000) / 1000, 10)
    # Ties with the levels (PITs exactly at a level count as <= it), duplicates, and the ends 0 and 1.
    pit = np.concatenate([rng.uniform(size=3000), rng.choice(levels, 500), [0.0, 1.0, 1.0, 0.5, 0.5]])
    np.testing.assert_array_equal(M.empirical_frequencies(pit, levels), _brute_force_frequencies(pit, levels))
    assert M.ece_iwata(pit, levels) == pytest.approx(np.mean(np.abs(levels - _brute_force_frequencies(pit, levels))),
                                                     abs=1e-15)


def test_ece_iwata_by_hand():
    # PITs 0.05, 0.15, 0.5, 0.95 at P = {0.1, ..., 0.9}: p_hat = 1/4 at 0.1, 2/4 at 0.2..0.4, 3/4 at 0.5..0.9
    p_hat = np.array([0.25, 0.5, 0.5, 0.5, 0.75, 0.75, 0.75, 0.75, 0.75])
    expected = np.mean(np.abs(M.ECE_LEVELS - p_hat))
    assert M.ece_iwata([0.05, 0.15, 0.5, 0.95]) == pytest.approx(expected)


def test_ece_iwata_is_half_the_central_interval_error_of_a_symmetric_miscalibration():
    # The docstring's claim: uncertainty-toolbox's default compares central-interval coverage at p with p; for a
    # symmetric over-confident predictive that error is twice the one-sided error at (1 + p) / 2, so its mean over
    # p uniform on [0, 1] is twice the mean one-sided error over levels uniform on [0, 1].
    rng = np.random.default_rng(0)
    z = rng.normal(size=200_000) / 0.6  # residuals of N(0, 0.6^2) forecasts for N(0, 1) targets, standardised
    levels = np.linspace(0.0005, 0.9995, 1000)
    one_sided = M.ece_iwata(stats.norm.cdf(z), levels)
    central = stats.norm.ppf(0.5 + levels / 2)
    interval = np.mean(np.abs(levels - np.mean(np.abs(z)[None, :] <= central[:, None], axis=1)))
    assert interval == pytest.approx(2 * one_sided, rel=0.02)


# ------------------------------------------------------------------------------------------ all_metrics
def test_gaussian_metrics_are_the_named_definitions():
    rng = np.random.default_rng(1)
    mean, std = rng.normal(size=400), rng.uniform(0.5, 2.0, size=400)
    y = mean + 1.5 * std * rng.normal(size=400)
    out = all_metrics(GaussianPredictive(mean, std), y)
    assert set(out) == GAUSSIAN_KEYS
    pit = stats.norm.cdf(y, mean, std)
    assert out["mse"] == pytest.approx(np.mean((y - mean) ** 2))
    assert out["rmse"] == pytest.approx(np.sqrt(out["mse"]))
    assert out["ece_iwata"] == pytest.approx(np.mean(np.abs(M.ECE_LEVELS - _brute_force_frequencies(pit, M.ECE_LEVELS))))
    levels = np.arange(1, 11) / 10
    assert out["ce_qr_percent"] == pytest.approx(100 * np.sum((_brute_force_frequencies(pit, levels) - levels) ** 2))
    levels = np.arange(1, 20) * 0.05
    assert out["calibration_score_kuleshov"] == pytest.approx(
        np.sum((levels - _brute_force_frequencies(pit, levels)) ** 2))
    assert out["nlpd"] == pytest.approx(-np.mean(stats.norm.logpdf(y, mean, std)))
    assert out["sharpness_variance"] == pytest.approx(np.mean(std**2))
    half_width = stats.norm.ppf(0.975) * std
    assert out["coverage_95"] == pytest.approx(np.mean(np.abs(y - mean) <= half_width))
    assert out["crps"] == pytest.approx(M.gaussian_crps(y, mean, std))


def test_total_error_is_not_reported_on_raw_units():
    # TE = (MSE + ECE) / 2 on raw targets is MSE / 2 in disguise (issue 39: 1557); all_metrics leaves it out.
    out = all_metrics(GaussianPredictive(np.full(3, 1000.0), np.full(3, 50.0)), np.array([900.0, 1000.0, 1100.0]))
    assert not {"te", "total_error", "ece", "ce", "cal_score"} & set(out)


def test_quantile_predictive_reports_the_coverages_its_levels_cover():
    levels = np.array([0.1, 0.16, 0.5, 0.84, 0.9])
    y = np.array([-1.0, 0.0, 0.5, 2.0])
    quantiles = np.tile(stats.norm.ppf(levels), (4, 1))
    out = all_metrics(QuantilePredictive(levels, quantiles), y)
    # 95 / 90 % intervals and the 0.05 / 0.95 quantiles need levels 0.025 / 0.05 and up; no density or variance
    assert set(out) == PIT_KEYS | {"coverage_68", "pinball_loss_50", "crps"}
    # the 68 % interval is [q0.16, q0.84] = [-0.994, 0.994]: y = 0 and 0.5 inside
    assert out["coverage_68"] == pytest.approx(0.5)
    assert out["mse"] == pytest.approx(np.mean(y**2))  # the median, 0, is the point prediction
    assert "coverage_68" not in all_metrics(QuantilePredictive([0.2, 0.8], [[-1.0, 1.0]] * 4), y)


def test_recalibrated_predictive_gets_the_regression_metrics():
    base = GaussianPredictive(np.zeros(4), np.ones(4))
    identity = RecalibratedPredictive(base, lambda p: p, lambda q: q)
    out = all_metrics(identity, np.array([-1.0, 0.0, 0.5, 2.0]))
    assert set(out) == GAUSSIAN_KEYS
    for key in GAUSSIAN_KEYS:  # crps and the variance by quadrature: to 1e-5 of the closed forms
        assert out[key] == pytest.approx(all_metrics(base, np.array([-1.0, 0.0, 0.5, 2.0]))[key], rel=1e-5)


def test_classification_metrics_and_their_names():
    probs = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8]])
    labels = np.array([0, 1, 1, 1])
    out = all_metrics(CategoricalPredictive(probs), labels)
    assert set(out) == CLASSIFICATION_KEYS
    assert out["accuracy"] == pytest.approx(0.75)
    assert out["nll_categorical"] == pytest.approx(-np.mean(np.log([0.9, 0.7, 0.4, 0.8])))
    assert out["ece_guo_15bins"] == pytest.approx(M.classification_ece(probs, labels, 15))
    assert out["mce_15bins"] == pytest.approx(M.classification_mce(probs, labels, 15))
    assert not set(out) & GAUSSIAN_KEYS  # no name shared with regression


def test_class_names_map_onto_columns():
    prediction = CategoricalPredictive(np.array([[0.9, 0.1], [0.2, 0.8]]), classes=np.array([5, 9]))
    assert all_metrics(prediction, np.array([5, 9]))["accuracy"] == 1.0


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="class labels must be integers"):
        all_metrics(CategoricalPredictive(np.array([[0.5, 0.5]])), np.array([1.0]))
    with pytest.raises(ValueError, match="y has 2 values for 3 predicted points"):
        all_metrics(GaussianPredictive(np.zeros(3), np.ones(3)), [0.0, 1.0])
    with pytest.raises(TypeError, match="got ndarray"):
        all_metrics(np.zeros(3), np.zeros(3))

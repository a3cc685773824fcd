"""Every metric on every predictive: an isotonic-recalibrated predictive's NLL, CRPS and variance from its
recalibrated CDF against numerical integration; a quantile predictive's CRPS (the quantile-score integral) and its
vectorised CDF against the per-row interpolation; levels matched to round-off; the four scores peers have (interval
score, pinball loss, Brier score, miscalibration area) against hand-computed cases and the peers' own functions
(scoringrules, scikit-learn, uncertainty-toolbox: test-only dependencies, skipped where not installed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import integrate, stats

from uqcal import metrics as M
from uqcal.core.predictive import (
    CategoricalPredictive,
    GaussianPredictive,
    Predictive,
    QuantilePredictive,
    RegressionPredictive,
)
from uqcal.core.recalibration import IsotonicRecalibrator
from uqcal.metrics import all_metrics


def _recalibrated(seed: int = 0, n: int = 300):
    """An over-confident Gaussian (std 0.5 for noise of std 1) isotonically recalibrated on held-out points."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    calibration = GaussianPredictive(mean, np.full(n, 0.5))
    y_calibration = mean + rng.normal(size=n)
    test_mean = rng.normal(size=40)
    test = GaussianPredictive(test_mean, np.full(40, 0.5))
    recalibrated = IsotonicRecalibrator().fit(calibration, y_calibration).transform(test)
    return recalibrated, test_mean + rng.normal(size=40)


def test_isotonic_recalibrated_metrics_are_finite():
    recalibrated, y = _recalibrated()
    metrics = all_metrics(recalibrated, y)
    assert {"nlpd", "crps", "sharpness_variance"} <= set(metrics)
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    # Recalibration widens the over-confident std 0.5 towards the noise's 1: variance near 1, not 0.25.
    assert 0.6 < metrics["sharpness_variance"] < 1.6


def test_recalibrated_density_crps_and_variance_agree_with_numerical_integration():
    recalibrated, y = _recalibrated(seed=1)
    logpdf, crps, var = recalibrated.logpdf(y), recalibrated.crps(y), recalibrated.var()
    for i in range(0, 40, 7):
        one = recalibrated.__class__(GaussianPredictive(recalibrated.base.mean[i:i + 1], recalibrated.base.std[i:i + 1]),
                                     recalibrated.cdf_map, recalibrated.inverse_map)

        def cdf(t, one=one):
            return float(one.cdf(np.array([t]))[0])

        # The density is the derivative of the recalibrated CDF (central difference away from the knots).
        step = 1e-5
        slope = (cdf(y[i] + step) - cdf(y[i] - step)) / (2 * step)
        assert np.exp(logpdf[i]) == pytest.approx(slope, rel=1e-3)
        # CRPS = int (F(t) - 1{t >= y})^2 dt, integrated by scipy's quad on each side of y.
        low, high = one.ppf(1e-12)[0], one.ppf(1 - 1e-12)[0]
        below = integrate.quad(lambda t: cdf(t) ** 2, low, y[i], limit=400)[0]
        above = integrate.quad(lambda t: (1 - cdf(t)) ** 2, y[i], high, limit=400)[0]
        assert crps[i] == pytest.approx(below + above, rel=1e-4)
        # Variance from the CDF: E[X] = hi - int F, E[X^2] = hi^2 - int 2 t F(t) dt over [lo, hi].
        first = high - integrate.quad(cdf, low, high, limit=400)[0]
        second = high**2 - integrate.quad(lambda t: 2 * t * cdf(t), low, high, limit=400)[0]
        assert var[i] == pytest.approx(second - first**2, rel=1e-3)


def test_recalibrated_metrics_of_the_identity_map_are_the_gaussian_closed_forms():
    rng = np.random.default_rng(2)
    base = GaussianPredictive(rng.normal(size=50), rng.uniform(0.5, 2.0, 50))
    y = rng.normal(size=50)
    recalibrated = IsotonicRecalibrator().fit(base, base.ppf(0.5))  # every PIT 0.5: a map, not the identity
    identity = recalibrated.transform(base).__class__(base, lambda p: p, lambda q: q)
    np.testing.assert_allclose(identity.crps(y), M.gaussian_crps_pointwise(y, base.mean, base.std), rtol=1e-5)
    np.testing.assert_allclose(identity.var(), base.std**2, rtol=1e-5)
    np.testing.assert_allclose(identity.logpdf(y), stats.norm.logpdf(y, base.mean, base.std), rtol=1e-6)


def test_quantile_predictive_cdf_is_the_row_by_row_interpolation():
    rng = np.random.default_rng(3)
    levels = np.linspace(0.05, 0.95, 19)
    quantiles = np.sort(rng.normal(size=(200, 19)), axis=1)
    y = rng.normal(scale=1.5, size=200)
    prediction = QuantilePredictive(levels, quantiles)
    expected = np.array([np.interp(v, row, levels) for v, row in zip(y, quantiles, strict=True)])
    np.testing.assert_allclose(prediction.cdf(y), expected, atol=1e-12)
    q = np.array([0.05, 0.3, 0.77, 0.95])
    expected_ppf = np.array([np.interp(q, levels, row) for row in quantiles])
    np.testing.assert_allclose(prediction.ppf(q), expected_ppf, atol=1e-12)


def test_quantile_predictive_crps_is_the_quantile_score_integral():
    # Levels at the midpoints of 999 equal cells of N(0, 1): the mean quantile score approaches the closed form.
    levels = (np.arange(999) + 0.5) / 999
    y = np.array([-1.5, 0.0, 0.3, 2.0])
    prediction = QuantilePredictive(levels, np.tile(stats.norm.ppf(levels), (4, 1)))
    np.testing.assert_allclose(prediction.crps(y), M.gaussian_crps_pointwise(y, np.zeros(4), np.ones(4)), rtol=2e-3)
    # By hand with two levels: 2 / 2 * [QS_0.25(-1, 0) + QS_0.75(1, 0)] = 0.25 + 0.25
    two = QuantilePredictive([0.25, 0.75], [[-1.0, 1.0]])
    assert two.crps(np.array([0.0]))[0] == pytest.approx(0.5)
    assert all_metrics(prediction, y)["crps"] == pytest.approx(float(np.mean(prediction.crps(y))))


def test_quantile_predictive_crps_matches_scoringrules():
    sr = pytest.importorskip("scoringrules")
    rng = np.random.default_rng(4)
    levels = np.linspace(0.1, 0.9, 9)
    prediction = QuantilePredictive(levels, np.sort(rng.normal(size=(30, 9)), axis=1))
    y = rng.normal(size=30)
    np.testing.assert_allclose(prediction.crps(y), sr.crps_quantile(y, prediction.quantiles, levels), rtol=1e-12)


def test_levels_at_round_off_still_report_the_interval():
    levels = np.array([0.05, 0.5, 0.95])  # (1 - 0.9) / 2 = 0.04999999999999999 < 0.05
    prediction = QuantilePredictive(levels, np.tile([-1.645, 0.0, 1.645], (4, 1)))
    out = all_metrics(prediction, np.array([-2.0, 0.0, 1.0, 3.0]))
    assert out["coverage_90"] == pytest.approx(0.5)
    assert {"interval_score_90", "pinball_loss_05", "pinball_loss_95"} <= set(out)


# ------------------------------------------------------------------------------------------ the four peer scores
def test_interval_score_by_hand_and_against_scoringrules():
    y, lower, upper = np.array([0.0, 3.0, -4.0]), np.array([-1.0, -1.0, -1.0]), np.array([1.0, 1.0, 2.0])
    # widths 2, 2, 3; misses: 3 - 1 = 2 above, -1 - -4 = 3 below, each times 2 / 0.2 = 10
    assert M.interval_score(y, lower, upper, alpha=0.2) == pytest.approx((2 + 22 + 33) / 3)
    sr = pytest.importorskip("scoringrules")
    rng = np.random.default_rng(5)
    y, centre, half = rng.normal(size=100), rng.normal(size=100), rng.uniform(0.1, 2, 100)
    assert M.interval_score(y, centre - half, centre + half, 0.1) == pytest.approx(
        float(np.mean(sr.interval_score(y, centre - half, centre + half, 0.1))), rel=1e-12)


def test_pinball_loss_matches_scikit_learn():
    from sklearn.metrics import mean_pinball_loss

    rng = np.random.default_rng(6)
    y, q = rng.normal(size=200), rng.normal(size=200)
    for level in (0.05, 0.5, 0.9):
        assert M.pinball_loss(y, q, level) == pytest.approx(mean_pinball_loss(y, q, alpha=level), rel=1e-12)


def test_brier_score_matches_scikit_learn():
    from sklearn.metrics import brier_score_loss

    rng = np.random.default_rng(7)
    probs = rng.dirichlet(np.ones(4), size=300)
    labels = rng.integers(0, 4, 300)
    assert M.brier_score(probs, labels) == pytest.approx(
        brier_score_loss(labels, probs, labels=[0, 1, 2, 3]), rel=1e-12)
    # Two classes: scikit-learn reports the positive class's binary score, half the two-column sum.
    binary = rng.dirichlet(np.ones(2), size=100)
    two_labels = rng.integers(0, 2, 100)
    assert M.brier_score(binary, two_labels) == pytest.approx(2 * brier_score_loss(two_labels, binary[:, 1]))


def test_miscalibration_area_by_hand_and_against_uncertainty_toolbox():
    # Calibrated in the limit: PITs on a fine uniform grid leave an area of about 0.
    assert M.miscalibration_area((np.arange(10_000) + 0.5) / 10_000) == pytest.approx(0.0, abs=1e-3)
    uct = pytest.importorskip("uncertainty_toolbox")
    rng = np.random.default_rng(8)
    for scale in (0.5, 1.0, 2.0):
        mean, std = rng.normal(size=500), np.full(500, scale)
        y = mean + rng.normal(size=500)
        ours = M.miscalibration_area(stats.norm.cdf(y, mean, std))
        assert ours == pytest.approx(uct.metrics_calibration.miscalibration_area(mean, std, y), abs=1e-12)


# ------------------------------------------------------------------------ all_metrics on every predictive kind
# Regression predictive classes that all_metrics is not asked to score, each with the reason.
NOT_A_LIBRARY_PREDICTIVE = {
    "RegressionPredictive": "the abstract base of the regression predictives",
    "StoredPIT": "the report's holder of a run's stored PIT values for a calibration curve (uqcal.pipeline.report)",
}


def _every_predictive_kind():
    """(prediction, y) of every predictive kind the library builds, by name."""
    from uqcal.core.recalibration import TemperatureScaling, VarianceScaling
    from uqcal.methods.fewshot.base import EpisodePredictive
    from uqcal.methods.metareg.predictive import GmmCalibratedPredictive, GridQuantilePredictive

    rng = np.random.default_rng(10)
    n = 60
    mean, std = rng.normal(size=n), rng.uniform(0.3, 1.0, n)
    y = mean + rng.normal(size=n)
    gaussian = GaussianPredictive(mean, std)
    levels = np.linspace(0.05, 0.95, 19)
    quantiles = QuantilePredictive(levels, mean[:, None] + std[:, None] * stats.norm.ppf(levels))
    isotonic = IsotonicRecalibrator().fit(gaussian, y)
    grid = (np.arange(199) + 0.5) / 199
    probs = rng.dirichlet(np.ones(3), size=n)
    probs[:, 0] = np.where(rng.uniform(size=n) < 0.2, 0.0, probs[:, 0])  # exact zeros (GaussianNB's kind)
    probs /= probs.sum(axis=1, keepdims=True)
    labels = rng.integers(0, 3, n)
    return {
        "gaussian": (gaussian, y),
        "variance_scaled": (VarianceScaling().fit(gaussian, y).transform(gaussian), y),
        "quantile": (quantiles, y),
        "isotonic_recalibrated": (isotonic.transform(gaussian), y),
        "isotonic_recalibrated_floored": (dataclasses.replace(isotonic.transform(gaussian), logpdf_floor=-20.0), y),
        "isotonic_recalibrated_quantile": (IsotonicRecalibrator().fit(quantiles, y).transform(quantiles), y),
        "gmm_calibrated": (GmmCalibratedPredictive(gaussian, isotonic.map_, isotonic.map_.inverse,
                                                   density_map=isotonic.map_.derivative), y),
        "grid_quantile": (GridQuantilePredictive(grid, mean[:, None] + std[:, None] * stats.norm.ppf(grid)), y),
        "categorical": (CategoricalPredictive(probs), labels),
        "temperature_scaled": (TemperatureScaling().fit(CategoricalPredictive(probs), labels)
                               .transform(CategoricalPredictive(probs)), labels),
        "episode": (EpisodePredictive(probs, classes=np.arange(3)), labels),
    }


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_all_metrics_is_finite_for_every_predictive_kind_the_library_builds():
    import uqcal.methods.fewshot.base  # noqa: F401  (registers its subclasses, whatever this process imported)
    import uqcal.methods.metareg.predictive  # noqa: F401
    import uqcal.pipeline.report.figures.calibration  # noqa: F401

    kinds = _every_predictive_kind()
    for name, (prediction, y) in kinds.items():
        metrics = all_metrics(prediction, y)
        assert metrics and all(np.isfinite(v) for v in metrics.values()), (name, metrics)
        if isinstance(prediction, RegressionPredictive) and "quantile" not in name:  # full support: every score
            assert {"crps", "nlpd", "sharpness_variance", "coverage_90", "interval_score_90"} <= set(metrics), name
    covered = {type(prediction) for prediction, _ in kinds.values()}
    for cls in (c for c in _subclasses(Predictive) if c.__module__.startswith("uqcal.")):  # not tests' own
        assert cls in covered or cls.__name__ in NOT_A_LIBRARY_PREDICTIVE, f"{cls.__name__}: no case above"

"""Every regression predictive kind converts to its skpro distribution and back (uqcal.core.interop), and skpro's
metrics score the converted distribution as uqcal's ``all_metrics`` scores the predictive.

skpro is in the lock (the ``test`` extra): under CI (``CI`` set) a missing skpro fails these tests; elsewhere they
skip without it.

Tolerances: closed forms on both sides (a Gaussian's CRPS, log loss, pinball losses and interval) agree to
round-off (rel 1e-9); skpro rounds a histogram's quantiles to 4 decimals, so its pinball losses agree to 5e-5. A
quantile predictive's CRPS is, in uqcal, the mean quantile score over its L levels (scoringrules' ``crps_quantile``),
in skpro the exact CRPS of the histogram: the midpoint rule of the same integral over cells of width h = 1 / L, off
by O(h^2) = 2.5e-5 at L = 199 (1.7e-5 relative measured; the test allows 2e-4). A recalibrated predictive's CRPS
is in uqcal a 2000-node quadrature of its quantile function (rel 1e-4 against scipy's quad,
tests/metrics/test_every_predictive.py); skpro estimates a mixture's CRPS only by Monte Carlo (minutes, per-cent
noise), so its side is the integral of skpro's exact mixture CDF, int (F(t) - 1{t >= y})^2 dt, on a 20001-point
trapezoid grid (error < 1e-6 relative).
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np
import pytest
from scipy import stats

from uqcal.core.interop import from_skpro, to_skpro
from uqcal.core.predictive import (
    CategoricalPredictive,
    GaussianPredictive,
    QuantilePredictive,
    RecalibratedPredictive,
)
from uqcal.core.recalibration import IsotonicRecalibrator
from uqcal.metrics import all_metrics

if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    import skpro  # noqa: F401  (in the lock: a CI without it fails here)
else:
    pytest.importorskip("skpro")

import pandas as pd  # noqa: E402
from skpro.metrics import CRPS, EmpiricalCoverage, IntervalWidth, LogLoss, PinballLoss  # noqa: E402


def _frame(y):
    return pd.DataFrame({"y": np.asarray(y, dtype=np.float64)})


def _skpro_scores(distribution, y, alphas=(0.05, 0.5, 0.95)):
    truth = _frame(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skpro's notes on approximate methods and pandas' on dtypes
        out = {f"pinball_{a}": PinballLoss()(truth, distribution.quantile([a])) for a in alphas}
        # skpro's interval frame: columns (variable, coverage, lower / upper)
        bounds = distribution.quantile([0.05, 0.95]).to_numpy()
        interval = pd.DataFrame(bounds, columns=pd.MultiIndex.from_tuples([("y", 0.9, "lower"), ("y", 0.9, "upper")]))
        out["coverage_90"] = EmpiricalCoverage()(truth, interval)
        out["width_90"] = IntervalWidth()(truth, interval)
    return out


def test_gaussian_is_skpros_normal_and_both_score_the_same():
    rng = np.random.default_rng(0)
    prediction = GaussianPredictive(rng.normal(size=50), rng.uniform(0.5, 2.0, 50))
    y = rng.normal(size=50)
    distribution = to_skpro(prediction)
    assert type(distribution).__name__ == "Normal"
    back = from_skpro(distribution)
    assert isinstance(back, GaussianPredictive)
    np.testing.assert_array_equal(back.mean, prediction.mean)
    np.testing.assert_array_equal(back.std, prediction.std)
    ours, truth = all_metrics(prediction, y), _frame(y)
    assert CRPS()(truth, distribution) == pytest.approx(ours["crps"], rel=1e-9)
    assert LogLoss()(truth, distribution) == pytest.approx(ours["nlpd"], rel=1e-9)
    theirs = _skpro_scores(distribution, y)
    for level in ("05", "50", "95"):
        assert theirs[f"pinball_{int(level) / 100}"] == pytest.approx(ours[f"pinball_loss_{level}"], rel=1e-9)
    lower, upper = prediction.interval(0.9)
    assert theirs["coverage_90"] == ours["coverage_90"]
    assert theirs["width_90"] == pytest.approx(float(np.mean(upper - lower)), rel=1e-9)


def _normal_quantiles(n_levels: int, n: int = 30, seed: int = 1):
    rng = np.random.default_rng(seed)
    levels = (np.arange(n_levels) + 0.5) / n_levels  # midpoints of equal cells
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, n)
    return QuantilePredictive(levels, mean[:, None] + std[:, None] * stats.norm.ppf(levels)[None, :]), mean, std


def test_quantile_predictive_is_skpros_histogram_qpd_and_both_score_the_same():
    prediction, mean, std = _normal_quantiles(199)
    y = mean + std * np.random.default_rng(2).normal(size=30)
    distribution = to_skpro(prediction)
    assert type(distribution).__name__ == "HistogramQPD"
    back = from_skpro(distribution)
    assert isinstance(back, QuantilePredictive)
    np.testing.assert_array_equal(back.levels, prediction.levels)
    np.testing.assert_array_equal(back.quantiles, prediction.quantiles)
    ours, truth = all_metrics(prediction, y), _frame(y)
    # The same quantile function (linear between the levels): pinball losses and the 90 % interval, to skpro's
    # rounding of a histogram's quantiles to 4 decimals (skpro 2.16's Histogram._ppf), 5e-5 at most.
    theirs = _skpro_scores(distribution, y)
    for level in ("05", "50", "95"):
        assert theirs[f"pinball_{int(level) / 100}"] == pytest.approx(ours[f"pinball_loss_{level}"], rel=0, abs=5e-5)
    assert theirs["coverage_90"] == ours["coverage_90"]
    lower, upper = prediction.interval(0.9)
    assert theirs["width_90"] == pytest.approx(float(np.mean(upper - lower)), rel=0, abs=1e-4)  # two bounds rounded
    # The same CDF between the outer quantiles.
    inside = (y > prediction.quantiles[:, 0]) & (y < prediction.quantiles[:, -1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        skpro_cdf = distribution.cdf(truth).to_numpy()[:, 0]
        skpro_crps = CRPS()(truth, distribution)
    np.testing.assert_allclose(skpro_cdf[inside], prediction.cdf(y)[inside], rtol=0, atol=1e-12)
    # CRPS: uqcal's midpoint rule over the levels against skpro's exact histogram CRPS (module docstring); both
    # approach the normal's closed form.
    assert ours["crps"] == pytest.approx(skpro_crps, rel=2e-4)
    closed_form = float(np.mean(GaussianPredictive(mean, std).crps(y)))
    assert skpro_crps == pytest.approx(closed_form, rel=2e-4)


def _isotonic(seed: int = 3, n_test: int = 40):
    """An over-confident Gaussian (std 0.5 for noise of std 1), isotonically recalibrated on 300 held-out points."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=300)
    recalibrator = IsotonicRecalibrator().fit(GaussianPredictive(mean, np.full(300, 0.5)), mean + rng.normal(size=300))
    test_mean = rng.normal(size=n_test)
    return recalibrator.transform(GaussianPredictive(test_mean, np.full(n_test, 0.5))), test_mean + rng.normal(size=n_test)


def test_isotonic_recalibrated_is_a_mixture_of_truncated_normals_and_both_score_the_same():
    prediction, y = _isotonic()
    distribution = to_skpro(prediction)
    assert type(distribution).__name__ == "Mixture"
    back = from_skpro(distribution)
    assert isinstance(back, RecalibratedPredictive)
    # (CDFs to 1e-10: the pieces are cut at F^-1(p_k) and read back as F(F^-1(p_k)), round-off amplified in the tails)
    levels = np.array([0.01, 0.05, 0.3, 0.5, 0.95, 0.99])
    np.testing.assert_allclose(back.cdf(y), prediction.cdf(y), rtol=0, atol=1e-10)
    # (quantiles: the same round-off, relative to the predictions' scale, not to a quantile that may lie near 0)
    quantiles = prediction.ppf(levels)
    np.testing.assert_allclose(back.ppf(levels), quantiles, rtol=1e-10, atol=1e-10 * np.abs(quantiles).max())
    ours, truth = all_metrics(prediction, y), _frame(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert LogLoss()(truth, distribution) == pytest.approx(ours["nlpd"], rel=1e-9)
        np.testing.assert_allclose(distribution.cdf(truth).to_numpy()[:, 0], prediction.pit(y), rtol=0, atol=1e-10)
        # uqcal's quantiles are skpro's: its exact CDF at them gives back the levels (so the 90 % interval, its
        # coverage and the pinball losses are the same).
        for level in levels:
            at = _frame(prediction.ppf(level))
            np.testing.assert_allclose(distribution.cdf(at).to_numpy()[:, 0], level, rtol=0, atol=1e-9)
    # CRPS from skpro's exact CDF by quadrature (module docstring), for a few points.
    for i in (0, 33):
        one = RecalibratedPredictive(GaussianPredictive(prediction.base.mean[i:i + 1], prediction.base.std[i:i + 1]),
                                     prediction.cdf_map, prediction.inverse_map)
        grid = np.linspace(one.ppf(1e-12)[0], one.ppf(1 - 1e-12)[0], 20001)
        tiled = RecalibratedPredictive(GaussianPredictive(np.full(grid.size, one.base.mean[0]),
                                                          np.full(grid.size, one.base.std[0])),
                                       prediction.cdf_map, prediction.inverse_map)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cdf = to_skpro(tiled).cdf(_frame(grid)).to_numpy()[:, 0]
        integrand = (cdf - (grid >= y[i])) ** 2
        skpro_crps = float(np.sum((integrand[1:] + integrand[:-1]) / 2 * np.diff(grid)))
        assert one.crps(y[i:i + 1])[0] == pytest.approx(skpro_crps, rel=2e-4)


def test_kinds_without_a_faithful_counterpart_are_refused_by_name():
    from skpro.distributions import Laplace

    gaussian = GaussianPredictive(np.zeros(3), np.ones(3))
    with pytest.raises(TypeError, match="class labels"):
        to_skpro(CategoricalPredictive(np.full((3, 2), 0.5)))
    with pytest.raises(TypeError, match="MonotoneMap of a GaussianPredictive"):
        to_skpro(RecalibratedPredictive(gaussian, lambda p: p**2, np.sqrt))  # a map that is not piecewise linear
    recalibrated, _ = _isotonic(n_test=3)
    with pytest.raises(ValueError, match="logpdf_floor"):
        to_skpro(dataclasses.replace(recalibrated, logpdf_floor=-20.0))
    with pytest.raises(TypeError, match="MonotoneMap of a GaussianPredictive"):
        to_skpro(IsotonicRecalibrator().fit(recalibrated, np.zeros(3)).transform(recalibrated))  # recalibrated twice
    with pytest.raises(ValueError, match="strictly increasing"):
        to_skpro(QuantilePredictive([0.1, 0.5, 0.9], [[0.0, 0.0, 1.0]]))
    with pytest.raises(TypeError, match="Laplace"):
        from_skpro(Laplace(mu=np.zeros((3, 1)), scale=np.ones((3, 1))))
    from skpro.distributions import Mixture, Normal, TruncatedNormal

    two = [Normal(mu=np.zeros((3, 1)), sigma=np.ones((3, 1))), Normal(mu=np.ones((3, 1)), sigma=np.ones((3, 1)))]
    with pytest.raises(TypeError, match="TruncatedNormal pieces"):
        from_skpro(Mixture(two))
    halves = [TruncatedNormal(mu=np.full((3, 1), m), sigma=np.ones((3, 1)), l_trunc=np.full((3, 1), lo),
                              r_trunc=np.full((3, 1), hi)) for m, lo, hi in ((0.0, -np.inf, 0.0), (1.0, 0.0, np.inf))]
    with pytest.raises(ValueError, match="not one normal"):
        from_skpro(Mixture(halves))  # two different normals: no isotonic recalibration of one
    with pytest.raises(ValueError, match="one-column"):
        from_skpro(Normal(mu=np.zeros((3, 2)), sigma=np.ones((3, 2))))

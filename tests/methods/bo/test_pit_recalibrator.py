"""Recalibrators: monotone, R(0) = 0, R(1) = 1, identity fallback, direction of the sigma rescaling."""

import numpy as np
import pytest
from scipy.stats import norm

from uqcal.methods.bo.pit_recalibrator import GRID, empirical_cdf_targets, fit_recalibration


def _pits(scale, n=40, seed=0):
    # Residuals with std `scale` judged by a unit-variance forecast: scale > 1 = overconfident model.
    return norm.cdf(np.random.default_rng(seed).normal(scale=scale, size=n))


@pytest.mark.parametrize("method", ["isotonic", "gp"])
@pytest.mark.parametrize("scale", [0.4, 1.0, 3.0])
def test_monotone_with_endpoints(method, scale):
    recal = fit_recalibration(_pits(scale), method)
    values = recal(GRID)
    assert np.all(np.diff(values) >= -1e-12)
    assert values[0] == pytest.approx(0.0, abs=1e-12)
    assert values[-1] == pytest.approx(1.0, abs=1e-12)
    assert np.all((values >= 0) & (values <= 1))


@pytest.mark.parametrize("method", ["isotonic", "gp"])
def test_sigma_scale_direction(method):
    assert fit_recalibration(_pits(3.0), method).sigma_scale() > 1.5  # overconfident -> widen
    assert fit_recalibration(_pits(0.3), method).sigma_scale() < 0.7  # underconfident -> sharpen


def test_identity_fallback_with_too_few_points():
    recal = fit_recalibration(_pits(3.0, n=4), "isotonic", min_points=5)
    assert recal.identity
    assert recal.sigma_scale() == 1.0
    np.testing.assert_allclose(recal(GRID), GRID)


def test_isotonic_fit_is_the_empirical_cdf_on_its_support():
    pit = np.array([0.05, 0.1, 0.2, 0.8, 0.9, 0.95])
    np.testing.assert_allclose(empirical_cdf_targets(pit), np.arange(1, 7) / 6)
    recal = fit_recalibration(pit, "isotonic")
    # P_hat is increasing in F here, so isotonic regression interpolates it exactly at the data.
    np.testing.assert_allclose(recal(pit), np.arange(1, 7) / 6, atol=2e-3)


def _gaussian_map(shift, scale):
    """R of a forecast whose residuals are N(shift, scale^2) in its own standardised units:
    R(p) = Phi((Phi^-1(p) - shift) / scale) (so Z = Phi^-1(R^-1(U)) ~ N(shift, scale^2))."""
    from uqcal.methods.bo.pit_recalibrator import RecalibrationMap

    values = norm.cdf((norm.ppf(np.clip(GRID, 1e-300, 1.0)) - shift) / scale)
    values[0], values[-1] = 0.0, 1.0
    return RecalibrationMap(GRID.copy(), values)


def test_identity_moments_and_quantiles():
    from uqcal.methods.bo.pit_recalibrator import RecalibrationMap

    identity = RecalibrationMap.identity_map()
    assert identity.moments() == (0.0, 1.0)
    np.testing.assert_allclose(identity.quantile([0.1, 0.5, 0.9]), norm.ppf([0.1, 0.5, 0.9]), atol=1e-12)


@pytest.mark.parametrize("shift,scale", [(0.0, 1.0), (0.4, 1.5), (-0.3, 0.4)])
def test_moments_recover_a_gaussian_recalibration(shift, scale):
    # The piecewise-linear R interpolates the exact Gaussian R between knots uniform in z on [-6, 6]
    # (step 0.012): its moments differ from (shift, scale) by O(step^2) plus the Gaussian's mass beyond
    # |z| = 6, which the outermost knot intervals place near +-6 (< 1e-4 for these scales; ~2 % at 2.5).
    recal = _gaussian_map(shift, scale)
    mean, std = recal.moments()
    assert mean == pytest.approx(shift, abs=1e-3)
    assert std == pytest.approx(scale, rel=1e-3)
    np.testing.assert_allclose(recal.quantile([0.1, 0.5, 0.9]), shift + scale * norm.ppf([0.1, 0.5, 0.9]),
                               atol=1e-3)


@pytest.mark.parametrize("method", ["isotonic", "gp"])
def test_moments_match_monte_carlo_of_a_fitted_map(method):
    # Independent reference: sample Z = Phi^-1(R^-1(U)) by inverse transform and take its moments.
    recal = fit_recalibration(_pits(2.0, n=30, seed=4), method)
    z = norm.ppf(np.clip(recal.inverse(np.random.default_rng(0).uniform(size=400_000)), 1e-300, 1 - 1e-16))
    mean, std = recal.moments()
    assert mean == pytest.approx(z.mean(), abs=0.02)
    assert std == pytest.approx(z.std(), rel=0.02)

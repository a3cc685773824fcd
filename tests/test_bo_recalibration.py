"""Recalibrators: monotone, R(0) = 0, R(1) = 1, identity fallback, direction of the sigma rescaling."""

import numpy as np
import pytest
from scipy.stats import norm

from uqcal.methods.bo.recalibration import GRID, empirical_cdf_targets, fit_recalibration


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

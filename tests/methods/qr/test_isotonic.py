"""Isotonic recalibration in closed form vs numerical integration, interpolation, truncation, the toy."""

import numpy as np
import pytest
from scipy.stats import norm

from uqcal.methods.qr.isotonic import recalibrated_predictions
from uqcal.methods.qr.isotonic_gaussian import StandardisedRecalibration, isotonic_knots
from uqcal.methods.qr.toy import isotonic_toy, isotonic_toy_figure
from uqcal.metrics import gaussian_crps


def _overconfident_pits(m=40, seed=0):
    rng = np.random.default_rng(seed)
    mu, sigma = rng.normal(size=m), np.full(m, 0.6)  # true y ~ N(mu, 1): the forecast is too sharp
    y = mu + rng.normal(size=m)
    return mu, sigma, y, norm.cdf((y - mu) / sigma)


def test_isotonic_map_is_monotone_and_interpolates_recalibration_points():
    _, _, _, pit = _overconfident_pits()
    u, r = isotonic_knots(pit)
    assert np.all(np.diff(u) > 0) and np.all(np.diff(r) >= 0)
    assert (u[0], r[0]) == (0.0, 0.0)
    recal = StandardisedRecalibration(u, r)
    c = np.sort(pit)
    # Distinct, already sorted targets i/m are left untouched by PAVA (Sec. 3): R(c_(i)) = i/m.
    np.testing.assert_allclose(recal.cdf(norm.ppf(c)), np.arange(1, c.size + 1) / c.size, atol=1e-12)
    u_fix, r_fix = isotonic_knots(pit, endpoint_fix=True)
    recal_fix = StandardisedRecalibration(u_fix, r_fix)
    levels_fix = np.arange(1, c.size + 1) / (c.size + 1)
    np.testing.assert_allclose(recal_fix.cdf(norm.ppf(c)), levels_fix, atol=1e-12)
    z = np.linspace(-6, 6, 2001)
    assert np.all(np.diff(recal.cdf(z)) >= 0)


def _numerical_moments(recal):
    """Adaptive quadrature of the recalibrated density piece by piece (it jumps at the knots)."""
    from scipy.integrate import quad

    edges = np.clip(norm.ppf(recal.u), -40.0, 40.0)
    moments = np.zeros(3)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        mid = 0.5 * (lo + hi)
        for power in range(3):
            # evaluate inside the piece (the density is left/right continuous only there)
            def integrand(z, p=power, lo=lo, hi=hi):
                return z**p * recal.pdf(np.array([min(max(z, lo + 1e-12), hi - 1e-12)]))[0]

            value, _ = quad(integrand, lo, hi, points=[mid], limit=200)
            moments[power] += value
    mass, first, second = moments
    return mass, first / mass, np.sqrt(second / mass - (first / mass) ** 2)


@pytest.mark.parametrize("endpoint_fix", [False, True])
def test_mean_shift_and_std_match_numerical_integration(endpoint_fix):
    _, _, _, pit = _overconfident_pits(seed=1)
    recal = StandardisedRecalibration(*isotonic_knots(pit, endpoint_fix=endpoint_fix))
    mass, mean, std = _numerical_moments(recal)
    assert mass == pytest.approx(1.0, abs=1e-7)
    assert -recal.delta == pytest.approx(mean, abs=1e-7)
    assert recal.std_factor == pytest.approx(std, abs=1e-6)
    assert abs(recal.delta) > 1e-3  # a real shift, not a trivial zero


def test_delta_matches_paper_eq4_from_raw_predictions():
    # Claim 3 / Eq. 4: delta = sum_i 1/m (sigma_(i+1) p_(i+1) - sigma_(i) p_(i)) / (c_(i+1) - c_(i)).
    mu, sigma, y, pit = _overconfident_pits(m=25, seed=2)
    order = np.argsort(pit)
    c = np.concatenate([[0.0], pit[order]])
    sigma_p = np.concatenate([[0.0], (sigma * norm.pdf(y, mu, sigma))[order]])
    m = pit.size
    delta_eq4 = np.sum((sigma_p[1:] - sigma_p[:-1]) / (c[1:] - c[:-1])) / m
    assert StandardisedRecalibration(*isotonic_knots(pit)).delta == pytest.approx(delta_eq4, rel=1e-9)


def test_truncation_zero_density_and_endpoint_fix():
    _, _, _, pit = _overconfident_pits(seed=3)
    recal = StandardisedRecalibration(*isotonic_knots(pit))
    beyond = norm.ppf(np.max(pit)) + 0.5
    assert recal.truncated
    assert recal.pdf(np.array([beyond]))[0] == 0.0 and recal.logpdf(np.array([beyond]))[0] == -np.inf
    assert recal.cdf(np.array([beyond]))[0] == 1.0
    fixed = StandardisedRecalibration(*isotonic_knots(pit, endpoint_fix=True))
    assert not fixed.truncated and np.isfinite(fixed.logpdf(np.array([beyond]))[0])


def test_quantiles_invert_cdf_and_identity_crps_matches_gaussian():
    _, _, _, pit = _overconfident_pits(seed=4)
    recal = StandardisedRecalibration(*isotonic_knots(pit, endpoint_fix=True))
    q = np.array([0.025, 0.16, 0.5, 0.84, 0.975])
    np.testing.assert_allclose(recal.cdf(recal.quantile(q)), q, atol=1e-9)
    identity = StandardisedRecalibration(np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    assert identity.delta == pytest.approx(0.0, abs=1e-12) and identity.std_factor == pytest.approx(1.0)
    z = np.array([-2.0, -0.3, 0.0, 1.1, 3.0])
    np.testing.assert_allclose(identity.crps(z), [gaussian_crps(np.array([v]), np.zeros(1), np.ones(1))
                                                  for v in z], rtol=1e-4)


def test_recalibrated_predictions_units_and_clipping():
    _, _, _, pit = _overconfident_pits(seed=5)
    recal = StandardisedRecalibration(*isotonic_knots(pit))
    y = np.array([10.0, 12.0, 1e3])  # the last is far beyond the truncation point
    mean, std = np.array([10.0, 10.0, 10.0]), np.array([2.0, 2.0, 2.0])
    frame, diag = recalibrated_predictions(y, mean, std, recal, logpdf_floor=-20.0)
    np.testing.assert_allclose(frame["mean"], mean - recal.delta * std)
    # Density in original units = standardised density / std.
    np.testing.assert_allclose(np.exp(frame["logpdf"][:2]), recal.pdf((y[:2] - mean[:2]) / std[:2]) / 2.0)
    assert frame["logpdf"].iloc[2] == -20.0 and diag["zero_density_fraction"] == pytest.approx(1 / 3)
    assert diag["max_density"] == pytest.approx(np.exp(frame["logpdf"][:2]).max())
    assert np.all(frame["q0.025"] < frame["q0.975"])


def test_isotonic_toy_is_spiky_and_its_mean_shift_is_exact(tmp_path):
    toy = isotonic_toy(seed=0)
    assert toy["pit_cal"].size == 32 and toy["x_train"].size == 256
    assert toy["max_pdf_ratio"] > 1.5  # spiky: density ratio to the base far from 1 somewhere
    y, pdf = toy["y_grid"], toy["pdf_iso"]
    # The toy's closed-form shifted mean against quadrature of its recalibrated density.
    _, mean_z, _ = _numerical_moments(StandardisedRecalibration(toy["knots_u"], toy["knots_r"]))
    assert toy["mean_iso"] == pytest.approx(toy["mu"] + toy["sigma"] * mean_z, abs=1e-6)
    assert toy["mean_iso"] != pytest.approx(toy["mu"], abs=1e-3)
    assert np.all(pdf[y > toy["truncation_point"] + 1e-9] == 0.0)
    out = isotonic_toy_figure(tmp_path / "toy.png")
    assert (tmp_path / "toy.png").stat().st_size > 10_000 and out["mu"] == toy["mu"]

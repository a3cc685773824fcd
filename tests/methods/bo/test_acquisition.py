"""Calibrated EI/PI/UCB: identity R equals botorch's analytic acquisitions; quantile EI equals Monte Carlo."""

import numpy as np
import pytest
import torch
from botorch.acquisition.analytic import ExpectedImprovement, ProbabilityOfImprovement, UpperConfidenceBound
from scipy.stats import norm

from uqcal.data.objectives import make_synthetic
from uqcal.methods.bo.acquisition import CalibratedAcquisition
from uqcal.methods.bo.pit_recalibrator import GRID, RecalibrationMap
from uqcal.methods.bo.surrogate import fit_gp

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_and_data():
    objective = make_synthetic("sixhump")
    u = np.random.default_rng(0).uniform(size=(10, 2))
    y = objective(objective.to_native(u))
    model, _ = fit_gp(torch.as_tensor(u), torch.as_tensor(y))
    test_x = torch.as_tensor(np.random.default_rng(1).uniform(size=(64, 1, 2)))
    return model, float(y.min()), test_x


@pytest.mark.parametrize("mode,atol", [("matched", 1e-10), ("sigma", 1e-10), ("quantile", 1e-5)])
def test_identity_recalibration_equals_botorch(model_and_data, mode, atol):
    model, best, x = model_and_data
    beta = 4.0
    references = {
        "ei": ExpectedImprovement(model, best_f=best, maximize=False),
        "pi": ProbabilityOfImprovement(model, best_f=best, maximize=False),
        "ucb": UpperConfidenceBound(model, beta=beta, maximize=False),
    }
    for kind, reference in references.items():
        ours = CalibratedAcquisition(model, kind, best, RecalibrationMap.identity_map(), beta, mode)
        with torch.no_grad():
            np.testing.assert_allclose(ours(x).numpy(), reference(x).numpy(), atol=atol, rtol=1e-6)


def _widening_map():
    # An overconfident model's R: pushes mass to the tails (R(p) below p under 0.5, above p over 0.5).
    values = norm.cdf(norm.ppf(np.clip(GRID, 1e-12, 1 - 1e-12)) / 2.0)
    values[0], values[-1] = 0.0, 1.0
    return RecalibrationMap(GRID.copy(), values)


def test_quantile_mode_matches_monte_carlo_under_calibrated_cdf(model_and_data):
    model, best, x = model_and_data
    recal = _widening_map()
    ei = CalibratedAcquisition(model, "ei", best, recal, mode="quantile")
    pi = CalibratedAcquisition(model, "pi", best, recal, mode="quantile")
    ucb = CalibratedAcquisition(model, "ucb", best, recal, beta=4.0, mode="quantile")
    with torch.no_grad():
        post = model.posterior(x[:8])
        mean = post.mean.reshape(-1).numpy()
        std = post.variance.reshape(-1).sqrt().numpy()
        ei_values, pi_values, ucb_values = (a(x[:8]).numpy() for a in (ei, pi, ucb))
    u01 = np.random.default_rng(5).uniform(size=400_000)
    z = norm.ppf(recal.inverse(u01))  # samples of the calibrated standardised forecast
    for j in range(8):
        samples = mean[j] + std[j] * z
        assert ei_values[j] == pytest.approx(np.mean(np.maximum(best - samples, 0.0)), rel=2e-2, abs=1e-4)
        assert pi_values[j] == pytest.approx(np.mean(samples < best), abs=5e-3)
        assert -ucb_values[j] == pytest.approx(np.quantile(samples, norm.cdf(-2.0)), rel=1e-2, abs=1e-3)


def test_sigma_mode_widens_with_an_overconfident_map(model_and_data):
    model, best, x = model_and_data
    recal = _widening_map()
    assert recal.sigma_scale() == pytest.approx(2.0, rel=1e-3)  # R built from a 2x wider Gaussian
    wide = CalibratedAcquisition(model, "ucb", best, recal, beta=4.0, mode="sigma")
    base = UpperConfidenceBound(model, beta=16.0, maximize=False)  # 2 * sqrt(4) = sqrt(16)
    with torch.no_grad():
        np.testing.assert_allclose(wide(x).numpy(), base(x).numpy(), rtol=1e-3, atol=1e-6)


def _shifted_map(shift, scale):
    values = norm.cdf((norm.ppf(np.clip(GRID, 1e-300, 1.0)) - shift) / scale)
    values[0], values[-1] = 0.0, 1.0
    return RecalibrationMap(GRID.copy(), values)


def test_matched_rule_against_numerical_integration(model_and_data):
    # The recalibrated forecast of a Gaussian R(p) = Phi((Phi^-1(p) - m) / s) is N(mu + sigma m, (sigma s)^2)
    # exactly, so the matched EI / PI must equal E[max(b - Y, 0)] and P(Y < b) under it (scipy quad and
    # the normal CDF here, independent of the code's closed forms), and the matched LCB its Phi(-2)-quantile.
    from scipy.integrate import quad

    model, best, x = model_and_data
    shift, scale = 0.3, 1.4  # mass beyond the map's |z| = 6 knots < 1e-4 (test_bo_pit_recalibrator)
    recal = _shifted_map(shift, scale)
    acqs = {kind: CalibratedAcquisition(model, kind, best, recal, beta=4.0, mode="matched")
            for kind in ("ei", "pi", "ucb")}
    with torch.no_grad():
        post = model.posterior(x[:6])
        mean = post.mean.reshape(-1).numpy()
        std = post.variance.reshape(-1).sqrt().numpy()
        values = {kind: acq(x[:6]).numpy() for kind, acq in acqs.items()}
    for j in range(6):
        mu, sd = mean[j] + std[j] * shift, std[j] * scale
        ei = quad(lambda t, mu=mu, sd=sd: (best - t) * norm.pdf(t, mu, sd), mu - 12 * sd, best)[0]
        assert values["ei"][j] == pytest.approx(max(ei, 0.0), rel=2e-3, abs=1e-8)
        assert values["pi"][j] == pytest.approx(norm.cdf(best, mu, sd), rel=2e-3, abs=1e-8)
        assert -values["ucb"][j] == pytest.approx(mu + sd * norm.ppf(norm.cdf(-2.0)), rel=1e-3, abs=1e-3)


def test_recalibrated_pit_is_the_pit_under_the_acted_on_forecast(model_and_data):
    model, best, _ = model_and_data
    recal = _shifted_map(0.3, 1.4)
    z = np.array([-2.0, 0.0, 0.7, 3.0])
    for kind in ("ei", "ucb"):  # matched Gaussian (EI) and recalibrated CDF (UCB): both N(0.3, 1.4^2) here
        acq = CalibratedAcquisition(model, kind, best, recal, mode="matched")
        np.testing.assert_allclose([acq.recalibrated_pit(v) for v in z], norm.cdf((z - 0.3) / 1.4), atol=2e-3)
        np.testing.assert_allclose(acq.standardised_quantile(np.array([0.025, 0.975])),
                                   0.3 + 1.4 * norm.ppf([0.025, 0.975]), atol=5e-3)

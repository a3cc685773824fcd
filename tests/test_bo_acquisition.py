"""Calibrated EI/PI/UCB: identity R equals botorch's analytic acquisitions; quantile EI equals Monte Carlo."""

import numpy as np
import pytest
import torch
from botorch.acquisition.analytic import ExpectedImprovement, ProbabilityOfImprovement, UpperConfidenceBound
from scipy.stats import norm

from uqcal.methods.bo.acquisition import CalibratedAcquisition
from uqcal.methods.bo.recalibration import GRID, RecalibrationMap
from uqcal.methods.bo.surrogate import fit_gp
from uqcal.objectives import make_synthetic

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_and_data():
    objective = make_synthetic("sixhump")
    u = np.random.default_rng(0).uniform(size=(10, 2))
    y = objective(objective.to_native(u))
    model, _ = fit_gp(torch.as_tensor(u), torch.as_tensor(y))
    test_x = torch.as_tensor(np.random.default_rng(1).uniform(size=(64, 1, 2)))
    return model, float(y.min()), test_x


@pytest.mark.parametrize("mode,atol", [("sigma", 1e-10), ("quantile", 1e-5)])
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


def _botorch_mean_and_sigma(monkeypatch):
    from botorch.acquisition.analytic import AnalyticAcquisitionFunction

    monkeypatch.setattr(CalibratedAcquisition, "_mean_and_sigma", AnalyticAcquisitionFunction._mean_and_sigma)


@pytest.mark.parametrize("kernel,d", [("rbf", 1), ("rbf", 2), ("matern52", 2)])
def test_posterior_moments_are_bit_identical_to_botorchs_posterior(monkeypatch, kernel, d):
    # The reference is botorch's AnalyticAcquisitionFunction._mean_and_sigma (model.posterior through gpytorch).
    from uqcal.methods.bo.acquisition import posterior_moments

    g = torch.Generator().manual_seed(d)
    train_x = torch.rand(9, d, dtype=torch.float64, generator=g)
    train_y = torch.sin(6 * train_x).sum(-1)
    model, _ = fit_gp(train_x, train_y, kernel)
    best = float(train_y.min())
    assert posterior_moments(model, train_x[:1].unsqueeze(0)) is None  # no prediction caches yet: botorch's path
    cases = []
    for kind in ("ei", "pi", "ucb"):
        for mode, recal in (("sigma", RecalibrationMap.identity_map()), ("sigma", _widening_map()),
                            ("quantile", _widening_map())):
            acq = CalibratedAcquisition(model, kind, best, recal, 4.0, mode)
            for shape, grad in (((64, 1, d), False), ((2, 1, d), True), ((3, 1, d), True)):
                x = torch.rand(*shape, dtype=torch.float64, generator=g)
                if shape[0] == 3:
                    x[1] = train_x[0]  # (near-)zero posterior variance: exercises the variance clamps
                cases.append((acq, x, grad))
    with torch.no_grad():
        cases[0][0](cases[0][1])  # botorch builds the prediction caches both paths then share

    def evaluate(acq, x, grad):
        x = x.clone().requires_grad_(grad)
        with torch.set_grad_enabled(grad):
            value = acq(x)
            return value.detach(), torch.autograd.grad(value.sum(), x)[0] if grad else None

    fast = [evaluate(*case) for case in cases]
    assert posterior_moments(model, cases[0][1]) is not None
    _botorch_mean_and_sigma(monkeypatch)
    reference = [evaluate(*case) for case in cases]
    for (value, grad), (value_ref, grad_ref) in zip(fast, reference, strict=True):
        assert torch.equal(value, value_ref)
        assert grad is None or torch.equal(grad, grad_ref)


def test_optimize_acqf_proposes_the_same_point_as_with_botorchs_posterior(monkeypatch, model_and_data):
    from botorch.optim import optimize_acqf

    model, best, _ = model_and_data
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)

    def propose():
        torch.manual_seed(3)
        acq = CalibratedAcquisition(model, "ei", best, _widening_map())
        return optimize_acqf(acq, bounds=bounds, q=1, num_restarts=2, raw_samples=64)

    fast = propose()
    _botorch_mean_and_sigma(monkeypatch)
    reference = propose()
    assert torch.equal(fast[0], reference[0]) and torch.equal(fast[1], reference[1])

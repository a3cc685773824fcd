"""Closed-form LOO / time-series PIT against brute-force conditioning with fixed hyperparameters."""

import copy

import numpy as np
import pytest
import torch
from scipy.stats import norm

from uqcal.methods.bo.surrogate import fit_gp, loo_moments, loo_pit, timeseries_pit
from uqcal.objectives import make_synthetic

torch.set_num_threads(1)


@pytest.fixture(scope="module", params=["rbf", "matern52"])
def fitted(request):
    objective = make_synthetic("branin")
    u = np.random.default_rng(3).uniform(size=(12, 2))
    x = torch.as_tensor(u)
    y = torch.as_tensor(objective(objective.to_native(u)))
    model, _ = fit_gp(x, y, request.param)
    return model, x


def _brute_force(model, x, keep, target):
    """gpytorch's own exact prediction on the reduced data set, same hyperparameters (standardised units)."""
    reduced = copy.deepcopy(model)
    reduced.set_train_data(inputs=x[keep], targets=model.train_targets[keep], strict=False)
    reduced.eval()
    with torch.no_grad():
        predictive = reduced.likelihood(reduced(x[target : target + 1]))
    return float(predictive.mean.detach()), float(predictive.variance.detach())


def test_closed_form_loo_matches_refits_with_fixed_hyperparameters(fitted):
    model, x = fitted
    y, mu, var = loo_moments(model)
    n = len(y)
    for i in range(n):
        keep = torch.arange(n) != i
        mean_ref, var_ref = _brute_force(model, x, keep, i)
        assert abs(float(mu[i]) - mean_ref) < 1e-6
        assert abs(float(var[i]) - var_ref) < 1e-6
    pit = loo_pit(model)
    ref = norm.cdf((y.numpy() - mu.numpy()) / np.sqrt(var.numpy()))
    np.testing.assert_allclose(pit, ref, atol=1e-10)


def test_timeseries_pit_matches_prefix_predictions(fitted):
    model, x = fitted
    y = model.train_targets
    pit = timeseries_pit(model, start=1)
    for t in range(1, len(y)):
        mean_ref, var_ref = _brute_force(model, x, torch.arange(len(y)) < t, t)
        assert abs(pit[t - 1] - norm.cdf((float(y[t]) - mean_ref) / np.sqrt(var_ref))) < 1e-6


def test_fit_without_gpytorch_debug_checks_is_identical():
    # CalibratedBO fits with gpytorch.settings.debug(False) for speed; the fitted state must not change
    import gpytorch

    g = torch.Generator().manual_seed(0)
    x = torch.rand(20, 3, dtype=torch.float64, generator=g)
    y = (x**2).sum(-1) + 0.1 * torch.randn(20, dtype=torch.float64, generator=g)
    checked, _ = fit_gp(x, y)
    with gpytorch.settings.debug(False):
        unchecked, _ = fit_gp(x, y)
    for (key, a), (key_b, b) in zip(checked.state_dict().items(), unchecked.state_dict().items(), strict=True):
        assert key == key_b and torch.equal(a, b), key

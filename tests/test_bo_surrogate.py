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


# ---------------------------------------------------------------- ExactMLLLoss (fit_gp's fast closure)
def _data(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, dtype=torch.float64, generator=g)
    y = torch.sin(6 * x).sum(-1) + 0.05 * torch.randn(n, dtype=torch.float64, generator=g)
    return x, y


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
@pytest.mark.parametrize("n,d", [(4, 1), (12, 2), (9, 5)])
def test_fast_mll_closure_is_bit_identical_to_botorchs(kernel, n, d):
    # The reference is botorch's own closure: -ExactMarginalLogLikelihood through gpytorch's linear operators.
    from botorch.optim.closures import get_loss_closure_with_grads
    from botorch.optim.utils import get_parameters_and_bounds
    from gpytorch.mlls import ExactMarginalLogLikelihood
    from linear_operator.utils.errors import NotPSDError

    from uqcal.methods.bo.surrogate import fast_loss_closure, make_gp

    x, y = _data(n, d, seed=n * d)
    model = make_gp(x, y, kernel)
    mll = ExactMarginalLogLikelihood(model.likelihood, model).train()
    all_params, bounds = get_parameters_and_bounds(mll)
    params = {k: p for k, p in all_params.items() if p.requires_grad}
    reference = get_loss_closure_with_grads(mll, parameters=params)
    fast = fast_loss_closure(mll)
    assert fast is not None
    g = torch.Generator().manual_seed(7)
    compared = 0
    for _ in range(20):
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(torch.randn(p.shape, dtype=p.dtype, generator=g))
                lower = bounds.get(name, (None, None))[0]
                if lower is not None and torch.isfinite(lower):  # the noise >= 1e-4 is an L-BFGS-B bound
                    p.copy_(lower + p.abs())
        try:
            value, grads = reference()
        except (NotPSDError, ValueError) as error:  # same factorisation / prior support check, same failure
            with pytest.raises(type(error)):
                fast.closure()
            continue
        fast_value, fast_grads = fast(fast.state)  # numpy API: (value, flat gradient)
        assert float(value) == float(fast_value)
        flat = np.concatenate([gr.reshape(-1).numpy() for gr in grads])
        np.testing.assert_array_equal(flat, fast_grads)
        compared += 1
    assert compared >= 10


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
@pytest.mark.parametrize("n,d", [(3, 1), (7, 1), (8, 2), (15, 2), (12, 6)])
def test_fast_fit_is_bit_identical_to_botorchs_fit(kernel, n, d):
    # Whole L-BFGS runs: one differing bit in any loss or gradient would change the fitted state.
    import gpytorch

    x, y = _data(n, d, seed=100 + n * d)
    with gpytorch.settings.debug(False):
        reference, failed_ref = fit_gp(x, y, kernel, fast=False)
        fast, failed = fit_gp(x, y, kernel, fast=True)
    assert failed == failed_ref
    for (key, a), (key_b, b) in zip(reference.state_dict().items(), fast.state_dict().items(), strict=True):
        assert key == key_b and torch.equal(a, b), key


def test_fast_closure_declines_models_it_does_not_mirror():
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.input import Normalize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from uqcal.methods.bo.surrogate import ExactMLLLoss, fast_loss_closure, make_gp

    x, y = _data(6, 2, seed=1)
    plain = make_gp(x, y)
    assert ExactMLLLoss.supports(ExactMarginalLogLikelihood(plain.likelihood, plain))
    normalised = SingleTaskGP(x, y.reshape(-1, 1), input_transform=Normalize(d=2))  # default kernel: no ScaleKernel
    assert fast_loss_closure(ExactMarginalLogLikelihood(normalised.likelihood, normalised)) is None

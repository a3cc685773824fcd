"""GP surrogate and held-out PIT values for recalibration (Deshpande & Kuleshov, Algorithms 3-4).

The surrogate is botorch's SingleTaskGP on unit-cube inputs with an explicit RBF kernel (Matern-5/2 as an
option), a Standardize outcome transform (paper Sec. 5: "output values ... are normalized") and ML-II
hyperparameters from ``fit_gpytorch_mll``.

Held-out PIT values F_i = [M_{-i}(x_i)](y_i) (Algorithm 4), three ways:

- ``loo`` (default): leave-one-out in closed form with the hyperparameters and the standardisation held
  fixed (Rasmussen & Williams Eq. 5.12): with K = k(X, X) + sigma_n^2 I and r = y - c (standardised
  targets minus the constant mean), mu_{-i} = y_i - [K^-1 r]_i / [K^-1]_ii and
  sigma^2_{-i} = 1 / [K^-1]_ii. This is the predictive of the *noisy* observation y_i, so
  PIT_i = Phi([K^-1 r]_i / sqrt([K^-1]_ii)). PIT values are invariant to the standardisation.
- ``loo_refit``: N exact ML-II refits on D minus point i (what public re-implementations do).
- ``timeseries``: one-step-ahead forecasts in observation order with fixed hyperparameters. With
  K = L L^T, e = L^-1 r holds the standardised innovations, e_t = (y_t - mu_{t|<t}) / sigma_{t|<t},
  so PIT_t = Phi(e_t) from a single Cholesky factorisation.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

KERNELS = ("rbf", "matern52")
PIT_MODES = ("loo", "loo_refit", "timeseries")


def make_gp(train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf"):
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

    if kernel not in KERNELS:
        raise ValueError(f"kernel {kernel!r} not in {KERNELS}")
    d = train_x.shape[-1]
    base = RBFKernel(ard_num_dims=d) if kernel == "rbf" else MaternKernel(nu=2.5, ard_num_dims=d)
    return SingleTaskGP(
        train_x, train_y.reshape(-1, 1), covar_module=ScaleKernel(base), outcome_transform=Standardize(m=1)
    )


def fit_gp(train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf"):
    """ML-II fit with botorch's ``fit_gpytorch_mll`` (its scipy L-BFGS-B on gpytorch's exact MLL closure).

    Returns (model, fit_failed: bool); a failed fit keeps botorch's initial hyperparameters.
    """
    from botorch.exceptions import ModelFittingError
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    model = make_gp(train_x, train_y, kernel)
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    failed = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit_gpytorch_mll(mll)
        except ModelFittingError:
            failed = True
    model.eval()
    return model, failed


def _standardised_system(model) -> tuple[torch.Tensor, torch.Tensor]:
    """(K incl. noise, r = standardised targets minus constant mean) of a fitted SingleTaskGP."""
    x = model.train_inputs[0]
    y = model.train_targets  # already standardised by the outcome transform
    noise = model.likelihood.noise.reshape(-1)
    with torch.no_grad():
        k = model.covar_module(x).to_dense()
        k = k + noise * torch.eye(len(y), dtype=k.dtype)
        r = y - model.mean_module.constant.reshape(())
    return k, r


def _cholesky(k: torch.Tensor) -> torch.Tensor:
    from gpytorch.utils.cholesky import psd_safe_cholesky

    return psd_safe_cholesky(k)


def loo_moments(model) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Closed-form LOO (standardised units): (y, mu_{-i}, sigma^2_{-i}) with fixed hyperparameters."""
    k, r = _standardised_system(model)
    chol = _cholesky(k)
    k_inv = torch.cholesky_inverse(chol)
    alpha = torch.cholesky_solve(r.unsqueeze(-1), chol).squeeze(-1)
    diag = torch.diagonal(k_inv)
    y = model.train_targets
    return y, y - alpha / diag, 1.0 / diag


def loo_pit(model) -> np.ndarray:
    """PIT_i = Phi((y_i - mu_{-i}) / sigma_{-i}) = Phi([K^-1 r]_i / sqrt([K^-1]_ii))."""
    y, mu, var = loo_moments(model)
    z = (y - mu) / var.sqrt()
    return torch.special.ndtr(z).detach().cpu().numpy()


def timeseries_pit(model, start: int = 1) -> np.ndarray:
    """One-step-ahead PIT values e_t -> Phi(e_t) for t >= start (observation order), fixed hyperparameters."""
    k, r = _standardised_system(model)
    chol = _cholesky(k)
    innovations = torch.linalg.solve_triangular(chol, r.unsqueeze(-1), upper=False).squeeze(-1)
    return torch.special.ndtr(innovations[start:]).detach().cpu().numpy()


def refit_loo_pit(train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf") -> np.ndarray:
    """LOO by N exact ML-II refits (Algorithm 4 taken literally); the slow reference for benchmarks."""
    n = len(train_y)
    pits = np.empty(n)
    for i in range(n):
        keep = torch.arange(n) != i
        model, _ = fit_gp(train_x[keep], train_y[keep], kernel)
        with torch.no_grad():
            post = model.posterior(train_x[i : i + 1], observation_noise=True)
            mean, std = post.mean.reshape(()), post.variance.reshape(()).sqrt()
        pits[i] = float(torch.special.ndtr((train_y[i] - mean) / std))
    return pits


def heldout_pit(model, mode: str, train_x=None, train_y=None, kernel: str = "rbf") -> np.ndarray:
    if mode == "loo":
        return loo_pit(model)
    if mode == "timeseries":
        return timeseries_pit(model)
    if mode == "loo_refit":
        return refit_loo_pit(train_x, train_y, kernel)
    raise ValueError(f"pit_mode {mode!r} not in {PIT_MODES}")

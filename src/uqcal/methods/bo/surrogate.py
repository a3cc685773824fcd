"""GP surrogate and held-out PIT values for recalibration (Deshpande & Kuleshov, Algorithms 3-4).

The surrogate is botorch's SingleTaskGP on unit-cube inputs with an explicit RBF kernel (Matern-5/2 as an
option), a Standardize outcome transform (paper Sec. 5: "output values ... are normalized") and ML-II
hyperparameters from botorch's ``fit_gpytorch_mll``.

Held-out PIT values F_i = [M'_i(x_i)](y_i) (Algorithm 4, step 3), three ways (``PIT_MODES``):

- ``refit_loo`` (default, the paper's): leave-one-out splits (Sec. 3.3, "we used leave-one-out
  cross-validation within CREATESPLITS") and a base model M'_i *retrained* on D minus point i
  (Algorithm 4a): its own standardisation and its own ML-II hyperparameters. The N refits are one batched
  SingleTaskGP (batch i = D minus point i) that botorch's ``fit_gpytorch_mll`` fits with its batched
  independent L-BFGS-B (each batch member is its own optimisation problem with its own convergence test,
  so the result is that of N separate fits; tested). Each refit is warm-started at the full-data fit's
  hyperparameters (lengthscales, outputscale, noise, constant mean), as botorch's closed-loop tutorial and
  public re-implementations do; the paper does not say how its refits are initialised.
- ``closed_loo`` (ablation ``calibrated_fastloo``): leave-one-out in closed form with the hyperparameters
  and the standardisation of the full-data fit held fixed (Rasmussen & Williams Eq. 5.12): with
  K = k(X, X) + sigma_n^2 I and r = y - c (standardised targets minus the constant mean),
  mu_{-i} = y_i - [K^-1 r]_i / [K^-1]_ii and sigma^2_{-i} = 1 / [K^-1]_ii, the predictive of the *noisy*
  observation y_i, so PIT_i = Phi([K^-1 r]_i / sqrt([K^-1]_ii)). No model is retrained, which is not what
  Algorithm 4 does: the hyperparameters have seen point i.
- ``timeseries``: the paper's other split ("time-series splits", Sec. 5): one-step-ahead forecasts in
  observation order with the full-data hyperparameters held fixed. With K = L L^T, e = L^-1 r holds the
  standardised innovations e_t = (y_t - mu_{t|<t}) / sigma_{t|<t}, so PIT_t = Phi(e_t).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from botorch.models import SingleTaskGP

KERNELS = ("rbf", "matern52")
PIT_MODES = ("refit_loo", "closed_loo", "timeseries")


def make_gp(train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf"):
    """SingleTaskGP(ScaleKernel(ARD kernel), Standardize). ``train_x`` may carry batch dimensions
    (b x n x d, ``train_y`` b x n): one independent GP per batch member, each standardised on its own data."""
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

    if kernel not in KERNELS:
        raise ValueError(f"kernel {kernel!r} not in {KERNELS}")
    batch = train_x.shape[:-2]
    d = train_x.shape[-1]
    if kernel == "rbf":
        base = RBFKernel(ard_num_dims=d, batch_shape=batch)
    else:
        base = MaternKernel(nu=2.5, ard_num_dims=d, batch_shape=batch)
    return SingleTaskGP(
        train_x, train_y.unsqueeze(-1), covar_module=ScaleKernel(base, batch_shape=batch),
        outcome_transform=Standardize(m=1, batch_shape=batch),
    )


def _fit(model) -> bool:
    """botorch's ``fit_gpytorch_mll`` from the model's current hyperparameters; True if it failed (the model
    then keeps botorch's rolled-back state)."""
    from botorch.exceptions import ModelFittingError
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    failed = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit_gpytorch_mll(mll)
        except ModelFittingError:
            failed = True
    model.eval()
    return failed


def fit_gp(train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf") -> tuple[SingleTaskGP, bool]:
    """ML-II fit from botorch's initial hyperparameters. Returns (model, fit_failed: bool).

    Parameters
    ----------
    train_x : torch.Tensor of shape (..., n, d)
        Inputs (unit cube); leading batch dimensions fit one independent GP per member.
    train_y : torch.Tensor of shape (..., n)
        Targets (standardised inside by the model's outcome transform).
    kernel : {"rbf", "matern52"}, default "rbf"
        The ARD kernel under a ScaleKernel.

    Returns
    -------
    tuple of (botorch.models.SingleTaskGP, bool)
        The fitted model in eval mode, and whether botorch's ``fit_gpytorch_mll`` failed (the model then keeps
        botorch's rolled-back state).
    """
    model = make_gp(train_x, train_y, kernel)
    return model, _fit(model)


def hyperparameters(model) -> dict[str, torch.Tensor]:
    """The fitted hyperparameters through gpytorch's public properties (constrained values)."""
    return {
        "lengthscale": model.covar_module.base_kernel.lengthscale.detach(),
        "outputscale": model.covar_module.outputscale.detach(),
        "noise": model.likelihood.noise.detach(),
        "constant": model.mean_module.constant.detach(),
    }


def _warm_start(batched, start: dict[str, torch.Tensor]) -> None:
    """Set every batch member's hyperparameters to ``start`` (gpytorch's public setters)."""
    kernel = batched.covar_module
    kernel.base_kernel.lengthscale = start["lengthscale"].expand_as(kernel.base_kernel.lengthscale)
    kernel.outputscale = start["outputscale"].expand_as(kernel.outputscale)
    batched.likelihood.noise = start["noise"].expand_as(batched.likelihood.noise)
    batched.mean_module.constant = start["constant"].expand_as(batched.mean_module.constant)


def loo_train_sets(train_x: torch.Tensor, train_y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The N leave-one-out training sets stacked as a batch: (N x N-1 x d, N x N-1); row i drops point i."""
    n = len(train_y)
    keep = ~torch.eye(n, dtype=torch.bool, device=train_y.device)
    index = torch.arange(n, device=train_y.device).expand(n, n)[keep].reshape(n, n - 1)
    return train_x[index], train_y[index]


def refit_loo_pit(model, train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf"
                  ) -> tuple[np.ndarray, bool]:
    """Algorithm 4 with leave-one-out splits: PIT_i of y_i under the model retrained on D minus point i.

    ``model`` is the full-data fit whose hyperparameters warm-start the refits. Returns (PIT values,
    fit_failed). The held-out predictive includes the observation noise (y_i is a noisy observation).
    """
    loo_x, loo_y = loo_train_sets(train_x, train_y)
    batched = make_gp(loo_x, loo_y, kernel)
    _warm_start(batched, hyperparameters(model))
    failed = _fit(batched)
    with torch.no_grad():
        post = batched.posterior(train_x.unsqueeze(-2), observation_noise=True)  # batch i at x_i
        mean, var = post.mean.reshape(-1), post.variance.reshape(-1)
    return torch.special.ndtr((train_y - mean) / var.sqrt()).cpu().numpy(), failed


def _standardised_system(model) -> tuple[torch.Tensor, torch.Tensor]:
    """(K incl. noise, r = standardised targets minus constant mean) of a fitted SingleTaskGP."""
    x = model.train_inputs[0]
    y = model.train_targets  # already standardised by the outcome transform
    noise = model.likelihood.noise.reshape(-1)
    with torch.no_grad():
        k = model.covar_module(x).to_dense()
        k = k + noise * torch.eye(len(y), dtype=k.dtype, device=k.device)
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


def heldout_pit(model: SingleTaskGP, mode: str, train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf"
                ) -> tuple[np.ndarray, bool]:
    """Held-out PIT values of the recalibration set (Algorithm 4) -> (PIT values, a refit failed).

    Parameters
    ----------
    model : botorch.models.SingleTaskGP
        The full-data fit (``fit_gp``); its hyperparameters warm-start the refits or are held fixed.
    mode : {"refit_loo", "closed_loo", "timeseries"}
        How the PIT values are held out (the module's docstring).
    train_x : torch.Tensor of shape (n, d)
        The model's training inputs.
    train_y : torch.Tensor of shape (n,)
        Its training targets.
    kernel : {"rbf", "matern52"}, default "rbf"
        The kernel of the refits (``refit_loo``).

    Returns
    -------
    tuple of (numpy.ndarray, bool)
        The PIT values (n for the leave-one-out modes, n - 1 for ``timeseries``), and whether a refit failed.
    """
    if mode == "refit_loo":
        return refit_loo_pit(model, train_x, train_y, kernel)
    if mode == "closed_loo":
        return loo_pit(model), False
    if mode == "timeseries":
        return timeseries_pit(model), False
    raise ValueError(f"pit_mode {mode!r} not in {PIT_MODES}")

"""Batched closed-form exact GP posterior (Rasmussen & Williams Alg. 2.1; Iwata & Kumagai Eqs. 4-5).

Shared block: every tensor carries a leading batch dimension (one GP per task), so a meta-training step
over a batch of tasks is one batched Cholesky and two batched triangular solves, with no Python loop over
tasks. Kernel matrices are built by the caller (any kernel), which keeps this function kernel-agnostic.
"""

from __future__ import annotations

import torch

from uqcal.core.gp.linalg import JitterCounter, psd_safe_cholesky

__all__ = ["batched_gp_posterior", "squared_distances", "batched_cholesky"]


def squared_distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise squared Euclidean distances of (..., N, D) and (..., M, D) -> (..., N, M), clamped >= 0.

    Written out (not torch.cdist) so the gradient is finite at zero distance.

    Parameters
    ----------
    a : torch.Tensor
        Points, shape (..., N, D).
    b : torch.Tensor
        Points, shape (..., M, D).

    Returns
    -------
    torch.Tensor
        Squared distances, shape (..., N, M), at least 0.
    """
    a2 = (a * a).sum(-1, keepdim=True)
    b2 = (b * b).sum(-1, keepdim=True).transpose(-1, -2)
    return (a2 + b2 - 2.0 * a @ b.transpose(-1, -2)).clamp_min(0.0)


def batched_cholesky(matrix: torch.Tensor, jitter: float = 1e-6, max_tries: int = 6,
                     counter: JitterCounter | None = None) -> torch.Tensor:
    """Cholesky of a batch of PSD matrices, escalating diagonal jitter x10 per failed try.

    The shared ``uqcal.core.gp.linalg.psd_safe_cholesky`` (it counts escalations); its name in this module.

    Parameters
    ----------
    matrix : torch.Tensor
        Symmetric positive (semi-)definite matrices, shape (..., n, n).
    jitter : float, optional
        Initial jitter, relative to the mean of the diagonal.
    max_tries : int, optional
        How many escalations of the jitter (x10 each) before giving up.
    counter : JitterCounter or None, optional
        Counts the escalations (``JitterCounter``); None counts nothing.

    Returns
    -------
    torch.Tensor
        Lower Cholesky factors, shape (..., n, n).
    """
    return psd_safe_cholesky(matrix, jitter=jitter, max_tries=max_tries, counter=counter)


def batched_gp_posterior(
    K_ss: torch.Tensor,
    K_sq: torch.Tensor,
    k_qq_diag: torch.Tensor | float,
    y_s: torch.Tensor,
    mean_s: torch.Tensor | float = 0.0,
    mean_q: torch.Tensor | float = 0.0,
    jitter: float = 1e-6,
    counter: JitterCounter | None = None,
    min_variance: float = 1e-10,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Predictive mean and variance at query points given support observations, batched over tasks.

    Parameters
    ----------
    K_ss : torch.Tensor
        (B, S, S) support covariance INCLUDING observation noise on the diagonal (Eq. 3's β·δ).
    K_sq : torch.Tensor
        (B, S, Q) cross-covariance between support and query inputs.
    k_qq_diag : torch.Tensor or float
        (B, Q) prior variance at each query point (include the noise for a predictive of y), or a scalar.
    y_s : torch.Tensor
        (B, S) support targets.
    mean_s : torch.Tensor or float, optional
        Prior mean at the support points (B, S), or a scalar.
    mean_q : torch.Tensor or float, optional
        Prior mean at the query points (B, Q), or a scalar.
    jitter : float, optional
        Initial diagonal jitter of the Cholesky, relative to the mean of the diagonal (``psd_safe_cholesky``).
    counter : JitterCounter or None, optional
        Counts the jitter escalations; None counts nothing.
    min_variance : float, optional
        Floor of the predictive variance.

    Returns
    -------
    mean : torch.Tensor
        (B, Q) mean_q + K_qs K_ss^{-1} (y_s - mean_s) (Eq. 5, f).
    var : torch.Tensor
        (B, Q) k_qq - diag(K_qs K_ss^{-1} K_sq), at least ``min_variance`` (Eq. 5, v).
    """
    if K_ss.dim() != 3 or K_ss.shape[-1] != K_ss.shape[-2]:
        raise ValueError(f"K_ss must be (B, S, S), got {tuple(K_ss.shape)}")
    if K_sq.dim() != 3 or K_sq.shape[:2] != K_ss.shape[:2]:
        raise ValueError(f"K_sq must be (B, S, Q) matching K_ss {tuple(K_ss.shape)}, got {tuple(K_sq.shape)}")
    if y_s.shape != K_ss.shape[:2]:
        raise ValueError(f"y_s must be (B, S) = {tuple(K_ss.shape[:2])}, got {tuple(y_s.shape)}")
    chol = batched_cholesky(K_ss, jitter=jitter, counter=counter)
    residual = (y_s - mean_s).unsqueeze(-1)
    weights = torch.cholesky_solve(residual, chol)  # K^{-1}(y - m)
    mean = mean_q + (K_sq.transpose(-1, -2) @ weights).squeeze(-1)
    half = torch.linalg.solve_triangular(chol, K_sq, upper=False)  # L^{-1} k
    var = k_qq_diag - (half * half).sum(-2)
    return mean, var.clamp_min(min_variance)

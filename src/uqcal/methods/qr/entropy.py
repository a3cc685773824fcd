"""Quantile regularisation (QR paper, Sec. 4): maximise the entropy of the PIT values.

A model is quantile calibrated iff its PIT values c_i = F_i(y_i) are Uniform[0, 1] (Claim 4), i.e. iff
KL(PIT || U) = -H(PIT) = 0. ``spacing_entropy`` is the Vasicek sample-spacing estimate of H (Eq. 6, the
Learned-Miller form), ``QuantileRegularizer`` turns it into the training loss ``nll - lam * H`` (Eq. 7).

This module is shared: any model with a Gaussian (or any other) predictive CDF can take the regulariser;
it only needs the PIT values of the minibatch as a differentiable tensor.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "SORTS",
    "QuantileRegularizer",
    "gaussian_nll",
    "gaussian_pit",
    "neural_sort",
    "spacing_entropy",
    "spacing_k",
]

SORTS = ("hard", "neuralsort")


def spacing_k(n: int, k: int | None = None, k_multiplier: float = 1.0) -> int:
    """The spacing k: t * sqrt(n) by default (Sec. 5.2, C.4), clipped to 1 <= k <= n - 1."""
    if n < 2:
        raise ValueError(f"spacing entropy needs at least 2 samples, got n={n}")
    if k is None:
        if k_multiplier <= 0:
            raise ValueError(f"k_multiplier must be > 0, got {k_multiplier}")
        k = int(round(k_multiplier * math.sqrt(n)))
    if k < 1:
        raise ValueError(f"spacing k must be >= 1, got {k}")
    # Guard: a minibatch smaller than k + 1 has no k-spacing; shrink k rather than average nothing.
    return min(k, n - 1)


def neural_sort(values: torch.Tensor, tau: float = 1e-3) -> torch.Tensor:
    """NeuralSort relaxation (Grover et al. 2019, Eq. 5) of an ascending sort of a 1-d tensor.

    P_hat[i, :] = softmax(((n + 1 - 2i) s - A_s 1) / tau) picks the i-th largest value; we flip the rows to
    get the ascending order the spacing estimator needs.
    """
    if values.ndim != 1:
        raise ValueError(f"neural_sort expects a 1-d tensor, got shape {tuple(values.shape)}")
    n = values.shape[0]
    pairwise_abs = (values[:, None] - values[None, :]).abs()
    row_sums = pairwise_abs.sum(dim=1)
    scaling = n + 1 - 2 * torch.arange(1, n + 1, dtype=values.dtype, device=values.device)
    logits = (scaling[:, None] * values[None, :] - row_sums[None, :]) / tau
    permutation = torch.softmax(logits, dim=-1)
    return (permutation @ values).flip(0)


def spacing_entropy(
    pit: torch.Tensor,
    k: int | None = None,
    k_multiplier: float = 1.0,
    sort: str = "hard",
    tau: float = 1e-3,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Vasicek sample-spacing entropy estimate of the PIT values (QR Eq. 6 / Alg. 1).

    H = 1/(n-k) * sum_{i=1}^{n-k} log((n+1)/k * (c_(i+k) - c_(i))), k = round(k_multiplier * sqrt(n)).

    Guards: spacings are floored at ``eps`` with a straight-through floor (the value is max(spacing, eps),
    the gradient is that of the raw spacing), so ties give a finite loss and gradients still flow; a
    batch with n < k + 1 uses k = n - 1. ``sort='hard'`` uses torch.sort, whose gradient is the permutation
    (well defined almost everywhere); ``'neuralsort'`` is the authors' relaxation with temperature ``tau``.
    """
    if pit.ndim != 1:
        raise ValueError(f"spacing_entropy expects a 1-d tensor of PIT values, got {tuple(pit.shape)}")
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {SORTS}, got {sort!r}")
    n = pit.shape[0]
    k = spacing_k(n, k, k_multiplier)
    ordered = torch.sort(pit).values if sort == "hard" else neural_sort(pit, tau)
    spacings = ordered[k:] - ordered[:-k]
    floored = spacings + (eps - spacings).clamp(min=0).detach()
    return torch.log((n + 1) / k * floored).mean()


def gaussian_pit(y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """c_i = Phi((y_i - mu_i) / sigma_i), differentiable in mean and std (Alg. 1, lines 4-5)."""
    return torch.special.ndtr((y - mean) / std)


def gaussian_nll(y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Mean negative Gaussian log likelihood (the architecture loss l of Eq. 7)."""
    return (torch.log(std) + 0.5 * ((y - mean) / std) ** 2).mean() + 0.5 * math.log(2 * math.pi)


class QuantileRegularizer:
    """Loss = NLL - lam * H(PIT) (QR Eq. 7), usable by any model that outputs a Gaussian (mean, std).

    ``penalty(pit)`` returns -lam * H for models with other predictive CDFs; ``loss(y, mean, std)`` adds
    the Gaussian NLL. lam = 0 gives back the plain likelihood (the entropy is not even computed).

    Parameters
    ----------
    lam : float
        The weight lambda >= 0 of the entropy (Eq. 7).
    k : int or None, default None
        The spacing of the Vasicek estimate; None: round(k_multiplier sqrt(n)) per batch.
    k_multiplier : float, default 1.0
        t in k = t sqrt(n) (App. C.4).
    sort : {"hard", "neuralsort"}, default "hard"
        torch.sort, or the authors' NeuralSort relaxation.
    tau : float, default 1e-3
        NeuralSort's temperature.
    eps : float, default 1e-6
        The floor of each spacing (a straight-through floor).
    """

    def __init__(
        self,
        lam: float,
        k: int | None = None,
        k_multiplier: float = 1.0,
        sort: str = "hard",
        tau: float = 1e-3,
        eps: float = 1e-6,
    ):
        if lam < 0:
            raise ValueError(f"QuantileRegularizer lam must be >= 0, got {lam}")
        if sort not in SORTS:
            raise ValueError(f"QuantileRegularizer sort must be one of {SORTS}, got {sort!r}")
        self.lam = float(lam)
        self.k = k
        self.k_multiplier = float(k_multiplier)
        self.sort = sort
        self.tau = float(tau)
        self.eps = float(eps)

    def entropy(self, pit: torch.Tensor) -> torch.Tensor:
        """The Vasicek sample-spacing entropy of the PIT values (``spacing_entropy``).

        Parameters
        ----------
        pit : torch.Tensor of shape (n,)
            PIT values F(y) of a batch, in [0, 1].

        Returns
        -------
        torch.Tensor
            The scalar entropy estimate H (``spacing_entropy``, QR Eq. 6).
        """
        return spacing_entropy(pit, self.k, self.k_multiplier, self.sort, self.tau, self.eps)

    def penalty(self, pit: torch.Tensor) -> torch.Tensor:
        """-lam H(PIT), the regulariser of Eq. 7 for any predictive CDF.

        Parameters
        ----------
        pit : torch.Tensor of shape (n,)
            PIT values F(y) of a batch, in [0, 1].

        Returns
        -------
        torch.Tensor
            The scalar -lam H; 0 when lam = 0 or the batch has fewer than 2 points.
        """
        if self.lam == 0.0 or pit.shape[0] < 2:
            return pit.new_zeros(())
        return -self.lam * self.entropy(pit)

    def loss(self, y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """NLL - lam H(PIT) of a Gaussian predictive (QR Eq. 7).

        Parameters
        ----------
        y : torch.Tensor of shape (n,)
            Targets.
        mean, std : torch.Tensor of shape (n,)
            The predicted Gaussian of each target (std > 0).

        Returns
        -------
        torch.Tensor
            The scalar mean Gaussian NLL plus ``penalty`` of the Gaussian PITs.
        """
        return gaussian_nll(y, mean, std) + self.penalty(gaussian_pit(y, mean, std))

    def __call__(self, y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        return self.loss(y, mean, std)

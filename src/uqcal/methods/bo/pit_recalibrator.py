"""Recalibrators R: [0, 1] -> [0, 1] fitted on held-out PIT values (Kuleshov et al. 2018, Algorithm 3).

Recalibration set {(F_t, P_hat(F_t))} with P_hat(p) = |{t : F_t <= p}| / N. R is fitted on it and then
stored as a monotone piecewise-linear map on a fixed grid (``RecalibrationMap``), whatever the recalibrator,
so that the acquisition functions can evaluate R(p) and R^-1(p) in torch with gradients.

- ``gp`` (default, the paper's: Sec. 5, "we use another GP as our recalibrator model R"): a GP regression
  (``surrogate.fit_gp``: RBF, standardised targets, ML-II) of P_hat(F_t) on F_t with the endpoints (0, 0)
  and (1, 1) added, its posterior mean made monotone by a running maximum and rescaled onto [0, 1].
- ``isotonic`` (ablation): ``uqcal.core.calibration.IsotonicPITMap`` (Kuleshov et al.'s choice) with the
  endpoints pinned.
- Identity while fewer than ``min_points`` PIT values exist.

How a recalibrated Gaussian forecast reaches the acquisition (``acquisition.py``): R acts on the
standardised residual z = (y - mu) / sigma, so the recalibrated forecast is y = mu + sigma Z with
P(Z <= z) = R(Phi(z)), the same law at every x. ``moments`` gives its mean m_R and standard deviation s_R
(exactly, for the piecewise-linear R), ``quantile`` its quantiles Phi^-1(R^-1(p)). ``sigma_scale`` is the
previous rule (ablation): a least-squares slope s of Phi^-1(R^-1(p)) on Phi^-1(p) over p = 0.05..0.95
(no intercept), so that sigma -> s sigma and any shift of the median is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.stats import norm
from sklearn.isotonic import IsotonicRegression  # imported here so recal_seconds excludes import time

try:  # the shared building block (uqcal.core.calibration on main)
    from uqcal.core.calibration import IsotonicPITMap
except ImportError:  # pragma: no cover - older checkouts
    IsotonicPITMap = None

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

RECALIBRATORS = ("gp", "isotonic")
# Knots dense in the tails (uniform in z = Phi^-1(p)) so that R^-1 of tail levels stays accurate.
GRID = np.concatenate([[0.0], norm.cdf(np.linspace(-6.0, 6.0, 1023)), [1.0]])
SCALE_LEVELS = np.linspace(0.05, 0.95, 19)
SCALE_BOUNDS = (0.05, 20.0)


def empirical_cdf_targets(pit: np.ndarray) -> np.ndarray:
    """P_hat(F_t) = fraction of PIT values <= F_t (Algorithm 3, step 1)."""
    pit = np.asarray(pit, dtype=float)
    return np.searchsorted(np.sort(pit), pit, side="right") / len(pit)


@dataclass
class RecalibrationMap:
    """Monotone piecewise-linear R on ``knots`` (non-decreasing ``values``, R(0) = 0, R(1) = 1).

    Parameters
    ----------
    knots : numpy.ndarray of shape (K,)
        Increasing levels in [0, 1], from 0 to 1.
    values : numpy.ndarray of shape (K,)
        R at the knots, non-decreasing, from 0 to 1.
    identity : bool, default False
        R is the identity (too few PIT values, or a flat fit).
    fit_failed : bool, default False
        The GP recalibrator's ML-II fit failed (counted in fit_failures).
    """

    knots: np.ndarray
    values: np.ndarray
    identity: bool = False
    fit_failed: bool = False  # the GP recalibrator's ML-II fit failed (counted in fit_failures)

    @classmethod
    def identity_map(cls) -> RecalibrationMap:
        return cls(np.array([0.0, 1.0]), np.array([0.0, 1.0]), identity=True)

    def __call__(self, p: ArrayLike) -> np.ndarray:
        return np.interp(p, self.knots, self.values)

    def inverse(self, q: ArrayLike) -> np.ndarray:
        """R^-1(q), the predicted level whose recalibrated level is q.

        Parameters
        ----------
        q : array_like
            Recalibrated levels in [0, 1], any shape.

        Returns
        -------
        numpy.ndarray
            R^-1(q), of ``q``'s shape: the generalised inverse (the swapped table interpolated).
        """
        # Generalised inverse of a non-decreasing map: interpolate the swapped table, whose x may repeat.
        return np.interp(q, self.values, self.knots)

    def torch_call(self, p: torch.Tensor) -> torch.Tensor:
        """R(p) in torch, differentiable in p (the calibrated acquisition's gradient).

        Parameters
        ----------
        p : torch.Tensor
            Predicted levels in [0, 1], any shape.

        Returns
        -------
        torch.Tensor
            R(p), of ``p``'s shape, dtype and device.
        """
        knots = torch.as_tensor(self.knots, dtype=p.dtype, device=p.device)
        return torch_interp(p, knots, torch.as_tensor(self.values, dtype=p.dtype, device=p.device))

    def quantile(self, p: ArrayLike) -> np.ndarray:
        """Quantiles Phi^-1(R^-1(p)) of the recalibrated standardised forecast Z.

        Parameters
        ----------
        p : array_like
            Levels in [0, 1], any shape.

        Returns
        -------
        numpy.ndarray
            The quantiles of Z (R^-1(p) clipped to [1e-12, 1 - 1e-12] first), of ``p``'s shape.
        """
        return norm.ppf(np.clip(self.inverse(p), 1e-12, 1 - 1e-12))

    def moments(self) -> tuple[float, float]:
        """Mean and standard deviation of Z with P(Z <= z) = R(Phi(z)), exact for the piecewise-linear R.

        On a knot interval [p_k, p_k+1] R has slope c_k, so Z has density c_k phi(z) on
        [z_k, z_k+1] = Phi^-1([p_k, p_k+1]) and E[Z] = sum_k c_k (phi(z_k) - phi(z_k+1)),
        E[Z^2] = sum_k c_k [Phi(z) - z phi(z)]_{z_k}^{z_k+1} (z phi(z) -> 0 at +-inf). Identity R: (0, 1).

        Returns
        -------
        tuple of float
            E[Z] and sd(Z) (the variance floored at 1e-12).
        """
        if self.identity:
            return 0.0, 1.0
        p = np.asarray(self.knots, dtype=float)
        width, rise = np.diff(p), np.diff(np.asarray(self.values, dtype=float))
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(width > 0, rise / np.where(width > 0, width, 1.0), 0.0)
            z = norm.ppf(p)
            phi = norm.pdf(z)  # 0 at +-inf
            z_phi = np.where(np.isfinite(z), z * phi, 0.0)
        first = float(np.sum(slope * (phi[:-1] - phi[1:])))
        second = float(np.sum(slope * ((p[1:] - z_phi[1:]) - (p[:-1] - z_phi[:-1]))))
        return first, float(np.sqrt(max(second - first**2, 1e-12)))

    def sigma_scale(self) -> float:
        """The factor by which R widens (s > 1) or narrows (s < 1) the standardised forecast.

        Returns
        -------
        float
            The least-squares slope s of Phi^-1(R^-1(p)) on Phi^-1(p) over the levels 0.05, ..., 0.95, clipped to
            ``SCALE_BOUNDS``; 1 for the identity.
        """
        if self.identity:
            return 1.0
        z = norm.ppf(SCALE_LEVELS)
        z_cal = norm.ppf(np.clip(self.inverse(SCALE_LEVELS), 1e-6, 1 - 1e-6))
        return float(np.clip(np.sum(z * z_cal) / np.sum(z * z), *SCALE_BOUNDS))


def torch_interp(x: torch.Tensor, xp: torch.Tensor, fp: torch.Tensor) -> torch.Tensor:
    """np.interp in torch (clamped at the ends), differentiable in x."""
    x_clamped = x.clamp(xp[0], xp[-1])
    idx = torch.searchsorted(xp, x_clamped.detach().contiguous()).clamp(1, len(xp) - 1)
    x0, x1 = xp[idx - 1], xp[idx]
    y0, y1 = fp[idx - 1], fp[idx]
    width = torch.where(x1 > x0, x1 - x0, torch.ones_like(x1))
    return y0 + (y1 - y0) * (x_clamped - x0) / width


def _isotonic_values(pit: np.ndarray, targets: np.ndarray) -> np.ndarray:
    if IsotonicPITMap is not None:
        values = np.asarray(IsotonicPITMap().fit(pit)(GRID), dtype=float)
    else:
        x = np.concatenate([[0.0], pit, [1.0]])
        y = np.concatenate([[0.0], targets, [1.0]])
        values = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(x, y).predict(GRID)
    return values


def _gp_values(pit: np.ndarray, targets: np.ndarray, device: torch.device | str = "cpu") -> tuple[np.ndarray, bool]:
    from uqcal.methods.bo.surrogate import fit_gp

    x = torch.as_tensor(np.concatenate([[0.0], pit, [1.0]]), dtype=torch.float64, device=device).unsqueeze(-1)
    y = torch.as_tensor(np.concatenate([[0.0], targets, [1.0]]), dtype=torch.float64, device=device)
    model, failed = fit_gp(x, y, "rbf")
    with torch.no_grad():
        grid = torch.as_tensor(GRID, dtype=torch.float64, device=device).unsqueeze(-1)
        return model.posterior(grid).mean.reshape(-1).cpu().numpy(), failed


def fit_recalibration(pit: ArrayLike, method: str = "gp", min_points: int = 5, device: torch.device | str = "cpu"
                      ) -> RecalibrationMap:
    """R fitted on held-out PIT values; identity below ``min_points`` values; the GP recalibrator's fit runs on
    ``device``.

    The targets are the empirical CDF of the PIT values (Algorithm 3, step 1); the GP (RBF, ML-II) or isotonic
    fit on them, with (0, 0) and (1, 1) added, is evaluated on ``GRID``, made non-decreasing and rescaled onto
    [0, 1].

    Parameters
    ----------
    pit : array_like
        Held-out PIT values (clipped to [0, 1]).
    method : {"gp", "isotonic"}, default "gp"
        The recalibrator.
    min_points : int, default 5
        Fewest PIT values to fit on; with fewer, R is the identity.
    device : torch.device or str, default "cpu"
        Where the GP recalibrator fits.

    Returns
    -------
    RecalibrationMap
        R on ``GRID`` (``identity`` when too few values or a flat fit; ``fit_failed`` when the GP fit failed).
    """
    if method not in RECALIBRATORS:
        raise ValueError(f"recalibrator {method!r} not in {RECALIBRATORS}")
    pit = np.clip(np.asarray(pit, dtype=float).reshape(-1), 0.0, 1.0)
    if len(pit) < min_points:
        return RecalibrationMap.identity_map()
    targets = empirical_cdf_targets(pit)
    failed = False
    if method == "isotonic":
        raw = _isotonic_values(pit, targets)
    else:
        raw, failed = _gp_values(pit, targets, device)
    values = np.maximum.accumulate(np.clip(raw, 0.0, 1.0))  # monotone (no-op for isotonic)
    lo, hi = values[0], values[-1]
    if hi - lo <= 1e-12:
        return RecalibrationMap(np.array([0.0, 1.0]), np.array([0.0, 1.0]), identity=True, fit_failed=failed)
    values = (values - lo) / (hi - lo)  # onto [0, 1]: R(0) = 0, R(1) = 1
    return RecalibrationMap(GRID.copy(), values, fit_failed=failed)

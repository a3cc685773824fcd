"""Recalibrators R: [0, 1] -> [0, 1] fitted on held-out PIT values (Kuleshov et al. 2018, Algorithm 3).

Recalibration set {(F_t, P_hat(F_t))} with P_hat(p) = |{t : F_t <= p}| / N. R is fitted on it and then
stored as a monotone piecewise-linear map on a fixed grid (``RecalibrationMap``), whatever the recalibrator,
so that the acquisition functions can evaluate R(p) and R^-1(p) in torch with gradients.

- ``isotonic`` (default): ``uqcal.calibration.IsotonicRecalibrator`` when main provides it, otherwise
  sklearn's IsotonicRegression with the endpoints (0, 0) and (1, 1) pinned.
- ``gp``: the paper's choice (Sec. 5, "we use another GP as our recalibrator"): a GP regression of P_hat
  on F, made monotone by a running maximum and rescaled to map [0, 1] onto [0, 1].
- Identity while fewer than ``min_points`` PIT values exist.

``sigma_scale`` turns R into the paper's sigma -> sigma_new rescaling: the calibrated p-quantile of a
Gaussian forecast is mu + sigma * Phi^-1(R^-1(p)) and the rescaled one is mu + s * sigma * Phi^-1(p);
s is their least-squares match over p = 0.05, ..., 0.95 (no intercept). R acts on the standardised
residual only, so s is the same at every x.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import norm
from sklearn.isotonic import IsotonicRegression  # imported here so recal_seconds excludes import time

try:  # the shared building block (uqcal.calibration on main)
    from uqcal.calibration import IsotonicRecalibrator
except ImportError:  # pragma: no cover - older checkouts
    IsotonicRecalibrator = None

RECALIBRATORS = ("isotonic", "gp")
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
    """Monotone piecewise-linear R on ``knots`` (non-decreasing ``values``, R(0) = 0, R(1) = 1)."""

    knots: np.ndarray
    values: np.ndarray
    identity: bool = False

    @classmethod
    def identity_map(cls) -> RecalibrationMap:
        return cls(np.array([0.0, 1.0]), np.array([0.0, 1.0]), identity=True)

    def __call__(self, p):
        return np.interp(p, self.knots, self.values)

    def inverse(self, q):
        # Generalised inverse of a non-decreasing map: interpolate the swapped table, whose x may repeat.
        return np.interp(q, self.values, self.knots)

    def torch_call(self, p: torch.Tensor) -> torch.Tensor:
        knots = torch.as_tensor(self.knots, dtype=p.dtype)
        return torch_interp(p, knots, torch.as_tensor(self.values, dtype=p.dtype))

    def sigma_scale(self) -> float:
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
    if IsotonicRecalibrator is not None:
        values = np.asarray(IsotonicRecalibrator().fit(pit)(GRID), dtype=float)
    else:
        x = np.concatenate([[0.0], pit, [1.0]])
        y = np.concatenate([[0.0], targets, [1.0]])
        values = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(x, y).predict(GRID)
    return values


def _gp_values(pit: np.ndarray, targets: np.ndarray) -> np.ndarray:
    from uqcal.methods.bo.surrogate import fit_gp

    x = torch.as_tensor(np.concatenate([[0.0], pit, [1.0]]), dtype=torch.float64).unsqueeze(-1)
    y = torch.as_tensor(np.concatenate([[0.0], targets, [1.0]]), dtype=torch.float64)
    model, _ = fit_gp(x, y, "rbf")
    with torch.no_grad():
        return model.posterior(torch.as_tensor(GRID).unsqueeze(-1)).mean.reshape(-1).numpy()


def fit_recalibration(pit, method: str = "isotonic", min_points: int = 5) -> RecalibrationMap:
    """R fitted on held-out PIT values; identity below ``min_points`` values."""
    if method not in RECALIBRATORS:
        raise ValueError(f"recalibrator {method!r} not in {RECALIBRATORS}")
    pit = np.clip(np.asarray(pit, dtype=float).reshape(-1), 0.0, 1.0)
    if len(pit) < min_points:
        return RecalibrationMap.identity_map()
    targets = empirical_cdf_targets(pit)
    raw = _isotonic_values(pit, targets) if method == "isotonic" else _gp_values(pit, targets)
    values = np.maximum.accumulate(np.clip(raw, 0.0, 1.0))  # monotone (no-op for isotonic)
    lo, hi = values[0], values[-1]
    if hi - lo <= 1e-12:
        return RecalibrationMap.identity_map()
    values = (values - lo) / (hi - lo)  # onto [0, 1]: R(0) = 0, R(1) = 1
    return RecalibrationMap(GRID.copy(), values)

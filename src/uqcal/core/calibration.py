"""Recalibration maps shared by several families (Kuleshov et al., 2018).

A recalibrator R maps a predicted CDF level p = F(y) to the empirical frequency P(F(Y) <= p), estimated
from held-out PIT values. R is monotone, maps [0, 1] onto [0, 1], and is the identity when there are too
few points to estimate it.
"""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

__all__ = ["LEVELS", "IsotonicRecalibrator", "empirical_cdf_pairs"]

LEVELS = ("i/n", "i/(n+1)")


def empirical_cdf_pairs(pit: np.ndarray, levels: str = "i/n") -> tuple[np.ndarray, np.ndarray]:
    """Sorted PIT values p_(i) and their empirical CDF levels: i/n (Kuleshov et al. 2018, Alg. 1), or
    i/(n+1), which keeps the largest PIT below 1 (the QR paper's Sec. 3 endpoint fix)."""
    if levels not in LEVELS:
        raise ValueError(f"levels {levels!r} not in {LEVELS}")
    pit = np.asarray(pit, dtype=float).ravel()
    if pit.size and (np.any(~np.isfinite(pit)) or pit.min() < 0 or pit.max() > 1):
        raise ValueError("pit values must be finite and in [0, 1]")
    p_sorted = np.sort(pit)
    denominator = pit.size + (levels == "i/(n+1)")
    return p_sorted, np.arange(1, pit.size + 1) / denominator


class IsotonicRecalibrator:
    """Isotonic regression of empirical CDF levels on predicted levels.

    ``add_endpoints`` pins (0, 0) and (1, 1) so that R maps [0,1] onto [0,1] (the fix for the truncation the
    QR paper discusses in App. B.2). ``min_points``: below it R is the identity. ``levels``: the empirical
    CDF levels of the sorted PIT values (``empirical_cdf_pairs``).
    """

    def __init__(self, add_endpoints: bool = True, min_points: int = 3, levels: str = "i/n"):
        self.add_endpoints = add_endpoints
        self.min_points = min_points
        self.levels = levels
        self._iso: IsotonicRegression | None = None

    @property
    def is_identity(self) -> bool:
        return self._iso is None

    def fit(self, pit: np.ndarray) -> IsotonicRecalibrator:
        p_sorted, levels = empirical_cdf_pairs(pit, self.levels)
        if p_sorted.size < self.min_points:
            self._iso = None
            return self
        if self.add_endpoints:
            p_sorted = np.concatenate([[0.0], p_sorted, [1.0]])
            levels = np.concatenate([[0.0], levels, [1.0]])
        self._iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        self._iso.fit(p_sorted, levels)
        return self

    def __call__(self, p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        if self._iso is None:
            return np.clip(p, 0.0, 1.0)
        return self._iso.predict(p.ravel()).reshape(p.shape)

    @property
    def knots(self) -> tuple[np.ndarray, np.ndarray]:
        """The piecewise-linear knots (x, R(x)) of the fitted map."""
        if self._iso is None:
            return np.array([0.0, 1.0]), np.array([0.0, 1.0])
        return self._iso.X_thresholds_, self._iso.y_thresholds_

    def inverse(self, q: np.ndarray) -> np.ndarray:
        """Generalised inverse R^{-1}(q) = inf{p : R(p) >= q}, used for calibrated quantiles."""
        q = np.asarray(q, dtype=float)
        if self._iso is None:
            return np.clip(q, 0.0, 1.0)
        xs, ys = self.knots
        # Strictly increasing pieces only: flat segments make the inverse a jump, take their left end.
        keep = np.concatenate([[True], np.diff(ys) > 0])
        return np.interp(q, ys[keep], xs[keep])

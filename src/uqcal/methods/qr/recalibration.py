"""Isotonic recalibration of a Gaussian forecast, in closed form (QR paper Sec. 3, App. A.2, B).

The isotonic map R is piecewise linear through knots (u_j, r_j) (u = the base PIT, r = recalibrated
probability). The recalibrated CDF of a Gaussian forecast N(mu, sigma^2) is G(y) = R(Phi((y - mu) / sigma)),
so every recalibrated forecast is the same standardised distribution moved and scaled by (mu, sigma):
its density in z = (y - mu) / sigma is phi(z) * slope_j on the segment j holding Phi(z) (Eq. 10). Hence

- mean  = mu - delta * sigma, delta = sum_j slope_j (phi(z_{j+1}) - phi(z_j))  (Eq. 3-4, Claim 3),
- std   = sigma * s, s^2 = sum_j slope_j [(u_{j+1} - u_j) - (z_{j+1} phi(z_{j+1}) - z_j phi(z_j))] - delta^2,
- density zero where slope_j = 0 or beyond the last knot u_m < 1: the truncation of App. B.2.

``StandardisedRecalibration`` holds the knots and gives cdf/logpdf/quantile/crps in z; the method classes
map them to original units.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm


def isotonic_knots(pit: np.ndarray, endpoint_fix: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Knots of the isotonic recalibration map fitted on recalibration PITs (Kuleshov et al. 2018, Sec. 2.2).

    Recalibration data: (0, 0) and (c_(i), i/m) (App. B.1: C = [0, c(1), ..., c(m)], so below c_(1) the
    density is f / (m c_(1)), Eq. 10) — or, with ``endpoint_fix``, (c_(i), i/(m+1)) plus (1, 1) (Sec. 3),
    so the support is not truncated. The fit is scikit-learn's IsotonicRegression (PAVA, Eq. 2), through
    ``uqcal.core.calibration.IsotonicRecalibrator``.
    """
    pit = np.asarray(pit, dtype=float).ravel()
    if pit.size < 2 or not np.all(np.isfinite(pit)) or pit.min() < 0 or pit.max() > 1:
        raise ValueError(f"recalibration PITs must be >= 2 finite values in [0, 1], got {pit.size} values")
    from uqcal.core.calibration import IsotonicRecalibrator

    # Pins (0, 0) and (1, 1). With levels i/m the map already reaches 1 at c_(m), so (1, 1) changes nothing
    # and the support stays truncated at F^-1(c_(m)) exactly as in the paper (App. B.2); levels i/(m+1)
    # leave room for the (1, 1) knot (the fix).
    levels = "i/(n+1)" if endpoint_fix else "i/n"
    u, r = IsotonicRecalibrator(add_endpoints=True, min_points=2, levels=levels).fit(pit).knots
    u, r = np.asarray(u, float), np.asarray(r, float)
    if u[0] > 0.0:  # sklearn may merge (0, 0) into a tie; App. B.1 needs the knot at 0
        u, r = np.concatenate([[0.0], u]), np.concatenate([[0.0], r])
    return u, r


class StandardisedRecalibration:
    """The recalibrated standard normal: CDF R(Phi(z)) for piecewise-linear R through (u, r)."""

    def __init__(self, u: np.ndarray, r: np.ndarray):
        u, r = np.asarray(u, float), np.asarray(r, float)
        if u.shape != r.shape or u.ndim != 1 or u.size < 2:
            raise ValueError("knots u and r must be 1-d arrays of the same length >= 2")
        if np.any(np.diff(u) <= 0) or np.any(np.diff(r) < 0):
            raise ValueError("knots must have strictly increasing u and non-decreasing r")
        if u[0] != 0.0 or r[0] != 0.0:
            raise ValueError(f"the first knot must be (0, 0), got ({u[0]}, {r[0]})")
        self.u, self.r = u, r
        self.slopes = np.diff(r) / np.diff(u)
        self.z = norm.ppf(u)  # -inf at u = 0, +inf at u = 1
        phi = _phi(self.z)
        finite_z = np.where(np.isfinite(self.z), self.z, 0.0)
        z_phi = finite_z * phi  # z phi(z) -> 0 at z = +-inf
        self.mass = float(r[-1])
        self.delta = float(np.sum(self.slopes * np.diff(phi)))  # Claim 3: mean = mu - delta * sigma
        second_moment = float(np.sum(self.slopes * (np.diff(u) - np.diff(z_phi))))
        self.std_factor = float(np.sqrt(max(second_moment / self.mass - (self.delta / self.mass) ** 2, 0.0)))
        # App. B.2: the support ends where R reaches its top (zero slope after, or no knot at u = 1).
        self.truncated = bool(u[-1] < 1.0 or self.slopes[-1] == 0.0)

    def slope_at(self, pit: np.ndarray) -> np.ndarray:
        pit = np.asarray(pit, float)
        index = np.searchsorted(self.u, pit, side="left") - 1
        index = np.clip(index, 0, self.slopes.size - 1)
        slope = self.slopes[index]
        return np.where(pit > self.u[-1], 0.0, slope)  # App. B.1: zero beyond c_(m)

    def cdf(self, z: np.ndarray) -> np.ndarray:
        return np.interp(norm.cdf(z), self.u, self.r)

    def pdf(self, z: np.ndarray) -> np.ndarray:
        return norm.pdf(z) * self.slope_at(norm.cdf(z))

    def logpdf(self, z: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return norm.logpdf(z) + np.log(self.slope_at(norm.cdf(z)))

    def quantile(self, q: np.ndarray) -> np.ndarray:
        """Smallest z with R(Phi(z)) >= q (flat pieces of R are skipped)."""
        q = np.asarray(q, float)
        first = np.concatenate([[True], np.diff(self.r) > 0])
        return norm.ppf(np.interp(q, self.r[first], self.u[first]))

    def crps(self, z_obs: np.ndarray, grid_size: int = 20001, z_max: float = 12.0) -> np.ndarray:
        """CRPS(G, z) = int_{-inf}^z G^2 dt + int_z^inf (1 - G)^2 dt, by cumulative trapezoid integrals."""
        from scipy.integrate import cumulative_trapezoid

        z_obs = np.asarray(z_obs, float)
        grid = np.linspace(-z_max, z_max, grid_size)
        cdf = self.cdf(grid)
        below = cumulative_trapezoid(cdf**2, grid, initial=0.0)
        above = cumulative_trapezoid((1.0 - cdf) ** 2, grid, initial=0.0)
        return np.interp(z_obs, grid, below) + above[-1] - np.interp(z_obs, grid, above)


def _phi(z: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(z), norm.pdf(np.where(np.isfinite(z), z, 0.0)), 0.0)

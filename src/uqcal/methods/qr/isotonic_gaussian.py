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

# Written once in uqcal.core.calibration (the arena recalibrates every Gaussian model with them too).
from uqcal.core.calibration import StandardisedRecalibration, isotonic_knots

__all__ = ["StandardisedRecalibration", "isotonic_knots"]

"""GMM-CDF calibration map of Iwata & Kumagai (Eqs. 7-9) and a batched monotone inverse.

All functions are batched over tasks: ``centers`` (B, N) are the uncalibrated CDF values of a task's
support points (the GMM component means, Eq. 7), ``p`` (B, M) are uncalibrated CDF values to map.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "gmm_calibration_map",
    "gmm_calibration_density",
    "empirical_calibration_map",
    "mixed_map",
    "mixed_map_density",
    "invert_monotone",
]

_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _raw_gmm_cdf(p: torch.Tensor, centers: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
    # Eq. (8): r(h') = 1/N sum_n Phi((h' - h_U(y_n)) / sigma)   (Phi(z) = (1 + erf(z/sqrt2))/2)
    return torch.special.ndtr((p.unsqueeze(-1) - centers.unsqueeze(-2)) / sigma).mean(-1)


def _normaliser(centers, sigma):
    ends = torch.stack([torch.zeros_like(centers[..., 0]), torch.ones_like(centers[..., 0])], -1)
    r_ends = _raw_gmm_cdf(ends, centers, sigma)
    return r_ends[..., :1], (r_ends[..., 1:] - r_ends[..., :1])


def gmm_calibration_map(p, centers, sigma, normalise: bool = True) -> torch.Tensor:
    """r(p; S) of Eq. (8), batched. ``normalise`` rescales r so r(0) = 0 and r(1) = 1.

    Without it r(0) > 0 and r(1) < 1, so h(y) = r(h_U(y)) would not tend to 0 / 1 as y -> -inf / +inf
    (not a CDF). The rescaling keeps r monotone, smooth, and equal to Eq. (2) in the limit sigma -> 0.
    """
    r = _raw_gmm_cdf(p, centers, sigma)
    if normalise:
        r0, span = _normaliser(centers, sigma)
        r = (r - r0) / span
    return r


def gmm_calibration_density(p, centers, sigma, normalise: bool = True) -> torch.Tensor:
    """dr/dp = q(p; S) of Eq. (7) (divided by the normaliser's span when ``normalise``)."""
    z = (p.unsqueeze(-1) - centers.unsqueeze(-2)) / sigma
    q = (torch.exp(-0.5 * z * z) / (_SQRT_2PI * sigma)).mean(-1)
    if normalise:
        _, span = _normaliser(centers, sigma)
        q = q / span
    return q


def empirical_calibration_map(p, centers) -> torch.Tensor:
    """r_emp of Eq. (2): n/N for p in [p_(n), p_(n+1)) — the fraction of centers <= p. Not differentiable."""
    return (centers.unsqueeze(-2) <= p.unsqueeze(-1)).to(p.dtype).mean(-1)


def mixed_map(u, centers, sigma, alpha, kind: str = "gmm", normalise: bool = True) -> torch.Tensor:
    """Eq. (9) as a map of u = h_U(y|x): G(u) = alpha*u + (1-alpha)*r(u). ``kind``: gmm | emp | none."""
    if kind == "none":
        return u
    r = (
        empirical_calibration_map(u, centers)
        if kind == "emp"
        else gmm_calibration_map(u, centers, sigma, normalise)
    )
    return alpha * u + (1.0 - alpha) * r


def mixed_map_density(u, centers, sigma, alpha, kind: str = "gmm", normalise: bool = True) -> torch.Tensor:
    """dG/du (the step function of r_emp contributes nothing between its jumps)."""
    if kind == "none":
        return torch.ones_like(u)
    if kind == "emp":
        return alpha * torch.ones_like(u)
    return alpha + (1.0 - alpha) * gmm_calibration_density(u, centers, sigma, normalise)


def invert_monotone(
    fn, targets: torch.Tensor, lo: float = 0.0, hi: float = 1.0, iters: int = 50
) -> torch.Tensor:
    """Vectorised bisection: the smallest u in [lo, hi] with fn(u) >= targets, elementwise.

    ``fn`` maps a tensor shaped like ``targets`` to a non-decreasing value elementwise. After ``iters``
    halvings the bracket is (hi - lo) / 2**iters wide (50 -> 9e-16 on [0, 1]).
    """
    low = torch.full_like(targets, lo)
    high = torch.full_like(targets, hi)
    with torch.no_grad():
        for _ in range(iters):
            mid = 0.5 * (low + high)
            above = fn(mid) >= targets
            high = torch.where(above, mid, high)
            low = torch.where(above, low, mid)
    return 0.5 * (low + high)

"""Shared GP building blocks: the batched closed-form exact GP posterior, PSD-safe Cholesky with counted
jitter escalation, and the failed-fit convention (never silent)."""

from uqcal.core.gp.exact import batched_cholesky, batched_gp_posterior, squared_distances
from uqcal.core.gp.failures import FitFailures
from uqcal.core.gp.linalg import JitterCounter, psd_safe_cholesky

__all__ = [
    "FitFailures",
    "JitterCounter",
    "batched_cholesky",
    "batched_gp_posterior",
    "psd_safe_cholesky",
    "squared_distances",
]

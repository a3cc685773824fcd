"""Input validation shared by the metric modules: every error names the offending argument."""

from __future__ import annotations

import numpy as np


def as_vector(name: str, values, *, allow_empty: bool = False) -> np.ndarray:
    """``values`` as a finite float64 1-D array; raise ValueError naming ``name`` otherwise."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: cannot convert to a float array ({exc})") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name}: is empty")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(f"{name}: contains {bad} non-finite value(s)")
    return arr


def as_like(name: str, values, reference: np.ndarray, reference_name: str) -> np.ndarray:
    """``values`` as a finite float64 array of ``reference``'s length; a scalar is broadcast."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        if not np.isfinite(arr):
            raise ValueError(f"{name}: is not finite ({float(arr)})")
        return np.full(reference.shape, float(arr))
    arr = as_vector(name, arr)
    if arr.shape != reference.shape:
        raise ValueError(
            f"{name}: shape {arr.shape} does not match {reference_name} shape {reference.shape}"
        )
    return arr


def as_positive_like(name: str, values, reference: np.ndarray, reference_name: str) -> np.ndarray:
    arr = as_like(name, values, reference, reference_name)
    if np.any(arr <= 0):
        raise ValueError(f"{name}: must be > 0 everywhere (min {arr.min():g})")
    return arr


def as_probability_vector(name: str, values, *, tolerance: float = 1e-9) -> np.ndarray:
    """A 1-D array of values in [0, 1] (tiny round-off outside is clipped)."""
    arr = as_vector(name, values)
    if np.any(arr < -tolerance) or np.any(arr > 1 + tolerance):
        raise ValueError(f"{name}: values must lie in [0, 1] (got range [{arr.min():g}, {arr.max():g}])")
    return np.clip(arr, 0.0, 1.0)


def as_levels(name: str, levels) -> np.ndarray:
    """Probability levels in [0, 1], strictly increasing."""
    arr = as_vector(name, levels)
    if np.any(arr < 0.0) or np.any(arr > 1.0):
        raise ValueError(f"{name}: levels must lie in [0, 1], got {arr.tolist()}")
    if np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name}: levels must be strictly increasing, got {arr.tolist()}")
    return arr

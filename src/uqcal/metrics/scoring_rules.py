"""Scores that the papers do not print but the ecosystem's users expect, each defined as its peer library does.

- :func:`interval_score`: the interval (Winkler) score of a central interval (Gneiting & Raftery 2007, Eq. 43;
  scoringrules' ``interval_score``).
- :func:`pinball_loss`: the quantile (pinball) loss of predicted quantiles at a level (scikit-learn's
  ``mean_pinball_loss``).
- :func:`brier_score`: the multi-class Brier score of class probabilities (Brier 1950; scikit-learn's
  ``brier_score_loss``).
- :func:`miscalibration_area`: uncertainty-toolbox's miscalibration area of central intervals, from PIT values
  (for a Gaussian predictive the toolbox's ``miscalibration_area`` with its defaults).

All are negatively oriented (lower is better) and averaged over the points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from uqcal.metrics._validate import as_like, as_probability_vector, as_vector

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["brier_score", "interval_score", "miscalibration_area", "pinball_loss"]


def interval_score(y: ArrayLike, lower: ArrayLike, upper: ArrayLike, alpha: float) -> float:
    """Mean interval (Winkler) score of the central (1 - alpha) intervals [lower, upper].

    IS = (u - l) + (2 / alpha)(l - y) 1{y < l} + (2 / alpha)(y - u) 1{y > u} (Gneiting & Raftery 2007, Eq. 43):
    the width plus a penalty for each miss, proper for the alpha / 2 and 1 - alpha / 2 quantiles.

    Parameters
    ----------
    y : array_like of shape (n,)
        Targets.
    lower, upper : array_like of shape (n,)
        Interval bounds, lower <= upper.
    alpha : float
        The interval's miss probability, in (0, 1): 0.1 for a 90 % interval.

    Returns
    -------
    float
        The mean score (y's units; lower is better).

    Examples
    --------
    >>> interval_score([0.0, 3.0], [-1.0, -1.0], [1.0, 1.0], alpha=0.1)  # widths 2; the miss costs 2 / 0.1 * 2
    22.0
    """
    y = as_vector("y", y)
    lower, upper = as_like("lower", lower, y, "y"), as_like("upper", upper, y, "y")
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha: expected a value in (0, 1), got {alpha!r}")
    if np.any(lower > upper):
        raise ValueError(f"lower/upper: lower > upper at {int(np.sum(lower > upper))} point(s)")
    penalty = (2.0 / alpha) * (np.maximum(lower - y, 0.0) + np.maximum(y - upper, 0.0))
    return float(np.mean(upper - lower + penalty))


def pinball_loss(y: ArrayLike, quantiles: ArrayLike, level: float) -> float:
    """Mean pinball (quantile) loss of predicted ``level``-quantiles: mean of max(tau (y - q), (tau - 1)(y - q)).

    Parameters
    ----------
    y : array_like of shape (n,)
        Targets.
    quantiles : array_like of shape (n,)
        The predicted ``level``-quantile of each point.
    level : float
        tau, in (0, 1).

    Returns
    -------
    float
        The mean loss (y's units; lower is better); at tau = 0.5 half the mean absolute error.

    Examples
    --------
    >>> pinball_loss([1.0, 2.0], [0.0, 3.0], level=0.9)  # (0.9 * 1 + 0.1 * 1) / 2
    0.5
    """
    y = as_vector("y", y)
    q = as_like("quantiles", quantiles, y, "y")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level: expected a value in (0, 1), got {level!r}")
    diff = y - q
    return float(np.mean(np.maximum(level * diff, (level - 1.0) * diff)))


def brier_score(probs: ArrayLike, labels: ArrayLike) -> float:
    """Mean multi-class Brier score: sum over classes c of (p_c - 1{label = c})^2, averaged over the points.

    Parameters
    ----------
    probs : array_like of shape (n, C)
        Class probabilities, rows summing to 1.
    labels : array_like of shape (n,)
        Integer labels, column indices into ``probs``.

    Returns
    -------
    float
        The mean score, in [0, 2] (lower is better). scikit-learn's ``brier_score_loss`` gives the same number for
        more than two classes; for two it reports half of it (the binary Brier score of the positive class).

    Examples
    --------
    >>> brier_score([[0.8, 0.2], [0.5, 0.5]], [0, 1])  # ((0.2^2 + 0.2^2) + (0.5^2 + 0.5^2)) / 2
    0.29
    """
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    if probs.ndim != 2 or labels.shape != (probs.shape[0],):
        raise ValueError(f"probs must be (n, C) and labels (n,), got shapes {probs.shape} and {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0 or labels.max() >= probs.shape[1]:
        raise ValueError(f"labels: expected integers in 0..{probs.shape[1] - 1} (columns of probs)")
    onehot = np.zeros_like(probs)
    onehot[np.arange(labels.size), labels] = 1.0
    return float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))


def miscalibration_area(pit: ArrayLike, num_bins: int = 100) -> float:
    """uncertainty-toolbox's miscalibration area (``prop_type="interval"``): the area between the observed coverage
    of the central p-intervals and the diagonal, over ``num_bins`` levels p = linspace(0, 1, num_bins).

    A target lies in its central p-interval exactly when |PIT - 1/2| <= p / 2, so the observed coverage is
    mean(|pit - 1/2| <= p / 2) for any continuous predictive; the area between the piecewise-linear curve of
    (p, coverage - p) and 0 is summed exactly per segment (a segment whose sign changes is two triangles), as
    the toolbox's ``trapezoid_area`` does. Compare with :func:`~uqcal.metrics.ece_iwata`, the one-sided error
    at 0.1..0.9, which for a symmetric miscalibration runs about half of this.

    Parameters
    ----------
    pit : array_like of shape (n,)
        F_i(y_i), the predictive CDF at each target.
    num_bins : int, default 100
        The number of levels (the toolbox's default).

    Returns
    -------
    float
        The area, in [0, 0.5] (lower is better).

    Examples
    --------
    >>> round(miscalibration_area([0.5, 0.5, 0.5, 0.5]), 3)  # every target at the median: coverage 1 at any p
    0.5
    """
    pit = as_probability_vector("pit", pit)
    if isinstance(num_bins, bool) or int(num_bins) != num_bins or num_bins < 2:
        raise ValueError(f"num_bins: expected an integer >= 2, got {num_bins!r}")
    expected = np.linspace(0.0, 1.0, int(num_bins))
    distance = np.sort(np.abs(pit - 0.5))
    observed = np.searchsorted(distance, expected / 2.0, side="right") / pit.size
    gap = observed - expected
    left, right, width = gap[:-1], gap[1:], np.diff(expected)
    same_sign = left * right >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = width * (left**2 + right**2) / (2.0 * (np.abs(left) + np.abs(right)))
    areas = np.where(same_sign, width * (np.abs(left) + np.abs(right)) / 2.0, crossing)
    return float(np.sum(areas))

"""Regression metrics, each with the definition of the paper whose tables it reproduces.

Papers (plain text in /work/shared/papers/):

- Iwata & Kumagai (meta-calibrated deep-kernel GP), Sec. 5: MSE, ECE over P = {0.1, ..., 0.9}, TE.
- Quantile regularization (QR), Sec. 5.1, Eq. (8): l2 quantile calibration error; the tables print
  100 x the *sum* over p in {0.1, ..., 1.0} (see IMPLEMENTATION-NOTES), which is :func:`ce_qr`.
- RIO (Qiu, Meyerson & Miikkulainen), App. D.1, Eq. (10): NLPD; App. D.2: CI coverage.
- Deshpande & Kuleshov (calibrated BO), Sec. 5: calibration score of Kuleshov et al. (2018).
- CRPS: Gneiting & Raftery (2007), closed form for a Gaussian forecast.

All PIT-based metrics take ``pit[i] = F_i(y_i)``, the predictive CDF at the observed target. For a
monotone predictive CDF ``h``, ``y <= h^{-1}(p|x)`` holds exactly when ``h(y|x) <= p``, so the
empirical frequency below a quantile equals the fraction of PIT values at or below its level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr, ndtri  # not scipy.stats: its import costs ~1 s in every job

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

from uqcal.metrics._validate import (
    as_levels,
    as_like,
    as_positive_like,
    as_probability_vector,
    as_vector,
)


def _normal_pdf(z):
    return np.exp(-0.5 * np.square(z)) / np.sqrt(2.0 * np.pi)


# Iwata & Kumagai Sec. 5: P = {0.1, 0.2, ..., 0.9}.
ECE_LEVELS = np.round(np.arange(0.1, 1.0, 0.1), 10)
# QR tables: M = 10 equidistant levels in (0, 1] with p_M = 1 (Sec. 5.1).
CE_QR_LEVELS = np.round(np.arange(1, 11) / 10.0, 10)
# Calibration score default levels (Kuleshov et al. 2018 do not fix m; D&K do not state theirs).
CAL_SCORE_LEVELS = np.round(np.arange(1, 20) * 0.05, 10)
# z values used by RIO's code for its 95/90/68 % intervals (App. D.2); the exact ones are
# Phi^{-1}(0.975) = 1.95996, Phi^{-1}(0.95) = 1.64485, Phi^{-1}(0.84) = 0.99446.
ROUNDED_Z = {0.95: 1.96, 0.90: 1.65, 0.68: 1.0}
# Quantile columns of predictions.parquet that bound each central interval (docs/ARCHITECTURE.md).
INTERVAL_QUANTILE_COLUMNS = {0.95: ("q0.025", "q0.975"), 0.90: ("q0.05", "q0.95"), 0.68: ("q0.16", "q0.84")}

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


# ----------------------------------------------------------------------------- point error
def mse(y: ArrayLike, mean: ArrayLike) -> float:
    """Mean squared error (Iwata & Kumagai Sec. 5: MSE = 1/N^Q sum ||y - f(x)||^2).

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).

    Returns
    -------
    float
        The mean of (y - mean)^2.
    """
    y = as_vector("y", y)
    mean = as_like("mean", mean, y, "y")
    return float(np.mean((y - mean) ** 2))


def rmse(y: ArrayLike, mean: ArrayLike) -> float:
    """Root mean squared error (RIO App. D.1; QR Tables 1-2).

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).

    Returns
    -------
    float
        The square root of `mse`.
    """
    return float(np.sqrt(mse(y, mean)))


# ----------------------------------------------------------------------------- density
def gaussian_logpdf(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> np.ndarray:
    """Pointwise log N(y | mean, std^2), the log predictive density of RIO's NLPD (Eq. 10) and QR's NLL.

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).
    std : array_like
        Predictive standard deviations (> 0), shape (n,).

    Returns
    -------
    numpy.ndarray
        log N(y_i; mean_i, std_i^2) per point, shape (n,).
    """
    y = as_vector("y", y)
    mean = as_like("mean", mean, y, "y")
    std = as_positive_like("std", std, y, "y")
    z = (y - mean) / std
    return -0.5 * z**2 - np.log(std) - _LOG_SQRT_2PI


def nlpd_from_logpdf(logpdf: ArrayLike) -> float:
    """Average negative log predictive density, RIO Eq. (10): -1/n sum log p(y_i | x_i).

    ``logpdf`` may contain ``-inf`` (a zero density, e.g. after isotonic recalibration the QR paper
    notes test points beyond the last level get zero density); the result is then ``inf``.

    Parameters
    ----------
    logpdf : array_like
        Pointwise predictive log densities log p_i(y_i), shape (n,).

    Returns
    -------
    float
        The negative mean of ``logpdf``.
    """
    arr = np.asarray(logpdf, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"logpdf: expected a non-empty 1-D array, got shape {arr.shape}")
    if np.any(np.isnan(arr)) or np.any(arr == np.inf):
        raise ValueError("logpdf: contains NaN or +inf")
    return float(-np.mean(arr))


def gaussian_nlpd(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> float:
    """Mean of -log N(y | mean, std^2) (RIO Eq. (10); QR's NLL).

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).
    std : array_like
        Predictive standard deviations (> 0), shape (n,).

    Returns
    -------
    float
        The mean negative Gaussian log density of the targets.
    """
    return nlpd_from_logpdf(gaussian_logpdf(y, mean, std))


def gaussian_pit(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> np.ndarray:
    """Probability integral transform Phi((y - mean) / std) of each target, the F_t(y_t) of Kuleshov et al. (2018).

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).
    std : array_like
        Predictive standard deviations (> 0), shape (n,).

    Returns
    -------
    numpy.ndarray
        Phi((y - mean) / std) per point, in [0, 1], shape (n,).
    """
    y = as_vector("y", y)
    mean = as_like("mean", mean, y, "y")
    std = as_positive_like("std", std, y, "y")
    return ndtr((y - mean) / std)


# ----------------------------------------------------------------------------- calibration
def empirical_frequencies(pit: ArrayLike, levels: ArrayLike) -> np.ndarray:
    """p_hat(p) = mean(pit <= p) for each level p (Kuleshov et al. 2018; Iwata & Kumagai Sec. 5).

    The count of PIT values <= p is the right insertion point of p among the sorted PIT values, so n points
    and L levels cost O((n + L) log n) time and O(n + L) memory (not an (L, n) comparison matrix: 2 GB for
    2M points x 999 levels; benchmarks/ece_iwata.py).

    Parameters
    ----------
    pit : array_like
        PIT values F_i(y_i) in [0, 1], shape (n,).
    levels : array_like
        Probability levels in (0, 1].

    Returns
    -------
    numpy.ndarray
        The fraction of PIT values at or below each level, shape of ``levels``.
    """
    pit = as_probability_vector("pit", pit)
    levels = as_levels("levels", levels)
    return np.searchsorted(np.sort(pit), levels, side="right") / pit.size


def ece_iwata(pit: ArrayLike, levels: ArrayLike=ECE_LEVELS) -> float:
    """Regression ECE of Iwata & Kumagai (Sec. 5): 1/|P| sum_p |p - p_hat(p)|, P = {0.1, ..., 0.9} by default.

    ``p_hat(p) = 1/N sum I(y <= h^{-1}(p|x))``, the fraction of targets at or below the predicted p-quantile,
    which equals ``mean(pit <= p)`` for a monotone CDF ``h``. A one-sided (quantile) calibration error, the
    plain mean over the levels.

    Not uncertainty-toolbox's default (``uct.metrics.get_all_metrics``: ``miscalibration_area`` and
    ``mean_absolute_calibration_error``, both ``prop_type="interval"``, ``num_bins=100``): those compare the
    observed coverage of the *central* p-intervals with p at 100 levels ``linspace(0, 1, 100)``, and the
    miscalibration area is the area between the observed curve and the diagonal. A central interval misses on
    both sides, so for a symmetric over- or under-dispersed predictive its coverage error at level p is about
    twice the one-sided error at (1 + p) / 2: the toolbox's numbers run about twice this one (e.g. 0.127 against
    0.065 in issue 39), and the two are not comparable.

    Parameters
    ----------
    pit : array_like
        PIT values F_i(y_i) in [0, 1], shape (n,).
    levels : array_like, optional
        Levels P of the ECE (default: 0.1, ..., 0.9).

    Returns
    -------
    float
        The mean over the levels of |fraction of PIT values <= p - p|.
    """
    levels = as_levels("levels", levels)
    return float(np.mean(np.abs(levels - empirical_frequencies(pit, levels))))


def ece_floor(n_points: int, levels: ArrayLike=ECE_LEVELS, n_sim: int = 4000, seed: int = 0) -> tuple[float, float]:
    """Expected :func:`ece_iwata` of a perfectly calibrated predictive on ``n_points`` points: (mean, s.e.).

    A calibrated predictive has uniform PIT values, yet p_hat(p) ~ Binomial(N, p) / N, so its ECE on a
    finite query set is E|p_hat - p| > 0 (Sec. 5.4's ECE is computed per query set of N_Q points). Simulated
    with this module's own ECE (``n_sim`` sets of uniform PITs, fixed ``seed``), so it matches the metric
    exactly; tests/metrics/test_regression.py checks it against the exact binomial expectation.

    Parameters
    ----------
    n_points : int
        Points per query set (N).
    levels : array_like, optional
        Levels P of the ECE.
    n_sim : int, optional
        Simulated query sets.
    seed : int, optional
        Seed of the simulation.

    Returns
    -------
    tuple of float
        The mean ECE of a calibrated predictive on ``n_points`` points and its standard error.
    """
    n_points, n_sim = int(n_points), int(n_sim)
    if n_points < 1 or n_sim < 2:
        raise ValueError(f"ece_floor needs n_points >= 1 and n_sim >= 2, got {n_points}, {n_sim}")
    rng = np.random.default_rng(seed)
    values = np.array([ece_iwata(rng.uniform(size=n_points), levels) for _ in range(n_sim)])
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(n_sim))


def ece_from_quantiles(y: ArrayLike, quantiles: Mapping[float, object]) -> float:
    """Iwata & Kumagai's ECE when the quantiles h^{-1}(p|x) are given directly.

    ``quantiles`` maps each level p to an array of per-point quantiles; ECE = mean over the levels
    of |p - mean(y <= q_p)|.

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    quantiles : Mapping[float, object]
        {level p: predicted p-quantiles, shape (n,)}, one entry per ECE level.

    Returns
    -------
    float
        The mean over the levels of |fraction of targets <= quantile - p|.
    """
    y = as_vector("y", y)
    if not isinstance(quantiles, Mapping) or len(quantiles) == 0:
        raise ValueError("quantiles: expected a non-empty mapping level -> array")
    errors = []
    for level, values in quantiles.items():
        p = float(level)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"quantiles: level {level!r} is outside [0, 1]")
        q = as_like(f"quantiles[{level!r}]", values, y, "y")
        errors.append(abs(p - float(np.mean(y <= q))))
    return float(np.mean(errors))


def total_error(mse_value: float, ece_value: float) -> float:
    """Iwata & Kumagai's total error TE = (MSE + ECE) / 2 (Sec. 5).

    A squared error in the target's units plus a unitless frequency: comparable with the paper's Tables 1-4
    only on standardised targets (the paper does not say which; Table 2's magnitudes suggest standardised ones).
    ``all_metrics`` leaves it out for that reason.

    Parameters
    ----------
    mse_value : float
        The MSE.
    ece_value : float
        The ECE.

    Returns
    -------
    float
        Iwata & Kumagai's total error TE = MSE + ECE.
    """
    for name, value in (("mse_value", mse_value), ("ece_value", ece_value)):
        if not np.isfinite(value):
            raise ValueError(f"{name}: is not finite ({value})")
    return float((mse_value + ece_value) / 2.0)


def ce_qr(pit: ArrayLike, reduction: str = "sum") -> float:
    """Quantile-regularization paper's l2 calibration error in percent.

    Levels p in {0.1, ..., 1.0} (M = 10 equidistant points in (0, 1] with p_M = 1, Sec. 5.1).
    ``reduction="sum"`` (default) is what the paper's tables print (authors' code):
    100 * sum_p (mean(pit <= p) - p)^2. ``reduction="mean"`` is Eq. (8) literally: the same sum / M.

    Parameters
    ----------
    pit : array_like
        PIT values F_i(y_i) in [0, 1], shape (n,).
    reduction : str, optional
        ``sum`` (the paper's tables) or ``mean`` (Eq. 8 literally).

    Returns
    -------
    float
        100 x the summed (or mean) squared calibration error over p in {0.1, ..., 1.0}.
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction: expected 'sum' or 'mean', got {reduction!r}")
    squared = (empirical_frequencies(pit, CE_QR_LEVELS) - CE_QR_LEVELS) ** 2
    total = float(np.sum(squared)) if reduction == "sum" else float(np.mean(squared))
    return 100.0 * total


def calibration_score(pit: ArrayLike, levels: ArrayLike | None=None, weights: ArrayLike | None=None) -> float:
    """Calibration error of Kuleshov et al. (2018): sum_j w_j (p_j - p_hat_j)^2.

    ``p_hat_j = |{t : F_t(y_t) <= p_j}| / N``. Deshpande & Kuleshov (Sec. 5) use this with w_j = 1
    ("calibration score", computed on one-step-ahead BO forecasts) and do not state their levels;
    Kuleshov et al. (2018) allow weights and typically use w_j = 1. Default levels here are
    0.05, 0.10, ..., 0.95 with unit weights.

    Parameters
    ----------
    pit : array_like
        PIT values F_i(y_i) in [0, 1], shape (n,).
    levels : array_like or None, optional
        Levels p_j (default: this module's calibration-score levels).
    weights : array_like or None, optional
        Weights w_j, one per level (default: 1).

    Returns
    -------
    float
        sum_j w_j (p_j - p_hat_j)^2.
    """
    levels = CAL_SCORE_LEVELS if levels is None else as_levels("levels", levels)
    if weights is None:
        w = np.ones_like(levels)
    else:
        w = as_like("weights", weights, levels, "levels")
        if np.any(w < 0):
            raise ValueError("weights: must be non-negative")
    return float(np.sum(w * (levels - empirical_frequencies(pit, levels)) ** 2))


# ----------------------------------------------------------------------------- intervals
def interval_coverage(y: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> float:
    """Fraction of targets inside their interval, lower <= y <= upper (RIO App. D.2).

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    lower : array_like
        Lower interval bounds, shape (n,).
    upper : array_like
        Upper interval bounds, shape (n,).

    Returns
    -------
    float
        The fraction of targets with lower <= y <= upper.
    """
    y = as_vector("y", y)
    lower = as_like("lower", lower, y, "y")
    upper = as_like("upper", upper, y, "y")
    if np.any(lower > upper):
        raise ValueError(f"lower/upper: lower > upper at {int(np.sum(lower > upper))} point(s)")
    return float(np.mean((lower <= y) & (y <= upper)))


def gaussian_interval_coverage(y: ArrayLike, mean: ArrayLike, std: ArrayLike, level: float, z: float | None = None) -> float:
    """Coverage of the central Gaussian interval mean +- z * std.

    By default ``z = Phi^{-1}((1 + level) / 2)`` exactly. RIO's code uses z = 1.96 / 1.65 / 1.0 for
    the 95 / 90 / 68 % intervals (see ``ROUNDED_Z``); pass ``z=ROUNDED_Z[level]`` to reproduce it.

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).
    std : array_like
        Predictive standard deviations (> 0), shape (n,).
    level : float
        Probability of the central interval (0.9: the 5 % and 95 % quantiles).
    z : float or None, optional
        Half-width in standard deviations (default: the exact normal quantile of ``level``).

    Returns
    -------
    float
        The fraction of targets inside mean ± z std.
    """
    if z is None:
        if not 0.0 < level < 1.0:
            raise ValueError(f"level: expected a value in (0, 1), got {level}")
        z = float(ndtri((1.0 + level) / 2.0))
    elif not (np.isfinite(z) and z > 0):
        raise ValueError(f"z: expected a positive finite value, got {z}")
    y = as_vector("y", y)
    mean = as_like("mean", mean, y, "y")
    std = as_positive_like("std", std, y, "y")
    return interval_coverage(y, mean - z * std, mean + z * std)


# ----------------------------------------------------------------------------- sharpness
def sharpness(std: ArrayLike, statistic: str = "variance") -> float:
    """Sharpness of the predictive distributions (lower is sharper).

    The QR paper asks for models that are "well-calibrated and sharp" (Sec. 4) but prints no formula;
    it takes its calibration metric from Kuleshov et al. (2018), whose sharpness is the mean
    predictive variance, sha = 1/T sum_t var(F_t). That is the default ``statistic="variance"``.
    ``"rms_std"`` gives sqrt(mean variance) (same units as y) and ``"mean_std"`` the mean std.

    Parameters
    ----------
    std : array_like
        Predictive standard deviations (> 0), shape (n,).
    statistic : str, optional
        ``variance`` (mean predictive variance), ``rms_std`` or ``mean_std``.

    Returns
    -------
    float
        The chosen spread statistic (lower is sharper).
    """
    std = as_vector("std", std)
    if np.any(std < 0):
        raise ValueError("std: must be non-negative")
    if statistic == "variance":
        return float(np.mean(std**2))
    if statistic == "rms_std":
        return float(np.sqrt(np.mean(std**2)))
    if statistic == "mean_std":
        return float(np.mean(std))
    raise ValueError(f"statistic: expected 'variance', 'rms_std' or 'mean_std', got {statistic!r}")


# ----------------------------------------------------------------------------- CRPS
def gaussian_crps_pointwise(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> np.ndarray:
    """Closed-form CRPS of N(mean, std^2) at y (Gneiting & Raftery 2007).

    CRPS = std * [z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)], z = (y - mean) / std.

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).
    std : array_like
        Predictive standard deviations (> 0), shape (n,).

    Returns
    -------
    numpy.ndarray
        The closed-form Gaussian CRPS of each point, shape (n,).
    """
    y = as_vector("y", y)
    mean = as_like("mean", mean, y, "y")
    std = as_positive_like("std", std, y, "y")
    z = (y - mean) / std
    return std * (z * (2.0 * ndtr(z) - 1.0) + 2.0 * _normal_pdf(z) - 1.0 / np.sqrt(np.pi))


def gaussian_crps(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> float:
    """Mean closed-form Gaussian CRPS (Gneiting & Raftery 2007; lower is better).

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).
    std : array_like
        Predictive standard deviations (> 0), shape (n,).

    Returns
    -------
    float
        The mean closed-form Gaussian CRPS.
    """
    return float(np.mean(gaussian_crps_pointwise(y, mean, std)))


def crps_from_samples(y: ArrayLike, samples: ArrayLike) -> float:
    """Mean CRPS from predictive samples, energy form E|X - y| - 1/2 E|X - X'|.

    ``samples`` has shape (n, S). E|X - X'| over the empirical distribution uses the sorted-sample
    identity sum_{i,j} |x_i - x_j| = 2 sum_k (2k - S - 1) x_(k) (k = 1..S), so the cost is O(S log S).

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    samples : array_like
        Predictive samples, shape (n, S): S draws per point.

    Returns
    -------
    float
        The mean sample estimate of the CRPS, E|X - y| - E|X - X'| / 2.
    """
    y = as_vector("y", y)
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != y.shape[0] or x.shape[1] < 1:
        raise ValueError(f"samples: expected shape ({y.shape[0]}, S>=1), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples: contains non-finite values")
    s = x.shape[1]
    term_obs = np.mean(np.abs(x - y[:, None]), axis=1)
    x_sorted = np.sort(x, axis=1)
    k = np.arange(1, s + 1)
    mean_abs_pair = 2.0 * np.sum((2 * k - s - 1) * x_sorted, axis=1) / s**2
    return float(np.mean(term_obs - 0.5 * mean_abs_pair))


def crps_from_quantiles(y: ArrayLike, levels: ArrayLike, quantiles: ArrayLike) -> float:
    """Mean CRPS from predictive quantiles: CRPS = 2 * integral_0^1 pinball_tau(y, q_tau) dtau.

    The integral is approximated by the mean over ``levels`` (use many equally spaced levels, e.g.
    0.01..0.99, midpoints of equal cells). ``quantiles`` has shape (n, len(levels)).

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    levels : array_like
        Quantile levels in (0, 1), shape (K,).
    quantiles : array_like
        Predicted quantiles, shape (n, K), one column per level.

    Returns
    -------
    float
        The mean CRPS approximated by the pinball losses of the quantiles.
    """
    y = as_vector("y", y)
    tau = as_levels("levels", levels)
    q = np.asarray(quantiles, dtype=np.float64)
    if q.shape != (y.shape[0], tau.shape[0]):
        raise ValueError(f"quantiles: expected shape ({y.shape[0]}, {tau.shape[0]}), got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError("quantiles: contains non-finite values")
    diff = y[:, None] - q
    pinball = np.maximum(tau * diff, (tau - 1.0) * diff)
    return float(np.mean(2.0 * np.mean(pinball, axis=1)))


# ----------------------------------------------------------------------------- grouping
def mean_over_groups(metric: Callable[..., float], groups: ArrayLike, *arrays, **kwargs) -> float:
    """Unweighted mean over groups of ``metric(*arrays[group], **kwargs)``.

    For per-episode evaluation (e.g. Iwata & Kumagai compute MSE/ECE "on query sets in the meta-test
    tasks": one value per query set, then averaged). Every array must have ``len(groups)`` rows.

    Parameters
    ----------
    metric : Callable[..., float]
        A metric of this module, called on each group's rows.
    groups : array_like
        The group of each row (e.g. the test episode), shape (n,).

    Returns
    -------
    float
        The unweighted mean of the groups' metric values.
    """
    keys = np.asarray(groups)
    if keys.ndim != 1 or keys.size == 0:
        raise ValueError(f"groups: expected a non-empty 1-D array, got shape {keys.shape}")
    columns = []
    for i, values in enumerate(arrays):
        arr = np.asarray(values)
        if arr.ndim == 0 or arr.shape[0] != keys.shape[0]:
            raise ValueError(f"arrays[{i}]: expected {keys.shape[0]} rows, got shape {arr.shape}")
        columns.append(arr)
    values = [metric(*(col[keys == g] for col in columns), **kwargs) for g in np.unique(keys)]
    return float(np.mean(values))


# ----------------------------------------------------------------------------- bundles
def regression_metrics_gaussian(y: ArrayLike, mean: ArrayLike, std: ArrayLike, *,
                                rounded_z: bool = False) -> dict[str, float]:
    """All shared regression metrics for a Gaussian predictive N(mean, std^2): the pipeline's bundle.

    Keys (``metrics.json``, summary.csv, the report specs and paper_numbers.yaml name them): mse, rmse, nlpd,
    ece (:func:`ece_iwata`), te (:func:`total_error`, meaningful on standardised targets only), ce (:func:`ce_qr`,
    percent), cal_score (:func:`calibration_score`), cov95, cov90, cov68, sharpness, crps. The library's
    ``uqcal.metrics.all_metrics`` gives the same numbers under names that say which definition each is.
    ``rounded_z=True`` uses RIO's rounded z values (1.96 / 1.65 / 1.0) for the coverages.

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).
    std : array_like
        Predictive standard deviations (> 0), shape (n,).
    rounded_z : bool, optional
        Interval coverages at z = 1.96 / 1.65 / 1.0 (RIO's tables) instead of the exact quantiles.

    Returns
    -------
    dict of str to float
        Every regression metric of a Gaussian predictive: mse, rmse, nlpd, ece, te, ce, cal_score, cov95,
        cov90, cov68, sharpness, crps.
    """
    y = as_vector("y", y)
    mean = as_like("mean", mean, y, "y")
    std = as_positive_like("std", std, y, "y")
    pit = gaussian_pit(y, mean, std)
    mse_value = mse(y, mean)
    ece_value = ece_iwata(pit)
    out = {
        "mse": mse_value,
        "rmse": float(np.sqrt(mse_value)),
        "nlpd": gaussian_nlpd(y, mean, std),
        "ece": ece_value,
        "te": total_error(mse_value, ece_value),
        "ce": ce_qr(pit),
        "cal_score": calibration_score(pit),
    }
    for level, key in ((0.95, "cov95"), (0.90, "cov90"), (0.68, "cov68")):
        out[key] = gaussian_interval_coverage(y, mean, std, level, z=ROUNDED_Z[level] if rounded_z else None)
    out["sharpness"] = sharpness(std)
    out["crps"] = gaussian_crps(y, mean, std)
    return out


def regression_metrics_general(
    y: ArrayLike,
    mean: ArrayLike,
    pit: ArrayLike,
    logpdf: ArrayLike,
    *,
    std: ArrayLike | None=None,
    quantiles: Mapping[str, object] | None = None,
    crps: ArrayLike | None=None,
) -> dict[str, float]:
    """The same metrics for a non-Gaussian predictive given pointwise PIT and log density.

    ``quantiles`` maps the predictions.parquet column names (``"q0.025"``, ``"q0.975"``, ...) to
    arrays; a coverage is reported when both bounds of its interval are present. ``std`` (for
    sharpness) and ``crps`` (pointwise values, averaged) are optional. Keys that cannot be computed
    are left out.

    Parameters
    ----------
    y : array_like
        Observed targets, shape (n,).
    mean : array_like
        Predictive means, shape (n,).
    pit : array_like
        PIT values F_i(y_i) in [0, 1], shape (n,).
    logpdf : array_like
        Pointwise predictive log densities log p_i(y_i), shape (n,).
    std : array_like or None, optional
        Predictive standard deviations for the sharpness, or None.
    quantiles : Mapping[str, object] or None, optional
        Predicted quantiles by column name (``q0.025`` ...), for the coverages.
    crps : array_like or None, optional
        Pointwise CRPS values, averaged, or None.

    Returns
    -------
    dict of str to float
        The metrics that can be computed from the given columns.
    """
    y = as_vector("y", y)
    mean = as_like("mean", mean, y, "y")
    pit = as_probability_vector("pit", pit)
    if pit.shape != y.shape:
        raise ValueError(f"pit: shape {pit.shape} does not match y shape {y.shape}")
    logpdf = np.asarray(logpdf, dtype=np.float64)
    if logpdf.shape != y.shape:
        raise ValueError(f"logpdf: shape {logpdf.shape} does not match y shape {y.shape}")
    mse_value = mse(y, mean)
    ece_value = ece_iwata(pit)
    out = {
        "mse": mse_value,
        "rmse": float(np.sqrt(mse_value)),
        "nlpd": nlpd_from_logpdf(logpdf),
        "ece": ece_value,
        "te": total_error(mse_value, ece_value),
        "ce": ce_qr(pit),
        "cal_score": calibration_score(pit),
    }
    quantiles = quantiles or {}
    for level, key in ((0.95, "cov95"), (0.90, "cov90"), (0.68, "cov68")):
        lo_col, hi_col = INTERVAL_QUANTILE_COLUMNS[level]
        if lo_col in quantiles and hi_col in quantiles:
            out[key] = interval_coverage(y, quantiles[lo_col], quantiles[hi_col])
    if std is not None:
        out["sharpness"] = sharpness(as_like("std", std, y, "y"))
    if crps is not None:
        out["crps"] = float(np.mean(as_like("crps", crps, y, "y")))
    return out

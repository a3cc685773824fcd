"""Classification metrics for few-shot evaluation (MD-BFSC, Ke, Cao & Zhou, Sec. 5, Table 2).

MD-BFSC reports ECE (Guo et al. 2017) and MCE with 15 bins following Patacchiola et al. (2020):
confidence = max predicted probability, prediction = its argmax, equal-width bins over [0, 1] with
bin m = ((m-1)/M, m/M] (Guo et al. Sec. 2; the first bin also takes confidence 0), and

    ECE = sum_m |B_m| / n * |acc(B_m) - conf(B_m)|,   MCE = max over non-empty m of |acc(B_m) - conf(B_m)|.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

_PROB_SUM_TOLERANCE = 1e-4


def _validate(probs, labels, *, atol: float = _PROB_SUM_TOLERANCE) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        raise ValueError(f"probs: expected shape (n >= 1, C >= 2), got {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("probs: contains non-finite values")
    if np.any(p < -atol) or np.any(p > 1 + atol):
        raise ValueError(f"probs: values must lie in [0, 1] (got range [{p.min():g}, {p.max():g}])")
    row_sums = p.sum(axis=1)
    bad = np.abs(row_sums - 1.0) > atol
    if np.any(bad):
        first = int(np.argmax(bad))
        raise ValueError(
            f"probs: {int(bad.sum())} row(s) do not sum to 1 within {atol:g} "
            f"(row {first} sums to {row_sums[first]:.6g})"
        )
    raw = np.asarray(labels)
    if raw.ndim != 1 or raw.shape[0] != p.shape[0]:
        raise ValueError(f"labels: expected shape ({p.shape[0]},), got {raw.shape}")
    if raw.dtype.kind not in "iub":
        as_float = raw.astype(np.float64)
        if not np.all(np.isfinite(as_float)) or np.any(as_float != np.round(as_float)):
            raise ValueError("labels: must be integers")
        raw = as_float
    y = raw.astype(np.int64)
    if np.any(y < 0) or np.any(y >= p.shape[1]):
        raise ValueError(f"labels: must lie in 0..{p.shape[1] - 1} (got range {y.min()}..{y.max()})")
    return np.clip(p, 0.0, 1.0), y


def _check_bins(n_bins: int) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins: expected a positive integer, got {n_bins!r}")
    return int(n_bins)


def accuracy(probs: ArrayLike, labels: ArrayLike) -> float:
    """Fraction of rows whose argmax class equals the label (MD-BFSC Table 2's accuracy).

    Parameters
    ----------
    probs : array_like
        Predicted class probabilities, shape (n, C), each row summing to 1.
    labels : array_like
        Integer class labels in 0..C-1, shape (n,).

    Returns
    -------
    float
        The fraction of rows whose most probable class is the label.
    """
    p, y = _validate(probs, labels)
    return float(np.mean(np.argmax(p, axis=1) == y))


def classification_nll(probs: ArrayLike, labels: ArrayLike, eps: float = 1e-12) -> float:
    """Mean negative log probability of the true label, -1/n sum_i log p_i(y_i) (the NLL Guo et al. 2017 minimise
    for temperature scaling, Sec. 4.2), probabilities clipped below at ``eps``.

    Parameters
    ----------
    probs : array_like
        Predicted class probabilities, shape (n, C), each row summing to 1.
    labels : array_like
        Integer class labels in 0..C-1, shape (n,).
    eps : float, optional
        Floor of the probabilities before the logarithm.

    Returns
    -------
    float
        -1/n sum_i log p_i(y_i).
    """
    p, y = _validate(probs, labels)
    return float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], eps, 1.0))))


def reliability_bins(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15) -> pd.DataFrame:
    """Per-bin statistics for reliability diagrams and ECE/MCE.

    Columns: bin (0..n_bins-1), lower, upper, count, accuracy, confidence (NaN for empty bins).

    Parameters
    ----------
    probs : array_like
        Predicted class probabilities, shape (n, C), each row summing to 1.
    labels : array_like
        Integer class labels in 0..C-1, shape (n,).
    n_bins : int, optional
        Number of equal-width confidence bins (Guo et al. 2017 use 15).

    Returns
    -------
    pandas.DataFrame
        One row per bin: bin, lower, upper, count, accuracy, confidence.
    """
    p, y = _validate(probs, labels)
    n_bins = _check_bins(n_bins)
    confidence = p.max(axis=1)
    correct = (np.argmax(p, axis=1) == y).astype(np.float64)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # bin m holds (edges[m], edges[m+1]]; confidence exactly 0 goes to the first bin.
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, n_bins - 1)
    count = np.bincount(index, minlength=n_bins)
    sum_correct = np.bincount(index, weights=correct, minlength=n_bins)
    sum_conf = np.bincount(index, weights=confidence, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(count > 0, sum_correct / count, np.nan)
        conf = np.where(count > 0, sum_conf / count, np.nan)
    return pd.DataFrame(
        {
            "bin": np.arange(n_bins),
            "lower": edges[:-1],
            "upper": edges[1:],
            "count": count.astype(np.int64),
            "accuracy": acc,
            "confidence": conf,
        }
    )


def classification_ece(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15) -> float:
    """Expected calibration error (Guo et al. 2017): sum_m |B_m|/n |acc(B_m) - conf(B_m)|.

    Parameters
    ----------
    probs : array_like
        Predicted class probabilities, shape (n, C), each row summing to 1.
    labels : array_like
        Integer class labels in 0..C-1, shape (n,).
    n_bins : int, optional
        Number of equal-width confidence bins (Guo et al. 2017 use 15).

    Returns
    -------
    float
        The count-weighted mean |accuracy - confidence| over the bins.
    """
    bins = reliability_bins(probs, labels, n_bins)
    filled = bins[bins["count"] > 0]
    n = filled["count"].sum()
    gap = np.abs(filled["accuracy"].to_numpy() - filled["confidence"].to_numpy())
    return float(np.sum(filled["count"].to_numpy() / n * gap))


def classification_mce(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15) -> float:
    """Maximum calibration error (Guo et al. 2017, Sec. 2): the largest |acc(B_m) - conf(B_m)| over non-empty bins.

    Parameters
    ----------
    probs : array_like
        Predicted class probabilities, shape (n, C), each row summing to 1.
    labels : array_like
        Integer class labels in 0..C-1, shape (n,).
    n_bins : int, optional
        Number of equal-width confidence bins (Guo et al. 2017 use 15).

    Returns
    -------
    float
        The largest |accuracy - confidence| over the non-empty bins.
    """
    bins = reliability_bins(probs, labels, n_bins)
    filled = bins[bins["count"] > 0]
    return float(np.max(np.abs(filled["accuracy"].to_numpy() - filled["confidence"].to_numpy())))


def classification_metrics(probs: ArrayLike, labels: ArrayLike, n_bins: int = 15) -> dict[str, float]:
    """The pipeline's classification bundle: accuracy, nll, ece, mce (``metrics.json``'s keys; the library's
    ``uqcal.metrics.all_metrics`` names them ``accuracy``, ``nll_categorical``, ``ece_guo_15bins``, ``mce_15bins``).

    Parameters
    ----------
    probs : array_like
        Predicted class probabilities, shape (n, C), each row summing to 1.
    labels : array_like
        Integer class labels in 0..C-1, shape (n,).
    n_bins : int, optional
        Number of equal-width confidence bins (Guo et al. 2017 use 15).

    Returns
    -------
    dict of str to float
        accuracy, nll, ece and mce.
    """
    return {
        "accuracy": accuracy(probs, labels),
        "nll": classification_nll(probs, labels),
        "ece": classification_ece(probs, labels, n_bins),
        "mce": classification_mce(probs, labels, n_bins),
    }

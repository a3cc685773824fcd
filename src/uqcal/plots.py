"""Calibration plots of predictive objects (``uqcal.core.predictive``): the reliability diagram, the calibration
curve and the PIT histogram. Each takes a prediction and its targets, draws on ``ax`` (a new figure without one)
and returns the matplotlib Axes. The report draws its reliability diagrams and calibration curves with them.

Needs matplotlib: ``pip install 'uqcal[plots]'``.

- Regression predictives (Gaussian, quantile, recalibrated) are read through their PIT values F_i(y_i)
  (Kuleshov et al. 2018): a calibrated predictive has uniform PIT values.
- Categorical predictives are read through their top-label confidence and whether the top label is right
  (Guo et al. 2017, Sec. 2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from uqcal.core.predictive import CategoricalPredictive, Predictive, RegressionPredictive
from uqcal.metrics import empirical_frequencies, reliability_bins

try:
    import matplotlib.pyplot as plt
except ImportError as exc:  # the base install has no matplotlib
    raise ImportError("uqcal.plots needs matplotlib: pip install 'uqcal[plots]'") from exc

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from numpy.typing import ArrayLike

__all__ = ["calibration_curve", "pit_histogram", "reliability_diagram"]

LEVELS = np.linspace(0.0, 1.0, 21)  # expected frequencies at which the regression curves are read
N_BINS = 15  # Guo et al. (2017)'s 15 equal-width confidence bins


def _axes(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(4.0, 3.6))
    return ax


def _check(prediction, name: str) -> None:
    if not isinstance(prediction, Predictive):
        raise TypeError(f"{name}: prediction must be a uqcal.core.predictive object (GaussianPredictive, "
                        f"QuantilePredictive, RecalibratedPredictive or CategoricalPredictive), got "
                        f"{type(prediction).__name__}")


def _central_coverage(prediction: RegressionPredictive, y) -> np.ndarray:
    """Observed fraction of y inside each central interval of probability LEVELS: y lies in the central p
    interval iff |F(y) - 1/2| <= p/2 (a continuous CDF)."""
    pit = np.asarray(prediction.pit(y), dtype=np.float64)
    return np.array([np.mean(np.abs(pit - 0.5) <= p / 2 + 1e-12) for p in LEVELS])


def _classification_bins(prediction: CategoricalPredictive, y):
    return reliability_bins(prediction.probs, prediction.labels(y), N_BINS)


def reliability_diagram(prediction: RegressionPredictive | CategoricalPredictive, y: ArrayLike, *,
                        recalibrated: Predictive | None = None, ax: Axes | None = None,
                        label: str | None = None) -> Axes:
    """Observed against expected frequency, the raw prediction beside ``recalibrated`` (another predictive of
    the same points, e.g. an ``IsotonicRecalibrator``'s output) when given.

    Regression: the observed fraction of targets inside each central interval against its probability.
    Classification: the accuracy of each of 15 equal-width confidence bins against its mean confidence, with
    the points per bin as grey bars on a right-hand axis.

    Parameters
    ----------
    prediction : RegressionPredictive | CategoricalPredictive
        A predictive object (``uqcal.core.predictive``) of the n points.
    y : array_like
        Observed targets, or integer class labels for a categorical predictive, shape (n,).
    recalibrated : Predictive or None, optional
        Another predictive of the same points drawn beside the raw one (e.g. an ``IsotonicRecalibrator``'s
        output), or None.
    ax : Axes or None, optional
        Matplotlib Axes to draw on; None draws on a new figure.
    label : str or None, optional
        Legend label of the drawn curve.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    _check(prediction, "reliability_diagram")
    if recalibrated is not None:
        _check(recalibrated, "reliability_diagram (recalibrated)")
        if isinstance(recalibrated, CategoricalPredictive) != isinstance(prediction, CategoricalPredictive):
            raise TypeError("reliability_diagram: recalibrated must be the same kind of prediction as prediction "
                            f"(got {type(prediction).__name__} and {type(recalibrated).__name__})")
    ax = _axes(ax)
    series = [(prediction, label or "raw", "-", "o")]
    if recalibrated is not None:
        series.append((recalibrated, "recalibrated", "--", "s"))
    if isinstance(prediction, CategoricalPredictive):
        counts = ax.twinx()  # first, so that the curves are drawn above the bars
        for k, (pred, name, style, marker) in enumerate(series):
            bins = _classification_bins(pred, y)
            if k == 0:
                counts.bar(bins["lower"], bins["count"], width=1 / N_BINS, align="edge", color="0.85",
                           edgecolor="0.6", lw=0.5, zorder=0)
            seen = bins["count"] > 0
            ax.plot(bins["confidence"][seen], bins["accuracy"][seen], ls=style, marker=marker, ms=3.5,
                    label=name)
        counts.set_ylabel("points per bin (raw)")
        counts.set_ylim(0, max(1.0, counts.get_ylim()[1]) * 3)  # bars in the lower third, under the curves
        counts.grid(False)
        ax.set_zorder(counts.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.set(xlabel="confidence (top-label probability)", ylabel="accuracy")
    else:
        for pred, name, style, marker in series:
            ax.plot(LEVELS, _central_coverage(pred, y), ls=style, marker=marker, ms=3, label=name)
        ax.set(xlabel="expected frequency (central interval probability)",
               ylabel="observed frequency inside the interval")
    ax.plot([0, 1], [0, 1], "k:", lw=1, label="ideal")
    ax.set(xlim=(0, 1), ylim=(0, 1))
    ax.legend(fontsize=7, loc="upper left")
    return ax


def calibration_curve(prediction: RegressionPredictive | CategoricalPredictive, y: ArrayLike, *,
                      ax: Axes | None = None, label: str | None = None, **line_kwargs: Any) -> Axes:
    """Regression: the observed fraction of targets with F(y) <= p against p (the predicted-vs-empirical CDF of
    Kuleshov et al. 2018, Fig. 1). Classification: accuracy against mean confidence per confidence bin (Guo et al.
    2017, Fig. 1) as a line. ``line_kwargs`` go to ``Axes.plot`` (e.g. ``color``, ``ls``).

    Parameters
    ----------
    prediction : RegressionPredictive | CategoricalPredictive
        A predictive object (``uqcal.core.predictive``) of the n points.
    y : array_like
        Observed targets, or integer class labels for a categorical predictive, shape (n,).
    ax : Axes or None, optional
        Matplotlib Axes to draw on; None draws on a new figure.
    label : str or None, optional
        Legend label of the drawn curve.
    **line_kwargs
        Passed to ``Axes.plot`` (e.g. ``color``, ``ls``).

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    _check(prediction, "calibration_curve")
    ax = _axes(ax)
    line_kwargs = {"marker": "o", "ms": 2.5, **line_kwargs}
    if isinstance(prediction, CategoricalPredictive):
        bins = _classification_bins(prediction, y)
        seen = bins["count"] > 0
        ax.plot(bins["confidence"][seen], bins["accuracy"][seen], label=label, **line_kwargs)
        ax.set(xlabel="confidence (top-label probability)", ylabel="accuracy")
    else:
        pit = np.clip(np.asarray(prediction.pit(y), dtype=np.float64), 0.0, 1.0)
        ax.plot(LEVELS, empirical_frequencies(pit, LEVELS), label=label, **line_kwargs)
        ax.set(xlabel="predicted CDF level p", ylabel="observed fraction with F(y) ≤ p")
    if "ideal" not in [line.get_label() for line in ax.lines]:  # one diagonal per Axes, however many curves
        ax.plot([0, 1], [0, 1], "k--", lw=1, label="ideal")
    ax.set(xlim=(0, 1), ylim=(0, 1))
    return ax


def pit_histogram(prediction: RegressionPredictive, y: ArrayLike, *, ax: Axes | None = None, bins: int = 10) -> Axes:
    """Histogram of the PIT values F_i(y_i) as a density: flat at 1 for a calibrated predictive; a U shape is
    over-confidence, a hump under-confidence.

    Parameters
    ----------
    prediction : RegressionPredictive
        A predictive object (``uqcal.core.predictive``) of the n points.
    y : array_like
        Observed targets, shape (n,).
    ax : Axes or None, optional
        Matplotlib Axes to draw on; None draws on a new figure.
    bins : int, optional
        Number of equal-width bins on [0, 1].

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    _check(prediction, "pit_histogram")
    if not isinstance(prediction, RegressionPredictive):
        raise TypeError(f"pit_histogram: needs a regression predictive (PIT values), got {type(prediction).__name__}; "
                        "for class probabilities use reliability_diagram")
    ax = _axes(ax)
    pit = np.clip(np.asarray(prediction.pit(y), dtype=np.float64), 0.0, 1.0)
    ax.hist(pit, bins=np.linspace(0.0, 1.0, int(bins) + 1), density=True, color="C0", alpha=0.7, edgecolor="k",
            lw=0.5)
    ax.axhline(1.0, color="k", ls="--", lw=1, label="uniform (calibrated)")
    ax.set(xlim=(0, 1), xlabel="PIT value F(y)", ylabel="density")
    ax.legend(fontsize=7)
    return ax

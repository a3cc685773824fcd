"""Post-hoc recalibrators of predictive objects: fit on held-out predictions and targets, then transform new
predictions. numpy, scipy and scikit-learn only (the base install).

- ``IsotonicRecalibrator``: any regression predictive; F'(y) = R(F(y)) with R the isotonic map of the held-out
  PIT values (Kuleshov et al. 2018, Alg. 1), returned as a ``RecalibratedPredictive`` (quantiles through R^-1).
- ``VarianceScaling``: a Gaussian predictive; N(mu, (s sigma)^2) with the one factor s that maximises the
  held-out likelihood, in closed form (``variance_scale``; the leaderboard's post-hoc baseline, Laves et al. 2020).
- ``TemperatureScaling``: class probabilities; softmax(log p / T) with the T that minimises the held-out NLL
  (Guo et al. 2017, Sec. 4.2).

Each has ``fit(prediction, y) -> self`` and ``transform(prediction) -> predictive object``, and raises
``NotFittedError`` when transforming before ``fit``.
"""

from __future__ import annotations

import numpy as np

from uqcal.core.calibration import LEVELS, IsotonicPITMap
from uqcal.core.predictive import (
    CategoricalPredictive,
    GaussianPredictive,
    NotFittedError,
    Predictive,
    RecalibratedPredictive,
    RegressionPredictive,
)

__all__ = ["IsotonicRecalibrator", "TemperatureScaling", "VarianceScaling", "variance_scale"]


def _expect(owner: str, prediction: Predictive, kind: type) -> None:
    if not isinstance(prediction, kind):
        raise TypeError(f"{owner}: prediction must be a {kind.__name__}, got {type(prediction).__name__}")


def variance_scale(y, mean, std) -> float:
    """The maximum-likelihood scale factor s of the predictive std on held-out (y, mean, std): sqrt(mean(z^2)).

    The Gaussian NLL sum_i [log(s sigma_i) + z_i^2 / (2 s^2)], z_i = (y_i - mu_i) / sigma_i, has d/ds = 0 only at
    s^2 = mean_i z_i^2 (the mean squared z-score), a minimum. None of the five papers defines it: it is the
    leaderboard's ``VarianceScaling`` baseline, the sigma scaling of Laves et al. (2020), the regression
    analogue of Guo et al.'s temperature scaling.
    """
    y, mean, std = (np.asarray(a, dtype=np.float64) for a in (y, mean, std))
    if not (y.shape == mean.shape == std.shape and y.ndim == 1):
        raise ValueError(f"variance_scale: y, mean and std must be 1-D of one length, got shapes {y.shape}, "
                         f"{mean.shape}, {std.shape}")
    if y.size == 0 or not np.all(np.isfinite(y) & np.isfinite(mean) & np.isfinite(std)) or np.any(std <= 0):
        raise ValueError("variance_scale: needs >= 1 point with finite y and mean and a finite std > 0")
    z = (y - mean) / std
    scale = float(np.sqrt(np.mean(z**2)))
    if scale == 0.0:
        raise ValueError("variance_scale: every z-score is 0 (mean == y everywhere), no scale maximises the likelihood")
    return scale


class IsotonicRecalibrator:
    """Isotonic recalibration of a regression predictive (Kuleshov et al. 2018, Alg. 1).

    ``fit`` computes the held-out PIT values p_t = F_t(y_t) and fits R by isotonic regression of their empirical
    CDF levels on them (``uqcal.core.calibration.IsotonicPITMap``, (0, 0) and (1, 1) pinned). ``transform``
    returns F'(y) = R(F(y)) with quantiles F^-1(R^-1(q)). ``levels``: ``"i/n"`` (Alg. 1: the fraction of PIT
    values <= p_t) or ``"i/(n+1)"`` (the QR paper's Sec. 3 endpoint fix: R stays below 1 at the largest PIT, so
    the recalibrated support is not cut at it).
    """

    def __init__(self, levels: str = "i/n"):
        if levels not in LEVELS:
            raise ValueError(f"IsotonicRecalibrator: levels must be one of {LEVELS}, got {levels!r}")
        self.levels = levels
        self.pit_map_: IsotonicPITMap | None = None

    def fit(self, prediction: RegressionPredictive, y) -> IsotonicRecalibrator:
        _expect("IsotonicRecalibrator.fit", prediction, RegressionPredictive)
        if len(prediction) < 2:
            raise ValueError(f"IsotonicRecalibrator.fit: needs >= 2 held-out points, got {len(prediction)}")
        self.pit_map_ = IsotonicPITMap(add_endpoints=True, min_points=2, levels=self.levels).fit(prediction.pit(y))
        return self

    def transform(self, prediction: RegressionPredictive) -> RecalibratedPredictive:
        if self.pit_map_ is None:
            raise NotFittedError("IsotonicRecalibrator is not fitted: call fit(prediction, y) on held-out data first")
        _expect("IsotonicRecalibrator.transform", prediction, RegressionPredictive)
        return RecalibratedPredictive(prediction, self.pit_map_, self.pit_map_.inverse)


class VarianceScaling:
    """N(mu, sigma^2) -> N(mu, (s sigma)^2), s = ``variance_scale`` of the held-out data (maximum likelihood)."""

    def __init__(self):
        self.scale_: float | None = None

    def fit(self, prediction: GaussianPredictive, y) -> VarianceScaling:
        _expect("VarianceScaling.fit", prediction, GaussianPredictive)
        y = np.asarray(y, dtype=np.float64)
        if y.shape != prediction.mean.shape:
            raise ValueError(f"VarianceScaling.fit: y has shape {y.shape} for {len(prediction)} predicted points")
        self.scale_ = variance_scale(y, prediction.mean, prediction.std)
        return self

    def transform(self, prediction: GaussianPredictive) -> GaussianPredictive:
        if self.scale_ is None:
            raise NotFittedError("VarianceScaling is not fitted: call fit(prediction, y) on held-out data first")
        _expect("VarianceScaling.transform", prediction, GaussianPredictive)
        return GaussianPredictive(prediction.mean, self.scale_ * prediction.std)


class TemperatureScaling:
    """Temperature scaling (Guo et al. 2017, Sec. 4.2): q = softmax(z / T) with the T > 0 that minimises the NLL
    of the held-out labels.

    The logits z are log p: for p = softmax(z), log p differs from z by a constant per row, which softmax
    ignores, so softmax(log p / T) is Guo et al.'s softmax(z / T). The NLL is convex in 1 / T (a log-sum-exp of
    terms linear in it, less a linear term), so a bounded scalar search over 1 / T (T within
    ``temperature_bounds``) finds its minimum (scipy.optimize.minimize_scalar). Labels must be integers naming the columns
    (``CategoricalPredictive.labels``): float labels are refused.
    """

    def __init__(self, temperature_bounds: tuple[float, float] = (1e-3, 1e3)):
        low, high = (float(b) for b in temperature_bounds)
        if not 0.0 < low < high < np.inf:
            raise ValueError(f"TemperatureScaling: temperature_bounds must be 0 < low < high < inf, got "
                             f"{temperature_bounds!r}")
        self.temperature_bounds = (low, high)
        self.temperature_: float | None = None

    @staticmethod
    def _logits(prediction: CategoricalPredictive) -> np.ndarray:
        # log 0 = -inf would make 0 * inf terms; the smallest normal float keeps the zero exactly zero after softmax
        return np.log(np.maximum(prediction.probs, np.finfo(np.float64).tiny))

    def fit(self, prediction: CategoricalPredictive, y) -> TemperatureScaling:
        from scipy.optimize import minimize_scalar
        from scipy.special import log_softmax

        _expect("TemperatureScaling.fit", prediction, CategoricalPredictive)
        labels = prediction.labels(y)
        logits = self._logits(prediction)
        rows = np.arange(len(labels))

        def nll(inverse_temperature: float) -> float:
            return float(-np.mean(log_softmax(logits * inverse_temperature, axis=1)[rows, labels]))

        low, high = self.temperature_bounds
        result = minimize_scalar(nll, bounds=(1.0 / high, 1.0 / low), method="bounded", options={"xatol": 1e-10})
        self.temperature_ = float(1.0 / result.x)
        return self

    def transform(self, prediction: CategoricalPredictive) -> CategoricalPredictive:
        from scipy.special import softmax

        if self.temperature_ is None:
            raise NotFittedError("TemperatureScaling is not fitted: call fit(prediction, y) on held-out data first")
        _expect("TemperatureScaling.transform", prediction, CategoricalPredictive)
        return CategoricalPredictive(softmax(self._logits(prediction) / self.temperature_, axis=1), prediction.classes)

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

from typing import TYPE_CHECKING

import numpy as np

from uqcal.core.calibration import LEVELS, IsotonicPITMap, MonotoneMap
from uqcal.core.predictive import (
    CategoricalPredictive,
    GaussianPredictive,
    NotFittedError,
    Predictive,
    RecalibratedPredictive,
    RegressionPredictive,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["IsotonicRecalibrator", "TemperatureScaling", "VarianceScaling", "variance_scale"]


def _expect(owner: str, prediction: Predictive, kind: type) -> None:
    if not isinstance(prediction, kind):
        raise TypeError(f"{owner}: prediction must be a {kind.__name__}, got {type(prediction).__name__}")


def variance_scale(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> float:
    """The maximum-likelihood scale factor s of the predictive std on held-out (y, mean, std): sqrt(mean(z^2)).

    The Gaussian NLL sum_i [log(s sigma_i) + z_i^2 / (2 s^2)], z_i = (y_i - mu_i) / sigma_i, has d/ds = 0 only at
    s^2 = mean_i z_i^2 (the mean squared z-score), a minimum. None of the five papers defines it: it is the
    leaderboard's ``VarianceScaling`` baseline, the sigma scaling of Laves et al. (2020), the regression
    analogue of Guo et al.'s temperature scaling.

    Parameters
    ----------
    y : array_like of shape (n,)
        Held-out targets.
    mean, std : array_like of shape (n,)
        The predictive means and standard deviations (std > 0) of those points.

    Returns
    -------
    float
        s = sqrt(mean_i z_i^2) > 0, the factor that multiplies every std.
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
    returns F'(y) = R(F(y)) with quantiles F^-1(R^-1(q)), R strictly increasing through the fit's knots
    (``MonotoneMap``), so the recalibrated predictive has a density (NLL), a CRPS and a variance.

    Parameters
    ----------
    levels : {"i/(n+1)", "i/n"}, default "i/(n+1)"
        The empirical CDF levels of the sorted PIT values. ``"i/(n+1)"`` (the QR paper's Sec. 3 endpoint fix): R
        stays below 1 at the largest held-out PIT, so the recalibrated support is not cut there and every test
        point has a positive density. ``"i/n"`` (Alg. 1 literally) puts all mass below the largest held-out PIT: a
        test point beyond it has density 0 (NLL = inf, as the QR paper's App. B.2 notes).

    Attributes
    ----------
    pit_map_ : IsotonicPITMap
        The isotonic fit; ``map_`` the strictly increasing map through its knots.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal import GaussianPredictive, IsotonicRecalibrator, all_metrics
    >>> rng = np.random.default_rng(0)
    >>> over_confident = GaussianPredictive(np.zeros(400), np.full(400, 0.5))
    >>> recalibrator = IsotonicRecalibrator().fit(over_confident, rng.normal(size=400))
    >>> metrics = all_metrics(recalibrator.transform(over_confident), rng.normal(size=400))
    >>> all(np.isfinite(v) for v in metrics.values()), round(metrics["coverage_90"], 2)
    (True, 0.88)
    """

    def __init__(self, levels: str = "i/(n+1)"):
        if levels not in LEVELS:
            raise ValueError(f"IsotonicRecalibrator: levels must be one of {LEVELS}, got {levels!r}")
        self.levels = levels
        self.pit_map_: IsotonicPITMap | None = None
        self.map_: MonotoneMap | None = None

    def fit(self, prediction: RegressionPredictive, y: ArrayLike) -> IsotonicRecalibrator:
        """Fit R on held-out predictions and their targets.

        Parameters
        ----------
        prediction : RegressionPredictive
            Predictions of >= 2 held-out points.
        y : array_like of shape (n,)
            Their targets.

        Returns
        -------
        IsotonicRecalibrator
            self, fitted.
        """
        _expect("IsotonicRecalibrator.fit", prediction, RegressionPredictive)
        if len(prediction) < 2:
            raise ValueError(f"IsotonicRecalibrator.fit: needs >= 2 held-out points, got {len(prediction)}")
        self.pit_map_ = IsotonicPITMap(add_endpoints=True, min_points=2, levels=self.levels).fit(prediction.pit(y))
        self.map_ = MonotoneMap(*self.pit_map_.knots)
        return self

    def transform(self, prediction: RegressionPredictive) -> RecalibratedPredictive:
        """Recalibrate new predictions.

        Parameters
        ----------
        prediction : RegressionPredictive
            Predictions of the same model as the held-out ones.

        Returns
        -------
        RecalibratedPredictive
            F'(y) = R(F(y)), quantiles F^-1(R^-1(q)).
        """
        if self.map_ is None:
            raise NotFittedError("IsotonicRecalibrator is not fitted: call fit(prediction, y) on held-out data first")
        _expect("IsotonicRecalibrator.transform", prediction, RegressionPredictive)
        return RecalibratedPredictive(prediction, self.map_, self.map_.inverse)


class VarianceScaling:
    """N(mu, sigma^2) -> N(mu, (s sigma)^2), s = ``variance_scale`` of the held-out data (maximum likelihood)."""

    def __init__(self):
        self.scale_: float | None = None

    def fit(self, prediction: GaussianPredictive, y: ArrayLike) -> VarianceScaling:
        """Fit s on held-out predictions and their targets (``variance_scale``).

        Parameters
        ----------
        prediction : GaussianPredictive
            Predictions of the held-out points.
        y : array_like of shape (n,)
            Their targets.

        Returns
        -------
        VarianceScaling
            self, fitted (``scale_`` set).
        """
        _expect("VarianceScaling.fit", prediction, GaussianPredictive)
        y = np.asarray(y, dtype=np.float64)
        if y.shape != prediction.mean.shape:
            raise ValueError(f"VarianceScaling.fit: y has shape {y.shape} for {len(prediction)} predicted points")
        self.scale_ = variance_scale(y, prediction.mean, prediction.std)
        return self

    def transform(self, prediction: GaussianPredictive) -> GaussianPredictive:
        """Rescale new predictions' standard deviations by the fitted s.

        Parameters
        ----------
        prediction : GaussianPredictive
            Predictions of the same model as the held-out ones.

        Returns
        -------
        GaussianPredictive
            N(mu, (s sigma)^2): the same means, every std times ``scale_``.
        """
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

    Parameters
    ----------
    temperature_bounds : tuple of float, default (1e-3, 1e3)
        The range (low, high), 0 < low < high < inf, that the fitted temperature T is searched in.
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
        # A probability of exactly 0 has no logit: clip to [eps, 1 - eps] (eps = 2.2e-16, float64's machine epsilon)
        # as netcal does. The smallest normal float (log = -708) instead put zeros ~20x further below the other
        # logits, so the NLL-optimal T grew to squash them (T = 41 against netcal's 7.5 for GaussianNB on digits).
        eps = np.finfo(np.float64).eps
        return np.log(np.clip(prediction.probs, eps, 1.0 - eps))

    def fit(self, prediction: CategoricalPredictive, y: ArrayLike) -> TemperatureScaling:
        """Fit T by minimising the NLL of held-out labels under softmax(log p / T).

        Parameters
        ----------
        prediction : CategoricalPredictive
            Class probabilities of the held-out points.
        y : array_like of shape (n,)
            Their integer class labels, each one of ``prediction.classes``.

        Returns
        -------
        TemperatureScaling
            self, fitted (``temperature_`` set).
        """
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
        """Rescale new class probabilities by the fitted temperature.

        Parameters
        ----------
        prediction : CategoricalPredictive
            Class probabilities of the same model as the held-out ones.

        Returns
        -------
        CategoricalPredictive
            softmax(log p / T) per row, with the same ``classes``.
        """
        from scipy.special import softmax

        if self.temperature_ is None:
            raise NotFittedError("TemperatureScaling is not fitted: call fit(prediction, y) on held-out data first")
        _expect("TemperatureScaling.transform", prediction, CategoricalPredictive)
        return CategoricalPredictive(softmax(self._logits(prediction) / self.temperature_, axis=1), prediction.classes)

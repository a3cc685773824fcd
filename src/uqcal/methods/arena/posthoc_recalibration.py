"""Post-hoc recalibration of any Gaussian predictive model of the arena, fitted on the validation part.

A recalibration method depends on a trained base run (``depends_on``). That run predicted the arena split's
``test`` rows, its validation rows first (uqcal.data.splits.train_val_test_split); the map is fitted on those and
applied to every row, and only the test rows are scored (uqcal.metrics.evaluation.test_part).

- ``VarianceScaling``: N(mu, s^2 sigma^2) with the one factor s that minimises the validation NLL. The
  Gaussian NLL sum_i [log(s sigma_i) + (y_i - mu_i)^2 / (2 s^2 sigma_i^2)] has d/ds = 0 at
  s^2 = mean_i ((y_i - mu_i) / sigma_i)^2 (the mean squared z-score), its only stationary point, a minimum.
- ``IsotonicOnValidation``: G(y) = R(Phi((y - mu) / sigma)) with R the isotonic map of Kuleshov et al. (2018)
  fitted on the validation PITs (uqcal.core.calibration: the map and the recalibrated Gaussian's density,
  moments, quantiles and CRPS are written once there, the qr family uses the same). ``endpoint_fix`` (default)
  uses levels i/(m+1) and the knot (1, 1), so the recalibrated support is not truncated (QR paper Sec. 3).
  The result is not Gaussian: the predictions carry ``pit``, ``logpdf``, quantiles and ``crps``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from uqcal.core.predictive import GaussianPredictive, RecalibratedPredictive
from uqcal.core.recalibration import VarianceScaling as LibraryVarianceScaling
from uqcal.methods.api import RunContext
from uqcal.methods.estimator import ProbabilisticRegressor

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from uqcal.core.predictive import RegressionPredictive

QUANTILE_LEVELS = (0.025, 0.05, 0.16, 0.84, 0.95, 0.975)


class _SavedBaseRun:
    """The pipeline's base: a run that already predicted the split's ``test`` rows (validation rows first), as
    it saved them. ``predict(positions)`` gives the saved Gaussian of those rows of its predictions file (an
    (m, 1) array of positions): the recalibration reuses the base's predictions, it does not recompute them."""

    fitted_ = True

    def __init__(self, run_dir):
        frame = pd.read_parquet(run_dir / "predictions.parquet")
        missing = [c for c in ("y", "mean", "std") if c not in frame]
        if missing or "pit" in frame:
            raise ValueError(f"{run_dir}: not a Gaussian predictive (missing {missing} or has pit)")
        self.frame = frame

    def predict_proba(self, positions) -> GaussianPredictive:
        rows = np.asarray(positions, dtype=np.int64).reshape(-1)
        return GaussianPredictive(self.frame["mean"].to_numpy(float)[rows], self.frame["std"].to_numpy(float)[rows])


class PostHocRecalibration(ProbabilisticRegressor):
    """A Gaussian model recalibrated after the fact on data its base did not train on (the arena's ``_iso`` and
    ``_vs`` methods). ``base``: any estimator whose ``predict`` returns a ``GaussianPredictive`` (qr's, rio's,
    MarginalGaussian), fitted or not.

    ``fit(X, y)``: X (n, d), y (n,). A fitted base: (X, y) are the held-out recalibration data. An unfitted
    base: a random ``val_fraction`` of the rows (the runtime's stream 1) is held out, the base is fitted on the
    rest and the map on that part. ``predict(X)``: the base's prediction, recalibrated. The pipeline fits the
    map on the base run's predictions of the split's validation part and predicts all of its rows.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    base : ProbabilisticRegressor, optional
        The Gaussian model to recalibrate, fitted or not (None: the pipeline's ``train`` loads the base run).
    **kwargs
        ``val_fraction`` (float, default 0.2: the held-out part when ``base`` is not fitted),
        ``random_state`` and ``device``.
    """

    defaults: dict = {"val_fraction": 0.2}
    cpu_only = True  # numpy on the base run's predictions

    def __init__(self, params: dict | None = None, /, *, base: ProbabilisticRegressor | None = None, **kwargs):
        super().__init__(params, **kwargs)
        self.base = base

    def fit(self, X: ArrayLike, y: ArrayLike) -> PostHocRecalibration:
        """Fit the base (a clone on the rows not held out, unless it is fitted) and the map on held-out rows.

        Parameters
        ----------
        X : array_like of shape (n, d)
        y : array_like of shape (n,)

        Returns
        -------
        PostHocRecalibration
            self, fitted (``base_`` the base used).
        """
        if self.base is None:
            raise ValueError(f"{type(self).__name__}: base is None; pass base= a Gaussian estimator")
        X, y = self.fit_arrays(X, y)
        if getattr(self.base, "fitted_", False):
            self.base_ = self.base
        else:
            from sklearn.base import clone

            order = self.runtime.rng(1).permutation(y.size)
            n_val = max(2, int(round(self.params["val_fraction"] * y.size)))
            validation, train = np.sort(order[:n_val]), np.sort(order[n_val:])
            self.base_ = clone(self.base).fit(X[train], y[train])
            X, y = X[validation], y[validation]
        prediction = self.base_.predict_proba(X)
        if not isinstance(prediction, GaussianPredictive):
            raise TypeError(f"{type(self).__name__}: the base must predict a GaussianPredictive, got "
                            f"{type(prediction).__name__}")
        self.fit_map(prediction, y)
        self.n_validation_ = int(y.size)
        self.fitted_ = True
        return self

    def predict_proba(self, X: ArrayLike) -> RegressionPredictive:
        """The base's predictive, recalibrated.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        RegressionPredictive
        """
        X = self.predict_array(X)
        return self.recalibrate(self.base_.predict_proba(X))

    def fit_map(self, prediction: GaussianPredictive, y: np.ndarray) -> None:
        """Fit the recalibration map on the base's predictions of held-out rows and their targets.

        Parameters
        ----------
        prediction : GaussianPredictive
            The base's predictions of the recalibration rows.
        y : numpy.ndarray of shape (n,)
            Their targets.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def recalibrate(self, prediction: GaussianPredictive) -> RegressionPredictive:
        """Apply the fitted map to the base's predictions.

        Parameters
        ----------
        prediction : GaussianPredictive
            The base's predictions.

        Returns
        -------
        RegressionPredictive
            The recalibrated predictive of each point.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def train(self, ctx: RunContext) -> None:
        from uqcal.metrics.evaluation import validation_part

        if ctx.depends_dir is None:
            raise ValueError(f"arena method {ctx.method!r} needs depends_on: a base run to recalibrate")
        self.runtime = ctx.runtime
        self.base = _SavedBaseRun(ctx.depends_dir)
        y = self.base.frame["y"].to_numpy(float)
        n_validation = len(validation_part(self.base.frame, ctx.load_split()))
        positions = np.arange(y.size)[:, None]
        start = time.perf_counter()
        prediction = self.fit(positions[:n_validation], y[:n_validation]).predict_proba(positions)
        frame, model, stats = self.outputs(prediction, self.base.predict_proba(positions), y)
        stats = {**stats, "recal_seconds": time.perf_counter() - start, "n_validation": self.n_validation_}
        ctx.save_outputs(frame, {**model, "base_run": str(ctx.depends_dir)}, stats)

    def outputs(self, prediction: RegressionPredictive, base: GaussianPredictive,
                y: np.ndarray) -> tuple[pd.DataFrame, dict, dict]:
        """The pipeline's predictions frame of ``prediction`` (recalibrated ``base``) at targets ``y``, the model
        and the stats.

        Parameters
        ----------
        prediction : RegressionPredictive
            The recalibrated predictive of every row of the base run.
        base : GaussianPredictive
            The base's Gaussian of the same rows.
        y : numpy.ndarray of shape (n,)
            Their targets.

        Returns
        -------
        tuple of (pandas.DataFrame, dict, dict)
            The predictions frame (one row per point), the model's saved entries and the run's stats.
        """
        raise NotImplementedError  # pragma: no cover - abstract


class VarianceScaling(PostHocRecalibration):
    """N(mu, s^2 sigma^2) with the NLL-optimal factor s = sqrt(mean z^2) on the recalibration data
    (``variance_scale``); ``predict_proba`` -> ``GaussianPredictive``.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    base : ProbabilisticRegressor, optional
        The Gaussian model to recalibrate, fitted or not (None: the pipeline's ``train`` loads the base run).
    **kwargs
        ``val_fraction`` (float, default 0.2: the held-out part when ``base`` is not fitted),
        ``random_state`` and ``device``.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.arena import VarianceScaling
    >>> from uqcal.methods.reference_predictors import MarginalGaussian
    >>> X, y = np.zeros((40, 1)), np.random.default_rng(0).normal(size=40)
    >>> model = VarianceScaling(base=MarginalGaussian(), random_state=0).fit(X, y)
    >>> model.predict_proba(X[:3]).std.shape
    (3,)
    """

    def fit_map(self, prediction: GaussianPredictive, y: np.ndarray) -> None:
        self.recalibrator_ = LibraryVarianceScaling().fit(prediction, y)
        self.scale_ = self.recalibrator_.scale_

    def recalibrate(self, prediction: GaussianPredictive) -> GaussianPredictive:
        return self.recalibrator_.transform(prediction)

    def outputs(self, prediction: GaussianPredictive, base: GaussianPredictive,
                y: np.ndarray) -> tuple[pd.DataFrame, dict, dict]:
        frame = pd.DataFrame({"y": y, "mean": prediction.mean, "std": prediction.std, "base_std": base.std})
        return frame, {"variance_scale": self.scale_}, {"variance_scale": self.scale_}


class IsotonicOnValidation(PostHocRecalibration):
    """G(y) = R(Phi((y - mu) / sigma)) with R the isotonic map of the recalibration PITs (``endpoint_fix``:
    levels i/(m+1) and the knot (1, 1), no truncated support); ``predict_proba`` -> ``RecalibratedPredictive``.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    base : ProbabilisticRegressor, optional
        The Gaussian model to recalibrate, fitted or not (None: the pipeline's ``train`` loads the base run).
    **kwargs
        ``val_fraction`` (float, default 0.2), ``endpoint_fix`` (bool, default True), ``logpdf_floor``
        (float, default -20: the floor of the saved log density), ``random_state`` and ``device``.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.arena import IsotonicOnValidation
    >>> from uqcal.methods.reference_predictors import MarginalGaussian
    >>> X, y = np.zeros((40, 1)), np.random.default_rng(0).normal(size=40)
    >>> model = IsotonicOnValidation(base=MarginalGaussian(), random_state=0).fit(X, y)
    >>> bool(np.all(np.diff(model.predict_proba(X[:3]).cdf(np.array([-1.0, 0.0, 1.0]))) >= 0))
    True
    """

    defaults: dict = {**PostHocRecalibration.defaults, "endpoint_fix": True, "logpdf_floor": -20.0}

    def fit_map(self, prediction: GaussianPredictive, y: np.ndarray) -> None:
        from scipy.special import ndtr

        from uqcal.core.calibration import StandardisedRecalibration, isotonic_knots

        pit = ndtr((y - prediction.mean) / prediction.std)
        self.recalibration_ = StandardisedRecalibration(*isotonic_knots(pit, bool(self.params["endpoint_fix"])))

    def recalibrate(self, prediction: GaussianPredictive) -> RecalibratedPredictive:
        return self.recalibration_.recalibrate(prediction, float(self.params["logpdf_floor"]))

    def outputs(self, prediction: RecalibratedPredictive, base: GaussianPredictive,
                y: np.ndarray) -> tuple[pd.DataFrame, dict, dict]:
        recalibration = self.recalibration_
        mean, std = base.mean, base.std
        z = (y - mean) / std
        with np.errstate(divide="ignore"):
            logpdf = recalibration.logpdf(z) - np.log(std)
        zero_density = ~np.isfinite(logpdf)
        frame = pd.DataFrame({
            "y": y,
            "mean": mean - recalibration.delta * std,  # E[G] = mu - delta sigma (QR Claim 3)
            "std": recalibration.std_factor * std,
            "pit": recalibration.cdf(z),
            "logpdf": np.maximum(np.where(zero_density, -np.inf, logpdf), float(self.params["logpdf_floor"])),
            "crps": std * recalibration.crps(z),
            "base_mean": mean,
            "base_std": std,
        })
        for level in QUANTILE_LEVELS:
            frame[f"q{level:g}"] = mean + std * recalibration.quantile(np.full(y.shape, level))
        stats = {"delta": recalibration.delta, "std_factor": recalibration.std_factor,
                 "n_knots": float(recalibration.u.size), "zero_density_fraction": float(zero_density.mean())}
        return frame, {"knots_u": recalibration.u, "knots_r": recalibration.r}, stats

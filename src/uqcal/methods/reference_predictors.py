"""Honest reference predictors, labelled as such in every table.

- MarginalGaussian: N(mean, std^2) of the training targets. The QR paper's Claim 5: perfectly calibrated in
  expectation, with no sharpness. (Meta-regression's per-task version is uqcal.methods.metareg's
  TaskMarginalGaussian.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from uqcal.core.predictive import GaussianPredictive
from uqcal.methods.api import REFERENCE_RESOURCES, RunContext
from uqcal.methods.estimator import ProbabilisticRegressor

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["MarginalGaussian", "regression_arrays"]


def regression_arrays(owner: str, X: ArrayLike, y: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``X`` as an (n, d) float array and ``y`` (when given) as an (n,) float array, both finite; a bad array
    is named with ``owner`` (the estimator) in the error.

    Parameters
    ----------
    owner : str
        The name that a ``ValueError`` about a bad array starts with.
    X : array_like of shape (n, d)
        Inputs, n >= 1, all finite.
    y : array_like of shape (n,), optional
        Targets, all finite.

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray or None)
        X as float64 (n, d) and y as float64 (n,), or None when ``y`` is None.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"{owner}: X must be a non-empty 2-D array (n points, d features), got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"{owner}: X has non-finite values")
    if y is None:
        return X, None
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"{owner}: y must be 1-D with one target per row of X ({X.shape[0]}), got shape {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError(f"{owner}: y has non-finite values")
    return X, y


class MarginalGaussian(ProbabilisticRegressor):
    """The marginal of the training targets, N(mean(y), std(y)^2), the same forecast for every point: perfectly
    calibrated in expectation and with no sharpness (the QR paper's Claim 5), the reference every table shows.

    ``fit(X, y)``: X (n, d) floats (unused: the forecast does not depend on the inputs), y (n,) targets.
    ``predict_proba(X)`` -> ``GaussianPredictive`` with mean(y) and max(std(y), min_std) (ddof 0) for each row of
    X; ``predict(X)`` -> mean(y) for each row.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        Unused (the fit is deterministic); kept for scikit-learn's conventions.
    device : str or torch.device, default "cpu"
        Unused (numpy only).
    **kwargs
        ``min_std`` (float > 0, default 1e-6), a floor of the predicted std (y's units).

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.reference_predictors import MarginalGaussian
    >>> X, y = np.zeros((4, 1)), np.array([1.0, 2.0, 3.0, 4.0])
    >>> prediction = MarginalGaussian().fit(X, y).predict_proba(np.zeros((2, 1)))
    >>> prediction.mean.tolist(), round(float(prediction.std[0]), 4)
    ([2.5, 2.5], 1.118)
    """

    defaults: dict = {"min_std": 1e-6}
    cpu_only = True  # numpy only: a cluster job never asks a GPU for it
    job_resources = REFERENCE_RESOURCES  # not the family's GPU-sized request (uqcal.pipeline.plan.resources)

    def fit(self, X: ArrayLike, y: ArrayLike) -> MarginalGaussian:
        """Fit N(mean(y), std(y)^2).

        Parameters
        ----------
        X : array_like of shape (n, d)
            Unused beyond its shape.
        y : array_like of shape (n,)

        Returns
        -------
        MarginalGaussian
            self, fitted.
        """
        _, y = self.fit_arrays(X, y)
        # A constant training target is refused when the pipeline's dataset is materialised (uqcal.data.validate).
        self.mean_, self.std_ = float(y.mean()), max(float(y.std()), self.params["min_std"])
        self.fitted_ = True
        return self

    def predict_proba(self, X: ArrayLike) -> GaussianPredictive:
        """The training marginal for each row of X.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        GaussianPredictive
        """
        X = self.predict_array(X)
        return GaussianPredictive(np.full(X.shape[0], self.mean_), np.full(X.shape[0], self.std_))

    def train(self, ctx: RunContext) -> None:
        """The pipeline's train job: fit on the split's training rows, predict its test rows, save both.

        Parameters
        ----------
        ctx : RunContext
            The job's data, split, runtime and output paths; the outputs are a frame of y, mean and std per test
            point and the fitted mean and std.
        """
        table, split = ctx.load_data(), ctx.load_split()
        self.runtime = ctx.runtime
        train, test = np.asarray(split["train"]), np.asarray(split["test"])
        X, y = np.asarray(table.X, dtype=np.float64), np.asarray(table.y, dtype=np.float64)
        prediction = self.fit(X[train], y[train]).predict_proba(X[test])
        frame = pd.DataFrame({"y": y[test], "mean": prediction.mean, "std": prediction.std})
        ctx.save_outputs(frame, {"mean": self.mean_, "std": self.std_}, {})

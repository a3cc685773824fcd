"""Bring your own model: any fitted point model as a uqcal estimator with a Gaussian predictive (docs/byom.md).

``WrappedRegressor(model=...)`` takes a fitted scikit-learn regressor (anything with ``predict(X)``) or a torch
module (called on a float tensor of X). ``fit(X, y)`` on held-out data sets the predictive std: the model's own
(``predict(X, return_std=True)``, as scikit-learn's GaussianProcessRegressor and BayesianRidge give) or else one
std for every point, the model's RMSE on that held-out data (as RIO's ``nn`` does, App. D.1). From there the
library applies: ``all_metrics``, the recalibrators (``IsotonicRecalibrator``, ``VarianceScaling``) and RIO
(``ResidualIOGP(base=wrapped)`` fits its GP on the model's residuals).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from uqcal.core.predictive import GaussianPredictive
from uqcal.methods.estimator import ProbabilisticRegressor

__all__ = ["WrappedRegressor"]


class WrappedRegressor(ProbabilisticRegressor):
    """A fitted point model with a Gaussian predictive: its prediction as the mean, its own std where it has one,
    else its held-out RMSE.

    Parameters
    ----------
    model : object
        A fitted scikit-learn regressor, or a torch ``nn.Module`` mapping an (n, d) float tensor to n outputs.
    min_std : float, default 1e-12
        A floor of the std (y's units).

    Attributes
    ----------
    std_ : float
        The held-out RMSE (the std of every point when the model gives none).
    model_std_ : bool
        Whether the model's own std is used.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from uqcal.methods.wrapped import WrappedRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = X @ [1.0, -2.0] + rng.normal(size=200)
    >>> wrapped = WrappedRegressor(model=LinearRegression().fit(X[:100], y[:100])).fit(X[100:150], y[100:150])
    >>> round(float(wrapped.predict_proba(X[150:]).std[0]), 2)
    0.96
    """

    defaults: dict = {"min_std": 1e-12}
    cpu_only = True

    def __init__(self, params: dict | None = None, /, *, model: Any = None, **kwargs):
        super().__init__(params, **kwargs)
        self.model = model

    def _is_torch(self) -> bool:
        return type(self.model).__module__.startswith("torch") or any(
            klass.__module__.startswith("torch.nn") for klass in type(self.model).__mro__)

    def _mean(self, X: np.ndarray) -> np.ndarray:
        if self._is_torch():
            import torch

            first = next(self.model.parameters(), None)
            dtype = first.dtype if first is not None else torch.float32
            device = first.device if first is not None else "cpu"
            self.model.eval()
            with torch.no_grad():
                out = self.model(torch.as_tensor(X, dtype=dtype, device=device))
            return out.detach().cpu().double().numpy().reshape(-1)
        return np.asarray(self.model.predict(X), dtype=np.float64).reshape(-1)

    def _gives_std(self) -> bool:
        predict = getattr(self.model, "predict", None)
        return predict is not None and "return_std" in inspect.signature(predict).parameters

    def fit(self, X, y) -> WrappedRegressor:
        """Set the predictive std from held-out data the model did not train on.

        Parameters
        ----------
        X : array_like of shape (n, d)
        y : array_like of shape (n,)

        Returns
        -------
        WrappedRegressor
            self, fitted.
        """
        if self.model is None:
            raise ValueError("WrappedRegressor: model is None; pass model= a fitted regressor or a torch module")
        X, y = self.fit_arrays(X, y)
        self.model_std_ = self._gives_std()
        self.std_ = max(float(np.sqrt(np.mean((y - self._mean(X)) ** 2))), float(self.params["min_std"]))
        self.fitted_ = True
        return self

    def predict_proba(self, X) -> GaussianPredictive:
        """N(model(x), std^2) for each row of X.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        GaussianPredictive
        """
        X = self.predict_array(X)
        if self.model_std_:
            mean, std = self.model.predict(X, return_std=True)
            return GaussianPredictive(np.asarray(mean, float).reshape(-1),
                                      np.maximum(np.asarray(std, float).reshape(-1), self.params["min_std"]))
        mean = self._mean(X)
        return GaussianPredictive(mean, np.full(mean.shape, self.std_))

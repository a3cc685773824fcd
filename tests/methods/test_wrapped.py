"""WrappedRegressor: a user's fitted scikit-learn regressor or torch network as a uqcal estimator (issue 51)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.linear_model import LinearRegression

from uqcal import IsotonicRecalibrator, all_metrics
from uqcal.methods.wrapped import WrappedRegressor


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, X @ np.array([1.0, -2.0]) + 0.5 * rng.normal(size=n)


def test_a_point_regressor_gets_its_held_out_rmse_as_std():
    X, y = _data()
    model = LinearRegression().fit(X[:100], y[:100])
    wrapped = WrappedRegressor(model=model).fit(X[100:200], y[100:200])
    rmse = np.sqrt(np.mean((y[100:200] - model.predict(X[100:200])) ** 2))
    prediction = wrapped.predict_proba(X[200:])
    np.testing.assert_allclose(prediction.mean, model.predict(X[200:]))
    np.testing.assert_allclose(prediction.std, rmse)
    recalibrated = IsotonicRecalibrator().fit(wrapped.predict_proba(X[100:200]), y[100:200]).transform(prediction)
    assert all(np.isfinite(v) for v in all_metrics(recalibrated, y[200:]).values())
    with pytest.raises(ValueError, match="X has 1 features, but WrappedRegressor is expecting 2"):
        wrapped.predict(X[:3, :1])


def test_a_model_with_its_own_std_keeps_it():
    X, y = _data(80)
    gp = GaussianProcessRegressor(alpha=0.25).fit(X[:40], y[:40])
    wrapped = WrappedRegressor(model=gp).fit(X[40:60], y[40:60])
    mean, std = gp.predict(X[60:], return_std=True)
    prediction = wrapped.predict_proba(X[60:])
    np.testing.assert_allclose(prediction.mean, mean)
    np.testing.assert_allclose(prediction.std, std)


def test_a_torch_network_is_called_on_a_float_tensor():
    X, y = _data(120)
    torch.manual_seed(0)
    net = torch.nn.Linear(2, 1).double()
    wrapped = WrappedRegressor(model=net).fit(X[:60], y[:60])
    with torch.no_grad():
        expected = net(torch.as_tensor(X[60:])).numpy().reshape(-1)
    np.testing.assert_allclose(wrapped.predict(X[60:]), expected)
    with pytest.raises(ValueError, match="model is None"):
        WrappedRegressor().fit(X, y)

"""The shared single-task `marginal` reference predictor as an estimator (metareg's per-task one is tested
with metareg)."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from uqcal.core.predictive import NotFittedError
from uqcal.methods.reference_predictors import MarginalGaussian


def test_marginal_gaussian_is_the_training_targets_mean_and_std():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(30, 2)), rng.normal(5.0, 2.0, size=30)
    with pytest.raises(NotFittedError):
        MarginalGaussian().predict(X)
    prediction = MarginalGaussian().fit(X, y).predict_proba(X[:7])
    np.testing.assert_allclose(prediction.mean, np.full(7, np.sum(y) / 30), rtol=1e-12)
    np.testing.assert_allclose(prediction.std, np.full(7, np.sqrt(np.sum((y - y.mean()) ** 2) / 30)), rtol=1e-12)
    assert MarginalGaussian(min_std=0.5).fit(X, np.full(30, 2.0)).predict_proba(X).std[0] == 0.5  # the floor
    with pytest.raises(ValueError, match=r"MarginalGaussian\.min_std"):
        MarginalGaussian(min_std=-1.0)
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder(recurse=False).find(MarginalGaussian, "MarginalGaussian", globs={}):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0

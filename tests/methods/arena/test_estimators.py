"""The arena's post-hoc recalibrations as estimators: base reuse, the held-out part, and their docstrings."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from tests.methods.arena.protocol_cases import noisy_sine
from uqcal.core.predictive import GaussianPredictive, NotFittedError, RecalibratedPredictive
from uqcal.methods.api import ParameterError
from uqcal.methods.arena import IsotonicOnValidation, VarianceScaling
from uqcal.methods.reference_predictors import MarginalGaussian


def test_variance_scaling_on_a_fitted_base_fits_the_held_out_data():
    rng = np.random.default_rng(5)
    X, y = np.zeros((50, 1)), rng.normal(2.0, 3.0, size=50)
    base = MarginalGaussian().fit(X, y)
    X_val, y_val = np.zeros((40, 1)), rng.normal(2.0, 6.0, size=40)
    model = VarianceScaling(base=base).fit(X_val, y_val)
    # s = sqrt(mean z^2) on the held-out data (the NLL minimiser), by hand:
    scale = np.sqrt(np.mean(((y_val - y.mean()) / y.std()) ** 2))
    assert model.scale_ == pytest.approx(scale, rel=1e-12)
    prediction = model.predict_proba(np.zeros((3, 1)))
    assert isinstance(prediction, GaussianPredictive)
    np.testing.assert_allclose(prediction.std, scale * y.std(), rtol=1e-12)


def test_unfitted_base_is_fitted_on_the_rest_and_the_map_on_a_held_out_part():
    problem = noisy_sine(np.random.default_rng(6))
    model = IsotonicOnValidation(base=MarginalGaussian(), val_fraction=0.25, random_state=0).fit(*problem.fit_args)
    n = len(problem.fit_args[1])
    assert model.n_validation_ == round(0.25 * n)
    held_out = np.sort(model.runtime.rng(1).permutation(n)[: model.n_validation_])
    rest = np.setdiff1d(np.arange(n), held_out)
    assert model.base_.mean_ == pytest.approx(problem.fit_args[1][rest].mean(), rel=1e-12)
    assert isinstance(model.predict_proba(*problem.predict_args), RecalibratedPredictive)


def test_constructor_and_state_checks():
    with pytest.raises(ParameterError, match=r"IsotonicOnValidation\.endpoint_fixed: unknown parameter"):
        IsotonicOnValidation(endpoint_fixed=False)
    with pytest.raises(ParameterError, match=r"VarianceScaling\.val_fraction"):
        VarianceScaling(val_fraction=0.0)
    with pytest.raises(NotFittedError):
        VarianceScaling(base=MarginalGaussian()).predict_proba(np.zeros((2, 1)))
    with pytest.raises(ValueError, match="base is None"):
        VarianceScaling().fit(np.zeros((4, 1)), np.zeros(4))


@pytest.mark.parametrize("cls", [IsotonicOnValidation, VarianceScaling])
def test_docstring_example_runs(cls):
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder(recurse=False).find(cls, cls.__name__, globs={}):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0

"""qr's methods as estimators: constructor checks, fit/predict on arrays, and the pipeline's train(ctx) going
through the same fit/predict."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest

from tests.methods.arena.protocol_cases import noisy_sine
from tests.methods.qr.test_methods import _context, _run
from uqcal.core.predictive import GaussianPredictive, NotFittedError, RecalibratedPredictive
from uqcal.methods.api import ParameterError
from uqcal.methods.qr import DeepEnsemble, DropoutVI, IsotonicRecalibrated


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"epoch": 5}, r"DeepEnsemble\.epoch: unknown parameter \(did you mean 'epochs'\?\)"),
    ({"hidden": "big"}, r"DeepEnsemble\.hidden: expected an integer"),
    ({"epochs": -1}, r"DeepEnsemble\.epochs: expected an integer > 0"),
    ({"calibration_fraction": 1.0}, r"DeepEnsemble\.calibration_fraction"),
    ({"variance": "median"}, r"DeepEnsemble\.variance: expected one of \['mixture', 'authors'\]"),
    ({"adversarial": "pgd"}, r"DeepEnsemble\.adversarial: expected one of"),
])
def test_constructor_names_the_bad_parameter(kwargs, message):
    with pytest.raises((ParameterError, ValueError), match=message):
        DeepEnsemble(**kwargs)


def test_isotonic_recalibrated_checks_fit_on_and_needs_a_base():
    with pytest.raises(ValueError, match=r"IsotonicRecalibrated\.fit_on: expected one of \['train', 'calibration'\]"):
        IsotonicRecalibrated(fit_on="test")
    problem = noisy_sine(np.random.default_rng(0))
    with pytest.raises(ValueError, match="base is None"):
        IsotonicRecalibrated().fit(*problem.fit_args)
    with pytest.raises(NotFittedError):
        IsotonicRecalibrated(base=DeepEnsemble()).predict_proba(*problem.predict_args)


def test_bad_arrays_are_named():
    # scikit-learn's validation (validate_data): its messages, which name the array and the estimator
    with pytest.raises(ValueError, match=r"Expected 2D array, got 1D array instead"):
        DropoutVI(epochs=1).fit(np.zeros(5), np.zeros(5))
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[5, 4\]"):
        DropoutVI(epochs=1).fit(np.zeros((5, 1)), np.zeros(4))
    with pytest.raises(ValueError, match=r"Input X contains NaN.\nDropoutVI does not accept missing values"):
        DropoutVI(epochs=1).fit(np.full((5, 1), np.nan), np.zeros(5))
    fitted = DropoutVI(epochs=1, mc_samples=2, random_state=0).fit(np.zeros((8, 2)), np.arange(8.0))
    with pytest.raises(ValueError, match=r"X has 1 features, but DropoutVI is expecting 2 features as input"):
        fitted.predict(np.zeros((3, 1)))


def test_train_goes_through_fit_and_predict(tmp_path):
    """The pipeline's predictions are the estimator's, fitted on the split's arrays with the run's streams."""
    ctx = _context(tmp_path, "de_cal", overrides={"n_members": 2})
    _run(ctx)
    saved = pd.read_parquet(ctx.run_dir / "predictions.parquet")
    train, test = np.asarray(ctx.split["train"]), np.asarray(ctx.split["test"])
    estimator = DeepEnsemble(ctx.params)
    estimator.runtime = ctx.runtime
    prediction = estimator.fit(ctx.data.X[train], ctx.data.y[train]).predict_proba(ctx.data.X[test])
    assert isinstance(prediction, GaussianPredictive)
    np.testing.assert_array_equal(saved["mean"], prediction.mean)
    np.testing.assert_array_equal(saved["std"], prediction.std)
    assert estimator.calibration_pit_.size == round(0.2 * train.size)


def test_isotonic_on_a_fitted_base_reuses_its_pits_and_is_a_monotone_map():
    problem = noisy_sine(np.random.default_rng(1))
    base = DeepEnsemble(epochs=3, n_members=2, hidden=16, random_state=0).fit(*problem.fit_args)
    weights = [p.detach().clone() for p in base.nets_[0].parameters()]
    model = IsotonicRecalibrated(base=base, fit_on="train", endpoint_fix=True).fit(*problem.fit_args)
    assert all(np.array_equal(a, b.detach()) for a, b in zip(weights, base.nets_[0].parameters(), strict=True))
    prediction = model.predict_proba(*problem.predict_args)
    assert isinstance(prediction, RecalibratedPredictive)
    # F'(y) = R(F(y)), R interpolating the knots fitted on the base's training PITs (endpoint fix: i/(m+1)).
    base_pit = base.predict_proba(*problem.predict_args).pit(problem.y)
    u, r = model.recalibration_.u, model.recalibration_.r
    np.testing.assert_allclose(prediction.pit(problem.y), np.interp(base_pit, u, r), rtol=0, atol=1e-12)
    assert model.n_recalibration_ == len(problem.fit_args[1])  # every training row: nothing held out


@pytest.mark.parametrize("cls", [DropoutVI, DeepEnsemble, IsotonicRecalibrated])
def test_docstring_example_runs(cls):
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(cls, cls.__name__, globs={}):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0

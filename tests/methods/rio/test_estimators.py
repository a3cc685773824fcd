"""rio's methods as estimators: constructor checks, fit/predict on arrays, base reuse, and train(ctx) going
through the same fit/predict."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest

from tests.methods.arena.protocol_cases import noisy_sine
from tests.methods.rio.test_methods import _make_ctx
from uqcal.core.predictive import GaussianPredictive, NotFittedError
from uqcal.methods.api import ParameterError
from uqcal.methods.rio import METHODS, ResidualIOGP, RioNetwork


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_iters": 5}, r"ResidualIOGP\.max_iters: unknown parameter \(did you mean 'max_iter'\?\)"),
    ({"n_inducing": "many"}, r"ResidualIOGP\.n_inducing: expected an integer"),
    ({"n_inducing": 0}, r"ResidualIOGP\.n_inducing: expected an integer > 0"),
    ({"target": "z"}, r"ResidualIOGP\.target: expected one of \['residual', 'y'\], got 'z'"),
    ({"kernel_inputs": "x"}, r"ResidualIOGP\.kernel_inputs: expected one of \['io', 'i', 'o'\]"),
    ({"optimizer": "sgd"}, r"ResidualIOGP\.optimizer: expected one of \['lbfgs', 'adam'\]"),
])
def test_constructor_names_the_bad_parameter(kwargs, message):
    with pytest.raises((ParameterError, ValueError), match=message):
        ResidualIOGP(**kwargs)


def test_network_val_fraction_out_of_range_is_refused():
    with pytest.raises(ParameterError, match=r"RioNetwork\.val_fraction"):
        RioNetwork(val_fraction=1.0)


def test_predict_before_fit_raises():
    problem = noisy_sine(np.random.default_rng(0))
    for estimator in (RioNetwork(), ResidualIOGP()):
        with pytest.raises(NotFittedError):
            estimator.predict_proba(*problem.predict_args)


def test_rio_on_a_fitted_network_keeps_it_and_adds_the_gp_mean_to_its_output():
    problem = noisy_sine(np.random.default_rng(2))
    X, y = problem.fit_args
    (X_test,) = problem.predict_args
    network = RioNetwork(max_epochs=20, random_state=0).fit(X, y)
    weights = [p.detach().clone() for p in network.net_.parameters()]
    rio = ResidualIOGP(base=network, max_iter=20, n_inducing=10, random_state=0).fit(X, y)
    assert rio.base is network
    assert all(np.array_equal(a, b.detach()) for a, b in zip(weights, network.net_.parameters(), strict=True))
    prediction = rio.predict_proba(X_test)
    # Eq. (7) by hand: y_hat + the GP's mean at [x standardised with the training statistics, y_hat].
    yhat = network.predict_proba(X_test).mean
    xs = (X_test - X.mean(axis=0)) / X.std(axis=0)
    gp_mean, gp_var = rio.result_.predict(np.column_stack([xs, yhat]))
    np.testing.assert_allclose(prediction.mean, yhat + gp_mean, rtol=1e-12)
    np.testing.assert_allclose(prediction.std, np.sqrt(gp_var), rtol=1e-12)


def test_network_predictive_is_its_validation_rmse():
    problem = noisy_sine(np.random.default_rng(3))
    network = RioNetwork(max_epochs=10, random_state=0).fit(*problem.fit_args)
    prediction = network.predict_proba(*problem.predict_args)
    assert isinstance(prediction, GaussianPredictive)
    np.testing.assert_array_equal(prediction.std, network.fit_info_["val_rmse"])


def test_train_goes_through_fit_and_predict(tmp_path):
    """The pipeline's nn and rio predictions are the estimators', fitted on the split's arrays with the run's
    streams (rio on the network the nn run saved)."""
    nn_ctx = _make_ctx(tmp_path, "nn")
    METHODS["nn"].load_class()(nn_ctx.params).train(nn_ctx)
    ctx = _make_ctx(tmp_path, "rio", depends_dir=nn_ctx.run_dir)
    METHODS["rio"].load_class()(ctx.params).train(ctx)
    train, test = np.asarray(ctx.split["train"]), np.asarray(ctx.split["test"])
    X, y = ctx.data.X, ctx.data.y
    network = RioNetwork(nn_ctx.params)
    network.runtime = nn_ctx.runtime
    network.fit(X[train], y[train])  # a fitted base is used as it is (an unfitted one would be cloned)
    rio = ResidualIOGP(ctx.params, base=network)
    rio.runtime = ctx.runtime
    prediction = rio.fit(X[train], y[train]).predict_proba(X[test])
    nn_saved = pd.read_parquet(nn_ctx.run_dir / "predictions.parquet")
    rio_saved = pd.read_parquet(ctx.run_dir / "predictions.parquet")
    np.testing.assert_array_equal(nn_saved["mean"], network.predict_proba(X[test]).mean)
    np.testing.assert_array_equal(rio_saved["mean"], prediction.mean)
    np.testing.assert_array_equal(rio_saved["std"], prediction.std)


@pytest.mark.parametrize("cls", [RioNetwork, ResidualIOGP])
def test_docstring_example_runs(cls):
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder(recurse=False).find(cls, cls.__name__, globs={}):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0

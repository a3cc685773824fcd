"""RIO survives a bad GP fit (issue 51): a gpytorch NanError / NotPSDError during the SVGP's optimisation fails
over as the pipeline's failed fits do (the last valid state kept, the failure named on the FitResult and counted
as ``fit_failures`` by the train step), and RIO on scikit-learn's raw diabetes targets predicts finite numbers."""

from __future__ import annotations

import numpy as np
import pytest
from linear_operator.utils.errors import NanError, NotPSDError

from uqcal.methods.rio import ResidualIOGP, RioNetwork, svgp


def _inject(monkeypatch, error: type[Exception], bad_calls: set[int]):
    """Make the SVGP's summed negative ELBO raise ``error`` on the given (0-based) evaluations."""
    real, calls = svgp._summed_loss, {"n": 0}

    def flaky(*args, **kwargs):
        index = calls["n"]
        calls["n"] += 1
        if index in bad_calls:
            raise error("cholesky_cpu: 1300 of 2500 elements of the torch.Size([50, 50]) tensor are NaN.")
        return real(*args, **kwargs)

    monkeypatch.setattr(svgp, "_summed_loss", flaky)
    return calls


def _data(n: int = 60):
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (n, 1))
    return np.column_stack([x, np.sin(x[:, 0])]), np.sin(x[:, 0]) + 0.1 * rng.normal(size=n)


@pytest.mark.parametrize("error", [NanError, NotPSDError])
def test_a_failed_evaluation_keeps_the_last_valid_state_and_names_the_failure(monkeypatch, error):
    inputs, targets = _data()
    _inject(monkeypatch, error, bad_calls={3})
    result = svgp.fit_svgp(inputs, targets, n_inducing=10, max_iter=20, seed=0)
    assert result.failed and error.__name__ in result.failure, result.failure
    assert np.isfinite(result.final_loss)
    mean, var = result.predict(inputs[:5])
    assert np.all(np.isfinite(mean)) and np.all(var > 0)


def test_adam_fails_over_the_same_way(monkeypatch):
    inputs, targets = _data()
    # Adam calls the ELBO directly per minibatch: a NanError there stops at the last finished epoch's state.
    real = svgp.gpytorch.mlls.VariationalELBO.forward
    calls = {"n": 0}

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise NanError("cholesky_cpu: NaN")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(svgp.gpytorch.mlls.VariationalELBO, "forward", flaky)
    result = svgp.fit_svgp(inputs, targets, n_inducing=10, optimizer="adam", epochs=5, batch_size=20, seed=0)
    assert result.failed and "NanError" in result.failure
    assert np.all(np.isfinite(result.predict(inputs[:5])[0]))


def test_a_fit_with_no_valid_state_is_one_named_error(monkeypatch):
    inputs, targets = _data()
    _inject(monkeypatch, NanError, bad_calls=set(range(10_000)))
    with pytest.raises(svgp.GPFitError, match="cannot be evaluated at any state"):
        svgp.fit_svgp(inputs, targets, n_inducing=10, max_iter=5, seed=0)


def test_rio_on_raw_diabetes_targets_predicts_finite_numbers():
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X_train, y_train, X_test = X[:282], y[:282], X[282:]
    for seed in (0, 1):
        network = RioNetwork(max_epochs=30, random_state=seed).fit(X_train, y_train)
        rio = ResidualIOGP(base=network, max_iter=40, n_inducing=20, random_state=seed).fit(X_train, y_train)
        prediction = rio.predict_proba(X_test)
        assert np.all(np.isfinite(prediction.mean)) and np.all(prediction.std > 0)
        # Whether or not an evaluation failed, the result says so (the train step's fit_failures / gp_failure).
        assert isinstance(rio.result_.failure, str)

"""The bo estimators on arrays: the surrogate's fit/predict, the minimize loop built on them, the constructor's
parameter checks and the docstring examples."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch
from scipy.special import ndtr

from tests.conftest import method_device
from uqcal.core.predictive import GaussianPredictive, NotFittedError, RecalibratedPredictive
from uqcal.data.objectives import make_synthetic
from uqcal.methods.api import ParameterError
from uqcal.methods.bo import BOResult, CalibratedBO, RandomSearchBO
from uqcal.methods.bo import calibrated as calibrated_module

torch.set_num_threads(1)
SMALL = {"num_restarts": 2, "raw_samples": 32, "snapshot_grid": 0, "min_recal_points": 5}


@pytest.fixture(autouse=True)
def _one_blas_thread():
    # as CalibratedBO.train does: OpenBLAS' thread pool costs far more than these tiny solves
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _observations(n=10, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 3.0, size=(n, 1))
    return x, np.sin(2 * x[:, 0]) + 0.05 * rng.standard_normal(n)


def test_constructor_rejects_a_typo_a_wrong_type_an_out_of_range_value_and_an_unknown_choice():
    with pytest.raises(ParameterError, match=r"num_restart: unknown parameter \(did you mean 'num_restarts'\?\)"):
        CalibratedBO(num_restart=2)
    with pytest.raises(ParameterError, match=r"CalibratedBO\.raw_samples: expected an integer, got 'many'"):
        CalibratedBO(raw_samples="many")
    with pytest.raises(ParameterError, match=r"CalibratedBO\.ucb_beta: expected a number > 0, got -1"):
        CalibratedBO({"ucb_beta": -1.0})
    with pytest.raises(ParameterError, match=r"CalibratedBO\.kernel: 'rbff' is not one of rbf, matern52"):
        CalibratedBO(kernel="rbff")
    with pytest.raises(ParameterError, match=r"RandomSearchBO\.budget: unknown parameter"):
        RandomSearchBO(budget=3)


def test_calibrated_prediction_is_r_of_the_uncalibrated_gp_forecast():
    x, y = _observations()
    plain = CalibratedBO(SMALL, calibrate=False, device=method_device()).fit(x, y)
    calibrated = CalibratedBO(SMALL, calibrate=True, recalibrator="isotonic", device=method_device()).fit(x, y)
    x_new = np.linspace(-1.0, 3.0, 7)[:, None]
    y_new = np.sin(2 * x_new[:, 0])
    base, recal = plain.predict(x_new), calibrated.predict(x_new)
    assert isinstance(base, GaussianPredictive) and isinstance(recal, RecalibratedPredictive)
    # calibrate=True only adds R: the GP (same data, same ML-II fit) is the plain one
    np.testing.assert_allclose(recal.base.mean, base.mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(recal.base.std, base.std, rtol=1e-12, atol=1e-12)
    # F'(y) = R(F(y)) with R the map fitted on the held-out PIT values (Algorithm 3)
    assert calibrated.pit_ is not None and len(calibrated.pit_) == len(y) and not calibrated.recal_.identity
    expected = np.interp(ndtr((y_new - base.mean) / base.std), calibrated.recal_.knots, calibrated.recal_.values)
    np.testing.assert_allclose(recal.cdf(y_new), expected, atol=1e-12)
    # its median is the GP's quantile at R^-1(0.5)
    level = np.interp(0.5, calibrated.recal_.values, calibrated.recal_.knots)
    np.testing.assert_allclose(recal.median(), base.ppf(level), atol=1e-9)


def test_too_few_points_for_r_give_the_identity_map():
    x, y = _observations(n=4)
    prediction = CalibratedBO(SMALL, device=method_device()).fit(x, y).predict(x)
    assert isinstance(prediction, RecalibratedPredictive)
    np.testing.assert_allclose(prediction.cdf(y), prediction.base.cdf(y), atol=1e-15)


def test_bounds_objective_and_bounding_box_are_the_same_unit_cube():
    objective = make_synthetic("sixhump")
    u = np.random.default_rng(1).uniform(size=(9, 2))
    x = objective.to_native(u)
    y = objective(x)
    x_new = objective.to_native(np.random.default_rng(2).uniform(size=(4, 2)))
    with_objective = CalibratedBO(SMALL, calibrate=False).fit(x, y, objective).predict(x_new)
    with_bounds = CalibratedBO(SMALL, calibrate=False).fit(x, y, objective.bounds).predict(x_new)
    # Same fit, bounds given two ways: round-off relative to the means' scale (a mean may cancel to near zero).
    scale = np.abs(with_objective.mean).max()
    np.testing.assert_allclose(with_bounds.mean, with_objective.mean, rtol=1e-10, atol=1e-10 * scale)
    box = np.stack([x.min(axis=0), x.max(axis=0)])
    default = CalibratedBO(SMALL, calibrate=False).fit(x, y).predict(x_new)
    explicit = CalibratedBO(SMALL, calibrate=False).fit(x, y, box).predict(x_new)
    np.testing.assert_allclose(default.mean, explicit.mean, rtol=1e-12)
    np.testing.assert_allclose(default.std, explicit.std, rtol=1e-12)


def test_minimize_forecasts_are_the_estimators_own_predictions():
    # a plain callable on its box and the registry's Forrester objective are the same problem
    objective = make_synthetic("forrester")
    bo = CalibratedBO(SMALL, calibrate=True, min_recal_points=4, random_state=3)
    result = bo.minimize(objective.function, bounds=[[0.0], [1.0]], n_iterations=3, n_initial=4, acquisition="ei")
    again = CalibratedBO(SMALL, calibrate=True, min_recal_points=4, random_state=3).minimize(
        objective, n_iterations=3, n_initial=4, acquisition="ei")
    assert isinstance(result, BOResult)
    np.testing.assert_array_equal(result.x, again.x)
    np.testing.assert_array_equal(result.iteration, [0, 0, 0, 0, 1, 2, 3])
    np.testing.assert_array_equal(result.y, objective(result.x))
    assert result.best_y == result.y.min() == result.best_so_far[-1]
    assert len(result.forecasts) == 3 and len(result.steps) == 3
    for t in range(1, 4):
        k = 3 + t  # observations before step t
        refit = CalibratedBO(SMALL, calibrate=True, min_recal_points=4).fit(result.x[:k], result.y[:k], [[0.0], [1.0]])
        forecast = refit.predict(result.x[k : k + 1])
        np.testing.assert_allclose(result.forecasts[t - 1].base.mean, forecast.base.mean, rtol=1e-9)
        np.testing.assert_allclose(result.forecasts[t - 1].cdf(result.y[k : k + 1]),
                                   forecast.cdf(result.y[k : k + 1]), atol=1e-9)


def test_random_search_is_paired_with_bo_and_its_surrogate_is_the_marginal_gaussian():
    f = lambda x: (x[:, 0] - 0.3) ** 2 + x[:, 1]  # noqa: E731
    bounds = [[0.0, -1.0], [1.0, 1.0]]
    search = RandomSearchBO(random_state=5)
    result = search.minimize(f, bounds, n_iterations=6, n_initial=3)
    bo_initial = CalibratedBO(SMALL, random_state=5).minimize(f, bounds, n_iterations=1, n_initial=3)
    np.testing.assert_array_equal(result.x[:3], bo_initial.x[:3])  # the same seeded initial design
    assert result.forecasts == [] and np.all((result.x >= [0.0, -1.0]) & (result.x <= [1.0, 1.0]))
    prediction = search.fit(result.x, result.y).predict(np.zeros((4, 2)))
    np.testing.assert_allclose(prediction.mean, np.full(4, np.mean(result.y)))
    np.testing.assert_allclose(prediction.std, np.full(4, np.sqrt(np.mean((result.y - np.mean(result.y)) ** 2))))


def test_bad_arrays_and_arguments_are_named():
    x, y = _observations()
    bo = CalibratedBO(SMALL)
    with pytest.raises(NotFittedError):
        bo.predict(x)
    with pytest.raises(ValueError, match=r"CalibratedBO\.fit: y must have shape \(10,\)"):
        bo.fit(x, y[:-1])
    with pytest.raises(ValueError, match=r"CalibratedBO\.fit: X must have shape"):
        bo.fit(x[:, 0], y)
    with pytest.raises(ValueError, match=r"CalibratedBO\.fit: bounds must be"):
        bo.fit(x, y, [[1.0], [0.0]])
    bo.fit(x, y)
    with pytest.raises(ValueError, match=r"CalibratedBO\.predict: X must have shape \(n, 1\)"):
        bo.predict(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"acquisition 'ucbb' is not one of ei, pi, ucb"):
        bo.minimize(np.sum, [[0.0], [1.0]], n_iterations=1, acquisition="ucbb")
    with pytest.raises(ValueError, match=r"bounds .* is required for a callable"):
        RandomSearchBO().minimize(np.sum, n_iterations=1)
    with pytest.raises(ValueError, match=r"initial_x leaves the bounds"):
        RandomSearchBO().minimize(np.sum, [[0.0], [1.0]], n_iterations=1, initial_x=[[2.0]])


def test_docstring_examples_run():
    failures, tests = doctest.testmod(calibrated_module)
    assert tests >= 8 and failures == 0


def test_an_initial_design_off_a_discrete_grid_is_refused():
    from uqcal.data.objectives import Dimension, Objective

    grid = Objective("grid", [Dimension("n", 1.0, 10.0, kind="integer")], function=lambda x: (x[:, 0] - 4.0) ** 2)
    with pytest.raises(ValueError, match=r"initial_x row 1 is not a feasible configuration of grid"):
        RandomSearchBO().minimize(grid, n_iterations=1, initial_x=[[2.0], [2.5]])
    result = RandomSearchBO(random_state=1).minimize(grid, n_iterations=4, initial_x=[[2.0], [7.0]])
    np.testing.assert_array_equal(result.x, np.round(result.x))  # every point chosen on the grid

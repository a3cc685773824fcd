"""One protocol for every method: each registered method of each builtin family is built with validated
parameters, fitted on small arrays with ``fit``, predicts a predictive object with ``predict`` and is scored by
the metrics. The cases live beside each family's tests (``tests/methods/<family>/protocol_cases.py``)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from uqcal.core.predictive import CategoricalPredictive, Predictive, RegressionPredictive
from uqcal.methods.api import NotFittedError, builtin_families, method_table
from uqcal.methods.estimator import ProbabilisticRegressor


def _cases(family: str) -> dict:
    return importlib.import_module(f"tests.methods.{family}.protocol_cases").cases()


# Methods whose recalibration map (the paper's) is flat on some PIT ranges: a target there has density 0, so the
# NLL is +inf (bo's PIT maps without the isotonic-slope fix; uqcal's own recalibrators interpolate strictly).
ZERO_DENSITY = {"calibrated_isoslope", "calibrated_legacy"}

ALL = [(family, method) for family in builtin_families() for method in sorted(method_table(family))]


@pytest.mark.parametrize("family", builtin_families())
def test_every_registered_method_has_a_protocol_case(family):
    assert sorted(_cases(family)) == sorted(method_table(family))


@pytest.mark.parametrize(("family", "method"), ALL, ids=[f"{f}-{m}" for f, m in ALL])
def test_fit_predict_score(family, method):
    case = _cases(family)[method]
    problem = case.problem(np.random.default_rng(0))
    estimator = case.make()
    # Single-task regressors return the predictive object from predict_proba (predict is the point array).
    predictive = estimator.predict_proba if isinstance(estimator, ProbabilisticRegressor) else estimator.predict
    with pytest.raises(NotFittedError):
        predictive(*problem.predict_args)
    assert estimator.fit(*problem.fit_args) is estimator
    prediction = predictive(*problem.predict_args)
    assert isinstance(prediction, Predictive)
    assert len(prediction) == len(problem.y)
    from uqcal.metrics import all_metrics

    metrics = all_metrics(prediction, problem.y)
    if family == "bo" and method in ZERO_DENSITY:
        assert metrics.pop("nlpd") == np.inf  # the honest NLL of a density that is 0 at some targets
    assert metrics and all(np.isfinite(v) for v in metrics.values()), metrics
    if isinstance(estimator, ProbabilisticRegressor):  # the point prediction (MC dropout draws anew each call)
        point = estimator.predict(*problem.predict_args)
        assert isinstance(point, np.ndarray) and point.shape == (len(problem.y),) and np.isfinite(point).all()
    if isinstance(prediction, RegressionPredictive):
        assert np.all((prediction.pit(problem.y) >= 0) & (prediction.pit(problem.y) <= 1))
    else:
        assert isinstance(prediction, CategoricalPredictive)

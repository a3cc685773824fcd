"""The estimator-protocol cases each family supplies (``tests/methods/<family>/protocol_cases.py``), run by
tests/methods/test_protocol.py: every registered method of every family is fitted on small arrays through
``fit`` and ``predict`` and its predictive object scored with the metrics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Problem:
    """Arrays for one fit/predict round: ``estimator.fit(*fit_args)``, then ``estimator.predict(*predict_args)``
    predicts the points whose true targets (regression) or integer class labels (classification) are ``y``."""

    fit_args: tuple[Any, ...]
    predict_args: tuple[Any, ...]
    y: np.ndarray


@dataclass(frozen=True)
class Case:
    """How to build one registered method's estimator with a small budget (``make``; a method that recalibrates
    or corrects another gets its base estimator here) and the problem it is fitted on."""

    make: Callable[[], Any]
    problem: Callable[[np.random.Generator], Problem]

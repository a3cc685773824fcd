"""The bo family's estimator-protocol cases (tests/methods/test_protocol.py): each registered method's surrogate
fitted with ``fit(X, y)`` on noisy observations of a 1-D function and asked to ``predict`` new points."""

from __future__ import annotations

import numpy as np

from tests.methods.protocol import Case, Problem
from uqcal.methods.api import get_entry, method_table

# Small budgets: one restart of the acquisition optimiser (unused by fit/predict), no snapshots; R is fitted
# from 5 held-out PIT values on (the default), so the 12 observations give every calibrated variant a real R.
SMALL = {"num_restarts": 1, "raw_samples": 16, "snapshot_grid": 0}


def _noisy_observations(rng: np.random.Generator) -> Problem:
    """f(x) = sin(3x) + x on [0, 2] observed with N(0, 0.1^2) noise: 12 observed points, 20 new ones."""
    def observe(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.uniform(0.0, 2.0, size=(n, 1))
        return x, np.sin(3 * x[:, 0]) + x[:, 0] + 0.1 * rng.standard_normal(n)

    (x, y), (x_new, y_new) = observe(12), observe(20)
    return Problem(fit_args=(x, y), predict_args=(x_new,), y=y_new)


def _make(method: str):
    entry = get_entry("bo", method)
    cls = entry.load_class()
    small = {key: value for key, value in SMALL.items() if key in cls.defaults}
    return lambda: cls({**small, **entry.overrides}, random_state=0)


def cases() -> dict[str, Case]:
    return {method: Case(make=_make(method), problem=_noisy_observations) for method in method_table("bo")}

"""The metareg family's estimator-protocol cases (tests/methods/test_protocol.py): every registered method,
variants built with their registry overrides, meta-trained on a few noisy sine tasks with a tiny budget."""

from __future__ import annotations

import numpy as np

from tests.methods.protocol import Case, Problem
from uqcal.methods.api import get_entry, method_table

# Tiny budgets by parameter name (a method takes those it has).
TINY = {"epochs": 2, "eval_every": 1, "patience": 2, "iterations": 3, "n_pool_max": 100, "n_inducing": 8,
        "mc_samples": 5, "inner_steps": 2, "n_quantile_grid": 20, "hidden": 8, "batch_size": 64}
N_SUPPORT, N_QUERY = 5, 10


def _task(rng, n: int):
    """y = a sin(w x + phi) + noise on x ~ U(-3, 3): one task's (X (n, 1), y (n,))."""
    a, w, phi = rng.uniform(0.5, 2.0), rng.uniform(0.5, 1.5), rng.uniform(0, np.pi)
    X = rng.uniform(-3, 3, (n, 1))
    return X, a * np.sin(w * X[:, 0] + phi) + 0.1 * rng.standard_normal(n)


def _problem(rng: np.random.Generator) -> Problem:
    tasks = [_task(rng, 40) for _ in range(8)]
    validation = []
    for _ in range(2):
        X, y = _task(rng, N_SUPPORT + N_QUERY)
        validation.append((X[:N_SUPPORT], y[:N_SUPPORT], X[N_SUPPORT:], y[N_SUPPORT:]))
    X, y = _task(rng, N_SUPPORT + N_QUERY)
    return Problem(fit_args=(tasks, validation), predict_args=(X[:N_SUPPORT], y[:N_SUPPORT], X[N_SUPPORT:]),
                   y=y[N_SUPPORT:])


def _make(name: str):
    entry = get_entry("metareg", name)
    cls = entry.load_class()
    params = {k: v for k, v in TINY.items() if k in cls.defaults}
    return lambda: cls({**params, **entry.overrides})


def cases() -> dict[str, Case]:
    return {name: Case(make=_make(name), problem=_problem) for name in method_table("metareg")}

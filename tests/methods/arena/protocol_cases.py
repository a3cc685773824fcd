"""Protocol cases of the arena (tests/methods/test_protocol.py), and the builder qr's and rio's cases share: every
single-task regression method built from its registry entry (its overrides, a small budget, its ``depends_on``
parent as ``base=``) and fitted on a noisy sine."""

from __future__ import annotations

import numpy as np

from tests.methods.protocol import Case, Problem
from uqcal.methods.api import get_entry, method_table


def noisy_sine(rng: np.random.Generator, n_train: int = 80, n_test: int = 30) -> Problem:
    """y = 3 + sin(2 x_0) + 0.3 x_1 + heteroscedastic noise, x uniform on [-2, 2]^2 (original units, not centred)."""
    X = rng.uniform(-2.0, 2.0, size=(n_train + n_test, 2))
    y = 3.0 + np.sin(2.0 * X[:, 0]) + 0.3 * X[:, 1] + rng.normal(size=n_train + n_test) * (0.1 + 0.1 * np.abs(X[:, 1]))
    return Problem((X[:n_train], y[:n_train]), (X[n_train:],), y[n_train:])


def small_budget(cls: type) -> dict:
    """Parameters that make one fit take well under a second on one CPU core."""
    from uqcal.methods.qr.gaussian_nets import GaussianNetMethod
    from uqcal.methods.rio.network import RioNetwork
    from uqcal.methods.rio.rio import ResidualIOGP

    if issubclass(cls, GaussianNetMethod):
        budget = {"epochs": 2, "hidden": 16}
        budget.update({key: 2 for key in ("mc_samples", "n_members") if cls.defaults[key] > 1})
        return budget
    if issubclass(cls, RioNetwork):
        return {"max_epochs": 5, "hidden": 16}
    if issubclass(cls, ResidualIOGP):
        return {"max_iter": 10, "n_inducing": 10}
    return {}


def build(family: str, method: str):
    """The registered method as an estimator: its entry's overrides over a small budget, its parent as ``base``."""
    entry = get_entry(family, method)
    cls = entry.load_class()
    base = {"base": build(family, entry.depends_on)} if entry.depends_on else {}
    return cls({**small_budget(cls), **entry.overrides}, random_state=0, **base)


def single_task_cases(family: str) -> dict[str, Case]:
    return {method: Case(make=lambda method=method: build(family, method), problem=noisy_sine)
            for method in method_table(family)}


def cases() -> dict[str, Case]:
    return single_task_cases("arena")

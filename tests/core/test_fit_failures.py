"""The shared failed-fit convention: counted, warned naming the run, reported as fit_failures."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import torch

from uqcal.core.gp.failures import FitFailures


def test_failures_are_counted_and_warned_with_the_run(caplog):
    ctx = SimpleNamespace(family="rio", dataset="houses", setting="holdout", method="svgp", seed=3,
                          log=logging.getLogger("uqcal.svgp"))
    failures = FitFailures.for_run(ctx)
    with caplog.at_level(logging.WARNING):
        assert failures.check_loss(torch.tensor(1.5))
        assert failures.check_loss(2.0)
        assert not failures.check_loss(torch.tensor(float("nan")), "ELBO at iteration 7")
        assert not failures.check_loss(float("inf"))
        failures.record("L-BFGS abnormal termination")
    assert failures.stats() == {"fit_failures": 3}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert all("rio/houses/holdout/svgp/seed3" in w for w in warnings)
    assert "non-finite ELBO at iteration 7 (nan)" in warnings[0] and "fit_failures=3" in warnings[2]


def test_a_clean_fit_reports_zero():
    assert FitFailures.for_run(None).stats() == {"fit_failures": 0}

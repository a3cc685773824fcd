"""``against_nominal``: a metric against a nominal value ("the 90 % intervals cover at least 90 %, within a
margin"), a one-sample test decided by the replication rules; p-values checked against statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.weightstats import DescrStatsW

from tests.pipeline.report.test_claims import claim, ctx_of, reference, rows
from uqcal.metrics import replication as R
from uqcal.pipeline.report.claims import evaluate_claim

COVERAGE = 0.9 + np.random.default_rng(3).normal(0, 0.01, 10)  # ten runs' 90 % coverage, mean ~0.9


def coverage_ctx(values, ref=None):
    return ctx_of({("standin", "h", "gp", "cov90"): values}, ref)


def test_superiority_is_a_one_sample_t_test_against_the_nominal_value():
    check = {"kind": "against_nominal", "metric": "cov90", "nominal": 0.85, "side": "at_least", "method": "gp"}
    row = rows(evaluate_claim(claim(check), coverage_ctx(COVERAGE)))["standin"]
    t, p, df = DescrStatsW(COVERAGE).ttest_mean(value=0.85)  # two-sided
    assert row["estimate"] == pytest.approx(COVERAGE.mean() - 0.85) and row["df"] == df == 9
    assert row["p"] == pytest.approx(p, rel=1e-9) and row["hypothesis"] == "superiority"
    assert row["verdict"] == R.GENERALISES  # above 85 %, no paper number: generalises
    under = rows(evaluate_claim(claim({**check, "nominal": 0.95}), coverage_ctx(COVERAGE)))["standin"]
    assert under["verdict"] == R.DOES_NOT_GENERALISE  # significantly below 95 %
    at_most = rows(evaluate_claim(claim({**check, "nominal": 0.95, "side": "at_most"}), coverage_ctx(COVERAGE)))
    assert at_most["standin"]["verdict"] == R.GENERALISES


def test_at_nominal_a_tie_never_supports_the_claim():
    check = {"kind": "against_nominal", "metric": "cov90", "nominal": float(COVERAGE.mean()), "method": "gp"}
    row = rows(evaluate_claim(claim(check), coverage_ctx(COVERAGE)))["standin"]
    assert row["verdict"] == R.UNDECIDED


def test_not_worse_is_non_inferiority_at_the_declared_margin():
    check = {"kind": "against_nominal", "metric": "cov90", "nominal": 0.9, "method": "gp", "accept": "not_worse"}
    with pytest.raises(ValueError, match=r"margins\.c"):
        evaluate_claim(claim(check), coverage_ctx(COVERAGE))
    ref = reference(margins={"c": {"margin": 0.02, "reason": "two points of coverage"}})
    row = rows(evaluate_claim(claim(check), coverage_ctx(COVERAGE, ref)))["standin"]
    _, p_sm, _ = DescrStatsW(COVERAGE).ttest_mean(value=0.88, alternative="larger")  # H1: coverage > 0.9 - 0.02
    assert (row["hypothesis"], row["margin"]) == ("noninferiority", 0.02)
    assert row["p"] == pytest.approx(p_sm, rel=1e-9) and row["verdict"] == R.GENERALISES
    # coverage of 80 %: worse than the nominal value by more than the margin
    low = rows(evaluate_claim(claim(check), coverage_ctx(COVERAGE - 0.1, ref)))["standin"]
    assert low["verdict"] == R.DOES_NOT_GENERALISE
    # a relative margin is a share of the nominal value
    ref = reference(margins={"c": {"relative": 0.05, "reason": "5 % of the level"}})
    assert rows(evaluate_claim(claim(check), coverage_ctx(COVERAGE, ref)))["standin"]["margin"] == pytest.approx(0.045)


def test_an_unknown_side_is_named():
    check = {"kind": "against_nominal", "metric": "cov90", "nominal": 0.9, "side": "above"}
    with pytest.raises(ValueError, match=r"claims\.c\.check: side: expected 'at_least' or 'at_most'"):
        evaluate_claim(claim(check), coverage_ctx(COVERAGE))


def test_the_spec_check_accepts_its_keys():
    from uqcal.pipeline.report.spec_check import kind_keys

    assert {"metric", "nominal", "side", "method", "methods", "accept", "alpha"} <= kind_keys("against_nominal")

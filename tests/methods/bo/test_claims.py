"""The bo claim kind ``censored_steps`` (steps to target, censored at the budget) on constructed runs: the row's
numbers are the paired test of the restricted means, the detail gives the counts and the log-rank check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from uqcal.metrics import replication as R
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference
from uqcal.pipeline.report.claims import evaluate_claim
from uqcal.pipeline.report.verdicts import NOT_RUN, STAND_INS, ClaimContext

BUDGET = 15  # censored runs record steps_to_target = BUDGET + 1


def _runs(rows, dataset="sixhump"):
    """rows: (setting, method, seed, steps, reached) -> the long per-run metrics table."""
    records = []
    for setting, method, seed, steps, reached in rows:
        records.append((dataset, setting, method, seed, "steps_to_target", float(steps)))
        records.append((dataset, setting, method, seed, "reached_target", float(reached)))
    return pd.DataFrame(records, columns=["dataset", "setting", "method", "seed", "metric", "value"])


def _ctx(runs, claim_runs=None, relations=None):
    summary = pd.DataFrame(columns=["dataset", "setting", "method", "metric", "mean", "std", "n"])
    return ClaimContext("bo", summary, runs, Reference("bo"), relations or {}, None, claim_runs, "test")


def _claim(**extra):
    return {"id": "steps", "text": "t",
            "check": {"kind": "censored_steps", "a": "calibrated", "b": "uncalibrated", **extra}}


def _logrank_by_hand(times_a, events_a, times_b, events_b) -> float:
    """Mantel's log-rank statistic written out: sum over event times of (observed - expected) in group a,
    variance from the hypergeometric; two-sided chi-square(1) p-value."""
    times = np.concatenate([times_a, times_b])
    events = np.concatenate([events_a, events_b])
    group_a = np.concatenate([np.ones(len(times_a), bool), np.zeros(len(times_b), bool)])
    o_minus_e, var = 0.0, 0.0
    for t in np.unique(times[events > 0]):
        at_risk = times >= t
        n, n_a = at_risk.sum(), (at_risk & group_a).sum()
        d = ((times == t) & (events > 0)).sum()
        d_a = ((times == t) & (events > 0) & group_a).sum()
        o_minus_e += d_a - d * n_a / n
        var += d * (n_a / n) * (1 - n_a / n) * (n - d) / max(n - 1, 1)
    return float(stats.chi2.sf(o_minus_e**2 / var, 1))


CAL = [(3, 1), (5, 1), (4, 1), (16, 0), (7, 1), (6, 1), (9, 1), (16, 0)]
UNC = [(8, 1), (16, 0), (9, 1), (16, 0), (12, 1), (16, 0), (10, 1), (16, 0)]


def _rows_of(cal, unc, setting="s"):
    return ([(setting, "calibrated", i, *v) for i, v in enumerate(cal)]
            + [(setting, "uncalibrated", i, *v) for i, v in enumerate(unc)])


def test_restricted_means_paired_test_and_logrank_against_hand_computation():
    res = evaluate_claim(_claim(), _ctx(_runs(_rows_of(CAL, UNC))))
    (row,) = res.as_dict()["evidence"]
    steps_a, steps_b = np.array([c[0] for c in CAL], float), np.array([u[0] for u in UNC], float)
    d = steps_a - steps_b
    # restricted mean with tau = BUDGET + 1 = the mean of the censored values
    assert f"calibrated {steps_a.mean():.3f} vs uncalibrated {steps_b.mean():.3f}" in row["detail"]
    assert f"{100 * (steps_b.mean() - steps_a.mean()) / steps_b.mean():.0f} % fewer" in row["detail"]
    assert "reached the target 6/8 vs 4/8" in row["detail"]
    expected = _logrank_by_hand(steps_a, np.array([c[1] for c in CAL]), steps_b, np.array([u[1] for u in UNC]))
    assert f"log-rank (unpaired) p = {expected:.3f}" in row["detail"]
    # the row's numbers: the paired Wilcoxon test (the pair censored in both runs has difference 0: scipy drops it)
    assert row["estimate"] == pytest.approx(d.mean()) and row["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(8))
    assert (row["df"], row["n"], row["runs"], row["direction"]) == (7, 8, 8, -1)
    assert row["p"] == pytest.approx(stats.wilcoxon(steps_a, steps_b).pvalue, rel=1e-9)
    assert row["test"] == "Wilcoxon signed-rank" and row["data"] == STAND_INS
    assert row["verdict"] == (R.GENERALISES if row["p"] < 0.05 else R.UNDECIDED)
    ttest = evaluate_claim(_claim(test="ttest"), _ctx(_runs(_rows_of(CAL, UNC)))).as_dict()["evidence"][0]
    assert ttest["p"] == pytest.approx(stats.ttest_rel(steps_a, steps_b).pvalue, rel=1e-9)


def test_all_censored_rows_are_undecided_not_support():
    rows = [("s", m, seed, BUDGET + 1, 0) for m in ("calibrated", "uncalibrated") for seed in range(6)]
    res = evaluate_claim(_claim(), _ctx(_runs(rows)))
    row = res.as_dict()["evidence"][0]
    assert row["p"] == 1.0 and "identical in every run" in row["detail"]
    assert "log-rank (unpaired) p = –" in row["detail"]
    assert res.verdict == R.UNDECIDED  # a tie neither supports nor refutes "fewer steps"


def test_every_row_scope_and_the_declared_runs():
    rng = np.random.default_rng(0)
    rows = []
    for setting in ("s1", "s2"):
        for seed in range(12):
            base = int(rng.integers(6, 12))
            rows.append((setting, "uncalibrated", seed, base + 4 + int(rng.integers(0, 3)), 1))
            rows.append((setting, "calibrated", seed, base, 1))
    rows = [r for r in rows if not (r[0] == "s2" and r[2] >= 8)]  # s2 has 8 paired seeds
    res = evaluate_claim(_claim(), _ctx(_runs(rows), claim_runs={"default": 10}))
    assert [e.runs for e in res.evidence] == [10] and res.runs_declared == 10
    assert res.skipped == ["sixhump / s2: 8 shared runs of the 10 declared"]
    assert res.verdict == R.GENERALISES
    both = evaluate_claim(_claim(), _ctx(_runs(rows), claim_runs={"default": 8}))
    assert [e.verdict for e in both.evidence] == [R.GENERALISES] * 2 and both.verdict == R.GENERALISES
    reverse = evaluate_claim(_claim(a="uncalibrated", b="calibrated"), _ctx(_runs(rows), claim_runs={"default": 8}))
    assert reverse.verdict == R.DOES_NOT_GENERALISE


def test_forrester_is_the_papers_data_without_a_published_number():
    # Forrester is the paper's own function; the BO paper prints no table, so its rows get direction verdicts.
    relations = {"forrester": DatasetRelation("forrester", "Forrester", "same")}
    res = evaluate_claim(_claim(), _ctx(_runs(_rows_of(CAL, UNC), dataset="forrester"), relations=relations))
    assert res.evidence[0].group == "paper's data, no published number"
    assert res.as_dict()["evidence"][0]["paper_estimate"] is None
    assert res.verdict in R.DIRECTION_VERDICTS


def test_a_method_that_did_not_run_is_not_run():
    rows = [("s", "calibrated", seed, 5, 1) for seed in range(4)]
    res = evaluate_claim({**_claim(), "config": "config/bo-power.yaml", "needs": "4.5 CPU hours"}, _ctx(_runs(rows)))
    assert res.verdict == NOT_RUN and res.config == "config/bo-power.yaml" and res.needs == "4.5 CPU hours"

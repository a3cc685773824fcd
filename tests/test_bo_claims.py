"""The bo claim kind ``censored_steps`` (steps to target with censoring) on constructed runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from uqcal.pipeline.reference import Reference
from uqcal.pipeline.report.claims import HELD, INCONCLUSIVE, ClaimContext, evaluate_claim

BUDGET = 15  # censored runs record steps_to_target = BUDGET + 1


def _runs(rows):
    """rows: (setting, method, seed, steps, reached) -> the long per-run metrics table."""
    records = []
    for setting, method, seed, steps, reached in rows:
        records.append(("sixhump", setting, method, seed, "steps_to_target", float(steps)))
        records.append(("sixhump", setting, method, seed, "reached_target", float(reached)))
    return pd.DataFrame(records, columns=["dataset", "setting", "method", "seed", "metric", "value"])


def _ctx(runs):
    summary = pd.DataFrame(columns=["dataset", "setting", "method", "metric", "mean", "std", "n"])
    return ClaimContext("bo", summary, runs, Reference("bo"), {}, None)


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


def test_restricted_means_paired_test_and_logrank_against_hand_computation():
    cal = [(3, 1), (5, 1), (4, 1), (16, 0), (7, 1), (6, 1), (9, 1), (16, 0)]
    unc = [(8, 1), (16, 0), (9, 1), (16, 0), (12, 1), (16, 0), (10, 1), (16, 0)]
    rows = [("s", "calibrated", i, *v) for i, v in enumerate(cal)] + [("s", "uncalibrated", i, *v)
                                                                        for i, v in enumerate(unc)]
    res = evaluate_claim(_claim(), _ctx(_runs(rows)))
    (row,) = res.evidence
    steps_a, steps_b = np.array([c[0] for c in cal], float), np.array([u[0] for u in unc], float)
    # restricted mean with tau = BUDGET + 1 = the mean of the censored values
    assert f"calibrated {steps_a.mean():.3f} vs uncalibrated {steps_b.mean():.3f}" in row.detail
    assert f"{100 * (steps_b.mean() - steps_a.mean()) / steps_b.mean():.0f} % fewer" in row.detail
    assert "reached the target 6/8 vs 4/8" in row.detail
    # the pair censored in both runs has difference 0: scipy's Wilcoxon drops it, as the claim does
    p_wilcoxon = stats.wilcoxon(steps_a, steps_b).pvalue
    assert f"Wilcoxon p = {p_wilcoxon:.3f}" in row.detail
    expected = _logrank_by_hand(steps_a, np.array([c[1] for c in cal]), steps_b, np.array([u[1] for u in unc]))
    assert f"log-rank (unpaired) p = {expected:.3f}" in row.detail
    assert row.outcome == ("better" if p_wilcoxon < 0.05 else "tie")


def test_all_censored_rows_are_ties_not_failures():
    rows = [("s", m, seed, BUDGET + 1, 0) for m in ("calibrated", "uncalibrated") for seed in range(6)]
    res = evaluate_claim(_claim(), _ctx(_runs(rows)))
    assert res.evidence[0].outcome == "tie" and "log-rank (unpaired) p = –" in res.evidence[0].detail
    assert res.verdict == INCONCLUSIVE  # a tie neither supports nor refutes "fewer steps"


@pytest.mark.parametrize("test", ["wilcoxon", "ttest"])
def test_every_row_scope_and_pooled_test(test):
    rng = np.random.default_rng(0)
    rows = []
    for setting in ("s1", "s2"):
        for seed in range(12):
            base = int(rng.integers(6, 12))
            rows.append((setting, "uncalibrated", seed, base + 4, 1))
            rows.append((setting, "calibrated", seed, base, 1))
    res = evaluate_claim(_claim(test=test, pooled=True), _ctx(_runs(rows)))
    assert [e.outcome for e in res.evidence] == ["better", "better"]
    assert res.verdict == HELD and "pooled over 2 rows" in res.summary

"""The claim kinds on a size the paper names (``versus_value``, ``relative_reduction``) against hand-computed tests,
and a claim's ``ours`` / ``config`` / ``needs`` keys (claims.evaluate_claim)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from uqcal.metrics import replication as R
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference
from uqcal.pipeline.report.claims import evaluate_claim
from uqcal.pipeline.report.verdicts import NOT_RUN, ClaimContext

COLUMNS = ["dataset", "setting", "method", "seed", "metric", "value"]


def ctx_of(values: dict, claim_runs=None) -> ClaimContext:
    rows = [(d, s, m, seed, metric, float(v)) for (d, s, m, metric), vs in values.items() for seed, v in enumerate(vs)]
    runs = pd.DataFrame(rows, columns=COLUMNS)
    summary = (runs.groupby(["dataset", "setting", "method", "metric"], sort=False)["value"]
               .agg(mean="mean", std="std", n="count").reset_index())
    relations = {"standin": DatasetRelation("standin", "CCS", "stand_in", "a stand-in")}
    return ClaimContext("rio", summary, runs, Reference("rio", path=Path("x.yaml")), relations, None, claim_runs,
                        "declared in the test")


def claim(check: dict, **extra) -> dict:
    return {"id": "c", "text": "t", "check": check, **extra}


# ------------------------------------------------------------------------------ versus_value
def test_versus_value_is_a_one_sample_t_test_of_the_mean_against_the_value():
    ir = [0.62, 0.55, 0.71, 0.58, 0.66]
    result = evaluate_claim(claim({"kind": "versus_value", "metric": "improvement_ratio", "method": "rio",
                                   "value": 0.5, "direction": "greater"}),
                            ctx_of({("standin", "h", "rio", "improvement_ratio"): ir}))
    (row,) = result.evidence
    # by hand: mean 0.624, sd of the five values, se = sd / sqrt(5), t = (mean - 0.5) / se on 4 df
    mean = sum(ir) / 5
    sd = math.sqrt(sum((x - mean) ** 2 for x in ir) / 4)
    assert row.test.estimate == pytest.approx(mean - 0.5)
    assert row.test.se == pytest.approx(sd / math.sqrt(5))
    assert row.test.df == 4
    assert row.test.p == pytest.approx(stats.ttest_1samp(ir, 0.5).pvalue, rel=1e-9)
    assert row.test.direction == 1 and row.test.hypothesis == "superiority"
    assert result.verdict == R.GENERALISES   # p = 0.005: significant, above 0.5, on a stand-in


def test_versus_value_below_the_value_goes_against_the_claim_and_a_direction_less_claim_flips():
    ir = [0.42, 0.45, 0.40, 0.47, 0.44]
    values = {("standin", "h", "rio", "improvement_ratio"): ir}
    check = {"kind": "versus_value", "metric": "improvement_ratio", "method": "rio", "value": 0.5}
    assert evaluate_claim(claim(check), ctx_of(values)).verdict == R.DOES_NOT_GENERALISE
    assert evaluate_claim(claim({**check, "direction": "less"}), ctx_of(values)).verdict == R.GENERALISES
    # a mean at the value is no evidence either way: a tie never supports a claim
    tie = {("standin", "h", "rio", "improvement_ratio"): [0.48, 0.52, 0.49, 0.51, 0.50]}
    assert evaluate_claim(claim(check), ctx_of(tie)).verdict == R.UNDECIDED


def test_versus_value_uses_the_declared_runs_and_lists_a_row_without_them():
    values = {("standin", "h", "rio", "improvement_ratio"): [0.62, 0.55, 0.71, 0.58, 0.66]}
    check = {"kind": "versus_value", "metric": "improvement_ratio", "method": "rio", "value": 0.5}
    three = evaluate_claim(claim(check), ctx_of(values, {"default": 3}))
    assert three.evidence[0].runs == 3
    assert three.evidence[0].test.p == pytest.approx(stats.ttest_1samp([0.62, 0.55, 0.71], 0.5).pvalue, rel=1e-9)
    short = evaluate_claim(claim(check), ctx_of(values, {"default": 10}))
    assert short.verdict == NOT_RUN and "5 shared runs of the 10 declared" in short.skipped[0]


# ------------------------------------------------------------------------------ relative_reduction
def test_relative_reduction_tests_a_against_the_reduced_b_paired_by_seed():
    cal = [8.0, 10.0, 7.0, 12.0, 9.0, 6.0]
    unc = [11.0, 12.0, 10.0, 13.0, 12.0, 9.0]
    values = {("standin", "s", "calibrated", "steps_to_target"): cal,
              ("standin", "s", "uncalibrated", "steps_to_target"): unc}
    check = {"kind": "relative_reduction", "metric": "steps_to_target", "a": "calibrated", "b": "uncalibrated",
             "reduction": 0.05, "test": "ttest"}
    result = evaluate_claim(claim(check), ctx_of(values))
    (row,) = result.evidence
    d = [a - 0.95 * b for a, b in zip(cal, unc, strict=True)]   # a below 95 % of b
    assert row.test.estimate == pytest.approx(sum(d) / 6)
    assert row.test.p == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
    assert row.test.direction == -1
    assert f"{1 - sum(cal) / sum(unc):.0%} lower" in row.detail
    assert result.verdict == R.GENERALISES
    # a 25 % reduction is more than these runs show (observed 22 %): not significant
    assert evaluate_claim(claim({**check, "reduction": 0.25}), ctx_of(values)).verdict in (
        R.UNDECIDED, R.DOES_NOT_GENERALISE)
    wilcoxon = evaluate_claim(claim({**check, "test": "wilcoxon"}), ctx_of(values)).evidence[0]
    assert wilcoxon.test.p == pytest.approx(stats.wilcoxon(d).pvalue, rel=1e-9)
    with pytest.raises(ValueError, match="reduction"):
        evaluate_claim(claim({**check, "reduction": 1.5}), ctx_of(values))


# ------------------------------------------------------------------------------ ours, config, needs
def test_ours_is_carried_to_claims_json():
    values = {("standin", "h", "rio", "improvement_ratio"): [0.62, 0.55, 0.71, 0.58, 0.66]}
    check = {"kind": "versus_value", "metric": "improvement_ratio", "method": "rio", "value": 0.5}
    assert evaluate_claim(claim(check, ours=True), ctx_of(values)).as_dict()["ours"] is True
    assert evaluate_claim(claim(check), ctx_of(values)).as_dict()["ours"] is False


def test_a_claim_without_a_check_is_not_run_and_says_what_it_needs():
    needs = "a random-forest base model, which uqcal does not have"
    result = evaluate_claim({"id": "rf", "text": "RIO improves RF", "source": "Table 7", "needs": needs},
                            ctx_of({}))
    out = result.as_dict()
    assert result.verdict == NOT_RUN and out["needs"] == needs and out["config"] is None
    assert needs in result.summary and out["evidence"] == []
    with pytest.raises(ValueError, match="needs"):
        evaluate_claim({"id": "rf", "text": "t"}, ctx_of({}))
    with pytest.raises(ValueError, match="unknown keys"):
        evaluate_claim({"id": "rf", "text": "t", "needs": "x", "decided_by": "config/paper.yaml"}, ctx_of({}))


def test_the_page_counts_the_papers_claims_apart_from_ours_and_shows_what_a_claim_not_run_needs():
    from uqcal.pipeline.report import html as H
    from uqcal.pipeline.report.verdicts import ClaimResult

    theirs = ClaimResult("a", "the paper's", R.GENERALISES, "s")
    ours = ClaimResult("b", "ours", R.UNDECIDED, "s", ours=True)
    missing = ClaimResult("c", "needs a method", NOT_RUN, "s", needs="a random-forest base model")
    elsewhere = ClaimResult("d", "runs elsewhere", NOT_RUN, "s", config="config/paper.yaml", needs="downloads")
    assert H.claims_count([theirs, ours, missing]) == "1 holds, direction only; 1 not run here; 1 of our checks"
    page = H.claims_html([missing, elsewhere])
    assert "needs a random-forest base model" in page
    assert "run by config/paper.yaml" in page and "needs downloads" in page

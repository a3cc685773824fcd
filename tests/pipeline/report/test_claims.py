"""The claim engine (uqcal.pipeline.report.claims and .verdicts) on constructed runs whose answers are computed by
hand or by scipy / statsmodels: structured evidence rows, runs fixed in advance, ties that never support a claim,
Holm within the scopes that count rows, non-inferiority and TOST at declared margins, ``best`` on shared seeds,
the sign test for a difference without spread, and not-run claims."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import DescrStatsW, ttost_paired

from uqcal.metrics import replication as R
from uqcal.metrics.stats import pairs_for_power
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference
from uqcal.pipeline.report.claims import KINDS, evaluate_claim
from uqcal.pipeline.report.results import RunFiles
from uqcal.pipeline.report.verdicts import NO_PAPER_NUMBER, NOT_RUN, PAPER_DATA, STAND_INS, ClaimContext

COLUMNS = ["dataset", "setting", "method", "seed", "metric", "value"]
Z95 = stats.norm.ppf(0.975)
BASE = 10 + np.random.default_rng(0).normal(0, 1, 10)   # per-split difficulty, shared by the methods
JIT = np.random.default_rng(1).normal(0, 0.3, 10)       # the paired scatter


def runs_of(values: dict) -> pd.DataFrame:
    """{(dataset, setting, method, metric): values by seed (a list) or {seed: value}} -> the per-run table."""
    rows = []
    for (dataset, setting, method, metric), vs in values.items():
        items = vs.items() if isinstance(vs, dict) else enumerate(vs)
        rows += [(dataset, setting, method, int(seed), metric, float(v)) for seed, v in items]
    return pd.DataFrame(rows, columns=COLUMNS)


def summary_of(runs: pd.DataFrame) -> pd.DataFrame:
    return (runs.groupby(["dataset", "setting", "method", "metric"], sort=False)["value"]
            .agg(mean="mean", std="std", n="count").reset_index())


RELATIONS = {"paper": DatasetRelation("paper", "CCS", "same"),
             "standin": DatasetRelation("standin", "CCS", "stand_in", "a stand-in")}


def reference(records=(), margins=None, uncertainty=None, table_id="t1") -> Reference:
    table = {"id": table_id, "table": "Table 1", "caption": "c", "records": [dict(r) for r in records],
             "uncertainty": uncertainty if uncertainty is not None else {"kind": "std", "ddof": 1, "n": 10}}
    return Reference("metareg", tables={table_id: table}, margins=margins or {},
                     path=Path("src/uqcal/methods/metareg/paper_numbers.yaml"))


def record(method, mean, std, dataset="CCS", setting="h", metric="rmse"):
    return {"dataset": dataset, "setting": setting, "method": method, "metric": metric, "mean": mean, "std": std}


def ctx_of(values, ref=None, claim_runs=None, relations=None) -> ClaimContext:
    runs = runs_of(values)
    return ClaimContext("metareg", summary_of(runs), runs, ref if ref is not None else reference(),
                        RELATIONS if relations is None else relations, None, claim_runs, "declared in the test")


def claim(check, cid="c", **extra) -> dict:
    return {"id": cid, "text": "t", "check": check, **extra}


def rows(result) -> dict:
    """The JSON evidence rows by dataset (one row per dataset in these tests)."""
    return {row["dataset"]: row for row in result.as_dict()["evidence"]}


def standardised(n: int, seed: int) -> np.ndarray:
    z = np.random.default_rng(seed).normal(size=n)
    return (z - z.mean()) / z.std(ddof=1)


def with_p(p: float, n: int, seed: int, sign: int = -1) -> np.ndarray:
    """Paired differences (sd 1) whose paired t-test gives exactly the two-sided ``p``, signed ``sign``."""
    return sign * stats.t.isf(p / 2, n - 1) / math.sqrt(n) + standardised(n, seed)


def pair_values(dataset, d, metric="rmse", setting="h", a="a", b="b", base=BASE):
    base = base[: len(d)]
    return {(dataset, setting, a, metric): base + d, (dataset, setting, b, metric): base}


# ------------------------------------------------------------------------------ 1. structured evidence rows
def test_a_comparison_row_carries_its_numbers_and_the_papers_on_the_papers_data_only():
    d = -1.0 + JIT
    values = {**pair_values("paper", d), **pair_values("standin", d)}
    ref = reference([record("a", 5.0, 0.4), record("b", 6.0, 0.3)])
    result = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "paper_table": "t1"}),
                            ctx_of(values, ref))
    paper, standin = rows(result)["paper"], rows(result)["standin"]
    se = d.std(ddof=1) / math.sqrt(10)
    p = stats.ttest_rel(BASE + d, BASE).pvalue
    for row in (paper, standin):
        assert row["estimate"] == pytest.approx(d.mean()) and row["se"] == pytest.approx(se)
        assert (row["df"], row["n"], row["runs"]) == (9, 10, 10)
        assert row["p"] == pytest.approx(p, rel=1e-9) and row["p_adjusted"] == pytest.approx(p, rel=1e-9)
        assert (row["hypothesis"], row["direction"]) == ("superiority", -1)
    # the paper's a - b with the se of a difference of two means (std ddof 1 over 10 runs each)
    paper_se = math.hypot(0.4, 0.3) / math.sqrt(10)
    assert paper["data"] == PAPER_DATA
    assert paper["paper_estimate"] == pytest.approx(-1.0) and paper["paper_se"] == pytest.approx(paper_se)
    # the interval's t at the Welch-Satterthwaite df of the paper's se (itself Welch's df of the two printed
    # means, 9 runs' df each) and ours (df 9)
    se_a, se_b = 0.4 / math.sqrt(10), 0.3 / math.sqrt(10)
    paper_df = (se_a**2 + se_b**2) ** 2 / (se_a**4 / 9 + se_b**4 / 9)
    df = (paper_se**2 + se**2) ** 2 / (paper_se**4 / paper_df + se**4 / 9)
    half = stats.t.ppf(0.975, df) * math.hypot(paper_se, se)
    assert (paper["pi_low"], paper["pi_high"]) == pytest.approx((-1.0 - half, -1.0 + half))
    # d33 in the claim's direction, at the paper's df for the difference of two printed means
    assert paper["d33"] == pytest.approx(-R.d33(paper_se, paper_df))
    assert paper["side"] == "inside" and paper["verdict"] == R.REPRODUCED
    assert paper["n80_at_paper_effect"] == pytest.approx(math.ceil(pairs_for_power(1.0 / d.std(ddof=1))))
    # a stand-in: the paper's numbers are not about this data
    assert standin["data"] == STAND_INS
    assert all(standin[k] is None for k in ("paper_estimate", "paper_se", "pi_low", "pi_high", "d33"))
    assert standin["verdict"] == R.GENERALISES
    assert result.verdict == R.REPRODUCED  # the paper rows decide; the stand-ins are kept beside them
    by_data = result.as_dict()["by_data"]
    assert {k: v["verdict"] for k, v in by_data.items()} == {PAPER_DATA: R.REPRODUCED, STAND_INS: R.GENERALISES}
    # the reverse claim (b < a) on the same rows: significant against it
    reverse = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "b", "b": "a", "paper_table": "t1"}),
                             ctx_of(values, ref))
    assert {r["verdict"] for r in rows(reverse).values()} == {R.CONTRADICTED, R.DOES_NOT_GENERALISE}
    assert reverse.verdict == R.CONTRADICTED


def test_the_papers_data_without_a_printed_spread_gets_direction_verdicts():
    d = -1.0 + JIT
    ref = reference([record("a", 5.0, None), record("b", 6.0, None)])
    result = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "paper_table": "t1"}),
                            ctx_of(pair_values("paper", d), ref))
    row = rows(result)["paper"]
    assert row["data"] == NO_PAPER_NUMBER and row["paper_estimate"] == pytest.approx(-1.0)
    assert row["paper_se"] is None and row["pi_low"] is None and row["verdict"] == R.GENERALISES
    assert result.verdict == R.GENERALISES and NO_PAPER_NUMBER in result.by_data
    # a table without an uncertainty block reads the same way: no se, no interval
    bare = reference([record("a", 5.0, 0.4), record("b", 6.0, 0.3)], uncertainty={})
    row = rows(evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b",
                                     "paper_table": "t1"}), ctx_of(pair_values("paper", d), bare)))["paper"]
    assert row["paper_se"] is None and row["data"] == NO_PAPER_NUMBER


def test_every_summary_based_kind_gives_numeric_rows():
    methods = ["a", "b", "c", "d"]
    values = {}
    for i, m in enumerate(methods):
        for metric, shift in (("rmse", i), ("noise", 2 * i)):
            values[("standin", "h", m, metric)] = BASE + shift + (i + 1) * JIT
    for setting, shift in (("s1", 0.0), ("s2", -1.0)):
        values[("standin", setting, "a", "rmse")] = BASE + shift + JIT
        values[("standin", setting, "b", "rmse")] = BASE + shift / 2
    checks = [
        {"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "settings": ["h"]},
        {"kind": "greater_than", "metric": "rmse", "a": "b", "b": "a", "settings": ["h"]},
        {"kind": "best", "metric": "rmse", "method": "a", "settings": ["h"]},
        {"kind": "best_among", "metric": "rmse", "method": "a", "methods": ["a", "b"], "settings": ["h"]},
        {"kind": "monotone", "metric": "rmse", "method": "a", "settings": ["s1", "s2"]},
        {"kind": "spearman", "x": "noise", "y": "rmse", "methods": methods},
        {"kind": "effect_contrast", "metric": "rmse", "a": "a", "b": "b", "settings": ["s1", "s2"]},
        {"kind": "versus_value", "metric": "rmse", "method": "a", "value": 9.0, "settings": ["h"]},
        {"kind": "relative_reduction", "metric": "rmse", "a": "a", "b": "b", "reduction": 0.05, "settings": ["h"]},
        {"kind": "against_nominal", "metric": "rmse", "nominal": 9.0, "side": "at_most", "method": "a",
         "settings": ["h"]},
    ]
    ref = reference(margins={"c": {"margin": 0.5, "reason": "test"}})
    for check in checks:
        result = evaluate_claim(claim(check), ctx_of(values, ref))
        assert result.evidence, check
        for row in result.as_dict()["evidence"]:
            for key in ("estimate", "se", "p", "p_adjusted"):
                assert isinstance(row[key], float) and math.isfinite(row[key]), (check["kind"], key, row)
            assert isinstance(row["n"], int) and isinstance(row["runs"], int) and row["runs"] >= 2
            # the paired / Welch tests have t degrees of freedom; Spearman's Fisher z is a normal test
            assert (row["df"] is None) if check["kind"] == "spearman" else row["df"] > 0
            assert row["verdict"] in R.DIRECTION_VERDICTS and row["paper_estimate"] is None
        assert result.verdict in R.DIRECTION_VERDICTS
    assert set(KINDS) == {"less_than", "greater_than", "best", "best_among", "within_paper_spread",
                          "within_paper_repeat_spread", "monotone", "spearman", "effect_contrast",
                          "fold_blocked_compare", "censored_steps", "stats_curve_greater", "episode_paired",
                          "versus_value", "relative_reduction", "against_nominal"}


# ------------------------------------------------------------------------------ 2. runs fixed in advance
def test_every_row_uses_the_first_declared_shared_seeds():
    rng = np.random.default_rng(5)
    a, b = BASE - 0.5 + rng.normal(0, 0.2, 10), BASE.copy()
    a[5:] += 50.0  # seeds 5-9 would change every number if they were used
    values = {("paper", "h", "a", "rmse"): a, ("paper", "h", "b", "rmse"): b,
              ("short", "h", "a", "rmse"): a, ("short", "h", "b", "rmse"): b[:3]}
    check = claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b"})
    result = evaluate_claim(check, ctx_of(values, claim_runs={"default": 5}))
    (row,) = result.as_dict()["evidence"]
    d = a[:5] - b[:5]
    assert row["estimate"] == pytest.approx(d.mean()) and row["se"] == pytest.approx(d.std(ddof=1) / math.sqrt(5))
    assert row["p"] == pytest.approx(stats.ttest_rel(a[:5], b[:5]).pvalue, rel=1e-9)
    assert row["runs"] == row["n"] == 5 == result.runs_declared
    assert result.as_dict()["runs_source"] == "declared in the test"
    assert result.as_dict()["rows_not_tested"] == ["short / h: 3 shared runs of the 5 declared"]
    # a claim's own entry overrides the default; the first shared seeds, not the first seeds of one method
    result = evaluate_claim(check, ctx_of({**values, ("paper", "h", "b", "rmse"): dict(enumerate(b))},
                                          claim_runs={"default": 5, "c": 8}))
    assert result.runs_declared == 8 and result.evidence[0].runs == 8
    later = {("paper", "h", "a", "rmse"): a, ("paper", "h", "b", "rmse"): {s: b[s] for s in range(2, 10)}}
    row = evaluate_claim(check, ctx_of(later, claim_runs={"default": 5})).as_dict()["evidence"][0]
    assert row["estimate"] == pytest.approx((a[2:7] - b[2:7]).mean())  # seeds 2-6: the first five both ran
    # none declared: every shared seed, and the claim says the config declares none
    result = evaluate_claim(check, ctx_of(values))
    assert result.runs_declared is None and result.runs_source == "not declared in the config"
    assert result.evidence[0].runs == 10 and result.skipped == []


def test_best_and_monotone_use_the_declared_runs_too():
    values = {("standin", s, m, "rmse"): BASE + i + (j + 1) * JIT
              for i, m in enumerate("abc") for j, s in enumerate(("s1", "s2"))}
    values[("standin", "s1", "c", "rmse")] = BASE[:4] + 2  # 4 runs: below the 5 declared
    ref = reference(margins={"c": {"margin": 0.5, "reason": "test"}})
    best = evaluate_claim(claim({"kind": "best", "metric": "rmse", "method": "a"}),
                          ctx_of(values, ref, claim_runs={"default": 5}))
    assert [e.runs for e in best.evidence] == [5]
    assert best.skipped == ["standin / s1: 4 shared runs of the 5 declared (every method of the row)"]
    mono = evaluate_claim(claim({"kind": "monotone", "metric": "rmse", "method": "c", "settings": ["s1", "s2"]}),
                          ctx_of(values, ref, claim_runs={"default": 5}))
    assert mono.verdict == NOT_RUN and mono.skipped == ["standin: s1 → s2: 4 shared runs of the 5 declared"]


# ------------------------------------------------------------------------------ 3. a tie never supports a claim
def test_a_non_significant_row_is_consistent_or_undecided_never_support():
    d = with_p(0.30, 8, seed=2)  # a < b by 1.10 sd / sqrt(8): p = .30
    values = {**pair_values("paper", d), **pair_values("standin", d)}
    ref = reference([record("a", 5.0, 1.2), record("b", 5.6, 1.2)])  # the paper: -0.6 with se 0.54
    for scope in ("every_row", "majority", "any_row"):
        result = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "paper_table": "t1",
                                       "scope": scope}), ctx_of(values, ref))
        paper, standin = rows(result)["paper"], rows(result)["standin"]
        assert paper["p"] == pytest.approx(0.30) and standin["p"] == pytest.approx(0.30)
        assert paper["side"] == "inside" and paper["p_d33"] > 0.05
        assert paper["verdict"] == R.CONSISTENT and standin["verdict"] == R.UNDECIDED
        assert result.verdict == R.CONSISTENT and result.by_data[STAND_INS][0] == R.UNDECIDED


def test_rows_significant_only_before_holm_do_not_carry_a_counting_scope():
    pvalues = [0.03, 0.04, 0.04]
    names = ["s1", "s2", "s3"]
    relations = {n: DatasetRelation(n, None, "stand_in", "x") for n in names}
    relations.update({f"p{i}": DatasetRelation(f"p{i}", f"P{i}", "same") for i in range(3)})
    values, records = {}, []
    for i, p in enumerate(pvalues):
        values.update(pair_values(names[i], with_p(p, 8, seed=10 + i)))
        values.update(pair_values(f"p{i}", with_p(p, 8, seed=20 + i)))
        records += [record("a", 5.0, 2.0, dataset=f"P{i}"), record("b", 6.0, 2.0, dataset=f"P{i}")]
    ref = reference(records)
    base = {"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "paper_table": "t1"}
    every = evaluate_claim(claim({**base, "scope": "every_row"}), ctx_of(values, ref, relations=relations))
    by = rows(every)
    assert [by[n]["p_adjusted"] for n in names] == pytest.approx(pvalues)  # intersection-union: no adjustment
    assert every.by_data[STAND_INS][0] == R.GENERALISES
    assert every.by_data[PAPER_DATA][0] in (R.REPRODUCED, R.REPRODUCED_SMALLER)
    for scope in ("majority", {"at_least": 0.6}, "any_row"):
        result = evaluate_claim(claim({**base, "scope": scope}), ctx_of(values, ref, relations=relations))
        by = rows(result)
        for group in (names, [f"p{i}" for i in range(3)]):  # Holm within each group of rows, not across them
            raw = [by[n]["p"] for n in group]
            assert raw == pytest.approx(pvalues)
            assert [by[n]["p_adjusted"] for n in group] == pytest.approx(multipletests(raw, method="holm")[1])
            assert all(by[n]["p_adjusted"] == pytest.approx(0.09) for n in group)
        assert {by[n]["verdict"] for n in names} == {R.UNDECIDED}
        assert not {by[f"p{i}"]["verdict"] for i in range(3)} & {R.REPRODUCED, R.REPRODUCED_SMALLER}
        assert result.by_data[STAND_INS][0] == R.UNDECIDED
        assert result.verdict not in (R.REPRODUCED, R.REPRODUCED_SMALLER)
        assert "Holm-adjusted within the claim" in result.summary


# ------------------------------------------------------------------------------ 4. margins: non-inferiority, TOST
def test_not_worse_needs_a_declared_margin_and_is_statsmodels_one_sided_test():
    d = 0.1 + JIT  # a slightly worse (higher rmse) than b
    values = {**pair_values("standin", d)}
    check = {"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "accept": "not_worse"}
    with pytest.raises(ValueError, match=r"claims\.qr_cost\.check: .*margins\.qr_cost.*methods/metareg/paper_numbers.yaml"):
        evaluate_claim(claim(check, "qr_cost"), ctx_of(values))
    ref = reference(margins={"c": {"margin": 0.3, "reason": "5 % of the baseline's RMSE"}})
    row = rows(evaluate_claim(claim(check), ctx_of(values, ref)))["standin"]
    assert (row["hypothesis"], row["margin"]) == ("noninferiority", 0.3)
    _, p_sm, _ = DescrStatsW(d).ttest_mean(value=0.3, alternative="smaller")
    assert row["p"] == pytest.approx(p_sm, rel=1e-9) and row["verdict"] == R.GENERALISES
    # higher is better: a not lower than b by more than the margin
    check_up = {**check, "kind": "greater_than"}
    row = rows(evaluate_claim(claim(check_up), ctx_of(pair_values("standin", -d), ref)))["standin"]
    _, p_sm, _ = DescrStatsW(-d).ttest_mean(value=-0.3, alternative="larger")
    assert row["p"] == pytest.approx(p_sm, rel=1e-9)
    # a margin relative to the comparator's mean
    ref = reference(margins={"c": {"relative": 0.05, "reason": "5 % of b"}})
    row = rows(evaluate_claim(claim(check), ctx_of(values, ref)))["standin"]
    assert row["margin"] == pytest.approx(0.05 * BASE.mean())
    _, p_sm, _ = DescrStatsW(d).ttest_mean(value=0.05 * BASE.mean(), alternative="smaller")
    assert row["p"] == pytest.approx(p_sm, rel=1e-9)
    # worse by more than the margin: inferiority is significant, the claim does not generalise
    row = rows(evaluate_claim(claim(check), ctx_of(pair_values("standin", 2.0 + JIT), ref)))["standin"]
    assert row["verdict"] == R.DOES_NOT_GENERALISE


def test_equivalent_is_tost():
    d = 0.05 + JIT
    ref = reference(margins={"c": {"margin": 0.4, "reason": "r"}})
    check = {"kind": "less_than", "metric": "mse", "a": "a", "b": "b", "accept": "equivalent"}
    with pytest.raises(ValueError, match="margins.c"):
        evaluate_claim(claim(check), ctx_of(pair_values("standin", d, metric="mse")))
    row = rows(evaluate_claim(claim(check), ctx_of(pair_values("standin", d, metric="mse"), ref)))["standin"]
    p_tost = ttost_paired(BASE + d, BASE, -0.4, 0.4)[0]
    assert row["hypothesis"] == "equivalence" and row["p"] == pytest.approx(p_tost, rel=1e-9)
    assert row["verdict"] == (R.GENERALISES if p_tost < 0.05 else R.UNDECIDED)
    far = rows(evaluate_claim(claim(check), ctx_of(pair_values("standin", 1.5 + JIT, metric="mse"), ref)))["standin"]
    assert far["p"] == pytest.approx(ttost_paired(BASE + 1.5 + JIT, BASE, -0.4, 0.4)[0], rel=1e-9)
    assert far["verdict"] == R.DOES_NOT_GENERALISE


# ------------------------------------------------------------------------------ 5. best on the shared seeds
def test_best_compares_on_the_seeds_every_method_ran_at_the_margin():
    a = BASE[:5] + 0.1 + JIT[:5]
    values = {("standin", "h", "a", "te"): a, ("standin", "h", "b", "te"): BASE[:5] + 1.0,
              ("standin", "h", "c", "te"): np.concatenate([BASE[:5], np.full(5, 100.0)])}
    check = {"kind": "best", "metric": "te", "method": "a"}
    with pytest.raises(ValueError, match=r"claims\.c\.check: .*margins\.c"):
        evaluate_claim(claim(check), ctx_of(values))
    ref = reference(margins={"c": {"relative": 0.05, "reason": "r"}})
    result = evaluate_claim(claim(check), ctx_of(values, ref))
    (row,) = result.as_dict()["evidence"]
    # over seeds 0-4 c (mean of BASE[:5]) is the best other; over its own 10 seeds it would be b
    d = a - BASE[:5]
    margin = 0.05 * BASE[:5].mean()
    assert "the best other, c" in row["detail"] and "3 methods on the same 5 runs" in row["detail"]
    assert row["estimate"] == pytest.approx(d.mean()) and row["runs"] == 5
    assert row["margin"] == pytest.approx(margin) and row["hypothesis"] == "noninferiority"
    assert row["p"] == pytest.approx(DescrStatsW(d).ttest_mean(value=margin, alternative="smaller")[1], rel=1e-9)
    # higher is better: a against the highest other
    up = evaluate_claim(claim({**check, "lower_is_better": False}), ctx_of(values, ref)).as_dict()["evidence"][0]
    assert "the best other, b" in up["detail"] and up["direction"] == 1
    assert up["estimate"] == pytest.approx((a - BASE[:5] - 1.0).mean())
    # best_among ranks only the listed methods
    among = evaluate_claim(claim({**check, "kind": "best_among", "methods": ["a", "b"]}), ctx_of(values, ref))
    assert "the best other, b" in among.evidence[0].detail and among.verdict == R.GENERALISES


# ------------------------------------------------------------------------------ 6. a difference without spread
def test_a_constant_difference_gets_the_sign_tests_p_never_zero():
    check = {"kind": "less_than", "metric": "rmse", "a": "a", "b": "b"}
    for n, p in ((5, 0.0625), (8, 2 / 2**8)):
        row = rows(evaluate_claim(claim(check), ctx_of(pair_values("standin", np.full(n, -0.5)))))["standin"]
        assert row["p"] == pytest.approx(p) and row["p"] == pytest.approx(stats.binomtest(n, n).pvalue)
        assert row["se"] == 0.0 and row["estimate"] == pytest.approx(-0.5)
        assert "the same difference in every run" in row["detail"]
        assert row["verdict"] == (R.UNDECIDED if n == 5 else R.GENERALISES)
    row = rows(evaluate_claim(claim(check), ctx_of(pair_values("standin", np.zeros(6)))))["standin"]
    assert row["p"] == 1.0 and "identical in every run" in row["detail"] and row["verdict"] == R.UNDECIDED
    # a run without a finite value (a failed fit) leaves the row untested: NaN never reads as significant
    broken = -1 + JIT
    broken[3] = np.nan
    result = evaluate_claim(claim(check), ctx_of(pair_values("standin", broken)))
    assert result.verdict == NOT_RUN and result.skipped == [
        "standin / h: 1 of 10 paired runs have no finite value, so the row is not tested"]
    # a metric on a tiny scale: differences of 1e-10 are tested like any other, not read as identical
    tiny = 1e-10 * (-1 + JIT)
    row = rows(evaluate_claim(claim(check), ctx_of(pair_values("standin", tiny, base=1e-9 * BASE))))["standin"]
    assert row["p"] == pytest.approx(stats.ttest_rel(1e-9 * BASE + tiny, 1e-9 * BASE).pvalue, rel=1e-6)
    assert row["p"] < 0.001 and row["verdict"] == R.GENERALISES
    # non-inferiority without spread: the one-sided sign test, 1 / 2^n (not 0 at any n)
    ref = reference(margins={"c": {"margin": 0.3, "reason": "r"}})
    for n in (3, 6):
        row = rows(evaluate_claim(claim({**check, "accept": "not_worse"}),
                                  ctx_of(pair_values("standin", np.zeros(n)), ref)))["standin"]
        assert row["p"] == pytest.approx(0.5**n)
        assert row["verdict"] == (R.UNDECIDED if n == 3 else R.GENERALISES)


# ------------------------------------------------------------------------------ other kinds' numbers
def test_monotone_is_welchs_t_per_step():
    x = BASE[:6] + 0.5 * JIT[:6]
    y = BASE[:8] + 1.0 + 2 * JIT[:8]
    values = {("standin", "s1", "m", "te"): y, ("standin", "s2", "m", "te"): x}
    result = evaluate_claim(claim({"kind": "monotone", "metric": "te", "method": "m", "settings": ["s1", "s2"]}),
                            ctx_of(values))
    (row,) = result.as_dict()["evidence"]
    vx, vy = x.var(ddof=1) / 6, y.var(ddof=1) / 8
    df = (vx + vy) ** 2 / (vx**2 / 5 + vy**2 / 7)
    welch = stats.ttest_ind(x, y, equal_var=False)
    assert row["estimate"] == pytest.approx(x.mean() - y.mean()) and row["se"] == pytest.approx(math.sqrt(vx + vy))
    assert row["df"] == pytest.approx(df) and row["p"] == pytest.approx(welch.pvalue, rel=1e-9)
    assert (row["n"], row["runs"], row["direction"]) == (14, 6, -1)
    increasing = evaluate_claim(claim({"kind": "monotone", "metric": "te", "method": "m", "settings": ["s1", "s2"],
                                       "direction": "increasing"}), ctx_of(values))
    assert (result.verdict, increasing.verdict) == ((R.GENERALISES, R.DOES_NOT_GENERALISE) if welch.pvalue < 0.05
                                                    else (R.UNDECIDED, R.UNDECIDED))


def test_spearman_is_fisher_z_beside_the_papers_rho():
    methods = ["rio", "r_i", "r_o", "y_o", "y_io", "svgp"]
    y_means = [3, 1, 6, 2, 5, 4]
    values = {}
    for i, m in enumerate(methods):
        values[("paper", "h", m, "noise")] = BASE[:3] * 0 + (i + 1)
        values[("paper", "h", m, "rmse")] = BASE[:3] * 0 + y_means[i]
    ref = reference([{"dataset": "CCS", "setting": "h", "method": "rio_variants", "metric": "spearman_rmse_noise",
                      "mean": 0.9, "std": None}], table_id="t2")
    check = {"kind": "spearman", "x": "noise", "y": "rmse", "methods": methods, "paper_table": "t2"}
    (row,) = evaluate_claim(claim(check), ctx_of(values, ref)).as_dict()["evidence"]
    rho = stats.spearmanr(range(1, 7), y_means).statistic
    se = math.sqrt(1.06 / 3)
    assert rho == pytest.approx(0.371, abs=1e-3)
    assert row["estimate"] == pytest.approx(math.atanh(rho)) and row["se"] == pytest.approx(se)
    # the p of the same Fisher-z test that the interval and d33 use (not scipy's t approximation)
    assert row["p"] == pytest.approx(2 * stats.norm.sf(math.atanh(rho) / se)) and (row["n"], row["runs"]) == (6, 3)
    # the paper prints its rho without a spread: no paper se is invented, the row is decided by direction alone
    assert row["paper_estimate"] == pytest.approx(math.atanh(0.9)) and row["paper_se"] is None
    assert row["pi_low"] is None and row["d33"] is None
    assert row["data"] == NO_PAPER_NUMBER and row["verdict"] == R.UNDECIDED  # not significant


def test_a_claim_over_several_pairs_and_metrics_has_one_row_per_comparison():
    values = {}
    for metric, pair, d in (("rmse", ("r1", "y1"), -1 + JIT), ("rmse", ("r2", "y2"), 0.1 * JIT),
                            ("nlpd", ("r1", "y1"), -0.5 + JIT), ("nlpd", ("r2", "y2"), 1 + JIT)):
        values.update(pair_values("standin", d, metric=metric, a=pair[0], b=pair[1]))
    check = {"kind": "less_than", "pairs": [["r1", "y1"], ["r2", "y2"]], "metrics": ["rmse", "nlpd"],
             "scope": "majority"}
    result = evaluate_claim(claim(check), ctx_of(values))
    by = {e.label: e for e in result.evidence}
    assert set(by) == {"standin / h: r1 vs y1, rmse", "standin / h: r2 vs y2, rmse",
                       "standin / h: r1 vs y1, nlpd", "standin / h: r2 vs y2, nlpd"}
    for label, e in by.items():
        a, b = label.split(": ")[1].split(", ")[0].split(" vs ")
        metric = label.rsplit(", ", 1)[1]
        pa, pb = values[("standin", "h", a, metric)], values[("standin", "h", b, metric)]
        assert e.test.p == pytest.approx(stats.ttest_rel(pa, pb).pvalue, rel=1e-9)
    assert by["standin / h: r2 vs y2, nlpd"].verdict == R.DOES_NOT_GENERALISE
    # a majority of 4 needs 3: two significant wins cannot make it
    assert result.verdict == R.UNDECIDED
    with pytest.raises(ValueError, match="pairs"):
        evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "pairs": [["r1"]]}), ctx_of(values))


# ------------------------------------------------------------------------------ 12. not run, and errors
def test_a_claim_without_rows_is_not_run_and_names_the_config_that_decides_it():
    values = pair_values("standin", -1 + JIT)
    needs = "no downloads; an hour on 2 cores"
    result = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "wo_r"},
                                  config="config/extended.yaml", needs=needs), ctx_of(values))
    assert result.verdict == NOT_RUN == "not_run"
    assert result.config == "config/extended.yaml" and result.as_dict()["config"] == "config/extended.yaml"
    assert result.as_dict()["needs"] == needs and result.as_dict()["ours"] is False
    assert "wo_r" in result.summary and "config/extended.yaml runs it" in result.summary and needs in result.summary
    assert result.as_dict()["evidence"] == []
    ran = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b"},
                               config="config/extended.yaml", needs=needs), ctx_of(values))
    assert ran.verdict == R.GENERALISES and ran.config is None
    assert "config" not in ran.as_dict() and "needs" not in ran.as_dict()  # only a claim not run names them
    assert evaluate_claim(claim({"kind": "best", "metric": "te", "method": "a"}), ctx_of(values)).verdict == NOT_RUN


def test_configuration_errors_name_the_claim():
    values = pair_values("standin", -1 + JIT)
    with pytest.raises(ValueError, match=r"claims\.c\.check\.kind"):
        evaluate_claim(claim({"kind": "fewer_steps", "a": "a", "b": "b"}), ctx_of(values))
    with pytest.raises(ValueError, match="missing key"):
        evaluate_claim(claim({"kind": "less_than", "metric": "rmse"}), ctx_of(values))
    with pytest.raises(ValueError, match="scope"):
        evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "scope": "pooled"}),
                       ctx_of(values))
    with pytest.raises(ValueError, match="paper_table: 't9'"):
        evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "paper_table": "t9"}),
                       ctx_of(pair_values("paper", -1 + JIT)))
    with pytest.raises(ValueError, match="accept"):
        evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "accept": "tie"}),
                       ctx_of(values))


# ------------------------------------------------------------------------------ 9. curves in train_stats.json
def _curves_ctx(tmp_path, curves_by_seed: list[dict]) -> ClaimContext:
    for seed, curves in enumerate(curves_by_seed):
        run = tmp_path / "fewshot" / "g" / "5w5s" / "md" / f"seed{seed}"
        run.mkdir(parents=True, exist_ok=True)
        (run / "train_stats.json").write_text(json.dumps({"inner_elbo_curves": curves}))
    summary = pd.DataFrame([("g", "5w5s", "md", "acc", 50.0, 0.0, len(curves_by_seed))],
                           columns=["dataset", "setting", "method", "metric", "mean", "std", "n"])
    return ClaimContext("fewshot", summary, pd.DataFrame(columns=COLUMNS), Reference("fewshot"), {},
                        RunFiles.on_disk(tmp_path, "fewshot"))


CURVE_CHECK = {"kind": "stats_curve_greater", "key": "inner_elbo_curves", "a": "md", "b": "gd_whitened",
               "method": "md"}


def test_stats_curve_greater_pairs_the_curves_at_their_last_common_step(tmp_path):
    md = [[-5.0, -3.0, -2.0], [-5.0, -4.0, -3.0], [-6.0, -3.5, -2.2]]
    gd = [[-5.0, -3.5, -2.5], [-5.0, -4.5, -3.6], [-6.0, -4.0, -2.4]]
    ctx = _curves_ctx(tmp_path, [{"md": md[:2], "gd_whitened": gd[:2]}, {"md": md[2:], "gd_whitened": gd[2:]}])
    result = evaluate_claim(claim(CURVE_CHECK), ctx)
    (row,) = result.as_dict()["evidence"]
    end_a, end_b = np.array([c[-1] for c in md]), np.array([c[-1] for c in gd])
    d = end_a - end_b
    assert row["estimate"] == pytest.approx(d.mean()) and row["se"] == pytest.approx(d.std(ddof=1) / math.sqrt(3))
    assert row["p"] == pytest.approx(stats.ttest_rel(end_a, end_b).pvalue, rel=1e-9)
    assert (row["n"], row["df"], row["direction"]) == (3, 2, 1) and row["test"] == "paired t over 3 curves"
    assert row["p"] == pytest.approx(0.069, abs=0.001) and result.verdict == R.UNDECIDED  # 3 curves: not yet
    reverse = evaluate_claim(claim({**CURVE_CHECK, "a": "gd_whitened", "b": "md"}), ctx)
    assert reverse.evidence[0].test.estimate == pytest.approx(-d.mean())
    assert evaluate_claim(claim({**CURVE_CHECK, "key": "outer_loss_curve"}), ctx).verdict == NOT_RUN


def test_a_curve_that_broke_down_is_left_out_and_counted_never_a_win(tmp_path):
    # The second gd curve stops logging after step 1 (its Sigma was not positive definite): it has no value at
    # step 2, so it is not a pair; the three complete pairs alone decide (all favour gd here).
    md = [[-5.0, -3.0, -2.0], [-5.0, -4.0, -3.0], [-5.0, -4.0, -3.2], [-5.0, -4.0, -3.1]]
    gd = [[-5.0, -2.5, -1.5], [-5.0, -1.0], [-5.0, -3.5, -2.9], [-5.0, -3.5, -2.7]]
    ctx = _curves_ctx(tmp_path, [{"md": md, "gd_whitened": gd}])
    (row,) = evaluate_claim(claim(CURVE_CHECK), ctx).as_dict()["evidence"]
    d = np.array([-2.0 - -1.5, -3.2 - -2.9, -3.1 - -2.7])
    assert row["n"] == 3 and row["estimate"] == pytest.approx(d.mean())
    assert "gd_whitened broke down before the end in 1 of 4 curves (left out)" in row["detail"]
    assert row["estimate"] < 0 and row["verdict"] != R.GENERALISES
    # fewer than 3 complete pairs (a t test cannot reach alpha): the row is not tested (a broken b is not a win)
    gd_broken = [[-5.0, -1.0], [-5.0, -1.0], [-5.0, -3.5, -2.9], [-5.0, -3.5, -2.7]]
    result = evaluate_claim(claim(CURVE_CHECK), _curves_ctx(tmp_path / "two", [{"md": md, "gd_whitened": gd_broken}]))
    assert result.verdict == NOT_RUN and result.evidence == []
    (why,) = result.skipped
    assert why.startswith("g / 5w5s: ")
    assert "2 pairs of curves (the test needs 3)" in why and "gd_whitened broke down before step 2 in 2 of 4" in why

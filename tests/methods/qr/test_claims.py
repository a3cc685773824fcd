"""The qr family's claim kinds on constructed runs whose answers are computed by hand: the fold-blocked paired test
(df = n - folds) as row fields, the paper's bold rule deciding which rows the paper claims, our mean against the
paper's by the prediction interval (the paper's ± a std with ddof 0 over 3 repeats), and effect contrasts between
protocols (Welch)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from uqcal.metrics import replication as R
from uqcal.metrics.stats import fold_blocked_test, pairs_for_power
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference
from uqcal.pipeline.report.claims import evaluate_claim
from uqcal.pipeline.report.verdicts import NOT_RUN, PAPER_DATA, STAND_INS, ClaimContext

RELATIONS = {"concrete": DatasetRelation("concrete", "Concrete Strength", "same"),
             "boston": DatasetRelation("boston", "Boston Housing", "same"),
             "diabetes": DatasetRelation("diabetes", None, "stand_in", "a small UCI set")}
# QR's save_stats: np.std (ddof 0) over the 3 repeats of the 5-fold mean; "Bold represents there is no overlap
# over 1 std interval".
UNCERTAINTY = {"kind": "std", "ddof": 0, "n": 3}
MARKS = {"bold_rule": "no overlap of the mean ± 1 std intervals"}
Z95 = stats.norm.ppf(0.975)


def _half(se_p, se_r, row):
    """The prediction interval's half width by hand: t at the Welch-Satterthwaite df of the two ses (REPLICATION-
    STATISTICS §3), the normal quantile where neither has a df."""
    df_p, df_r = row.get("paper_df"), row.get("df")
    parts = [(se_p, df_p), (se_r, df_r)]
    if all(df is None for _, df in parts):
        return Z95 * math.hypot(se_p, se_r)
    denom = sum(se ** 4 / df for se, df in parts if df is not None)
    df = (se_p ** 2 + se_r ** 2) ** 2 / denom
    return stats.t.ppf(0.975, df) * math.hypot(se_p, se_r)


def _context(per_seed: dict[tuple[str, str, str], list[float]], reference=None, claim_runs=None,
             metric="ce") -> ClaimContext:
    runs = pd.DataFrame(
        [(d, s, m, seed, metric, v) for (d, s, m), values in per_seed.items() for seed, v in enumerate(values)],
        columns=["dataset", "setting", "method", "seed", "metric", "value"])
    summary = (runs.groupby(["dataset", "setting", "method", "metric"])["value"]
               .agg(mean="mean", std="std", n="size").reset_index())
    return ClaimContext("qr", summary, runs, reference or Reference("qr"), RELATIONS, None, claim_runs, "test")


def _reference(records, marks=MARKS, uncertainty=UNCERTAINTY) -> Reference:
    table = {"id": "table1", "table": "Table 1", "caption": "c", "uncertainty": uncertainty,
             "records": [{"setting": "cv5", "metric": "ce", **r} for r in records]}
    if marks:
        table["marks"] = marks
    return Reference("qr", tables={"table1": table})


def _claim(check, cid="c"):
    return {"id": cid, "text": "t", "check": check}


def _rows(result) -> dict:
    return {row["dataset"]: row for row in result.as_dict()["evidence"]}


def _blocked_se(d: np.ndarray, folds: int = 5) -> float:
    """The fold-blocked se from a least-squares fit on fold indicators: sqrt(s^2 / n), s^2 = RSS / (n - folds)."""
    design = np.eye(folds)[np.arange(d.size) % folds]
    residual = d - design @ np.linalg.lstsq(design, d, rcond=None)[0]
    return float(np.sqrt(residual @ residual / (d.size - folds) / d.size))


def test_fold_blocked_test_by_hand_and_against_least_squares():
    # 2 folds x 2 repeats: d = 1, 10, 3, 12 (seed k -> fold k % 2). Fold means 2 and 11, residuals +-1:
    # s^2 = 4 / (4 - 2) = 2, se = sqrt(2 / 4), t = 6.5 / se; df = 2, where the t distribution's two-sided
    # p-value has the closed form 1 - |t| / sqrt(t^2 + 2).
    res = fold_blocked_test({0: 1.0, 1: 10.0, 2: 3.0, 3: 12.0}, folds=2)
    t = 6.5 / np.sqrt(0.5)
    assert res["df"] == 2 and res["se"] == pytest.approx(np.sqrt(0.5))
    assert res["p_two"] == pytest.approx(1 - t / np.sqrt(t**2 + 2), rel=1e-9)
    rng = np.random.default_rng(1)
    d = np.array([0.0, 5.0, -3.0, 2.0, -40.0] * 3) + rng.normal(-1.0, 0.5, 15)
    res = fold_blocked_test(dict(enumerate(d)), folds=5)
    assert res["se"] == pytest.approx(_blocked_se(d), rel=1e-12)
    assert res["p_two"] == pytest.approx(2 * stats.t.sf(abs(d.mean() / _blocked_se(d)), 10), rel=1e-9)
    assert res["p_two"] < 1e-6 < stats.ttest_1samp(d, 0).pvalue  # the plain paired test drowns in fold effects
    with pytest.raises(ValueError, match="repeated folds"):
        fold_blocked_test({0: 1.0, 1: 2.0}, folds=5)


def test_fold_blocked_compare_rows_carry_the_blocked_test_and_the_papers_difference():
    folds = np.array([0.0, 5.0, -3.0, 2.0, 40.0])
    rng = np.random.default_rng(4)
    base = np.tile(20 + folds, 3) + rng.normal(0, 0.3, 15)
    diffs = np.tile([3.0, -2.0, 0.0, 1.0, -1.0], 3) - 2.0 + rng.normal(0, 1.0, 15)  # fold-dependent, noisy
    per_seed = {("concrete", "cv5", "dvi"): list(base), ("concrete", "cv5", "dvi_qr"): list(base + diffs),
                ("diabetes", "cv5", "dvi"): list(base), ("diabetes", "cv5", "dvi_qr"): list(base - diffs)}
    reference = _reference([{"dataset": "Concrete Strength", "method": m, "mean": v, "std": 2.0}
                            for m, v in (("dvi", 21.35), ("dvi_qr", 19.96))], marks=None)
    check = {"kind": "fold_blocked_compare", "metric": "ce", "a": "dvi_qr", "b": "dvi", "direction": "less",
             "paper_table": "table1"}
    result = evaluate_claim(_claim(check), _context(per_seed, reference))
    concrete, diabetes = _rows(result)["concrete"], _rows(result)["diabetes"]
    se = _blocked_se(diffs)
    assert concrete["estimate"] == pytest.approx(diffs.mean()) and concrete["se"] == pytest.approx(se, rel=1e-12)
    assert (concrete["df"], concrete["n"], concrete["runs"]) == (10, 15, 15)  # df = n - folds
    assert concrete["p"] == pytest.approx(2 * stats.t.sf(abs(diffs.mean()) / se, 10), rel=1e-9)
    assert concrete["test"] == "fold-blocked paired t (df 10)"
    # the paper's -1.39 with the se of two cells whose ± is a std (ddof 0) over 3 repeats: each 2 / sqrt(2)
    paper_se = math.hypot(2 / math.sqrt(2), 2 / math.sqrt(2))
    assert concrete["paper_estimate"] == pytest.approx(-1.39) and concrete["paper_se"] == pytest.approx(paper_se)
    half = _half(paper_se, se, concrete)
    assert (concrete["pi_low"], concrete["pi_high"]) == pytest.approx((-1.39 - half, -1.39 + half))
    # runs for 80 % power at the paper's difference, with the within-fold scatter and 5 blocks
    needed = pairs_for_power(1.39 / (se * math.sqrt(15)), blocks=5)
    assert concrete["n80_at_paper_effect"] == pytest.approx(needed)
    assert concrete["data"] == PAPER_DATA and diabetes["data"] == STAND_INS
    assert diabetes["paper_estimate"] is None and diabetes["pi_low"] is None
    assert diabetes["estimate"] == pytest.approx(-diffs.mean())
    assert concrete["p"] < 0.001 and concrete["side"] == "inside" and concrete["verdict"] == R.REPRODUCED
    assert diabetes["verdict"] == R.DOES_NOT_GENERALISE and result.verdict == R.REPRODUCED
    # the other direction flips the verdicts
    up = _rows(evaluate_claim(_claim({**check, "direction": "greater"}), _context(per_seed, reference)))
    assert up["concrete"]["direction"] == 1 and up["concrete"]["verdict"] == R.CONTRADICTED
    assert up["diabetes"]["verdict"] == R.GENERALISES
    # a list of tables: each method from the first table that has it
    reference.tables["table4"] = {"id": "table4", "table": "Table 4", "caption": "c", "uncertainty": UNCERTAINTY,
                                  "records": [{"dataset": "Concrete Strength", "setting": "cv5", "method": "dvi_qr",
                                               "metric": "ce", "mean": 30.0, "std": 2.0}]}
    listed = evaluate_claim(_claim({**check, "paper_table": ["table4", "table1"]}), _context(per_seed, reference))
    assert _rows(listed)["concrete"]["paper_estimate"] == pytest.approx(30.0 - 21.35)


def test_fold_blocked_compare_needs_repeats_and_the_declared_runs():
    base = list(np.arange(15.0))
    per_seed = {("concrete", "cv5", "dvi"): base, ("concrete", "cv5", "dvi_qr"): [v - 1 for v in base]}
    check = {"kind": "fold_blocked_compare", "metric": "ce", "a": "dvi_qr", "b": "dvi"}
    result = evaluate_claim(_claim(check), _context(per_seed, claim_runs={"default": 5}))
    assert result.verdict == NOT_RUN and result.skipped == ["concrete / cv5: 5 runs over 5 folds (the test needs "
                                                            "7)"]  # folds + 2: df = n - folds >= 2
    result = evaluate_claim(_claim(check), _context(per_seed, claim_runs={"default": 20}))
    assert result.skipped == ["concrete / cv5: 15 shared runs of the 20 declared"]
    # no spread within folds: the sign test's 2 / 2^n, not p = 0
    row = evaluate_claim(_claim(check), _context(per_seed, claim_runs={"default": 10})).as_dict()["evidence"][0]
    assert row["se"] == 0.0 and row["p"] == pytest.approx(2 / 2**10) and "sign test" in row["detail"]


def test_only_the_rows_the_paper_bolds_are_claimed():
    rng = np.random.default_rng(5)
    per_seed = {}
    for dataset in ("concrete", "boston"):
        base = 20 + rng.normal(0, 1, 15)
        per_seed[(dataset, "cv5", "dvi")] = list(base)
        per_seed[(dataset, "cv5", "dvi_qr")] = list(base - 3 + rng.normal(0, 0.5, 15))
    records = [{"dataset": "Concrete Strength", "method": "dvi", "mean": 21.35, "std": 2.0},
               {"dataset": "Concrete Strength", "method": "dvi_qr", "mean": 15.0, "std": 1.0},  # [19.35, 23.35] vs
               {"dataset": "Boston Housing", "method": "dvi", "mean": 22.0, "std": 2.0},        # [14, 16]: bold
               {"dataset": "Boston Housing", "method": "dvi_qr", "mean": 20.61, "std": 1.5}]    # overlap: not bold
    check = {"kind": "fold_blocked_compare", "paper_rows": "bold", "paper_table": "table1", "direction": "less",
             "metric": "ce", "a": "dvi_qr", "b": "dvi", "settings": ["cv5"], "scope": "majority"}
    result = evaluate_claim(_claim(check), _context(per_seed, _reference(records)))
    assert list(_rows(result)) == ["concrete"]
    assert result.skipped == ["boston / cv5: the paper does not mark this difference (its 1-std intervals overlap)"]
    # where the table does not say the rule applies, every row is the paper's claim
    result = evaluate_claim(_claim(check), _context(per_seed, _reference(records, marks=None)))
    assert set(_rows(result)) == {"concrete", "boston"} and result.skipped == []
    # a stand-in has no paper cells: the rule does not exclude it
    stand = {("diabetes", "cv5", m): v for (_, _, m), v in per_seed.items()}
    result = evaluate_claim(_claim(check), _context(stand, _reference(records)))
    assert list(_rows(result)) == ["diabetes"]


def test_within_paper_repeat_spread_is_a_prediction_interval_for_our_mean():
    # 3 repeats x 5 folds: fold values differ a lot, repeat means (10, 11, 12) little.
    folds = np.array([2.0, 6.0, 10.0, 14.0, 18.0])
    values = np.concatenate([folds, folds + 1, folds + 2])
    check = {"kind": "within_paper_repeat_spread", "paper_table": "table1", "metric": "ce", "methods": ["dvi"],
             "folds": 5}
    per_seed = {("concrete", "cv5", "dvi"): list(values), ("diabetes", "cv5", "dvi"): list(values + 50)}

    def run(mean, std):
        ref = _reference([{"dataset": "Concrete Strength", "method": "dvi", "mean": mean, "std": std}])
        return evaluate_claim(_claim(check), _context(per_seed, ref))

    result = run(12.5, 2.0)
    (row,) = result.as_dict()["evidence"]  # the stand-in is not compared
    ours_se = 1 / math.sqrt(3)  # std([10, 11, 12], ddof 1) / sqrt(3 repeats), not the 15 runs' scatter
    paper_se = 2.0 / math.sqrt(2)  # std ddof 0 over n = 3: sd = 2 sqrt(3/2), se = sd / sqrt(3)
    assert row["hypothesis"] == "match" and row["estimate"] == pytest.approx(11.0)
    assert row["se"] == pytest.approx(ours_se) and row["df"] == 2 and (row["n"], row["runs"]) == (15, 15)
    assert row["paper_estimate"] == 12.5 and row["paper_se"] == pytest.approx(paper_se)
    half = _half(paper_se, ours_se, row)
    assert (row["pi_low"], row["pi_high"]) == pytest.approx((12.5 - half, 12.5 + half))
    assert row["verdict"] == R.CONSISTENT and result.verdict == R.CONSISTENT and "inside the interval" in row["detail"]
    # a tight paper ±: z = 1.96 put 11 below 12.5 - 1.96 sqrt(0.02 + 1/3) = 11.335, but both ses rest on 2 df:
    # t at their Welch df widens the interval, and 11 is inside it (issue 47, small-sample honesty)
    row = run(12.5, 0.2).as_dict()["evidence"][0]
    assert row["pi_low"] == pytest.approx(12.5 - _half(0.2 / math.sqrt(2), ours_se, row))
    assert row["pi_low"] < 11.0 < 11.335 and row["verdict"] == R.CONSISTENT
    row = run(18.0, 0.2).as_dict()["evidence"][0]  # far above ours (lower CE is better)
    assert row["pi_low"] > 11.0 and row["verdict"] == R.CONTRADICTED and "better than the paper's" in row["detail"]
    row = run(5.0, 0.2).as_dict()["evidence"][0]
    assert row["pi_high"] < 11.0 and row["verdict"] == R.CONTRADICTED and "worse than the paper's" in row["detail"]
    # runs fixed in advance: 10 declared runs are the first 2 repeats (means 10 and 11)
    ref = _reference([{"dataset": "Concrete Strength", "method": "dvi", "mean": 12.5, "std": 2.0}])
    row = evaluate_claim(_claim(check), _context(per_seed, ref, {"default": 10})).as_dict()["evidence"][0]
    assert row["estimate"] == pytest.approx(10.5) and row["runs"] == 10 and row["df"] == 1


def test_within_paper_spread_reads_the_papers_plus_minus_as_its_uncertainty_block_says():
    # RIO Table 1: mean ± std over 100 runs (ddof 1): se = 0.39 / 10
    rng = np.random.default_rng(6)
    ours = 6.80 + rng.normal(0, 0.3, 10)
    per_seed = {("concrete", "holdout", "svgp"): list(ours), ("diabetes", "holdout", "svgp"): list(ours + 40)}
    ref = Reference("rio", tables={"table1": {"id": "table1", "table": "Table 1", "caption": "c",
                                              "uncertainty": {"kind": "std", "ddof": 1, "n": 100},
                                              "records": [{"dataset": "Concrete Strength", "setting": "holdout",
                                                           "method": "svgp", "metric": "ce", "mean": 6.87,
                                                           "std": 0.39}]}})
    check = {"kind": "within_paper_spread", "paper_table": "table1", "metric": "ce", "methods": ["svgp"]}
    (row,) = evaluate_claim(_claim(check), _context(per_seed, ref)).as_dict()["evidence"]
    se = ours.std(ddof=1) / math.sqrt(10)
    assert row["estimate"] == pytest.approx(ours.mean()) and row["se"] == pytest.approx(se)
    assert row["paper_se"] == pytest.approx(0.039) and (row["n"], row["runs"], row["df"]) == (10, 10, 9)
    assert row["pi_high"] == pytest.approx(6.87 + _half(0.039, se, row))
    inside = row["pi_low"] <= ours.mean() <= row["pi_high"]
    assert row["verdict"] == (R.CONSISTENT if inside else R.CONTRADICTED)
    # a cell without a printed ± is listed, not compared
    ref.tables["table1"]["records"][0]["std"] = None
    result = evaluate_claim(_claim(check), _context(per_seed, ref))
    assert result.verdict == NOT_RUN and result.skipped == ["concrete / holdout / svgp: the paper prints no ± for "
                                                            "this cell"]


def test_effect_contrast_is_welchs_t_on_the_two_paired_effects():
    rng = np.random.default_rng(0)
    base = {"cv5": 25 + rng.normal(0, 2, 15), "cv5_shuffled": 6 + rng.normal(0, 1, 15)}
    gain = {"cv5": 9 + rng.normal(0, 2, 15), "cv5_shuffled": 1 + rng.normal(0, 1, 12)}
    per_seed = {}
    for setting in base:
        n = gain[setting].size
        per_seed[("concrete", setting, "dvi")] = list(base[setting][:n])
        per_seed[("concrete", setting, "dvi_qr")] = list(base[setting][:n] - gain[setting])
    check = {"kind": "effect_contrast", "metric": "ce", "a": "dvi_qr", "b": "dvi",
             "settings": ["cv5", "cv5_shuffled"]}
    (row,) = evaluate_claim(_claim(check), _context(per_seed)).as_dict()["evidence"]
    g1, g2 = gain["cv5"], gain["cv5_shuffled"]
    v1, v2 = g1.var(ddof=1) / 15, g2.var(ddof=1) / 12
    welch = stats.ttest_ind(g1, g2, equal_var=False)
    assert row["estimate"] == pytest.approx(g1.mean() - g2.mean()) and row["se"] == pytest.approx(math.sqrt(v1 + v2))
    assert row["df"] == pytest.approx((v1 + v2) ** 2 / (v1**2 / 14 + v2**2 / 11))
    assert row["p"] == pytest.approx(welch.pvalue, rel=1e-9)
    assert (row["n"], row["runs"]) == (27, 12) and row["verdict"] == R.GENERALISES
    change = -g1.mean()
    assert f"[{change:+.3g}, {change / base['cv5'].mean():+.0%}]" in row["detail"]
    reversed_check = {**check, "settings": ["cv5_shuffled", "cv5"]}
    assert evaluate_claim(_claim(reversed_check), _context(per_seed)).verdict == R.DOES_NOT_GENERALISE


def test_effect_contrast_with_fixed_folds_uses_the_fold_blocked_error():
    rng = np.random.default_rng(3)
    fold_gain = np.array([1.0, 2.0, 1.0, 0.0, 41.0])
    gain_cv5 = np.tile(fold_gain, 3) + rng.normal(0, 0.5, 15)
    gain_shuffled = 1 + rng.normal(0, 1, 15)
    base = 20 + rng.normal(0, 1, 15)
    per_seed = {("concrete", "cv5", "dvi"): list(base), ("concrete", "cv5", "dvi_qr"): list(base - gain_cv5),
                ("concrete", "cv5_shuffled", "dvi"): list(base),
                ("concrete", "cv5_shuffled", "dvi_qr"): list(base - gain_shuffled)}
    check = {"kind": "effect_contrast", "metric": "ce", "a": "dvi_qr", "b": "dvi",
             "settings": ["cv5", "cv5_shuffled"], "fixed_folds": ["cv5"]}
    (row,) = evaluate_claim(_claim(check), _context(per_seed)).as_dict()["evidence"]
    v1, df1 = _blocked_se(gain_cv5) ** 2, 10  # fold-blocked: df = 15 - 5
    v2, df2 = gain_shuffled.var(ddof=1) / 15, 14
    df = (v1 + v2) ** 2 / (v1**2 / df1 + v2**2 / df2)
    t = (gain_cv5.mean() - gain_shuffled.mean()) / math.sqrt(v1 + v2)
    assert row["se"] == pytest.approx(math.sqrt(v1 + v2)) and row["df"] == pytest.approx(df)
    assert row["p"] == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9)
    plain = evaluate_claim(_claim({**check, "fixed_folds": []}), _context(per_seed)).as_dict()["evidence"][0]
    assert plain["df"] == pytest.approx((gain_cv5.var(ddof=1) / 15 + v2) ** 2
                                        / ((gain_cv5.var(ddof=1) / 15) ** 2 / 14 + v2**2 / 14))
    assert plain["p"] > row["p"]  # fold effects counted as noise

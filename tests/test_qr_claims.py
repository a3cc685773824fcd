"""The qr family's claim kinds (uqcal.pipeline.report.claims): our spread read as the paper's, and effect contrasts
between protocols, on constructed inputs whose answers are computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from uqcal.pipeline.reference import DatasetRelation, Reference
from uqcal.pipeline.report.claims import HELD, NOT_HELD, ClaimContext, evaluate_claim

RELATIONS = {"concrete": DatasetRelation("concrete", "Concrete Strength", "same"),
             "diabetes": DatasetRelation("diabetes", None, "stand_in")}


def _context(per_seed: dict[tuple[str, str, str], list[float]], reference=None) -> ClaimContext:
    runs = pd.DataFrame(
        [(d, s, m, seed, "ce", v) for (d, s, m), values in per_seed.items() for seed, v in enumerate(values)],
        columns=["dataset", "setting", "method", "seed", "metric", "value"])
    summary = (runs.groupby(["dataset", "setting", "method", "metric"])["value"]
               .agg(mean="mean", std="std", n="size").reset_index())
    return ClaimContext("qr", summary, runs, reference or Reference("qr"), RELATIONS)


def _claim(check):
    return {"id": "c", "text": "t", "check": check}


def test_within_paper_repeat_spread_gives_our_spread_the_paper_way():
    # 3 repeats x 5 folds: fold values differ a lot, repeat means (10, 11, 12) little.
    folds = np.array([2.0, 6.0, 10.0, 14.0, 18.0])
    values = np.concatenate([folds, folds + 1, folds + 2])
    reference = Reference("qr", tables={"table1": {"id": "table1", "records": [
        {"dataset": "Concrete Strength", "setting": "cv5", "method": "dvi", "metric": "ce", "mean": 12.5, "std": 2.0}]}})
    ctx = _context({("concrete", "cv5", "dvi"): list(values), ("diabetes", "cv5", "dvi"): list(values + 50)},
                   reference)
    check = {"kind": "within_paper_repeat_spread", "paper_table": "table1", "metric": "ce", "methods": ["dvi"]}
    res = evaluate_claim(_claim(check), ctx)
    assert res.verdict == HELD and len(res.evidence) == 1  # the stand-in is not compared
    # mean 11, |11 - 12.5| <= 2; our spread: np.std([10, 11, 12]) = sqrt(2/3), not the 15-run std (~5.9)
    assert f"± {np.sqrt(2 / 3):.3f} (3 repeats)" in res.evidence[0].detail
    reference.tables["table1"]["records"][0]["std"] = 1.0
    assert evaluate_claim(_claim(check), ctx).verdict == NOT_HELD


def test_effect_contrast_compares_paired_effects_between_settings():
    rng = np.random.default_rng(0)
    base = {"cv5": 25 + rng.normal(0, 2, 15), "cv5_shuffled": 6 + rng.normal(0, 1, 15)}
    gain = {"cv5": 9 + rng.normal(0, 2, 15), "cv5_shuffled": 1 + rng.normal(0, 1, 15)}
    per_seed = {}
    for setting in base:
        per_seed[("concrete", setting, "dvi")] = list(base[setting])
        per_seed[("concrete", setting, "dvi_qr")] = list(base[setting] - gain[setting])
    check = {"kind": "effect_contrast", "metric": "ce", "a": "dvi_qr", "b": "dvi",
             "settings": ["cv5", "cv5_shuffled"]}
    res = evaluate_claim(_claim(check), _context(per_seed))
    assert res.verdict == HELD
    expected = stats.ttest_ind(gain["cv5"], gain["cv5_shuffled"], equal_var=False, alternative="greater").pvalue
    assert res.evidence[0].pvalue_one_sided == pytest.approx(expected, rel=1e-9)
    change = -gain["cv5"].mean()
    assert f"[{change:+.3g}, {change / base['cv5'].mean():+.0%}]" in res.evidence[0].detail
    reversed_check = {**check, "settings": ["cv5_shuffled", "cv5"]}
    assert evaluate_claim(_claim(reversed_check), _context(per_seed)).verdict == NOT_HELD


def test_fold_blocked_test_by_hand_and_against_least_squares():
    from uqcal.pipeline.report.claims import fold_blocked_test

    # 2 folds x 2 repeats: d = 1, 10, 3, 12 (seed k -> fold k % 2). Fold means 2 and 11, residuals +-1:
    # s^2 = 4 / (4 - 2) = 2, se = sqrt(2 / 4), t = 6.5 / se; df = 2, where the t distribution's two-sided
    # p-value has the closed form 1 - |t| / sqrt(t^2 + 2).
    res = fold_blocked_test({0: 1.0, 1: 10.0, 2: 3.0, 3: 12.0}, folds=2)
    t = 6.5 / np.sqrt(0.5)
    assert res["df"] == 2 and res["se"] == pytest.approx(np.sqrt(0.5))
    assert res["p_two"] == pytest.approx(1 - t / np.sqrt(t**2 + 2), rel=1e-9)
    # 5 folds x 3 repeats, large fold effects: residuals from a least-squares fit on fold indicators.
    rng = np.random.default_rng(1)
    d = np.array([0.0, 5.0, -3.0, 2.0, -40.0] * 3) + rng.normal(-1.0, 0.5, 15)
    res = fold_blocked_test(dict(enumerate(d)), folds=5)
    design = np.eye(5)[np.arange(15) % 5]
    residual = d - design @ np.linalg.lstsq(design, d, rcond=None)[0]
    se = np.sqrt(residual @ residual / 10 / 15)
    assert res["se"] == pytest.approx(se, rel=1e-12)
    assert res["p_two"] == pytest.approx(2 * stats.t.sf(abs(d.mean() / se), 10), rel=1e-9)
    assert res["p_two"] < 1e-6 < stats.ttest_1samp(d, 0).pvalue  # the plain paired test drowns in fold effects
    with pytest.raises(ValueError, match="repeated folds"):
        fold_blocked_test({0: 1.0, 1: 2.0}, folds=5)


def test_fold_blocked_compare_claim_outcomes():
    folds = np.array([0.0, 5.0, -3.0, 2.0, 40.0])
    rng = np.random.default_rng(2)
    base = np.tile(20 + folds, 3) + rng.normal(0, 0.3, 15)
    per_seed = {("concrete", "cv5", "dvi"): list(base), ("concrete", "cv5", "dvi_qr"): list(base - 2.0),
                ("diabetes", "cv5", "dvi"): list(base), ("diabetes", "cv5", "dvi_qr"): list(base + 2.0)}
    check = {"kind": "fold_blocked_compare", "metric": "ce", "a": "dvi_qr", "b": "dvi", "direction": "less"}
    res = evaluate_claim(_claim(check), _context(per_seed))
    assert [e.outcome for e in res.evidence] == ["better", "worse"] and res.verdict == NOT_HELD
    assert "fold-blocked paired t (fixed folds, df 10)" in res.evidence[0].detail
    assert res.by_data["paper's data"][0] == HELD
    res = evaluate_claim(_claim({**check, "direction": "greater"}), _context(per_seed))
    assert [e.outcome for e in res.evidence] == ["worse", "better"]


def test_effect_contrast_with_fixed_folds_uses_the_fold_blocked_error():
    # cv5: a gain of 9 on average but fold-dependent (fold effects are fixed: only the within-fold scatter is
    # noise); shuffled: a gain of 1. Reference: se from a least-squares fit on fold indicators, Welch df.
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
    res = evaluate_claim(_claim(check), _context(per_seed))
    design = np.eye(5)[np.arange(15) % 5]
    residual = gain_cv5 - design @ np.linalg.lstsq(design, gain_cv5, rcond=None)[0]
    v1, df1 = residual @ residual / 10 / 15, 10
    v2, df2 = gain_shuffled.var(ddof=1) / 15, 14
    t = (gain_cv5.mean() - gain_shuffled.mean()) / np.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1**2 / df1 + v2**2 / df2)
    assert res.evidence[0].pvalue_one_sided == pytest.approx(stats.t.sf(t, df), rel=1e-9)
    assert res.verdict == HELD and "cv5: fold-blocked se" in res.evidence[0].detail
    plain = evaluate_claim(_claim({**check, "fixed_folds": []}), _context(per_seed))
    assert plain.evidence[0].pvalue_one_sided > res.evidence[0].pvalue_one_sided  # fold effects counted as noise


def test_fold_blocked_compare_names_the_runs_that_detect_the_papers_difference():
    from uqcal.metrics.stats import pairs_for_power

    folds = np.array([0.0, 5.0, -3.0, 2.0, 40.0])
    rng = np.random.default_rng(4)
    base = np.tile(20 + folds, 3) + rng.normal(0, 0.3, 15)
    diffs = np.tile([3.0, -2.0, 0.0, 1.0, -1.0], 3) + rng.normal(0, 2.0, 15)  # fold-dependent, noisy
    per_seed = {("concrete", "cv5", "dvi"): list(base), ("concrete", "cv5", "dvi_qr"): list(base + diffs)}
    reference = Reference("qr", tables={"table1": {"id": "table1", "records": [
        {"dataset": "Concrete Strength", "setting": "cv5", "method": m, "metric": "ce", "mean": v, "std": 2.0}
        for m, v in (("dvi", 21.35), ("dvi_qr", 19.96))]}})
    check = {"kind": "fold_blocked_compare", "metric": "ce", "a": "dvi_qr", "b": "dvi", "direction": "less",
             "paper_table": "table1"}
    detail = evaluate_claim(_claim(check), _context(per_seed, reference)).evidence[0].detail
    # Within-fold scatter from a least-squares fit on fold indicators (df = 15 - 5); 5 blocks.
    design = np.eye(5)[np.arange(15) % 5]
    residual = diffs - design @ np.linalg.lstsq(design, diffs, rcond=None)[0]
    needed = pairs_for_power(1.39 / np.sqrt(residual @ residual / 10), blocks=5)
    assert detail.endswith(f"; the paper's difference -1.390, which {needed:.0f} runs would detect with 80 % power")
    # A list of tables: each method's value from the first table that has it (Table 4's isotonic rows against
    # Table 1's base row); the same method in an earlier table wins.
    reference.tables["table4"] = {"id": "table4", "records": [
        {"dataset": "Concrete Strength", "setting": "cv5", "method": "dvi_qr", "metric": "ce", "mean": 30.0,
         "std": 2.0}]}
    listed = evaluate_claim(_claim({**check, "paper_table": ["table4", "table1"]}), _context(per_seed, reference))
    assert "; the paper's difference 8.650 (against the claim)" in listed.evidence[0].detail  # 30 - 21.35

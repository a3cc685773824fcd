"""The qr family's claim kinds (uqcal.report.claims): our spread read as the paper's, and effect contrasts
between protocols, on constructed inputs whose answers are computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from uqcal.report.claims import HELD, NOT_HELD, ClaimContext, evaluate_claim
from uqcal.report.reference import DatasetRelation, Reference

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

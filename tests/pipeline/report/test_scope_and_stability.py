"""Scope in words (``decided_on``) and the stability of a verdict (``stability``) on hand-built rows whose answers
are known: the claim's paper datasets counted, a verdict far from every threshold stable, one at the threshold
fragile with the runs at the paper's effect, and the same numbers on every call (fixed seed)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats

from uqcal.metrics import replication as R
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference
from uqcal.pipeline.report import html as H
from uqcal.pipeline.report.verdicts import ClaimContext, Evidence, finish

PAPER_DATASETS = [f"D{i}" for i in range(12)]


def _ctx() -> ClaimContext:
    records = [{"dataset": d, "setting": "h", "method": "a", "metric": "rmse", "mean": 1.0} for d in PAPER_DATASETS]
    reference = Reference("rio", tables={"t1": {"records": records}})
    relations = {"concrete": DatasetRelation("concrete", "D0", "same"),
                 "diamonds": DatasetRelation("diamonds", None, "stand_in", "the paper's large datasets")}
    return ClaimContext("rio", pd.DataFrame(), pd.DataFrame(), reference, relations)


def _row(dataset: str, t_stat: float, n: int = 5, paper=(-1.0, 0.3), n80=None) -> Evidence:
    se, df = 0.1, n - 1
    estimate = -t_stat * se
    test = R.RowTest("superiority", estimate, se, df, R.two_sided_pvalue(estimate, se, df), -1,
                     paper_estimate=None if dataset != "concrete" else paper[0],
                     paper_se=None if dataset != "concrete" else paper[1], paper_df=4)
    return Evidence(dataset, "", dataset, "h", test, "paired t", n, n, n80)


CLAIM = {"id": "rio_beats_nn", "text": "RIO beats NN on all 12 datasets", "check": {"kind": "less_than",
                                                                                 "paper_table": "t1"}}


def test_decided_on_counts_the_datasets_the_paper_names():
    result = finish(CLAIM, _ctx(), [_row("concrete", 8.0), _row("diamonds", 8.0)], "")
    assert result.verdict == R.REPRODUCED
    assert result.decided_on.startswith("on 1 of the 12 datasets the paper names (concrete = D0); the others need "
                                        "config/paper.yaml and downloads")
    assert "stand-ins: diamonds (stand-in for the paper's large datasets)" in result.decided_on
    assert "5 runs per row" in result.decided_on
    assert result.as_dict()["decided_on"] == result.decided_on


def test_a_verdict_far_from_every_threshold_is_stable_and_the_draw_is_deterministic():
    first = finish(CLAIM, _ctx(), [_row("concrete", 12.0)], "").stability
    again = finish(CLAIM, _ctx(), [_row("concrete", 12.0)], "").stability
    assert first == again
    assert first == {"share": 1.0, "replications": 200, "method": "parametric draw", "fragile": False,
                     "n_stable_at_paper_effect": None}


def test_a_verdict_at_the_significance_threshold_is_fragile_and_names_the_runs_at_the_papers_effect():
    # ours exactly at the critical t of 4 df: a redraw is significant with probability
    # P(T > 0) + P(T < -2 t_crit) (just over one half), so "reproduced" comes back in about half the replications
    crit = stats.t.ppf(0.975, 4) + 1e-9
    result = finish(CLAIM, _ctx(), [_row("concrete", crit, n80=23.0)], "")
    assert result.verdict == R.REPRODUCED
    expected = stats.t.sf(0, 4) + stats.t.cdf(-2 * crit, 4)
    stab = result.stability
    assert stab["share"] == pytest.approx(expected, abs=4 * math.sqrt(expected * (1 - expected) / 200))
    assert stab["fragile"] is True and stab["n_stable_at_paper_effect"] == 23


def test_the_checklist_line_shows_scope_and_fragility():
    result = finish(CLAIM, _ctx(), [_row("concrete", stats.t.ppf(0.975, 4) + 1e-9, n80=23.0)], "")
    line = H.claims_html([result])
    assert "on 1 of the 12 datasets the paper names" in line  # the line's data part is decided_on
    assert 'class="fragile"' in line and "stable from about 23 runs at the paper" in line
    assert "stability: same verdict in" in line  # the share on the line itself, not only in its details

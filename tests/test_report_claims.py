"""Claims engine on constructed inputs whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tests.test_report_tree import bo_predictions, write_run
from uqcal.core.io import write_json
from uqcal.pipeline.reference import DatasetRelation, Reference
from uqcal.pipeline.report.claims import (
    HELD,
    INCONCLUSIVE,
    NOT_HELD,
    NOT_RUN,
    PAPER_DATA,
    STAND_INS,
    ClaimContext,
    evaluate_claim,
)
from uqcal.pipeline.report.tables import fmt


def summary_of(rows):
    return pd.DataFrame(rows, columns=["dataset", "setting", "method", "metric", "mean", "std", "n"])


def ctx_of(summary, runs=None, reference=None, relations=None, results_dir=None):
    runs = runs if runs is not None else pd.DataFrame(columns=["dataset", "setting", "method", "seed", "metric", "value"])
    return ClaimContext("metareg", summary, runs, reference or Reference("metareg"), relations or {}, results_dir)


SUMMARY = summary_of(
    [
        ("ozone", "ns10", "metacal", "ece", 0.10, 0.01, 3),
        ("ozone", "ns10", "mdkl", "ece", 0.15, 0.01, 3),
        ("ozone", "ns20", "metacal", "ece", 0.08, 0.01, 3),
        ("ozone", "ns20", "mdkl", "ece", 0.07, 0.01, 3),
        ("exam", "ns10", "metacal", "ece", 0.05, 0.01, 3),
        ("exam", "ns10", "mdkl", "ece", 0.09, 0.01, 3),
    ]
)


def claim(check, cid="c"):
    return {"id": cid, "text": "t", "check": check}


def test_less_than_every_row_and_fraction():
    res = evaluate_claim(claim({"kind": "less_than", "metric": "ece", "a": "metacal", "b": "mdkl"}), ctx_of(SUMMARY))
    assert res.verdict == NOT_HELD  # ozone/ns20 breaks it
    assert [e.ok for e in res.evidence] == [True, False, True]
    assert "0.070" in res.evidence[1].detail and "0.080" in res.evidence[1].detail
    res = evaluate_claim(
        claim({"kind": "less_than", "metric": "ece", "a": "metacal", "b": "mdkl", "scope": {"at_least": 0.6}}),
        ctx_of(SUMMARY),
    )
    assert res.verdict == HELD
    res = evaluate_claim(
        claim({"kind": "less_than", "metric": "ece", "a": "metacal", "b": "mdkl", "settings": ["ns10"]}),
        ctx_of(SUMMARY),
    )
    assert res.verdict == HELD and len(res.evidence) == 2
    res = evaluate_claim(
        claim({"kind": "greater_than", "metric": "ece", "a": "mdkl", "b": "metacal", "datasets": ["exam"]}),
        ctx_of(SUMMARY),
    )
    assert res.verdict == HELD


def test_absent_method_is_not_run_never_dropped():
    res = evaluate_claim(claim({"kind": "less_than", "metric": "ece", "a": "metacal", "b": "wo_r"}), ctx_of(SUMMARY))
    assert res.verdict == NOT_RUN and "wo_r" in res.summary
    res = evaluate_claim(claim({"kind": "best", "metric": "te", "method": "metacal"}), ctx_of(SUMMARY))
    assert res.verdict == NOT_RUN


def test_best_with_significance_ties():
    seeds = range(5)
    noise = np.array([0.03, -0.02, 0.01, -0.04, 0.02])
    runs = pd.DataFrame(
        [("d", "s", "a", s, "te", 1.00 + noise[s]) for s in seeds]
        + [("d", "s", "b", s, "te", 0.99 - noise[s]) for s in seeds]
        + [("d", "s", "c", s, "te", 2.0 + 0.01 * s) for s in seeds],
        columns=["dataset", "setting", "method", "seed", "metric", "value"],
    )
    summary = (
        runs.groupby(["dataset", "setting", "method", "metric"])["value"]
        .agg(mean="mean", std="std", n="count")
        .reset_index()
    )
    strict = evaluate_claim(claim({"kind": "best", "metric": "te", "method": "a", "ties": "strict"}), ctx_of(summary, runs))
    assert strict.verdict == NOT_HELD  # b has the lower mean
    tied = evaluate_claim(claim({"kind": "best", "metric": "te", "method": "a"}), ctx_of(summary, runs))
    assert tied.verdict == HELD and "tied" in tied.evidence[0].detail
    loser = evaluate_claim(claim({"kind": "best", "metric": "te", "method": "c"}), ctx_of(summary, runs))
    assert loser.verdict == NOT_HELD and "significantly worse" in loser.evidence[0].detail


def test_monotone_and_spearman():
    summary = summary_of(
        [("ozone", s, "metacal", "te", v, 0.0, 2) for s, v in (("ns10", 0.3), ("ns20", 0.2), ("ns30", 0.25))]
    )
    res = evaluate_claim(
        claim({"kind": "monotone", "metric": "te", "method": "metacal", "settings": ["ns10", "ns20", "ns30"]}),
        ctx_of(summary),
    )
    assert res.verdict == NOT_HELD
    res = evaluate_claim(
        claim({"kind": "monotone", "metric": "te", "method": "metacal", "settings": ["ns10", "ns20"]}),
        ctx_of(summary),
    )
    assert res.verdict == HELD
    methods = ["rio", "r_i", "r_o", "y_o", "y_io", "svgp"]
    noise = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    rows = [("c", "h", m, "noise_variance", v, 0, 1) for m, v in zip(methods, noise, strict=False)]
    rows += [("c", "h", m, "rmse", v**0.5, 0, 1) for m, v in zip(methods, noise, strict=False)]  # perfectly monotone
    rows += [("d", "h", m, "noise_variance", v, 0, 1) for m, v in zip(methods, noise, strict=False)]
    rows += [("d", "h", m, "rmse", r, 0, 1) for m, r in zip(methods, [3, 1, 6, 2, 5, 4], strict=False)]
    res = evaluate_claim(
        claim({"kind": "spearman", "x": "noise_variance", "y": "rmse", "methods": methods}),
        ctx_of(summary_of(rows)),
    )
    assert [e.ok for e in res.evidence] == [True, False] and res.verdict == NOT_HELD
    rho = float(res.evidence[1].detail.split("=")[1].split(",")[0])
    assert rho == pytest.approx(0.371, abs=1e-3)  # scipy.stats.spearmanr([1..6], [3,1,6,2,5,4])


def test_within_paper_spread_uses_same_datasets_only():
    reference = Reference(
        "rio",
        tables={
            "table1": {
                "id": "table1",
                "records": [
                    {
                        "dataset": "CCS",
                        "setting": "holdout",
                        "method": "rio",
                        "metric": "rmse",
                        "mean": 5.97,
                        "std": 0.48,
                    }
                ],
            }
        },
    )
    relations = {
        "concrete": DatasetRelation("concrete", "CCS", "same"),
        "diabetes": DatasetRelation("diabetes", "CCS", "stand_in"),
    }
    summary = summary_of(
        [
            ("concrete", "holdout", "rio", "rmse", 6.40, 0.1, 3),
            ("diabetes", "holdout", "rio", "rmse", 50.0, 0.1, 3),
        ]
    )
    check = {"kind": "within_paper_spread", "paper_table": "table1", "metric": "rmse", "methods": ["rio"]}
    res = evaluate_claim(claim(check), ctx_of(summary, reference=reference, relations=relations))
    assert res.verdict == HELD and len(res.evidence) == 1
    summary.loc[0, "mean"] = 6.46
    res = evaluate_claim(claim(check), ctx_of(summary, reference=reference, relations=relations))
    assert res.verdict == NOT_HELD


def test_fewer_steps_on_curves(tmp_path):
    results = tmp_path / "results"
    fast = pd.DataFrame({"iteration": range(5), "best_so_far": [3.0, 1.0, 0.5, 0.5, 0.5]})
    slow = pd.DataFrame({"iteration": range(5), "best_so_far": [3.0, 2.0, 1.5, 1.0, 1.0]})
    for seed in range(2):
        write_run(results, "bo", "forrester", "forrester-ucb", "calibrated", seed, {"final_best": 0.5}, fast)
        write_run(results, "bo", "forrester", "forrester-ucb", "uncalibrated", seed, {"final_best": 1.0}, slow)
    summary = summary_of([("forrester", "forrester-ucb", "calibrated", "final_best", 0.5, 0, 2)])
    ctx = ClaimContext("bo", summary, pd.DataFrame(), Reference("bo"), {}, results)
    res = evaluate_claim(claim({"kind": "fewer_steps", "a": "calibrated", "b": "uncalibrated"}), ctx)
    assert res.verdict == HELD and "iteration 1 by calibrated, 3 by uncalibrated" in res.evidence[0].detail
    res = evaluate_claim(claim({"kind": "fewer_steps", "a": "uncalibrated", "b": "calibrated"}), ctx)
    assert res.verdict == NOT_HELD
    assert bo_predictions(np.random.default_rng(0), 4, 0.1)["best_so_far"].is_monotonic_decreasing


def test_unknown_kind_names_the_claim():
    with pytest.raises(ValueError, match="claims.c.check.kind"):
        evaluate_claim(claim({"kind": "bigger"}), ctx_of(SUMMARY))
    with pytest.raises(ValueError, match="missing key"):
        evaluate_claim(claim({"kind": "less_than", "metric": "ece"}), ctx_of(SUMMARY))


def test_stats_curve_greater_reads_train_stats(tmp_path):
    results = tmp_path / "results"
    for seed in range(2):
        run_dir = write_run(results, "fewshot", "g", "5w5s", "md", seed, {"acc": 50.0})
        write_json(
            run_dir / "train_stats.json",
            {"inner_elbo_curves": {"md": [[-5.0, -3.0, -2.0]], "gd": [[-5.0, -4.0, -3.5 + seed]]}},
        )
    summary = summary_of([("g", "5w5s", "md", "acc", 50.0, 0.0, 2)])
    ctx = ClaimContext("fewshot", summary, pd.DataFrame(), Reference("fewshot"), {}, results)
    check = {"kind": "stats_curve_greater", "key": "inner_elbo_curves", "a": "md", "b": "gd", "method": "md"}
    res = evaluate_claim(claim(check), ctx)  # md ends at -2.0; gd at mean(-3.5, -2.5) = -3.0
    assert res.verdict == HELD and "md -2.000 vs gd -3.000" in res.evidence[0].detail
    res = evaluate_claim(claim({**check, "a": "gd", "b": "md"}), ctx)
    assert res.verdict == NOT_HELD
    res = evaluate_claim(claim({**check, "key": "outer_loss_curve"}), ctx)
    assert res.verdict == NOT_RUN


def test_stats_curve_greater_counts_a_curve_that_broke_down_as_lower(tmp_path):
    """MD-BFSC's vanilla GD stops logging once its Sigma is not positive definite: an undefined ELBO (-inf)
    at the compared step, however high its earlier values were."""
    results = tmp_path / "results"
    run_dir = write_run(results, "fewshot", "g", "5w5s", "md", 0, {"acc": 50.0})
    write_json(run_dir / "train_stats.json",
               {"inner_elbo_curves": {"md": [[-5.0, -3.0, -2.0], [-5.0, -4.0, -3.0]],
                                      "gd": [[-5.0, -1.0], [-5.0, -3.5, -2.5]]}})
    summary = summary_of([("g", "5w5s", "md", "acc", 50.0, 0.0, 1)])
    ctx = ClaimContext("fewshot", summary, pd.DataFrame(), Reference("fewshot"), {}, results)
    check = {"kind": "stats_curve_greater", "key": "inner_elbo_curves", "a": "md", "b": "gd", "method": "md"}
    res = evaluate_claim(claim(check), ctx)
    detail = res.evidence[0].detail
    assert res.verdict == HELD, detail
    assert "gd broke down before the end in 1 of 2 curves (last defined step 1)" in detail
    assert "where gd ran all steps: md -3.000 vs gd -2.500" in detail  # the complete pair alone favours gd
    # Without the breakdown the same numbers favour gd (-2.5 > -3.0 on the complete pair): a can fail.
    write_json(run_dir / "train_stats.json",
               {"inner_elbo_curves": {"md": [[-5.0, -4.0, -3.0]], "gd": [[-5.0, -3.5, -2.5]]}})
    assert evaluate_claim(claim(check), ctx).verdict == NOT_HELD


def runs_of(rows_by_key: dict) -> pd.DataFrame:
    """{(dataset, setting, method): [values by seed]} -> the per-run long table."""
    rows = [
        (d, st, m, seed, "rmse", float(v)) for (d, st, m), values in rows_by_key.items() for seed, v in enumerate(values)
    ]
    return pd.DataFrame(rows, columns=["dataset", "setting", "method", "seed", "metric", "value"])


def paired_ctx(relations=None):
    """Three rows: a clearly below b (row 'win'), a and b indistinguishable ('tie'), a clearly above b ('loss')."""
    noise = np.array([0.3, -0.2, 0.1, -0.4, 0.2, 0.0, -0.1, 0.25])
    base = 5.0 + noise
    runs = runs_of(
        {
            ("win", "h", "a"): base - 1.0 + 0.05 * noise[::-1],
            ("win", "h", "b"): base,
            ("tie", "h", "a"): base + np.array([0.1, -0.1, 0.05, -0.05, 0.1, -0.1, 0.05, -0.05]),
            ("tie", "h", "b"): base,
            ("loss", "h", "a"): base + 1.0 + 0.05 * noise[::-1],
            ("loss", "h", "b"): base,
        }
    )
    summary = runs.groupby(["dataset", "setting", "method", "metric"])["value"].agg(mean="mean", std="std", n="count")
    return ctx_of(summary.reset_index(), runs, relations=relations)


def test_paired_rows_are_better_tie_or_worse_with_the_scipy_pvalue():
    ctx = paired_ctx()
    res = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b"}), ctx)
    outcome = {e.dataset: e.outcome for e in res.evidence}
    assert outcome == {"win": "better", "tie": "tie", "loss": "worse"}
    assert res.verdict == NOT_HELD  # 'on every dataset' with one significant contradiction
    win = next(e for e in res.evidence if e.dataset == "win")
    runs = ctx.runs
    xa = runs[(runs.dataset == "win") & (runs.method == "a")].sort_values("seed")["value"]
    xb = runs[(runs.dataset == "win") & (runs.method == "b")].sort_values("seed")["value"]
    p = stats.ttest_rel(xa, xb).pvalue
    assert f"p = {p:.3g}" in win.detail and "paired t" in win.detail and "n = 8" in win.detail
    # one-sided in the claimed direction: half the two-sided p-value
    assert win.pvalue_one_sided == pytest.approx(p / 2, rel=1e-9)
    wil = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "test": "wilcoxon"}), ctx)
    assert all("Wilcoxon" in e.detail for e in wil.evidence)


def test_scopes_decide_held_not_held_or_inconclusive():
    ctx = paired_ctx()
    check = {"kind": "less_than", "metric": "rmse", "a": "a", "b": "b"}
    only = {"datasets": ["win", "tie"]}
    # every row: one better, one tie -> cannot reject, cannot accept
    assert evaluate_claim(claim({**check, **only}), ctx).verdict == INCONCLUSIVE
    # a tie counts for "at least as good as"
    assert evaluate_claim(claim({**check, **only, "accept": "not_worse"}), ctx).verdict == HELD
    # majority of 3 rows needs 2 supporting rows: 1 better + 1 tie could still make it -> inconclusive
    assert evaluate_claim(claim({**check, "scope": "majority"}), ctx).verdict == INCONCLUSIVE
    assert evaluate_claim(claim({**check, "scope": "any_row"}), ctx).verdict == HELD
    # the reverse claim: one row better for b, one tie, one worse
    reverse = evaluate_claim(claim({**check, "a": "b", "b": "a", "scope": {"at_least": 0.9}}), ctx)
    assert reverse.verdict == NOT_HELD
    # the means-only comparison of the old engine says held on 'win' alone
    assert evaluate_claim(claim({**check, "datasets": ["win"], "test": "none"}), ctx).verdict == HELD


def test_pooled_scope_combines_rows_with_stouffer():
    ctx = paired_ctx()
    res = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "scope": "pooled",
                                "datasets": ["win", "tie"]}), ctx)
    ones = [e.pvalue_one_sided for e in res.evidence]
    expected = stats.combine_pvalues(ones, method="stouffer").pvalue
    assert f"p = {fmt(expected)}" in res.summary
    assert res.verdict == (HELD if expected < 0.05 else INCONCLUSIVE)


def test_verdicts_split_paper_data_from_stand_ins():
    relations = {"win": DatasetRelation("win", "CCS", "same"), "loss": DatasetRelation("loss", None, "stand_in")}
    ctx = paired_ctx(relations)
    res = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "a", "b": "b",
                                "datasets": ["win", "loss"]}), ctx)
    assert res.verdict == NOT_HELD
    assert res.by_data[PAPER_DATA][0] == HELD and res.by_data[STAND_INS][0] == NOT_HELD
    assert "1 of 1 rows hold" in res.by_data[PAPER_DATA][1]


def test_a_claim_over_several_pairs_and_metrics_counts_each_comparison():
    # "The residual variants generally perform better than their counterparts in both RMSE and NLPD":
    # pairs (r1, y1), (r2, y2) x metrics rmse, nlpd are four comparisons on the one row.
    noise = np.array([0.3, -0.2, 0.1, -0.4, 0.2, 0.0, -0.1, 0.25])
    jitter = np.array([0.1, -0.1, 0.05, -0.05, 0.1, -0.1, 0.05, -0.05])
    base = 5.0 + noise
    values = {
        ("rmse", "y1"): base, ("rmse", "r1"): base - 1.0 + 0.05 * noise[::-1],   # better
        ("rmse", "y2"): base, ("rmse", "r2"): base + jitter,                     # tie
        ("nlpd", "y1"): base, ("nlpd", "r1"): base - 0.5 + 0.05 * noise[::-1],   # better
        ("nlpd", "y2"): base, ("nlpd", "r2"): base + 1.0 + 0.05 * noise[::-1],   # worse
    }
    runs = pd.DataFrame([("d", "h", m, seed, metric, float(v)) for (metric, m), vs in values.items()
                         for seed, v in enumerate(vs)],
                        columns=["dataset", "setting", "method", "seed", "metric", "value"])
    summary = runs.groupby(["dataset", "setting", "method", "metric"])["value"].agg(mean="mean", std="std", n="count")
    ctx = ctx_of(summary.reset_index(), runs)
    check = {"kind": "less_than", "pairs": [["r1", "y1"], ["r2", "y2"]], "metrics": ["rmse", "nlpd"]}
    res = evaluate_claim(claim({**check, "scope": "majority"}), ctx)
    assert len(res.evidence) == 4
    outcome = {e.label: e.outcome for e in res.evidence}
    assert outcome == {"d / h: r1 vs y1, rmse": "better", "d / h: r2 vs y2, rmse": "tie",
                       "d / h: r1 vs y1, nlpd": "better", "d / h: r2 vs y2, nlpd": "worse"}
    for e in res.evidence:  # each cell is scipy's paired t-test of its own pair and metric
        a, b, metric = e.label.split(": ")[1].replace(" vs ", ",").replace(", ", ",").split(",")
        p = stats.ttest_rel(values[metric, a], values[metric, b]).pvalue
        assert f"p = {p:.3g}" in e.detail
    # a majority of 4 needs 3: two better, one tie that could go either way, one worse -> inconclusive
    assert res.verdict == INCONCLUSIVE
    assert evaluate_claim(claim({**check, "scope": "every_row"}), ctx).verdict == NOT_HELD
    assert evaluate_claim(claim({**check, "scope": "any_row"}), ctx).verdict == HELD
    # one pair and one metric is the plain comparison
    single = evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "a": "r1", "b": "y1"}), ctx)
    assert [(e.label, e.outcome) for e in single.evidence] == [("d / h", "better")]
    with pytest.raises(ValueError, match="pairs"):
        evaluate_claim(claim({"kind": "less_than", "metric": "rmse", "pairs": [["r1"]]}), ctx)


def test_a_row_on_the_papers_data_names_the_papers_difference_and_the_runs_that_detect_it():
    from uqcal.metrics.stats import pairs_for_power

    relations = {"tie": DatasetRelation("tie", "CCS", "same"), "win": DatasetRelation("win", None, "stand_in")}
    records = [{"dataset": "CCS", "setting": "h", "method": m, "metric": "rmse", "mean": v, "std": 0.5}
               for m, v in (("a", 5.97), ("b", 6.06))]
    ctx = paired_ctx(relations)
    ctx.reference = Reference("metareg", tables={"t1": {"id": "t1", "records": records}})
    check = {"kind": "less_than", "metric": "rmse", "a": "a", "b": "b", "datasets": ["tie", "win"],
             "paper_table": "t1"}
    tie, win = (next(e for e in evaluate_claim(claim(check), ctx).evidence if e.dataset == d) for d in ("tie", "win"))
    # The tie's differences are the jitter of paired_ctx; the paper's a - b = -0.09 in those units.
    sd = np.std([0.1, -0.1, 0.05, -0.05, 0.1, -0.1, 0.05, -0.05], ddof=1)
    needed = pairs_for_power(0.09 / sd)
    assert tie.outcome == "tie"
    expected = f"; the paper's difference {fmt(-0.09)}, which {needed:.0f} runs would detect with 80 % power"
    assert tie.detail.endswith(expected)
    assert "paper" not in win.detail  # a stand-in: the paper's numbers are not about this data
    # The reverse claim (b < a): the paper's own difference goes against it.
    reverse = evaluate_claim(claim({**check, "a": "b", "b": "a"}), ctx).evidence
    assert f"the paper's difference {fmt(0.09)} (against the claim), which {needed:.0f} runs" in next(
        e for e in reverse if e.dataset == "tie").detail
    with pytest.raises(ValueError, match="paper_table: 't2'"):
        evaluate_claim(claim({**check, "paper_table": "t2"}), ctx)

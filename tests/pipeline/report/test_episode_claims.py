"""Episode-paired claims (uqcal.pipeline.report.episode_claims) against direct computations and known answers: one
row per other method, paired over the test episodes of the declared runs, non-inferiority at the declared margin."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.weightstats import DescrStatsW

from uqcal.metrics import replication as R
from uqcal.metrics.classification import classification_ece, classification_mce
from uqcal.pipeline.paper_numbers import Reference
from uqcal.pipeline.report.claims import evaluate_claim
from uqcal.pipeline.report.episode_claims import compare, episode_table, pooled_errors
from uqcal.pipeline.report.results import RunFiles
from uqcal.pipeline.report.verdicts import NOT_RUN, ClaimContext


def predictions(seed: int, sharp: float, n_episodes=60, n_query=75, n_classes=5, acc=None) -> pd.DataFrame:
    """Labels drawn from softmax(2 logits) (calibrated when `sharp` = 2), or right with probability `acc`;
    the predicted probabilities are softmax(sharp logits): `sharp` moves calibration, not the argmax."""
    rng = np.random.default_rng(seed)
    rows = []
    for episode in range(n_episodes):
        logits = rng.normal(size=(n_query, n_classes))
        truth = np.exp(2 * logits)
        truth /= truth.sum(1, keepdims=True)
        label = (truth.cumsum(1) < rng.random((n_query, 1))).sum(1)
        if acc is not None:
            top = logits.argmax(1)
            label = np.where(rng.random(n_query) < acc, top, (top + rng.integers(1, n_classes, n_query)) % n_classes)
        p = np.exp(sharp * logits)
        p /= p.sum(1, keepdims=True)
        frame = pd.DataFrame({"episode": episode, "label": label, "seed": 0})
        for c in range(n_classes):
            frame[f"p{c}"] = p[:, c]
            frame[f"ts_p{c}"] = p[:, c]
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


def test_pooled_errors_equal_the_metrics_on_all_queries():
    frame = predictions(0, sharp=1.0)
    table = episode_table(frame, "raw")
    ece, mce = pooled_errors(table, np.ones((1, len(table))))
    probs, labels = frame[[f"p{c}" for c in range(5)]].to_numpy(), frame["label"].to_numpy()
    assert ece[0] == pytest.approx(classification_ece(probs, labels), abs=1e-12)
    assert mce[0] == pytest.approx(classification_mce(probs, labels), abs=1e-12)
    # integer weights = the episodes repeated
    weights = np.zeros((1, len(table)))
    weights[0, :3] = [2, 0, 1]
    repeated = pd.concat([frame[frame.episode == 0]] * 2 + [frame[frame.episode == 2]])
    assert pooled_errors(table, weights)[0][0] == pytest.approx(
        classification_ece(repeated[[f"p{c}" for c in range(5)]].to_numpy(), repeated["label"].to_numpy()), abs=1e-12)


def test_accuracy_comparison_is_scipys_paired_t_test():
    a, b = episode_table(predictions(1, 1.0, acc=0.85), "raw"), episode_table(predictions(2, 1.0, acc=0.8), "raw")
    r = compare(a, b, "acc", alpha=0.05, n_boot=100)
    assert r["p"] == pytest.approx(stats.ttest_rel(a["acc"], b["acc"]).pvalue)
    assert r["delta"] == pytest.approx(a["acc"].mean() - b["acc"].mean()) and r["n"] == 60
    assert r["se"] == pytest.approx((a["acc"] - b["acc"]).std(ddof=1) / np.sqrt(60))


def test_ece_bootstrap_separates_a_calibrated_from_an_overconfident_method_and_ties_a_copy():
    good = episode_table(predictions(3, sharp=2.0), "raw")  # calibrated by construction
    overconfident = episode_table(predictions(3, sharp=8.0), "raw")  # same labels and argmax, confidences ~1
    r = compare(good, overconfident, "ece", alpha=0.05, n_boot=500)
    assert r["p"] < 0.01 and r["a"] < r["b"]
    same = compare(good, good, "ece", alpha=0.05, n_boot=500)
    assert same["p"] == 1.0 and same["delta"] == 0.0


def _write(tmp_path, method, frames):
    for seed, frame in enumerate(frames):
        run = tmp_path / "fewshot" / "glyphs" / "5w5s" / method / f"seed{seed}"
        run.mkdir(parents=True)
        frame.drop(columns="seed").to_parquet(run / "predictions.parquet")


def _ctx(tmp_path, methods, margins=None, claim_runs=None):
    summary = pd.DataFrame([("glyphs", "5w5s", m, "acc", 0.5, None, 1) for m in methods],
                           columns=["dataset", "setting", "method", "metric", "mean", "std", "n"])
    return ClaimContext("fewshot", summary, pd.DataFrame(), Reference("fewshot", margins=margins or {}), {},
                        RunFiles.on_disk(tmp_path, "fewshot"), claim_runs, "test")


def test_episode_paired_has_one_row_per_other_method_and_tests_not_worse_at_the_margin(tmp_path):
    _write(tmp_path, "md", [predictions(10, 1.0, acc=0.80), predictions(11, 1.0, acc=0.2)])
    _write(tmp_path, "dkt", [predictions(10, 1.0, acc=0.81), predictions(11, 1.0, acc=0.9)])
    _write(tmp_path, "protonet", [predictions(10, 1.0, acc=0.6), predictions(11, 1.0, acc=0.9)])
    claim = {"id": "md_acc_not_worse", "text": "t",
             "check": {"kind": "episode_paired", "metric": "acc", "a": "md", "b": ["dkt", "protonet", "maml"],
                       "require": "not_worse", "scope": "every_row"}}
    with pytest.raises(ValueError, match=r"margins\.md_acc_not_worse.*paper_numbers.yaml"):
        evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt", "protonet"], claim_runs={"default": 1}))
    margins = {"md_acc_not_worse": {"margin": 0.03, "reason": "3 points of accuracy"}}
    result = evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt", "protonet"], margins, {"default": 1}))
    rows = {row["label"]: row for row in result.as_dict()["evidence"]}
    assert set(rows) == {"glyphs / 5w5s: vs dkt", "glyphs / 5w5s: vs protonet"}  # maml did not run: no row
    md = episode_table(predictions(10, 1.0, acc=0.80), "raw")["acc"].to_numpy()
    for other, acc in (("dkt", 0.81), ("protonet", 0.6)):
        row = rows[f"glyphs / 5w5s: vs {other}"]
        d = md - episode_table(predictions(10, 1.0, acc=acc), "raw")["acc"].to_numpy()  # seed 0 only: 1 run
        assert (row["n"], row["runs"], row["df"]) == (60, 1, 59)  # n = the episodes
        assert row["estimate"] == pytest.approx(d.mean()) and row["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(60))
        assert (row["hypothesis"], row["margin"], row["direction"]) == ("noninferiority", 0.03, 1)
        # higher accuracy is better: H1 mean(d) > -margin
        _, p_sm, _ = DescrStatsW(d).ttest_mean(value=-0.03, alternative="larger")
        assert row["p"] == pytest.approx(p_sm, rel=1e-9)
    assert rows["glyphs / 5w5s: vs protonet"]["verdict"] == R.GENERALISES
    assert result.verdict == min((r["verdict"] for r in rows.values()), key=[R.DOES_NOT_GENERALISE, R.UNDECIDED,
                                                                             R.GENERALISES].index)
    # both runs: n = 2 x 60 episodes
    both = evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt", "protonet"], margins, {"default": 2}))
    assert {(e.n, e.runs) for e in both.evidence} == {(120, 2)}
    assert {e.verdict for e in both.evidence} == {R.DOES_NOT_GENERALISE}  # seed 1: md far worse
    assert both.verdict == R.DOES_NOT_GENERALISE
    short = evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt", "protonet"], margins, {"default": 3}))
    assert short.verdict == NOT_RUN and short.skipped == ["glyphs / 5w5s: vs dkt: 2 shared runs of the 3 declared",
                                                          "glyphs / 5w5s: vs protonet: 2 shared runs of the 3 declared"]


def test_episode_paired_better_is_superiority_and_ece_is_a_bootstrap(tmp_path):
    _write(tmp_path, "md", [predictions(4, 2.0)])
    _write(tmp_path, "dkt", [predictions(4, 8.0)])
    claim = {"id": "c", "text": "t", "check": {"kind": "episode_paired", "metric": "ece", "probs": "ts", "a": "md",
                                                "b": ["dkt"], "require": "better", "n_boot": 300}}
    result = evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt"]))
    (row,) = result.as_dict()["evidence"]
    assert row["hypothesis"] == "superiority" and row["df"] is None and row["n"] == 60  # bootstrap: normal tests
    assert row["estimate"] < 0 and row["p"] < 0.01 and result.verdict == R.GENERALISES
    claim["check"].update(a="dkt", b=["md"])
    assert evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt"])).verdict == R.DOES_NOT_GENERALISE
    claim["check"].update(metric="brier")
    with pytest.raises(ValueError, match="metric"):
        evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt"]))


def test_the_same_accuracy_difference_on_every_episode_gets_the_sign_tests_p():
    a = episode_table(predictions(1, 1.0, n_episodes=8), "raw")
    a["acc"] = 0.5 + 0.0625 * np.arange(8)  # exact binary fractions: the differences are exactly equal
    b = a.copy()
    b["acc"] = a["acc"] - 0.25
    r = compare(a, b, "acc", alpha=0.05, n_boot=10)
    assert r["se"] == 0.0 and r["p"] == pytest.approx(2 / 2**8) and r["delta"] == pytest.approx(0.25)
    assert compare(a, a.copy(), "acc", alpha=0.05, n_boot=10)["p"] == 1.0

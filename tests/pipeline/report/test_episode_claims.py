"""Episode-paired claims (uqcal.pipeline.report.episode_claims) against direct computations and known answers: one
row per other method, paired over the trained models (training seeds as the unit, at least 3; fewer: not run,
the episode comparison descriptive only), non-inferiority at the declared margin."""

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


def _model_acc(seed, acc):
    return episode_table(predictions(seed, 1.0, acc=acc), "raw")["acc"].mean()


def test_episode_claims_take_trained_models_as_the_unit_and_test_not_worse_at_the_margin(tmp_path):
    # three trained models (seeds) per method; md's third is far worse than DKT's
    _write(tmp_path, "md", [predictions(10, 1.0, acc=0.80), predictions(11, 1.0, acc=0.82),
                            predictions(12, 1.0, acc=0.2)])
    _write(tmp_path, "dkt", [predictions(20, 1.0, acc=0.81), predictions(21, 1.0, acc=0.80),
                             predictions(22, 1.0, acc=0.9)])
    _write(tmp_path, "protonet", [predictions(30, 1.0, acc=0.6), predictions(31, 1.0, acc=0.62),
                                  predictions(32, 1.0, acc=0.1)])
    claim = {"id": "md_acc_not_worse", "text": "t",
             "check": {"kind": "episode_paired", "metric": "acc", "a": "md", "b": ["dkt", "protonet", "maml"],
                       "require": "not_worse", "scope": "every_row"}}
    with pytest.raises(ValueError, match=r"margins\.md_acc_not_worse.*paper_numbers.yaml"):
        evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt", "protonet"], claim_runs={"default": 3}))
    margins = {"md_acc_not_worse": {"margin": 0.03, "reason": "3 points of accuracy"}}
    result = evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt", "protonet"], margins, {"default": 3}))
    rows = {row["label"]: row for row in result.as_dict()["evidence"]}
    assert set(rows) == {"glyphs / 5w5s: vs dkt", "glyphs / 5w5s: vs protonet"}  # maml did not run: no row
    md = np.array([_model_acc(s, a) for s, a in ((10, 0.80), (11, 0.82), (12, 0.2))])
    for other, pairs in (("dkt", ((20, 0.81), (21, 0.80), (22, 0.9))), ("protonet", ((30, 0.6), (31, 0.62),
                                                                                      (32, 0.1)))):
        row = rows[f"glyphs / 5w5s: vs {other}"]
        d = md - np.array([_model_acc(s, a) for s, a in pairs])  # per trained model: its mean over the episodes
        assert (row["n"], row["runs"], row["df"]) == (3, 3, 2)  # n = the trained models, not the episodes
        assert row["estimate"] == pytest.approx(d.mean()) and row["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(3))
        assert (row["hypothesis"], row["margin"], row["direction"]) == ("noninferiority", 0.03, 1)
        # higher accuracy is better: H1 mean(d) > -margin
        _, p_sm, _ = DescrStatsW(d).ttest_mean(value=-0.03, alternative="larger")
        assert row["p"] == pytest.approx(p_sm, rel=1e-9)
    # against DKT the models disagree (md's third far worse): not shown on 3 models; ProtoNet is worse on all 3
    assert rows["glyphs / 5w5s: vs dkt"]["verdict"] in (R.UNDECIDED, R.DOES_NOT_GENERALISE)
    assert rows["glyphs / 5w5s: vs protonet"]["verdict"] == R.GENERALISES
    assert result.stability is not None and result.decided_on.startswith("ours: glyphs")
    assert "3 trained models per method" in result.decided_on


def test_one_trained_model_decides_no_fewshot_claim(tmp_path):
    # episodes are pseudo-replicates of one model: with fewer than 3 models declared the claim is not run, naming
    # the config that trains 3, and the one-model episode comparison is descriptive only
    _write(tmp_path, "md", [predictions(10, 1.0, acc=0.80)])
    _write(tmp_path, "dkt", [predictions(10, 1.0, acc=0.6)])
    claim = {"id": "md_acc_not_worse", "text": "t",
             "check": {"kind": "episode_paired", "metric": "acc", "a": "md", "b": ["dkt"], "require": "not_worse"}}
    margins = {"md_acc_not_worse": {"margin": 0.03, "reason": "3 points of accuracy"}}
    for declared in ({"default": 1}, {"default": 2}, None):
        result = evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt"], margins, declared))
        assert result.verdict == NOT_RUN and result.evidence == []
        assert result.config == "config/fewshot-seeds.yaml" == result.as_dict()["config"]
        assert "CPU-minutes" in result.as_dict()["needs"]
        assert any("descriptive only" in s and "episodes as pairs" in s for s in result.skipped) or declared == {
            "default": 2}  # 2 declared, 1 run: the row lacks its runs


def test_episode_paired_better_is_superiority_and_ece_is_pooled_per_model(tmp_path):
    _write(tmp_path, "md", [predictions(s, 2.0) for s in (4, 5, 6)])
    _write(tmp_path, "dkt", [predictions(s, 8.0) for s in (4, 5, 6)])
    claim = {"id": "c", "text": "t", "check": {"kind": "episode_paired", "metric": "ece", "probs": "ts", "a": "md",
                                                "b": ["dkt"], "require": "better", "n_boot": 300}}
    result = evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt"], claim_runs={"default": 3}))
    (row,) = result.as_dict()["evidence"]
    assert row["hypothesis"] == "superiority" and row["df"] == 2 and row["n"] == 3
    assert row["estimate"] < 0 and row["p"] < 0.05 and result.verdict == R.GENERALISES
    claim["check"].update(a="dkt", b=["md"])
    assert evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt"], claim_runs={"default": 3})).verdict == \
        R.DOES_NOT_GENERALISE
    claim["check"].update(metric="brier")
    with pytest.raises(ValueError, match="metric"):
        evaluate_claim(claim, _ctx(tmp_path, ["md", "dkt"], claim_runs={"default": 3}))


def test_the_same_accuracy_difference_on_every_episode_gets_the_sign_tests_p():
    a = episode_table(predictions(1, 1.0, n_episodes=8), "raw")
    a["acc"] = 0.5 + 0.0625 * np.arange(8)  # exact binary fractions: the differences are exactly equal
    b = a.copy()
    b["acc"] = a["acc"] - 0.25
    r = compare(a, b, "acc", alpha=0.05, n_boot=10)
    assert r["se"] == 0.0 and r["p"] == pytest.approx(2 / 2**8) and r["delta"] == pytest.approx(0.25)
    assert compare(a, a.copy(), "acc", alpha=0.05, n_boot=10)["p"] == 1.0

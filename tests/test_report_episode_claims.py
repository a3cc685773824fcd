"""Episode-paired claims (uqcal.pipeline.report.episode_claims) against direct computations and known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from uqcal.metrics.classification import classification_ece, classification_mce
from uqcal.pipeline.report.claims import ClaimContext, evaluate_claim
from uqcal.pipeline.report.episode_claims import compare, episode_table, pooled_errors


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
    assert r["outcome"] == "better" and r["delta"] == pytest.approx(a["acc"].mean() - b["acc"].mean())


def test_ece_bootstrap_separates_a_calibrated_from_an_overconfident_method_and_ties_a_copy():
    good = episode_table(predictions(3, sharp=2.0), "raw")  # calibrated by construction
    overconfident = episode_table(predictions(3, sharp=8.0), "raw")  # same labels and argmax, confidences ~1
    r = compare(good, overconfident, "ece", alpha=0.05, n_boot=500)
    assert r["outcome"] == "better" and r["p"] < 0.01 and r["a"] < r["b"]
    same = compare(good, good, "ece", alpha=0.05, n_boot=500)
    assert same["outcome"] == "tie" and same["delta"] == 0.0


def test_episode_paired_claim_reads_runs_and_applies_require(tmp_path):
    for method, sharp in (("md", 2.0), ("dkt", 8.0)):
        run = tmp_path / "fewshot" / "glyphs" / "5w5s" / method / "seed0"
        run.mkdir(parents=True)
        predictions(4, sharp).drop(columns="seed").to_parquet(run / "predictions.parquet")
    summary = pd.DataFrame([("glyphs", "5w5s", m, "ece", 0.1, None, 1) for m in ("md", "dkt")],
                           columns=["dataset", "setting", "method", "metric", "mean", "std", "n"])
    ctx = ClaimContext("fewshot", summary, pd.DataFrame(), reference=None, relations={}, results_dir=tmp_path)
    claim = {"id": "c", "text": "t", "check": {"kind": "episode_paired", "metric": "ece", "probs": "ts", "a": "md",
                                                "b": ["dkt"], "n_boot": 300}}
    result = evaluate_claim(claim, ctx)
    assert result.verdict == "held" and "better" in result.evidence[0].detail
    claim["check"].update(a="dkt", b=["md"])
    assert evaluate_claim(claim, ctx).verdict == "not held"

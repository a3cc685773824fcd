"""The shared `marginal` reference predictor: as an estimator, and on a support set without spread."""

from __future__ import annotations

import doctest
import json
import logging

import numpy as np
import pandas as pd
import pytest

from tests.conftest import method_device
from uqcal.core.predictive import NotFittedError
from uqcal.methods.api import RunContext
from uqcal.methods.reference_predictors import MarginalGaussian


def _metareg_run(tmp_path, frame: pd.DataFrame, split: dict) -> pd.DataFrame:
    spec = {"kind": "multitask_regression", "target": "y", "features": ["x"], "task": "t"}
    frame.to_parquet(tmp_path / "raw.parquet")
    (tmp_path / "split.json").write_text(json.dumps(split))
    ctx = RunContext(
        family="metareg", dataset="d", setting="s", method="marginal", seed=0, config={}, dataset_spec=spec,
        setting_params={}, family_params={}, params=dict(MarginalGaussian.defaults), run_dir=tmp_path / "run",
        split_path=tmp_path / "split.json", raw_path=tmp_path / "raw.parquet", depends_dir=None,
        device=method_device(), log=logging.getLogger("test"),
    )
    MarginalGaussian().train(ctx)
    return pd.read_parquet(ctx.run_dir / "predictions.parquet")


def test_zero_spread_support_set_gets_the_pooled_within_task_std(tmp_path):
    rng = np.random.default_rng(0)
    train = {"a": rng.normal(10, 2, 8), "b": rng.normal(-5, 3, 6)}
    test_y = np.array([4.0, 4.0, 4.0, 3.0, 6.0, 5.0])  # support = first three rows: no spread
    rows = [(t, y) for t, ys in train.items() for y in ys] + [("c", y) for y in test_y]
    frame = pd.DataFrame(rows, columns=["t", "y"]).assign(x=0.0)
    n_train = sum(len(v) for v in train.values())
    test_rows = list(range(n_train, n_train + 6))
    split = {"tasks": {"train": ["a", "b"], "val": [], "test": ["c"]},
             "test_episodes": [{"task": "c", "support": test_rows[:3], "query": test_rows[3:]},
                               {"task": "c", "support": test_rows[2:5], "query": [test_rows[5]]}]}
    pred = _metareg_run(tmp_path, frame, split)

    # Independent reference: the meta-train statistics and the pooled within-task std by hand.
    y_train = np.concatenate(list(train.values()))
    mean, std = y_train.mean(), y_train.std()
    squares = sum(((v - v.mean()) ** 2).sum() for v in train.values())
    pooled = np.sqrt(squares / sum(len(v) - 1 for v in train.values())) / std
    first, second = pred[pred["episode"] == 0], pred[pred["episode"] == 1]
    np.testing.assert_allclose(first["std"], pooled, rtol=1e-12)
    np.testing.assert_allclose(first["mean"], (4.0 - mean) / std, rtol=1e-12)
    # An episode whose support does vary keeps its own std (ddof 0, as before).
    np.testing.assert_allclose(second["std"], np.std((np.array([4.0, 3.0, 6.0]) - mean) / std), rtol=1e-12)
    assert json.loads((tmp_path / "run" / "train_stats.json").read_text())["zero_spread_support_sets"] == 1


def test_marginal_gaussian_is_the_training_targets_mean_and_std():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(30, 2)), rng.normal(5.0, 2.0, size=30)
    with pytest.raises(NotFittedError):
        MarginalGaussian().predict(X)
    prediction = MarginalGaussian().fit(X, y).predict(X[:7])
    np.testing.assert_allclose(prediction.mean, np.full(7, np.sum(y) / 30), rtol=1e-12)
    np.testing.assert_allclose(prediction.std, np.full(7, np.sqrt(np.sum((y - y.mean()) ** 2) / 30)), rtol=1e-12)
    assert MarginalGaussian(min_std=0.5).fit(X, np.full(30, 2.0)).predict(X).std[0] == 0.5  # the floor
    with pytest.raises(ValueError, match=r"MarginalGaussian\.min_std"):
        MarginalGaussian(min_std=-1.0)
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder(recurse=False).find(MarginalGaussian, "MarginalGaussian", globs={}):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0

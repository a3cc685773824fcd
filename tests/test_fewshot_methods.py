"""Every fewshot method trains and predicts end to end on synthetic glyphs (tiny), with valid outputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import uqcal.splits
from tests.fewshot_fakes import FakeContext, synthetic_glyphs, synthetic_split
from uqcal.io import read_json
from uqcal.methods.fewshot import METHODS

torch.set_num_threads(1)
TINY = {
    "train_episodes": 3,
    "width": 8,
    "n_pred_samples": 50,
    "steps_test": 5,
    "n_mc_samples": 32,
    "n_convergence_episodes": 1,
    "convergence_steps": 3,
    "convergence_mc_samples": 100,
}


@pytest.fixture(scope="module")
def data():
    table = synthetic_glyphs(n_classes=24, per_class=12, n_groups=4)
    return table, synthetic_split(table, n_way=5, k_shot=2, n_query=4, n_val=2, n_test=3)


def run(name, table, split, tmp_path, dirs):
    entry = METHODS[name]
    cls = entry.load_class()
    params = {k: v for k, v in TINY.items() if k in cls.defaults}
    method = cls({**params, **entry.overrides})
    run_dir = tmp_path / name
    ctx = FakeContext(
        table,
        split,
        method.params,
        run_dir,
        method=name,
        depends_dir=dirs.get(entry.depends_on),
        n_query_train=4,
    )
    method.train(ctx)
    dirs[name] = run_dir
    return run_dir


@pytest.mark.parametrize("name", ["md", "gd", "dkt", "protonet", "maml"])
def test_method_runs_and_predicts_distributions(name, data, tmp_path, monkeypatch):
    table, split = data
    seen_classes = []
    real_sampler = uqcal.splits.sample_fewshot_episode

    def recording_sampler(*args, **kwargs):
        episode = real_sampler(*args, **kwargs)
        seen_classes.extend(episode["classes"])
        return episode

    monkeypatch.setattr(uqcal.splits, "sample_fewshot_episode", recording_sampler)
    dirs: dict = {}
    run_dir = run(name, table, split, tmp_path, dirs)
    pred = pd.read_parquet(run_dir / "predictions.parquet")
    probs = pred[[f"p{c}" for c in range(5)]].to_numpy()
    assert len(pred) == sum(len(ep["query"]) for ep in split["test_episodes"])
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)  # predictive probabilities sum to 1
    assert probs.min() >= 0 and set(pred["label"]) <= set(range(5))
    # meta-training episodes never use a val/test class
    assert seen_classes and set(seen_classes) <= set(split["classes"]["train"])
    stats = read_json(run_dir / "train_stats.json")
    assert stats["nonfinite_steps_skipped"] == 0 and "jitter_escalations" in stats
    if name == "md":
        curves = stats["inner_elbo_curves"]
        assert len(curves["md"][0]) == len(curves["gd"][0]) == 4
        assert curves["md"][0][0] == pytest.approx(curves["gd"][0][0], rel=1e-4)  # same initial q (prior)


def test_temperature_variant_reuses_the_base_model(data, tmp_path):
    table, split = data
    dirs: dict = {}
    run("protonet", table, split, tmp_path, dirs)
    run_dir = run("protonet_ts", table, split, tmp_path, dirs)
    base = pd.read_parquet(dirs["protonet"] / "predictions.parquet")
    tempered = pd.read_parquet(run_dir / "predictions.parquet")
    cols = [f"p{c}" for c in range(5)]
    # same model, same argmax: a temperature never changes a deterministic method's decision
    np.testing.assert_array_equal(base[cols].to_numpy().argmax(1), tempered[cols].to_numpy().argmax(1))
    stats = read_json(run_dir / "train_stats.json")
    assert stats["val_nll_tempered"] <= stats["val_nll_untempered"] + 1e-9

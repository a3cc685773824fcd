"""Every fewshot method trains and predicts end to end on synthetic glyphs (tiny), with valid outputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import uqcal.data.splits
from tests.methods.fewshot.fakes import FakeContext, synthetic_glyphs, synthetic_split
from uqcal.core.io import read_json
from uqcal.methods.fewshot import METHODS

torch.set_num_threads(1)
TINY = {
    "train_episodes": 3,
    "val_every": 2,
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
    real_sampler = uqcal.data.splits.sample_fewshot_episode

    def recording_sampler(*args, **kwargs):
        episode = real_sampler(*args, **kwargs)
        seen_classes.extend(episode["classes"])
        return episode

    monkeypatch.setattr(uqcal.data.splits, "sample_fewshot_episode", recording_sampler)
    cls = METHODS[name].load_class()
    pools = []
    real_fit = cls.fit

    def recording_fit(self, X, y, *args, **kwargs):
        pools.append((X, y))
        return real_fit(self, X, y, *args, **kwargs)

    monkeypatch.setattr(cls, "fit", recording_fit)
    dirs: dict = {}
    run_dir = run(name, table, split, tmp_path, dirs)
    pred = pd.read_parquet(run_dir / "predictions.parquet")
    probs = pred[[f"p{c}" for c in range(5)]].to_numpy()
    assert len(pred) == sum(len(ep["query"]) for ep in split["test_episodes"])
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)  # predictive probabilities sum to 1
    assert probs.min() >= 0 and set(pred["label"]) <= set(range(5))
    # meta-training sees only the train classes' rows (labelled by their positions in the split's list), and
    # its episodes draw from them
    (X, y), = pools
    train_classes = split["classes"]["train"]
    rows = np.flatnonzero(np.isin(table.y, train_classes))
    np.testing.assert_array_equal(X, table.images[rows])
    assert [train_classes[c] for c in y] == table.y[rows].tolist()
    assert seen_classes and set(seen_classes) <= set(range(len(train_classes)))
    stats = read_json(run_dir / "train_stats.json")
    assert stats["nonfinite_steps_skipped"] == 0 and "jitter_escalations" in stats
    if name == "md":
        curves = stats["inner_elbo_curves"]
        assert len(curves["md"][0]) == len(curves["gd_whitened"][0]) == 4
        assert 1 <= len(curves["gd"][0]) <= 4  # the authors' GD ends early where its Sigma breaks
        for name in ("gd", "gd_whitened"):  # same initial q (the prior)
            assert curves["md"][0][0] == pytest.approx(curves[name][0][0], rel=1e-4)


def test_every_method_recalibrates_on_validation_episodes(data, tmp_path):
    """The run keeps the raw predictive (p*) and adds the recalibrated ones (ts_p*, tsm_p*, nllts_p*): valid
    distributions, a temperature never changes a deterministic method's argmax, and the metrics include
    ece_ts / mce_ts / ece_nllts with the fitted log temperatures in train_stats.json."""
    table, split = data
    dirs: dict = {}
    run_dir = run("protonet", table, split, tmp_path, dirs)
    pred = pd.read_parquet(run_dir / "predictions.parquet")
    raw = pred[[f"p{c}" for c in range(5)]].to_numpy()
    for prefix in ("ts", "tsm", "nllts"):
        probs = pred[[f"{prefix}_p{c}" for c in range(5)]].to_numpy()
        np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-9)
        np.testing.assert_array_equal(probs.argmax(1), raw.argmax(1))
    stats = read_json(run_dir / "train_stats.json")
    assert stats["n_val_episodes_recalibration"] == len(split["val_episodes"])
    assert stats["nllts_log_t"] == pytest.approx(np.log(stats["nllts_t"]))
    assert 0.05 <= stats["ts_ece_t_lik"] <= 1.995 and 0.05 <= stats["ts_ece_t_ece"] <= 1.995
    cls = METHODS["protonet"].load_class()
    method = cls({k: v for k, v in TINY.items() if k in cls.defaults})
    metrics = method.evaluate(FakeContext(table, split, method.params, run_dir, method="protonet"))
    for key in ("ece", "mce", "ece_ts", "mce_ts", "ece_nllts", "mce_nllts", "acc_ts"):
        assert 0.0 <= metrics[key] <= 1.0, key
    assert metrics["acc_ts"] == pytest.approx(metrics["acc"])  # deterministic: same argmax


def test_best_validation_checkpoint_is_the_model_after_that_many_episodes(data, tmp_path):
    """Validation every episode keeps the best one; the reference is the same training stopped after the
    kept number of episodes without validation (the same code path and seed, so exactly equal)."""
    table, split = data
    cls = METHODS["protonet"].load_class()
    params = {"train_episodes": 5, "width": 8, "val_every": 1, "n_val_check": 2, "recalibrate": False}
    first = cls(params)
    first.train(FakeContext(table, split, first.params, tmp_path / "a", method="protonet", n_query_train=4))
    stats = read_json(tmp_path / "a" / "train_stats.json")
    assert len(stats["val_acc_curve"]) == 5 and stats["best_val_episode"] in range(1, 6)
    accs = [acc for _, acc in stats["val_acc_curve"]]
    assert stats["best_val_acc"] == max(accs) and accs.index(max(accs)) + 1 == stats["best_val_episode"]
    again = cls({**params, "train_episodes": stats["best_val_episode"], "val_every": 0})
    again.train(FakeContext(table, split, again.params, tmp_path / "b", method="protonet", n_query_train=4))
    kept, reference = (torch.load(tmp_path / d / "model.pt", weights_only=False)["state_dict"] for d in "ab")
    for name, tensor in reference.items():
        assert torch.equal(kept[name], tensor), name


def test_per_run_parameters_take_this_runs_value():
    from uqcal.methods.fewshot.base import per_run_params

    params = {"kernel": {"glyphs": "cosine", "glyphs2digits": "rbf"}, "train_episodes": {"5w1s": 60, "5w5s": 40},
              "width": 8}
    assert per_run_params(params, "glyphs2digits", "5w5s") == {"kernel": "rbf", "train_episodes": 40, "width": 8}
    with pytest.raises(ValueError, match="kernel"):
        per_run_params(params, "omniglot", "5w5s")


def test_extended_config_repeats_the_default_fewshot_runs_exactly():
    """config/fewshot-extended.yaml adds runs; every default fewshot run is the same job there (reused)."""
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.config.payloads import run_job
    from uqcal.pipeline.config.runs import iter_runs

    default, extended = load_config("config/config.yaml"), load_config("config/fewshot-extended.yaml")
    runs = list(iter_runs(default, ["fewshot"]))
    extended_runs = set(iter_runs(extended, ["fewshot"]))
    assert runs and set(runs) < extended_runs
    for run in runs:
        assert run_job(default, run) == run_job(extended, run), run

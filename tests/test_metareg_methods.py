"""Every registered metareg method runs on a small synthetic split and writes the predictions schema."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uqcal.api import resolve_params
from uqcal.methods.metareg import METHODS
from uqcal.methods.metareg.episodes import EpisodeData
from uqcal.methods.metareg.metacal import MetaCal
from uqcal.methods.metareg.synthetic import episode_split, sine_tasks

torch.set_num_threads(1)
QUANTILE_COLUMNS = ["q0.025", "q0.05", "q0.16", "q0.84", "q0.95", "q0.975"]
TINY = {"epochs": 2, "eval_every": 1, "patience": 1, "iterations": 3, "n_pool_max": 100}


@pytest.fixture(scope="module")
def data():
    X, y, task = sine_tasks(20, 60, 2, seed=4)
    return EpisodeData(X, y, task, episode_split(task, n_support=10, n_query=30, seed=0))


@pytest.mark.parametrize("name", [m for m in METHODS if m != "marginal" and not m.startswith("metacal_")])
def test_method_writes_the_regression_schema(data, name):
    cls = METHODS[name].load_class()
    params = resolve_params("metareg", name, {k: v for k, v in TINY.items() if k in cls.defaults})
    frame, _, stats = cls(params).run(data, None, seed=0)
    n_rows = data.test.yq.numel()
    assert len(frame) == n_rows and {"task", "episode", "y", "mean", "std"} <= set(frame.columns)
    assert np.isfinite(frame.drop(columns="task").to_numpy(float)).all()
    assert (frame["std"] > 0).all()
    if "pit" in frame:  # non-Gaussian predictive
        assert {"logpdf", "crps", *QUANTILE_COLUMNS} <= set(frame.columns)
        assert frame["pit"].between(0, 1).all()
        q = frame[QUANTILE_COLUMNS].to_numpy()
        assert (np.diff(q, axis=1) >= -1e-9).all()
    assert stats["predict_seconds_per_task"] >= 0


def test_lambda_and_task_count_variants_are_overrides():
    assert METHODS["metacal_l001"].overrides == {"lam": 0.01}
    assert METHODS["metacal_l10"].overrides == {"lam": 1.0}
    assert METHODS["metacal_t10"].overrides == {"max_train_tasks": 10}


def test_max_train_tasks_subsets_the_training_tasks():
    X, y, task = sine_tasks(20, 60, 1, seed=4)
    split = episode_split(task, n_support=10, n_query=30, seed=0)
    data = EpisodeData(X, y, task, split, max_train_tasks=5, rng=np.random.default_rng(0))
    assert len(data.train_tasks) == 5 and set(data.train_tasks) <= set(split["tasks"]["train"])


def test_metacal_meta_training_lowers_the_validation_loss(data):
    method = MetaCal({"epochs": 40, "eval_every": 40, "patience": 1})
    torch.manual_seed(0)
    untrained = method.build(data).double()
    with torch.no_grad():
        before = float(method.loss(untrained, data.val))
    _, _, stats = method.run(data, None, seed=0)
    assert stats["best_val_loss"] < before
    assert 0 < stats["alpha"] < 1 and stats["sigma2"] > 0 and stats["beta"] > 0

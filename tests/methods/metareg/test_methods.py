"""Every registered metareg method runs on a small synthetic split and writes the predictions schema."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tests.conftest import method_device
from uqcal.methods.api import resolve_params
from uqcal.methods.metareg import METHODS
from uqcal.methods.metareg.episodes import EarlyStopping, EpisodeData, meta_train
from uqcal.methods.metareg.metacal import MetaCal
from uqcal.methods.metareg.synthetic import episode_split, sine_tasks

torch.set_num_threads(1)
QUANTILE_COLUMNS = ["q0.025", "q0.05", "q0.16", "q0.84", "q0.95", "q0.975"]
TINY = {"epochs": 2, "eval_every": 1, "patience": 1, "iterations": 3, "n_pool_max": 100}


@pytest.fixture(scope="module")
def data():
    X, y, task = sine_tasks(20, 60, 2, seed=4)
    return EpisodeData(X, y, task, episode_split(task, n_support=10, n_query=30, seed=0), device=method_device())


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
    untrained = method.build(data).to(device=data.device, dtype=torch.float64)
    with torch.no_grad():
        before = float(method.loss(untrained, data.val))
    _, _, stats = method.run(data, None, seed=0)
    assert stats["best_val_loss"] < before
    assert 0 < stats["alpha"] < 1 and stats["sigma2"] > 0 and stats["beta"] > 0


def test_pooled_ece_beside_the_per_query_set_ece():
    # Two episodes of 30 points with PIT values evenly inside (0, 0.5) and inside (0.5, 1): each query set
    # alone is badly calibrated, p_hat - p = p for p <= 0.5 and 1 - p above (or the mirror image), so
    # ECE = (.1+.2+.3+.4+.5+.4+.3+.2+.1) / 9 = 2.5 / 9 per episode; pooled, the 60 values are evenly spread
    # ((i + 0.5) / 60), p_hat(p) = p exactly at every level and the pooled ECE is 0.
    from uqcal.methods.api import get_family

    pit = (np.arange(60) + 0.5) / 60
    pred = pd.DataFrame({
        "task": "a", "episode": np.repeat([0, 1], 30), "y": 0.0, "mean": 0.0, "pit": pit, "logpdf": 0.0,
    })
    metrics = get_family("metareg").evaluate(pred)
    assert metrics["ece"] == pytest.approx(2.5 / 9, abs=1e-12)
    assert metrics["ece_pooled"] == pytest.approx(0.0, abs=1e-12)
    assert metrics["n_query"] == 30 and metrics["n_query_pooled"] == 60  # the report's floors use these


def _stop(curve, **rule):
    stopper = EarlyStopping(**rule)
    for step, value in curve:
        if stopper.due(step) and stopper.update(step, value, {"step": step}):
            return step, stopper
    return None, stopper


def test_early_stopping_counts_adam_steps_and_waits_for_min_steps():
    # A criterion that is best at step 20 and flat-worse afterwards; checks every 10 steps.
    curve = [(s, 1.0 if s != 20 else 0.5) for s in range(10, 501, 10)]
    step, stopper = _stop(curve, eval_every=10, patience=50)
    assert step == 70 and stopper.best_step == 20 and stopper.best_state == {"step": 20}  # 20 + 50 steps
    step, stopper = _stop(curve, eval_every=10, patience=50, min_steps=300)
    assert step == 300 and stopper.best_step == 20  # no stop before min_steps, best state kept
    step, _ = _stop(curve, eval_every=30, patience=50)  # checks only at 30, 60, ...: 20 is never seen
    assert step == 90  # first check 30 is best; 90 - 30 >= 50


def test_early_stopping_smooths_a_single_noisy_dip_away():
    # The raw criterion falls slowly with one spurious dip at step 50; without smoothing the dip is the
    # "best" state and stops training at 50 + patience; the EMA (a = 0.8) keeps tracking the trend.
    curve = [(s, 1.0 - 0.001 * s - (0.3 if s == 50 else 0.0)) for s in range(10, 401, 10)]
    raw_step, raw = _stop(curve, eval_every=10, patience=100)
    assert raw.best_step == 50 and raw_step == 150
    smooth_step, smooth = _stop(curve, eval_every=10, patience=100, smoothing=0.8)
    assert smooth_step is None and smooth.best_step == 400
    # EMA by hand for the first three checks: 0.99, 0.8 * 0.99 + 0.2 * 0.98, ...
    assert smooth.curve[1][2] == pytest.approx(0.8 * 0.99 + 0.2 * 0.98)


def test_a_non_finite_loss_stops_meta_training_and_restores_the_best_state(data):
    method = MetaCal({"epochs": 30, "eval_every": 1, "patience": 1000})
    torch.manual_seed(0)
    model = method.build(data).to(device=data.device, dtype=torch.float64)
    calls = {"n": 0}

    def loss(model, episodes):
        calls["n"] += 1
        value = method.loss(model, episodes)
        return value * float("nan") if calls["n"] == 12 else value

    stats = meta_train(model, loss, data, method.params, None, torch.Generator().manual_seed(0))
    assert stats["fit_failures"] == 1 and stats["steps_run"] < 30
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert stats["best_step"] == min(stats["val_curve"], key=lambda c: c[2])[0]

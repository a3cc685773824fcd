"""Every registered metareg method fits and predicts on a small synthetic split and writes the predictions schema;
the estimators' protocol (random streams, parameter checks, NotFittedError); the marginal reference."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
import torch

from tests.conftest import method_device
from uqcal.core.predictive import NotFittedError
from uqcal.methods.api import ParameterError, RunContext, resolve_params
from uqcal.methods.metareg import METHODS
from uqcal.methods.metareg.episodes import EarlyStopping, EpisodeData, meta_train
from uqcal.methods.metareg.marginal import TaskMarginalGaussian
from uqcal.methods.metareg.metacal import MetaCal
from uqcal.methods.metareg.neural import PooledNet
from uqcal.methods.metareg.np import NeuralProcess
from uqcal.methods.metareg.synthetic import episode_split, sine_tasks
from uqcal.methods.metareg.tasks import predictions_frame, split_arrays

torch.set_num_threads(1)
QUANTILE_COLUMNS = ["q0.025", "q0.05", "q0.16", "q0.84", "q0.95", "q0.975"]
TINY = {"epochs": 2, "eval_every": 1, "patience": 1, "iterations": 3, "n_pool_max": 100}


@pytest.fixture(scope="module")
def arrays():
    X, y, task = sine_tasks(20, 60, 2, seed=4)
    return split_arrays(X, y, task, episode_split(task, n_support=10, n_query=30, seed=0))


@pytest.fixture(scope="module")
def data():
    X, y, task = sine_tasks(20, 60, 2, seed=4)
    return EpisodeData(X, y, task, episode_split(task, n_support=10, n_query=30, seed=0), device=method_device())


@pytest.mark.parametrize("name", [m for m in METHODS if not m.startswith("metacal_")])
def test_method_writes_the_regression_schema(arrays, name):
    # The pipeline's path (MetaRegMethod.train): fit on the split's tasks, predict its test episodes, one frame.
    cls = METHODS[name].load_class()
    params = resolve_params("metareg", name, {k: v for k, v in TINY.items() if k in cls.defaults})
    estimator = cls(params, device=method_device()).fit(arrays["tasks"], arrays["validation"])
    predictions = estimator.predict_tasks(arrays["test"])
    y_mean, y_std = (estimator.data_.y_mean, estimator.data_.y_std) if hasattr(estimator, "data_") else \
        (estimator.y_mean_, estimator.y_std_)
    frame = predictions_frame(arrays["test_tasks"], [e[3] for e in arrays["test"]], predictions, y_mean, y_std)
    n_rows = sum(len(e[3]) for e in arrays["test"])
    assert len(frame) == n_rows and {"task", "episode", "y", "mean", "std"} <= set(frame.columns)
    assert np.isfinite(frame.drop(columns="task").to_numpy(float)).all()
    assert (frame["std"] > 0).all()
    if "pit" in frame:  # non-Gaussian predictive
        assert {"logpdf", "crps", *QUANTILE_COLUMNS} <= set(frame.columns)
        assert frame["pit"].between(0, 1).all()
        q = frame[QUANTILE_COLUMNS].to_numpy()
        assert (np.diff(q, axis=1) >= -1e-9).all()
    # The frame's standardised y and mean are the predictive's original units mapped back.
    np.testing.assert_allclose(frame["y"] * y_std + y_mean, np.concatenate([e[3] for e in arrays["test"]]),
                               rtol=1e-12)
    np.testing.assert_allclose(frame["mean"] * y_std + y_mean, np.concatenate([p.point() for p in predictions]),
                               rtol=1e-12)


def test_predict_is_predict_tasks_of_one_episode(arrays):
    # A deterministic method (no dropout, no per-task initialisation): one episode alone equals its batch row.
    estimator = MetaCal(epochs=2, eval_every=1, patience=1, n_quantile_grid=20).fit(arrays["tasks"])
    together = estimator.predict_tasks(arrays["test"])
    # The two orders sum the same float64 terms differently: round-off is relative to the terms' scale, not to
    # a mean that cancels to ~1e-5, so the absolute tolerance is 1e-10 of the episode's largest value.
    for episode, batched in zip(arrays["test"][:3], together, strict=False):
        alone = estimator.predict(*episode[:3])
        for ours, theirs in ((alone.base.mean, batched.base.mean), (alone.ppf(0.9), batched.ppf(0.9))):
            np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10 * np.abs(theirs).max())


def test_fit_draws_from_the_runtime_streams(arrays):
    def fitted(seed):
        estimator = MetaCal(epochs=2, eval_every=1, patience=1, calibration="none", random_state=seed)
        return estimator.fit(arrays["tasks"], arrays["validation"]).predict(*arrays["test"][0][:3]).mean

    np.testing.assert_array_equal(fitted(3), fitted(3))
    assert not np.allclose(fitted(3), fitted(4))


def test_predict_before_fit_and_bad_parameters_are_refused(arrays):
    with pytest.raises(NotFittedError):
        MetaCal().predict(*arrays["test"][0][:3])
    with pytest.raises(ParameterError, match=r"MetaCal\.epoch: unknown parameter \(did you mean 'epochs'\?\)"):
        MetaCal({"epoch": 5})
    with pytest.raises(ParameterError, match=r"MetaCal\.hidden: expected an integer, got 'big'"):
        MetaCal(hidden="big")
    with pytest.raises(ParameterError, match=r"MetaCal\.epochs: expected an integer > 0, got -1"):
        MetaCal(epochs=-1)
    with pytest.raises(ParameterError, match=r"MetaCal\.lam: expected a number <= 1, got 1.5|MetaCal\.lam: .*1.5"):
        MetaCal(lam=1.5)
    with pytest.raises(ParameterError, match=r"MetaCal\.calibration: expected one of \['gmm', 'emp', 'none'\]"):
        MetaCal(calibration="isotonic")
    with pytest.raises(ParameterError, match=r"PooledNet\.head: expected one of \['sqr', 'ng', 'bd'\], got 'nb'"):
        PooledNet(head="nb")


def test_tasks_too_small_for_an_episode_are_named(arrays):
    tasks = list(arrays["tasks"])
    tasks[2] = (tasks[2][0][:12], tasks[2][1][:12])
    with pytest.raises(ValueError, match=r"fewer than N_S \+ N_Q = 40 rows: \['2'\]"):
        NeuralProcess(epochs=1).fit(tasks, arrays["validation"])


def test_task_marginal_gaussian_pools_the_within_task_std_for_a_support_set_without_spread():
    rng = np.random.default_rng(0)
    tasks = [(np.zeros((8, 1)), rng.normal(10, 2, 8)), (np.zeros((6, 1)), rng.normal(-5, 3, 6))]
    estimator = TaskMarginalGaussian().fit(tasks)
    flat = estimator.predict(np.zeros((3, 1)), np.array([4.0, 4.0, 4.0]), np.zeros((2, 1)))
    spread = estimator.predict(np.zeros((3, 1)), np.array([4.0, 3.0, 6.0]), np.zeros((1, 1)))
    # Independent reference: the pooled within-task std by hand, in the meta-train targets' units.
    squares = sum(((y - y.mean()) ** 2).sum() for _, y in tasks)
    pooled = np.sqrt(squares / sum(len(y) - 1 for _, y in tasks))
    np.testing.assert_allclose(flat.std, pooled, rtol=1e-12)
    np.testing.assert_allclose(flat.mean, 4.0, rtol=1e-12)
    np.testing.assert_allclose(spread.std, np.std([4.0, 3.0, 6.0]), rtol=1e-12)  # its own std (ddof 0)


def test_task_marginal_gaussian_train_counts_the_fallbacks(tmp_path):
    # The pipeline's path: a split file without validation episodes, one test support set without spread.
    rng = np.random.default_rng(0)
    train = {"a": rng.normal(10, 2, 8), "b": rng.normal(-5, 3, 6)}
    test_y = np.array([4.0, 4.0, 4.0, 3.0, 6.0, 5.0])
    rows = [(t, y) for t, ys in train.items() for y in ys] + [("c", y) for y in test_y]
    frame = pd.DataFrame(rows, columns=["t", "y"]).assign(x=0.0)
    n_train = sum(len(v) for v in train.values())
    test_rows = list(range(n_train, n_train + 6))
    split = {"tasks": {"train": ["a", "b"], "val": [], "test": ["c"]},
             "test_episodes": [{"task": "c", "support": test_rows[:3], "query": test_rows[3:]},
                               {"task": "c", "support": test_rows[2:5], "query": [test_rows[5]]}]}
    spec = {"kind": "multitask_regression", "target": "y", "features": ["x"], "task": "t"}
    frame.to_parquet(tmp_path / "raw.parquet")
    (tmp_path / "split.json").write_text(json.dumps(split))
    ctx = RunContext(
        family="metareg", dataset="d", setting="s", method="marginal", seed=0, config={}, dataset_spec=spec,
        setting_params={}, family_params={}, params=dict(TaskMarginalGaussian.defaults), run_dir=tmp_path / "run",
        split_path=tmp_path / "split.json", raw_path=tmp_path / "raw.parquet", depends_dir=None,
        device=method_device(), log=logging.getLogger("test"),
    )
    TaskMarginalGaussian().train(ctx)
    pred = pd.read_parquet(ctx.run_dir / "predictions.parquet")
    y_train = np.concatenate(list(train.values()))
    mean, std = y_train.mean(), y_train.std()
    np.testing.assert_allclose(pred.loc[pred["episode"] == 0, "mean"], (4.0 - mean) / std, rtol=1e-12)
    np.testing.assert_allclose(pred["y"], (np.r_[test_y[3:], test_y[5]] - mean) / std, rtol=1e-12)
    assert json.loads((tmp_path / "run" / "train_stats.json").read_text())["zero_spread_support_sets"] == 1


def test_lambda_and_task_count_variants_are_overrides():
    assert METHODS["metacal_l001"].overrides == {"lam": 0.01}
    assert METHODS["metacal_l10"].overrides == {"lam": 1.0}
    assert METHODS["metacal_t10"].overrides == {"max_train_tasks": 10}


def test_max_train_tasks_subsets_the_training_tasks():
    X, y, task = sine_tasks(20, 60, 1, seed=4)
    split = episode_split(task, n_support=10, n_query=30, seed=0)
    data = EpisodeData(X, y, task, split, max_train_tasks=5, rng=np.random.default_rng(0))
    assert len(data.train_tasks) == 5 and set(data.train_tasks) <= set(split["tasks"]["train"])


def test_metacal_meta_training_lowers_the_validation_loss(arrays, data):
    method = MetaCal({"epochs": 40, "eval_every": 40, "patience": 1})
    torch.manual_seed(0)
    untrained = method.build(data).to(device=data.device, dtype=torch.float64)
    with torch.no_grad():
        before = float(method.loss(untrained, data.val))
    method.fit(arrays["tasks"], arrays["validation"])
    stats = {**method.fit_stats_, **method.extra_stats(method.model_)}
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


@pytest.mark.parametrize("module", ["metacal", "np", "neural", "agp", "marginal"])
def test_the_class_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"uqcal.methods.metareg.{module}"))
    assert result.attempted > 0 and result.failed == 0

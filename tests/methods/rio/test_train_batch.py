"""Issue 53: a job's seeds trained as one batch (ResidualIOGP.train_batch, svgp.fit_svgp_batch) give what each
seed trained alone gives, within the tolerance ResidualIOGP.train_batch states."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import gpytorch
import numpy as np
import pandas as pd
import pytest
import torch
from linear_operator.utils.errors import NotPSDError
from sklearn.datasets import load_diabetes

import uqcal.methods.rio.svgp as svgp
from tests.methods.contexts import InMemoryContext
from uqcal.methods.api import resolve_params
from uqcal.methods.rio import METHODS
from uqcal.methods.rio.svgp import batchable, fit_svgp, fit_svgp_batch

SEEDS = (0, 1, 2)
ADAM = dict(optimizer="adam", batch_size=64, epochs=4, lr=0.05, scale_targets=True, centre_targets=True)


def _diabetes_fits(seeds=SEEDS, n=200, **extra):
    """fit_svgp keyword sets of a RIO-like problem on real data (sklearn's diabetes), one per seed: each seed its
    own random rows, a crude linear 'network' as y_hat, the residuals as targets."""
    data = load_diabetes()
    x_all, y_all = data.data, data.target
    fits = []
    for seed in seeds:
        rows = np.random.default_rng(seed).permutation(len(y_all))[:n]
        x = (x_all[rows] - x_all[rows].mean(0)) / x_all[rows].std(0)
        y = y_all[rows]
        coef, *_ = np.linalg.lstsq(np.column_stack([x, np.ones(n)]), y, rcond=None)
        yhat = np.column_stack([x, np.ones(n)]) @ coef
        fits.append(dict(inputs=np.column_stack([x, yhat]), targets=y - yhat, n_features=x.shape[1],
                         seed=1000 + seed, **extra))  # fmt: skip
    return fits


def test_batched_objective_equals_each_seeds_own_model():
    # The core of the batch: one batched evaluation gives each seed the loss and gradient its own model gives,
    # also at the first evaluation, where gpytorch initialises the variational mean from the seed's torch stream.
    fits = _diabetes_fits(n=120)
    with gpytorch.settings.debug(False):
        alone, thetas, first = [], [], []
        for f in fits:  # as fit_svgp: set up (seeding torch), then the first evaluation initialises (gpytorch)
            alone.append(svgp._set_up(**{**svgp._SET_UP_DEFAULTS, **f}))
            thetas.append(alone[-1].flat_params())
            first.append(alone[-1].evaluate(thetas[-1]))
        problems = []
        for f in fits:
            problems.append(svgp._set_up(**{**svgp._SET_UP_DEFAULTS, **f}))
            problems[-1].initial_variational = svgp._take_initial_variational(problems[-1].model)
        batched = svgp._BatchedSVGP(problems, list(range(len(problems))))
        got = batched.evaluate(dict(enumerate(thetas)))
        rng = np.random.default_rng(5)
        moved = [t + 0.05 * rng.normal(size=t.shape) for t in thetas]
        want_moved = [p.evaluate(t) for p, t in zip(alone, moved, strict=True)]
        got_moved = batched.evaluate({0: moved[0], 2: moved[2]})  # a subset: seed 1 has stopped
    assert sorted(got_moved) == [0, 2]
    for (value, grad), (got_value, got_grad) in [*zip(first, got.values(), strict=True),
                                                 (want_moved[0], got_moved[0]), (want_moved[2], got_moved[2])]:
        assert got_value == pytest.approx(value, rel=1e-12)
        np.testing.assert_allclose(got_grad, grad, rtol=1e-9, atol=1e-9 * np.abs(grad).max())


def _compare_fits(alone, batch, rtol):
    x = _diabetes_fits(seeds=(7,), n=60)[0]["inputs"]  # other rows of the same data
    for a, b in zip(alone, batch, strict=True):
        assert (b.iterations, b.function_evals, b.converged, b.failure) == (a.iterations, a.function_evals,
                                                                            a.converged, a.failure)
        assert b.final_loss == pytest.approx(a.final_loss, rel=rtol)
        assert b.noise_var == pytest.approx(a.noise_var, rel=rtol)
        (mean_a, var_a), (mean_b, var_b) = a.predict(x), b.predict(x)
        np.testing.assert_allclose(mean_b, mean_a, rtol=0, atol=rtol * np.sqrt(var_a).mean())
        np.testing.assert_allclose(var_b, var_a, rtol=rtol)
        assert a.model.state_dict().keys() == b.model.state_dict().keys()


@pytest.mark.parametrize("kernel_inputs", ["io", "o"])
def test_fit_svgp_batch_takes_each_seeds_own_steps(kernel_inputs):
    # Few iterations: each seed's L-BFGS-B takes the steps it takes alone (the evaluations differ by ~1e-16
    # relative at first; L-BFGS-B roughly multiplies a difference by 10 an iteration, hence the short run).
    fits = _diabetes_fits(kernel_inputs=kernel_inputs, max_iter=8)
    with gpytorch.settings.debug(False):
        alone = [fit_svgp(**f) for f in fits]
        batch = fit_svgp_batch(fits)
    _compare_fits(alone, batch, rtol=1e-8)


def test_fit_svgp_batch_reaches_each_seeds_own_optimum():
    # Run to L-BFGS-B's own convergence test (standardised targets, the output kernel: a few hundred steps): the
    # steps drift apart on the way, the optima agree within the optimiser's tolerance.
    fits = _diabetes_fits(kernel_inputs="o", scale_targets=True, centre_targets=True, max_iter=1000)
    with gpytorch.settings.debug(False):
        alone = [fit_svgp(**f) for f in fits]
        batch = fit_svgp_batch(fits)
    x = _diabetes_fits(seeds=(7,), n=60)[0]["inputs"]
    for a, b in zip(alone, batch, strict=True):
        assert a.converged and b.converged
        assert b.final_loss == pytest.approx(a.final_loss, rel=1e-6)
        (mean_a, var_a), (mean_b, var_b) = a.predict(x), b.predict(x)
        np.testing.assert_allclose(mean_b, mean_a, rtol=0, atol=1e-3 * np.sqrt(var_a).mean())
        np.testing.assert_allclose(var_b, var_a, rtol=1e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("optimizer", [{"max_iter": 8}, ADAM])
def test_fit_svgp_batch_on_cuda_follows_each_seeds_fit_svgp(optimizer):
    fits = _diabetes_fits(device="cuda", **optimizer)
    with gpytorch.settings.debug(False):
        alone = [fit_svgp(**f) for f in fits]
        batch = fit_svgp_batch(fits)
    _compare_fits(alone, batch, rtol=1e-6)


def test_a_failed_batched_evaluation_is_redone_seed_by_seed(monkeypatch):
    # A Cholesky failure of the batched model must not change any seed: the evaluation is redone for each seed in
    # a batch of one, which here succeeds.
    fits = _diabetes_fits(max_iter=8)
    with gpytorch.settings.debug(False):
        alone = [fit_svgp(**f) for f in fits]
        stock, calls = svgp._summed_loss, {"batched": 0}

        def flaky(model, elbo, train_x, train_y):
            if train_x.dim() == 3 and train_x.shape[0] > 1:  # a batch of several seeds (not of one)
                calls["batched"] += 1
                if calls["batched"] in (1, 4):
                    raise NotPSDError("not PSD")
            return stock(model, elbo, train_x, train_y)

        monkeypatch.setattr(svgp, "_summed_loss", flaky)
        batch = fit_svgp_batch(fits)
    assert calls["batched"] > 4
    _compare_fits(alone, batch, rtol=1e-8)


def test_adam_batch_takes_each_seeds_own_steps():
    # Adam is elementwise: each seed's rows of the batched model take its own steps on its own minibatches.
    fits = _diabetes_fits(n=300, **ADAM)
    with gpytorch.settings.debug(False):
        alone = [fit_svgp(**f) for f in fits]
        batch = fit_svgp_batch(fits)
    _compare_fits(alone, batch, rtol=1e-8)
    for a, b in zip(alone, batch, strict=True):
        np.testing.assert_allclose(b.loss_trace, a.loss_trace, rtol=1e-10)


def test_adam_batch_stops_a_seed_whose_loss_turns_non_finite_as_alone(monkeypatch):
    # Seed 1's loss is NaN at its 7th step (epoch 1: 5 steps an epoch): alone, _run_adam stops it at its epoch-0
    # state; in the batch it must end the same, while seeds 0 and 2 go on as alone.
    fits = _diabetes_fits(n=300, **ADAM)
    stock = gpytorch.mlls.VariationalELBO.forward
    calls = {"n": 0}

    def poisoned(self, *args, **kwargs):
        out = stock(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] != 7:
            return out
        if out.dim() == 0:
            return out * float("nan")
        return out * torch.tensor([1.0, float("nan"), 1.0], dtype=out.dtype)

    with gpytorch.settings.debug(False):
        alone = [fit_svgp(**f) for f in (fits[0], fits[2])]
        monkeypatch.setattr(gpytorch.mlls.VariationalELBO, "forward", poisoned)
        alone.insert(1, fit_svgp(**fits[1]))
        calls["n"] = 0
        batch = fit_svgp_batch(fits)
    assert alone[1].failed and alone[1].failure.startswith("epoch 1") and alone[1].iterations == 6
    _compare_fits(alone, batch, rtol=1e-8)
    for a, b in zip(alone, batch, strict=True):
        np.testing.assert_allclose(b.loss_trace, a.loss_trace, rtol=1e-10)


def test_a_seeds_batched_fit_does_not_depend_on_the_other_seeds():
    # Each evaluation of a seed is computed by a batched model, whichever seeds share it (a lone seed: a batch of
    # one), so a job resumed with fewer (two or more) pending seeds fits a seed as the whole job does.
    fits = _diabetes_fits(seeds=(0, 1, 2, 3), max_iter=8)
    with gpytorch.settings.debug(False):
        together = fit_svgp_batch(fits)
        pairs = fit_svgp_batch([fits[1], fits[3]])
    _compare_fits([together[1], together[3]], pairs, rtol=1e-10)


def test_adam_batch_of_one_records_a_cholesky_failure_as_alone(monkeypatch):
    fits = _diabetes_fits(n=300, **ADAM)
    stock, calls = gpytorch.mlls.VariationalELBO.forward, {"n": 0}

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 7:
            raise NotPSDError("not PSD")
        return stock(self, *args, **kwargs)

    with gpytorch.settings.debug(False):
        monkeypatch.setattr(gpytorch.mlls.VariationalELBO, "forward", flaky)
        alone = fit_svgp(**fits[0])
        calls["n"] = 0
        batch = svgp._fit_together([fits[0]])[0]
    assert alone.failure == batch.failure == "epoch 1: NotPSDError: not PSD" and batch.iterations == 6
    _compare_fits([alone], [batch], rtol=1e-8)


def test_batchable_only_for_fits_of_one_optimiser_and_shape():
    fits = _diabetes_fits(max_iter=10)
    assert batchable(fits)
    assert not batchable(fits[:1])
    assert not batchable([{**fits[0], "optimizer": "adam"}, *fits[1:]])
    assert batchable([{**f, "optimizer": "adam"} for f in fits])
    assert not batchable([{**fits[0], "optimizer": "adam", "lr": 0.1}, *({**f, "optimizer": "adam"} for f in fits[1:])])
    assert not batchable([{**fits[0], "inputs": fits[0]["inputs"][:-1], "targets": fits[0]["targets"][:-1]},
                          *fits[1:]])  # fmt: skip
    assert not batchable([{**fits[0], "kernel_inputs": "i"}, *fits[1:]])
    with pytest.raises(ValueError, match="batchable"):
        fit_svgp_batch([{**fits[0], "kernel_inputs": "i"}, *fits[1:]])


# ------------------------------------------------------------------------------ the pipeline's train_batch
def _diabetes_ctx(root: Path, method: str, seed: int, depends_dir=None, params=None) -> InMemoryContext:
    data = load_diabetes()
    n = len(data.target)
    rows = np.random.default_rng(seed).permutation(n)
    train, test = np.sort(rows[: int(0.8 * n)]), np.sort(rows[int(0.8 * n) :])
    overrides = {"max_epochs": 30} if method == "nn" else {"max_iter": 8, **(params or {})}
    run_dir = root / method / f"seed{seed}"
    ctx = InMemoryContext(
        family="rio", dataset="diabetes", setting="holdout", method=method, seed=seed, config={"torch_threads": 1},
        dataset_spec={}, setting_params={}, family_params={}, params=resolve_params("rio", method, overrides),
        run_dir=run_dir, split_path=root / "split.json", raw_path=root / "raw.parquet",
        depends_dir=None if depends_dir is None else depends_dir / f"seed{seed}", device=torch.device("cpu"),
        log=logging.getLogger("test_rio_batch"),
    )  # fmt: skip
    ctx.data = SimpleNamespace(X=data.data, y=data.target)
    ctx.split = {"train": train.tolist(), "test": test.tolist()}
    return ctx


def _train_alone(ctx) -> dict:
    method = METHODS[ctx.method].load_class()(ctx.params)
    ctx.seed_everything()  # as the train step does
    with gpytorch.settings.debug(False):
        method.train(ctx)
    return method.evaluate(ctx, ctx.saved_predictions)


@pytest.mark.parametrize("method, params", [("rio", {}), ("svgp_std", {}), ("rio", {"optimizer": "adam", "epochs": 3})])
def test_train_batch_saves_what_train_saves_per_seed(tmp_path, method, params):
    for seed in SEEDS:
        _train_alone(_diabetes_ctx(tmp_path, "nn", seed))
    alone = [_diabetes_ctx(tmp_path / "alone", method, s, tmp_path / "nn", params) for s in SEEDS]
    metrics_alone = [_train_alone(ctx) for ctx in alone]
    batch = [_diabetes_ctx(tmp_path / "batch", method, s, tmp_path / "nn", params) for s in SEEDS]
    trainer = METHODS[method].load_class()(batch[0].params)
    with gpytorch.settings.debug(False):
        assert trainer.train_batch(batch) is True
    for a, b, metrics_a in zip(alone, batch, metrics_alone, strict=True):
        pred_a = pd.read_parquet(a.run_dir / "predictions.parquet")
        pred_b = pd.read_parquet(b.run_dir / "predictions.parquet")
        assert list(pred_b.columns) == list(pred_a.columns)
        scale = pred_a["std"].mean()
        for column in pred_a.columns:
            np.testing.assert_allclose(pred_b[column], pred_a[column], rtol=0, atol=1e-6 * scale, err_msg=column)
        metrics_b = METHODS[method].load_class()(b.params).evaluate(b, pred_b)
        assert metrics_b.keys() == metrics_a.keys()
        for key, value in metrics_a.items():
            assert metrics_b[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key
        stats_a = json.loads((a.run_dir / "train_stats.json").read_text())
        stats_b = json.loads((b.run_dir / "train_stats.json").read_text())
        assert stats_b.keys() == stats_a.keys()
        for key in ("gp_iterations", "gp_function_evals", "gp_converged", "fit_failures", "gp_failure", "optimizer"):
            assert stats_b[key] == stats_a[key], key
        saved_a = torch.load(a.run_dir / "model.pt", weights_only=False)
        saved_b = torch.load(b.run_dir / "model.pt", weights_only=False)
        assert saved_b.keys() == saved_a.keys()
        # The saved state: Adam's step is scale-free, so a coordinate whose gradient is nearly zero (an inducing
        # point's raw y_hat far out of the output kernel's reach) moves by the sign of rounding-level noise.
        for key, value in saved_a["model_state"].items():
            torch.testing.assert_close(saved_b["model_state"][key], value, rtol=1e-4, atol=1e-6,
                                       msg=lambda m, key=key: f"{key}: {m}")

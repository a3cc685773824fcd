"""qr's train_batch (issue 53): a job's seeds trained as one stacked model save what each seed's own run saves.

On a real dataset (scikit-learn's diabetes, 442 rows), five folds as the qr cv5 splits: seeds whose training
sets differ in size (353 and 354 rows), several minibatches an epoch with a smaller last one, dropout, the
NeuralSort and hard-sort regularisers, a held-out calibration part; and what train_batch declines.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.datasets import load_diabetes

from tests.methods.contexts import InMemoryContext
from uqcal.core.io import load_torch
from uqcal.methods.api import get_entry, resolve_params
from uqcal.methods.qr import batched
from uqcal.methods.qr.entropy import QuantileRegularizer
from uqcal.methods.qr.gaussian_nets import HeteroscedasticMLP, minibatch_loss

# The tolerance train_batch states (GaussianNetMethod.train_batch): float32 rounding, relative 1e-5.
RTOL, ATOL = 1e-5, 1e-7
SEEDS = (0, 1, 2, 3)
TIMINGS = {"train_seconds"}


def _contexts(tmp_path, method, mode, overrides):
    X, y = load_diabetes(return_X_y=True)
    folds = np.array_split(np.arange(y.size), 5)  # KFold(5) without shuffling: 89, 89, 88, 88, 88 test rows
    params = resolve_params("qr", method, {"epochs": 3, "batch_size": 128, **overrides})
    contexts = []
    for seed in SEEDS:
        test = folds[seed]
        train = np.setdiff1d(np.arange(y.size), test)
        contexts.append(InMemoryContext(
            family="qr", dataset="diabetes", setting="cv5", method=method, seed=seed,
            config={"torch_threads": 1}, dataset_spec={}, setting_params={}, family_params={}, params=params,
            run_dir=tmp_path / mode / f"seed{seed}", split_path=tmp_path / "split.json",
            raw_path=tmp_path / "raw.parquet", depends_dir=None, device=torch.device("cpu"),
            log=logging.getLogger("test"), data=SimpleNamespace(X=X, y=y),
            split={"train": train.tolist(), "test": test.tolist()}))
    return contexts


def _per_seed(contexts):
    """The pipeline's per-seed path (uqcal.pipeline.steps.train.train_one): a fresh method, seeded, train."""
    cls = get_entry("qr", contexts[0].method).load_class()
    for ctx in contexts:
        ctx.seed_everything()
        cls(ctx.params).train(ctx)


def _saved(ctx):
    cls = get_entry("qr", ctx.method).load_class()
    stats = json.loads((ctx.run_dir / "train_stats.json").read_text())
    return (pd.read_parquet(ctx.run_dir / "predictions.parquet"), load_torch(ctx.run_dir / "model.pt"), stats,
            cls(ctx.params).evaluate(ctx))


def _close(name, a, b):
    np.testing.assert_allclose(np.asarray(b, float), np.asarray(a, float), rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize(("method", "overrides"), [
    ("de", {"n_members": 2}),                       # the authors' step, no regulariser
    ("de_qr", {"n_members": 2}),                    # NeuralSort entropy (QR Eq. 6-7)
    ("dvi", {"mc_samples": 4}),                     # dropout masks from each seed's global stream
    ("dvi_qr", {"mc_samples": 4}),
    ("dvi_qr_hardsort", {"mc_samples": 4}),         # torch.sort entropy
    ("de_qr_cal", {"n_members": 2}),                # a held-out calibration part (stream 1)
])
def test_train_batch_saves_what_each_seed_saves_alone(tmp_path, method, overrides):
    alone = _contexts(tmp_path, method, "alone", overrides)
    together = _contexts(tmp_path, method, "batch", overrides)
    _per_seed(alone)
    assert get_entry("qr", method).load_class()(together[0].params).train_batch(together) is True
    for one, other in zip(alone, together, strict=True):
        (pred_a, model_a, stats_a, metrics_a), (pred_b, model_b, stats_b, metrics_b) = _saved(one), _saved(other)
        assert list(pred_a.columns) == list(pred_b.columns) and set(stats_a) == set(stats_b)
        assert set(model_a) == set(model_b) and set(metrics_a) == set(metrics_b)
        for column in pred_a.columns:
            _close(f"seed {one.seed} {column}", pred_a[column], pred_b[column])
        for key in ("train_pit", "calibration_pit", "train_rows", "calibration_rows", "x_mean", "x_std"):
            _close(f"seed {one.seed} {key}", model_a[key], model_b[key])
        for net_a, net_b in zip(model_a["state_dicts"], model_b["state_dicts"], strict=True):
            for key in net_a:
                _close(f"seed {one.seed} {key}", net_a[key], net_b[key])
        for key, value in stats_a.items():
            if key in TIMINGS:
                continue
            if isinstance(value, (int, float)):
                _close(f"seed {one.seed} {key}", value, stats_b[key])
            else:
                assert stats_b[key] == value, key
        for key, value in metrics_a.items():
            _close(f"seed {one.seed} metric {key}", value, metrics_b[key])
    # The seeds differ (their own streams and folds): equal runs would pass the comparison trivially.
    assert not np.allclose(_saved(together[0])[0]["std"].to_numpy()[:80], _saved(together[1])[0]["std"].to_numpy()[:80])


@pytest.mark.parametrize(("method", "overrides"), [
    ("de_qr_paper", {"n_members": 2}),              # real FGSM (its perturbation's gradient per model)
    ("dvi", {"mc_samples": 4, "n_members": 2}),     # dropout with several members: one interleaved stream
])
def test_train_batch_declines_what_it_cannot_stack(tmp_path, method, overrides):
    """Declined seeds are left to the pipeline's per-seed path: train_batch saves nothing and says False."""
    together = _contexts(tmp_path, method, "batch", overrides)
    assert get_entry("qr", method).load_class()(together[0].params).train_batch(together) is False
    assert not any(ctx.run_dir.exists() and any(ctx.run_dir.iterdir()) for ctx in together)
    mixed = _contexts(tmp_path, "de", "mixed", {"n_members": 2})
    mixed[1].params = {**mixed[1].params, "lr": 2 * float(mixed[1].params["lr"])}
    assert get_entry("qr", "de").load_class()(mixed[0].params).train_batch(mixed) is False


def test_stacked_step_is_each_models_own_step():
    """One stacked step: every model's loss and gradients are those of its own minibatch_loss."""
    torch.manual_seed(0)
    nets = [HeteroscedasticMLP(5, hidden=16) for _ in range(3)]
    X, y = torch.randn(3, 40, 5), torch.randn(3, 40)
    regularizer = QuantileRegularizer(5.0, 6, sort="neuralsort")
    stack = batched.StackedMLPs(nets)
    loss, nll, penalty = batched.stacked_loss(stack, X, y, regularizer, "fgsm_authors", None)
    loss.sum().backward()
    for i, net in enumerate(nets):
        own, own_nll, own_penalty = minibatch_loss(net, X[i], y[i], regularizer, "fgsm_authors", None)
        own.backward()
        _close("loss", own.detach(), loss[i].detach())
        _close("nll", own_nll.detach(), nll[i].detach())
        _close("penalty", own_penalty.detach(), penalty[i].detach())
        for parameter, stacked in zip(net.parameters(), stack.parameters(), strict=True):
            np.testing.assert_allclose(stacked.grad[i].numpy(), parameter.grad.numpy(), rtol=1e-4, atol=1e-6)

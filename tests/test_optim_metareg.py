"""metareg trains to the same numbers, bit for bit, with uqcal.optim.make_adam as with torch.optim.Adam.

Reference: the same runs with ``make_adam`` replaced by ``torch.optim.Adam`` in the metareg modules.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from uqcal.api import resolve_params
from uqcal.methods.metareg import METHODS, agp, episodes, neural
from uqcal.methods.metareg.episodes import EpisodeData, meta_train
from uqcal.methods.metareg.metacal import MetaCal
from uqcal.methods.metareg.synthetic import episode_split, sine_tasks
from uqcal.optim import ForeachAdam

torch.set_num_threads(1)


def _torch_adam(params, lr):
    return torch.optim.Adam(params, lr=lr)


@pytest.fixture(scope="module")
def data():
    X, y, task = sine_tasks(40, 60, 1, seed=5)  # 24 training tasks: 3 steps of 8 tasks an epoch
    return EpisodeData(X, y, task, episode_split(task, n_support=10, n_query=20, seed=0))


@pytest.mark.parametrize("calibration", ["gmm", "none"])
def test_metacal_meta_training_is_torch_adam_bit_for_bit(data, calibration, monkeypatch):
    method = MetaCal({"epochs": 5, "eval_every": 5, "patience": 1, "batch_tasks": 8, "calibration": calibration})
    models = []
    for reference in (False, True):
        if reference:
            monkeypatch.setattr(episodes, "make_adam", _torch_adam)
        torch.manual_seed(0)
        model = method.build(data).to(torch.float64)
        if not reference and calibration == "none":  # parameters that never get a gradient
            loss = method.loss(model, data.val)
            loss.backward()
            assert model.raw_sigma2.grad is None
            model.zero_grad(set_to_none=True)
        stats = meta_train(model, method.loss, data, method.params, None, torch.Generator().manual_seed(1))
        assert stats["epochs_run"] == 5
        models.append(model)
    for (name, p), q in zip(models[0].named_parameters(), models[1].parameters(), strict=True):
        assert torch.equal(p, q), name
    init = method.build(data).to(torch.float64)
    assert not torch.equal(init.raw_beta, models[0].raw_beta)  # it did train


@pytest.mark.parametrize("name", ["np", "mng", "ng", "ang", "agp"])
def test_other_metareg_optimisers_are_torch_adam_bit_for_bit(data, name, monkeypatch):
    cls = METHODS[name].load_class()
    tiny = {"epochs": 3, "eval_every": 1, "patience": 3, "iterations": 5, "n_pool_max": 100, "batch_tasks": 8}
    params = resolve_params("metareg", name, {k: v for k, v in tiny.items() if k in cls.defaults})
    calls = []
    real = episodes.make_adam

    def spy(*args):
        optimiser = real(*args)
        calls.append(type(optimiser))
        return optimiser

    for module in (episodes, neural, agp):
        monkeypatch.setattr(module, "make_adam", spy)
    frame, _, _ = cls(params).run(data, None, seed=0)
    assert calls and all(c is ForeachAdam for c in calls)
    for module in (episodes, neural, agp):
        monkeypatch.setattr(module, "make_adam", _torch_adam)
    reference, _, _ = cls(params).run(data, None, seed=0)
    pd.testing.assert_frame_equal(frame, reference, check_exact=True)

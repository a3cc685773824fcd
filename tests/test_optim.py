"""uqcal.optim.ForeachAdam is torch.optim.Adam (default settings, CPU) bit for bit; make_adam falls back."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from torch import nn

from uqcal.optim import ForeachAdam, make_adam

torch.set_num_threads(1)


def _model(dtype):
    torch.manual_seed(0)
    model = nn.ModuleDict({
        "a": nn.Linear(6, 5),
        "b": nn.Linear(5, 3),
        "sometimes": nn.Linear(2, 2),  # a gradient on some steps only
        "never": nn.Linear(2, 2),  # no gradient ever
    })
    return model.to(dtype)


def _groups(model, two_groups: bool):
    if not two_groups:
        return list(model.parameters())
    return [
        {"params": list(model["a"].parameters()) + list(model["never"].parameters()), "lr": 1e-3},
        {"params": list(model["b"].parameters()) + list(model["sometimes"].parameters()), "lr": 3e-2},
    ]


def _backward(model, step: int, gen: torch.Generator, dtype):
    x = torch.randn(7, 6, generator=gen, dtype=dtype) * (10.0 if step % 4 == 0 else 0.1)
    loss = model["b"](torch.tanh(model["a"](x))).pow(2).mean()
    if step % 3 == 1:
        loss = loss + model["sometimes"](x[:, :2]).sin().sum() * 0.5
    loss.backward()


def _run(model, optimiser, steps, dtype, seed=3, start=0):
    gen = torch.Generator()
    for step in range(start, start + steps):
        gen.manual_seed(seed * 1000 + step)
        optimiser.zero_grad(set_to_none=True)
        _backward(model, step, gen, dtype)
        optimiser.step()


def _assert_same(model_a, model_b):
    for (name, p), q in zip(model_a.named_parameters(), model_b.parameters(), strict=True):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("two_groups", [False, True])
def test_foreach_adam_is_torch_adam(dtype, two_groups):
    ours_model, ref_model = _model(dtype), _model(dtype)
    lr = None if two_groups else 1e-2
    ours = make_adam(_groups(ours_model, two_groups), lr)
    assert isinstance(ours, ForeachAdam)
    ref = torch.optim.Adam(_groups(ref_model, two_groups), **({} if lr is None else {"lr": lr}))
    for step in range(20):
        for model, opt in ((ours_model, ours), (ref_model, ref)):
            opt.zero_grad()
            _backward(model, step, torch.Generator().manual_seed(step), dtype)
            opt.step()
        _assert_same(ours_model, ref_model)
    # per-parameter step counts and moments as torch's; no state for the parameter without gradients
    for p, q in zip(ours_model.parameters(), ref_model.parameters(), strict=True):
        assert (p in ours.state) == (q in ref.state)
        if q in ref.state:
            assert ours.state[p]["step"] == int(ref.state[q]["step"].item())
            assert torch.equal(ours.state[p]["exp_avg"], ref.state[q]["exp_avg"])
            assert torch.equal(ours.state[p]["exp_avg_sq"], ref.state[q]["exp_avg_sq"])
    assert ours_model["never"].weight not in ours.state
    assert ours.state[ours_model["sometimes"].weight]["step"] == 7  # steps 1, 4, ..., 19
    assert ours.state[ours_model["a"].weight]["step"] == 20


def test_gradients_of_extreme_scales():
    """The qr test's schedule: random gradients spanning 1e-6 .. 10."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
    ref = copy.deepcopy(net)
    ours, theirs = ForeachAdam(net.parameters(), lr=1e-2), torch.optim.Adam(ref.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        grads = [torch.randn(p.shape, generator=gen) * 10 ** torch.randint(-6, 2, (), generator=gen)
                 for p in net.parameters()]  # fmt: skip
        for p, q, g in zip(net.parameters(), ref.parameters(), grads, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        ours.step()
        theirs.step()
        ours.zero_grad()
        assert all(p.grad is None for p in net.parameters())
    _assert_same(net, ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_resume_from_state_dict_is_bit_identical(dtype):
    steps, cut = 20, 9
    straight_model = _model(dtype)
    straight = make_adam(_groups(straight_model, True))
    _run(straight_model, straight, steps, dtype)

    model = _model(dtype)
    first = make_adam(_groups(model, True))
    _run(model, first, cut, dtype)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimiser": first.state_dict()}, buffer)
    saved = first.state_dict()
    before = {k: v["exp_avg"].clone() for k, v in saved["state"].items()}
    _run(model, first, 1, dtype, start=cut)  # the saved dict holds copies, not the live tensors
    assert all(torch.equal(saved["state"][k]["exp_avg"], v) for k, v in before.items())
    pickle.dumps(saved)

    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)
    resumed_model = _model(dtype)
    resumed_model.load_state_dict(checkpoint["model"])
    resumed = make_adam(_groups(resumed_model, True))
    resumed.load_state_dict(checkpoint["optimiser"])
    _run(resumed_model, resumed, steps - cut, dtype, start=cut)
    _assert_same(resumed_model, straight_model)


def test_state_dicts_interchange_with_torch_adam():
    """A checkpoint written by torch.optim.Adam (e.g. before this optimiser existed) resumes in ForeachAdam
    and the other way round, with the same result as never switching."""
    dtype = torch.float64
    ref_model = _model(dtype)
    ref = torch.optim.Adam(_groups(ref_model, True))
    _run(ref_model, ref, 16, dtype)

    for first_cls, second_cls in ((torch.optim.Adam, ForeachAdam), (ForeachAdam, torch.optim.Adam)):
        model = _model(dtype)
        first = first_cls(_groups(model, True))
        _run(model, first, 7, dtype)
        second = second_cls(_groups(model, True))
        second.load_state_dict(copy.deepcopy(first.state_dict()))
        _run(model, second, 9, dtype, start=7)
        _assert_same(model, ref_model)


def test_supports_and_fallback():
    x = torch.zeros(2, requires_grad=True)
    assert ForeachAdam.supports([{"params": [x], "lr": 1e-3}])
    assert not ForeachAdam.supports([{"params": [torch.zeros(2, dtype=torch.complex64)], "lr": 1e-3}])
    assert not ForeachAdam.supports([{"params": [x], "lr": 1e-3, "weight_decay": 0.1}])
    assert not ForeachAdam.supports([{"params": [x], "lr": torch.tensor(1e-3)}])
    assert not ForeachAdam.supports([{"params": [torch.zeros(2, dtype=torch.float16)], "lr": 1e-3}])
    assert not ForeachAdam.supports([{"params": [torch.zeros(2).to_sparse()], "lr": 1e-3}])
    with pytest.raises(ValueError):
        ForeachAdam([{"params": [x], "lr": 1e-3, "betas": (0.5, 0.9)}])
    fallback = make_adam([{"params": [x], "lr": 1e-3, "weight_decay": 0.1}])
    assert isinstance(fallback, torch.optim.Adam)
    assert fallback.param_groups[0]["weight_decay"] == 0.1
    assert isinstance(make_adam([torch.zeros(2, dtype=torch.complex64, requires_grad=True)], lr=0.1),
                      torch.optim.Adam)
    assert isinstance(make_adam(iter([x]), lr=0.1), ForeachAdam)  # a generator, as model.parameters()
    with pytest.raises(ValueError):
        make_adam([])
    with pytest.raises(ValueError):
        make_adam([{"params": [x], "lr": 0.1}, {"params": [x], "lr": 0.2}])


def test_zero_grad_keep_tensors():
    model = _model(torch.float32)
    ours = make_adam(model.parameters(), lr=1e-2)
    _backward(model, 1, torch.Generator().manual_seed(0), torch.float32)
    ours.zero_grad(set_to_none=False)
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())
    assert model["a"].weight.grad is not None

"""The rio family's CPU fast paths give the same numbers, bit for bit, as the stock code they replace.

References: autograd + torch.optim.RMSprop for the fused network step; stock gpytorch kernels and
gpytorch.mlls.VariationalELBO for the SVGP; copy.deepcopy for the best-state snapshot.
"""

from __future__ import annotations

import copy

import gpytorch
import numpy as np
import pytest
import torch
from torch import nn

from uqcal.methods.rio.network import FusedMLPStep, train_network
from uqcal.methods.rio.svgp import IOKernelSVGP, VariationalELBO, _snapshot, io_kernel

torch.set_num_threads(1)


def _regression(n=300, d=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = 40.0 * np.sin(x[:, 0]) + 5.0 * x[:, 1] ** 2 + rng.normal(scale=3.0, size=n) + 100.0
    return x, y


def _flat_state(net: nn.Module) -> torch.Tensor:
    return torch.cat([v.reshape(-1) for v in net.state_dict().values()])


# ------------------------------------------------------------------------------------------ network
@pytest.mark.parametrize(
    ("batch_size", "restore_best", "hidden", "depth"),
    [(32, False, 64, 2), (17, True, 12, 1), (64, False, 7, 3)],  # ragged last batches, odd widths
)
def test_fused_network_training_is_bit_identical_to_autograd_rmsprop(batch_size, restore_best, hidden, depth):
    x, y = _regression()
    kw = dict(hidden=hidden, depth=depth, max_epochs=25, patience=3, batch_size=batch_size,
              restore_best=restore_best, seed=7)  # fmt: skip
    fused, info_fused = train_network(x, y, fused=True, **kw)
    ref, info_ref = train_network(x, y, fused=False, **kw)
    assert torch.equal(_flat_state(fused), _flat_state(ref))
    for key in ("epochs", "best_val_mse", "val_rmse", "val_rows"):
        assert info_fused[key] == info_ref[key], key
    # The trained network owns ordinary parameters again (saved and loaded like before).
    for p in fused.parameters():
        assert p.is_contiguous() and p.untyped_storage().nbytes() == p.numel() * p.element_size()
        assert p.requires_grad


def test_fused_step_matches_many_rmsprop_steps_on_one_batch_stream():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    ref = copy.deepcopy(net)
    step = FusedMLPStep(net, lr=3e-3, alpha=0.9, eps=1e-7)
    opt = torch.optim.RMSprop(ref.parameters(), lr=3e-3, alpha=0.9, eps=1e-7)
    gen = torch.Generator().manual_seed(1)
    for i in range(60):
        xb = torch.randn(8 + i % 5, 4, generator=gen)
        yb = 10 * torch.randn(8 + i % 5, 1, generator=gen)
        step.step(xb, yb)
        opt.zero_grad()
        nn.MSELoss()(ref(xb), yb).backward()
        opt.step()
        if i % 20 == 0:  # the module reads the fused buffer mid-training
            with torch.no_grad():
                assert torch.equal(net(xb), ref(xb))
    step.release()
    assert torch.equal(_flat_state(net), _flat_state(ref))
    with pytest.raises(RuntimeError, match="release"):
        step.step(xb, yb)


def test_fused_step_declines_networks_it_does_not_reproduce():
    assert FusedMLPStep.supports(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)))
    assert not FusedMLPStep.supports(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    assert not FusedMLPStep.supports(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Dropout(0.1), nn.Linear(4, 1)))
    assert not FusedMLPStep.supports(nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 1)))
    assert not FusedMLPStep.supports(nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 1)))
    with pytest.raises(TypeError):
        FusedMLPStep(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), lr=1e-3, alpha=0.9, eps=1e-7)


# ------------------------------------------------------------------------------------------ SVGP
def _stock_kernel(kernel_inputs: str, n_features: int, ard: bool) -> gpytorch.kernels.Kernel:
    """io_kernel built from gpytorch's own classes (the reference)."""
    parts = []
    if "i" in kernel_inputs:
        parts.append(gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(
            active_dims=tuple(range(n_features)), ard_num_dims=n_features if ard else None)))  # fmt: skip
    if "o" in kernel_inputs:
        parts.append(gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(active_dims=(n_features,))))
    return parts[0] if len(parts) == 1 else gpytorch.kernels.AdditiveKernel(*parts)


def _loss_and_grads(kernel, elbo_class, z, y, state):
    model = IOKernelSVGP(z[:12].clone(), kernel).double()
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model.load_state_dict(state["model"])
    likelihood.load_state_dict(state["likelihood"])
    elbo = elbo_class(likelihood, model, num_data=len(y))
    model.train()
    likelihood.train()
    out = []
    for _ in range(3):  # repeated evaluations, as inside L-BFGS
        model.zero_grad()
        likelihood.zero_grad()
        loss = -elbo(model(z), y)
        loss.backward()
        out.append([loss.detach()] + [p.grad.clone() for p in list(model.parameters()) + list(likelihood.parameters())])
        with torch.no_grad():  # move every parameter a little
            for p in list(model.parameters()) + list(likelihood.parameters()):
                p.add_(0.01 * torch.sin(p + 1.0))
    with torch.no_grad():
        model.eval()
        likelihood.eval()
        pred = likelihood(model(z[:20]))
        out.append([pred.mean, pred.variance])
    return out


@pytest.mark.parametrize(("kernel_inputs", "ard"), [("io", False), ("io", True), ("i", False), ("o", False)])
def test_svgp_kernels_and_elbo_are_bit_identical_to_stock_gpytorch(kernel_inputs, ard):
    rng = np.random.default_rng(3)
    n_features = 3
    z = torch.as_tensor(rng.normal(size=(60, n_features + 1)))
    y = torch.as_tensor(np.sin(2 * z[:, 0].numpy()) + 0.1 * rng.normal(size=60))
    # One random state (non-default hyperparameters and q(u)), loaded into both models.
    base = IOKernelSVGP(z[:12].clone(), _stock_kernel(kernel_inputs, n_features, ard)).double()
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    base.train()
    base(z)  # initialises q(u) (a random draw), so that both copies start from the same state
    with torch.no_grad():
        gen = torch.Generator().manual_seed(5)
        for p in list(base.parameters()) + list(lik.parameters()):
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    state = {"model": base.state_dict(), "likelihood": lik.state_dict()}

    ours = _loss_and_grads(io_kernel(kernel_inputs, n_features, ard), VariationalELBO, z, y, state)
    stock = _loss_and_grads(_stock_kernel(kernel_inputs, n_features, ard), gpytorch.mlls.VariationalELBO, z, y,
                            state)  # fmt: skip
    for got, want in zip(ours, stock, strict=True):
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b)


def test_lean_elbo_refuses_models_with_priors():
    model = IOKernelSVGP(torch.zeros(3, 2, dtype=torch.float64), io_kernel("o", 1)).double()
    likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_prior=gpytorch.priors.GammaPrior(1.0, 1.0))
    with pytest.raises(ValueError, match="priors"):
        VariationalELBO(likelihood, model, num_data=10)


def test_snapshot_equals_deepcopy_of_the_state_dict():
    model = IOKernelSVGP(torch.randn(5, 3, dtype=torch.float64), io_kernel("io", 2)).double()
    snap, ref = _snapshot(model), copy.deepcopy(model.state_dict())
    assert list(snap) == list(ref) and snap._metadata == ref._metadata
    for key in ref:
        assert torch.equal(snap[key], ref[key])
        assert snap[key].data_ptr() != model.state_dict()[key].data_ptr()  # a copy, not a view

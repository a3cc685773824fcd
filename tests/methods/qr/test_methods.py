"""qr methods end to end on a small synthetic problem: Dropout VI, Deep Ensemble (FGSM), isotonic reuse."""

import logging
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import expit
from scipy.stats import norm

from tests.conftest import method_device
from tests.methods.contexts import InMemoryContext
from uqcal.methods.api import get_entry, resolve_params
from uqcal.methods.qr.entropy import QuantileRegularizer
from uqcal.methods.qr.gaussian_nets import (
    HeteroscedasticMLP,
    batch_spacing_k,
    minibatch_loss,
    mixture_moments,
    train_member,
)
from uqcal.methods.qr.metrics import QR_METRICS

torch.set_num_threads(1)


def _context(tmp_path, method, depends_dir=None, overrides=None, n=240):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = 5.0 + 2.0 * (X[:, 0] + np.sin(2 * X[:, 1])) + rng.normal(0, 0.5 + 0.3 * np.abs(X[:, 2]), n)
    train, test = np.arange(0, 192), np.arange(192, n)
    split = {"train": train.tolist(), "test": test.tolist(), "x_mean": X[train].mean(0).tolist(),
             "x_std": X[train].std(0).tolist(), "y_mean": float(y[train].mean()),
             "y_std": float(y[train].std()), "repeat": 0, "fold": 0}
    trains = "epochs" in get_entry("qr", method).load_class().defaults
    params = resolve_params("qr", method, {**({"epochs": 3} if trains else {}), **(overrides or {})})
    return InMemoryContext(
        family="qr", dataset="synthetic", setting="cv5", method=method, seed=0, config={"torch_threads": 1},
        dataset_spec={}, setting_params={}, family_params={}, params=params, run_dir=tmp_path / method,
        split_path=tmp_path / "split.json", raw_path=tmp_path / "raw.parquet", depends_dir=depends_dir,
        device=method_device(), log=logging.getLogger("test"),
        data=SimpleNamespace(X=X, y=y), split=split)


def _run(ctx):
    method = get_entry("qr", ctx.method).load_class()(ctx.params)
    method.train(ctx)
    return method.evaluate(ctx)


def test_dvi_qr_and_isotonic_variants_end_to_end(tmp_path):
    ctx = _context(tmp_path, "dvi_qr", overrides={"mc_samples": 8})
    assert ctx.params["lam"] == 1.0 and ctx.params["dropout"] == 0.5
    metrics = _run(ctx)
    assert set(QR_METRICS) <= set(metrics)
    assert ctx.params["sort"] == "neuralsort" and metrics["spacing_k"] == 14  # round(sqrt(192)): one batch
    pred = pd.read_parquet(ctx.run_dir / "predictions.parquet")
    assert np.all(pred["std"] > 0) and len(pred) == 48
    # Original units: the target is centred at 5, far from the standardised 0.
    assert abs(pred["mean"].mean() - 5.0) < 3.0
    base_model = torch.load(ctx.run_dir / "model.pt", weights_only=False)
    assert base_model["train_pit"].size == 192
    iso = _context(tmp_path, "dvi_qr_iso", depends_dir=ctx.run_dir)
    iso_metrics = _run(iso)
    assert set(QR_METRICS) | {"zero_density_fraction", "max_density", "delta"} <= set(iso_metrics)
    iso_pred = pd.read_parquet(iso.run_dir / "predictions.parquet")
    np.testing.assert_allclose(iso_pred["base_mean"], pred["mean"])  # the same trained model, reused
    np.testing.assert_allclose(iso_pred["mean"], pred["mean"] - iso_metrics["delta"] * pred["std"])
    with pytest.raises(ValueError, match="calibration_fraction"):
        _run(_context(tmp_path, "dvi_qr_isocal", depends_dir=ctx.run_dir))


def test_deep_ensemble_with_held_out_calibration_part(tmp_path):
    ctx = _context(tmp_path, "de_cal", overrides={"n_members": 2})
    assert ctx.params["adversarial"] == "fgsm_authors" and ctx.params["calibration_fraction"] == 0.2
    metrics = _run(ctx)
    assert metrics["n_calibration"] == pytest.approx(round(0.2 * 192))
    assert metrics["n_train"] + metrics["n_calibration"] == 192
    model = torch.load(ctx.run_dir / "model.pt", weights_only=False)
    assert len(model["state_dicts"]) == 2 and model["calibration_pit"].size == metrics["n_calibration"]
    assert not set(model["calibration_rows"]) & set(model["train_rows"])
    iso = _run(_context(tmp_path, "de_isocal", depends_dir=ctx.run_dir))
    assert iso["n_recalibration"] == metrics["n_calibration"]


class _RecordingNet(HeteroscedasticMLP):
    def __init__(self):
        super().__init__(2, hidden=8, depth=1)
        self.inputs = []

    def forward(self, x):
        self.inputs.append(x.detach().clone())
        return super().forward(x)


@pytest.mark.parametrize("mode", ["fgsm", "fgsm_authors"])
def test_fgsm_loss_uses_perturbed_inputs(mode):
    X, y = torch.randn(16, 2), torch.randn(16)
    net = _RecordingNet()
    params = {"lr": 1e-3, "batch_size": 16, "epochs": 1, "adversarial": mode}
    eps = torch.tensor([0.1, 0.2])
    train_member(net, X, y, params, QuantileRegularizer(0.0), torch.Generator().manual_seed(0), eps)
    if mode == "fgsm":
        clean, adversarial = net.inputs
        # x_adv = x + eps * sign(grad): every coordinate moved by exactly eps_j.
        np.testing.assert_allclose((adversarial - clean).abs().numpy(), eps.expand(16, 2).numpy(), rtol=1e-6)
    else:  # the authors' bug: no forward pass on perturbed inputs at all
        assert len(net.inputs) == 1


def _three_point_case(lam):
    """A linear Gaussian head (depth 0: mu = w_0 x + b_0, sigma = 0.1 + 0.9 softplus(w_1 x + b_1)) in float64
    and a 3-point batch; n = 3 gives k = round(sqrt 3) = 2, so Eq. 6 has the single term log(2 (c_(3) - c_(1)))."""
    torch.manual_seed(0)
    net = HeteroscedasticMLP(2, depth=0).double()
    x = torch.tensor([[0.3, -1.2], [1.1, 0.4], [-0.7, 0.9]], dtype=torch.float64)
    y = torch.tensor([0.5, -0.4, 1.3], dtype=torch.float64)
    return net, x, y, QuantileRegularizer(lam)


def _hand_gradient(net, x, y, lam):
    """d/d(head weight, head bias) of 2 NLL + (lam / 2)(-H), derived by hand (numpy, no autograd)."""
    w, b = net.head.weight.detach().numpy(), net.head.bias.detach().numpy()
    xn, yn, n = x.numpy(), y.numpy(), 3
    pre_mu, pre_s = xn @ w[0] + b[0], xn @ w[1] + b[1]
    mu, s = pre_mu, 0.1 + 0.9 * np.log1p(np.exp(pre_s))
    z = (yn - mu) / s
    # NLL = mean(log s + z^2 / 2) + const
    dnll_dmu, dnll_ds = -z / s / n, (1 / s - z**2 / s) / n
    # H = log((n + 1) / k (c_max - c_min)), c = Phi(z): dH/dc = +-1 / (c_max - c_min) at the max / min
    c = norm.cdf(z)
    dh_dc = np.zeros(n)
    dh_dc[np.argmax(c)], dh_dc[np.argmin(c)] = 1 / (c.max() - c.min()), -1 / (c.max() - c.min())
    dh_dmu, dh_ds = dh_dc * (-norm.pdf(z) / s), dh_dc * (-norm.pdf(z) * z / s)
    dl_dmu = 2 * dnll_dmu - lam / 2 * dh_dmu
    dl_ds = (2 * dnll_ds - lam / 2 * dh_ds) * 0.9 * expit(pre_s)  # d softplus = sigmoid
    grad_w = np.stack([dl_dmu @ xn, dl_ds @ xn])
    grad_b = np.array([dl_dmu.sum(), dl_ds.sum()])
    return grad_w, grad_b


@pytest.mark.parametrize("lam", [0.0, 5.0])
def test_fgsm_authors_step_is_their_gradient(lam):
    """`fgsm_authors`'s step gradient is 2 grad NLL + (lam / 2) grad(-H), (a) derived by hand and (b) produced
    by the authors' procedure replayed literally: perturb()'s NLL backward, not zeroed, then the backward of
    ((NLL - lam H) + NLL on the clean outputs) / 2. float64 throughout, so agreement is to rounding (1e-10)."""
    net, x, y, regularizer = _three_point_case(lam)
    loss, _, _ = minibatch_loss(net, x, y, regularizer, "fgsm_authors", torch.full((2,), 0.01))
    ours = torch.autograd.grad(loss, [net.head.weight, net.head.bias])
    hand_w, hand_b = _hand_gradient(net, x, y, lam)
    np.testing.assert_allclose(ours[0].numpy(), hand_w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours[1].numpy(), hand_b, rtol=1e-10, atol=1e-12)

    net.zero_grad()
    x_req = x.clone().requires_grad_(True)
    mean, std = net(x_req)
    from uqcal.methods.qr.entropy import gaussian_nll, gaussian_pit

    gaussian_nll(y, mean, std).backward()  # perturb(): its gradient stays in .grad
    mean, std = net(x)
    clean_loss = gaussian_nll(y, mean, std) - lam * regularizer.entropy(gaussian_pit(y, mean, std))
    ((clean_loss + gaussian_nll(y, mean, std)) / 2).backward()
    np.testing.assert_allclose(ours[0].numpy(), net.head.weight.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours[1].numpy(), net.head.bias.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_paper_fgsm_gradient_weights_lambda_against_both_nll_terms():
    """`fgsm` (the paper as written): the gradient is grad NLL(x) + grad NLL(x_adv) - lam grad H, each term
    computed separately with autograd (float64, rounding-level tolerance)."""
    lam = 5.0
    net, x, y, regularizer = _three_point_case(lam)
    eps = torch.tensor([0.05, 0.1], dtype=torch.float64)
    loss, _, _ = minibatch_loss(net, x, y, regularizer, "fgsm", eps)
    ours = torch.autograd.grad(loss, [net.head.weight, net.head.bias])
    from uqcal.methods.qr.entropy import gaussian_nll, gaussian_pit

    x_req = x.clone().requires_grad_(True)
    mean, std = net(x_req)
    (grad_x,) = torch.autograd.grad(gaussian_nll(y, mean, std), x_req)
    x_adv = x + eps * grad_x.sign()
    params = [net.head.weight, net.head.bias]
    mean, std = net(x)
    terms = [gaussian_nll(y, mean, std), gaussian_nll(y, *net(x_adv)),
             -lam * regularizer.entropy(gaussian_pit(y, mean, std))]
    grads = [torch.autograd.grad(t, params, retain_graph=True) for t in terms]
    expected = [sum(g) for g in zip(*grads, strict=True)]
    for a, b in zip(ours, expected, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def test_spacing_k_is_fixed_by_the_batch_size():
    """Sec. 5.2: k = sqrt(n), n the batch size, one k for every minibatch (the authors' fixed `spacing`)."""
    p = {"batch_size": 512, "k": None, "k_multiplier": 1.0}
    assert batch_spacing_k(p, 824) == 23  # concrete's training folds: minibatches of 512 and 312, both k = 23
    assert batch_spacing_k(p, 405) == 20  # boston: one minibatch of 405
    assert batch_spacing_k({**p, "k_multiplier": 3.0}, 824) == 68  # App. C.4: round(3 sqrt(512))
    assert batch_spacing_k({**p, "k": 64}, 824) == 64  # the authors' repository default
    # The last 312-row minibatch keeps k = 23 (not round(sqrt(312)) = 18): Eq. 6 with k = 23 by hand.
    c = np.sort(np.random.default_rng(0).uniform(size=312))
    by_hand = np.mean(np.log((313 / 23) * (c[23:] - c[:-23])))
    ours = QuantileRegularizer(1.0, k=batch_spacing_k(p, 824), sort="hard").entropy(torch.tensor(c))
    assert ours.item() == pytest.approx(by_hand, rel=1e-12)


def test_mixture_variance_rules():
    rng = np.random.default_rng(0)
    means, stds = rng.normal(size=(5, 7)), rng.uniform(0.5, 2.0, size=(5, 7))
    mean, std = mixture_moments(means, stds, "mixture")
    second_moment = (stds**2 + means**2).mean(axis=0)  # E[Y^2] of the equal-weight mixture
    np.testing.assert_allclose(std**2, second_moment - means.mean(axis=0) ** 2)
    _, std_authors = mixture_moments(means, stds, "authors")
    np.testing.assert_allclose(std**2 - std_authors**2, stds.var(axis=0))
    with pytest.raises(ValueError, match="variance"):
        mixture_moments(means, stds, "median")

"""Correctness tests of the metareg family against independent references (gpytorch, scipy, numpy, Eq. 2)."""

from __future__ import annotations

import math

import gpytorch
import numpy as np
import pytest
import torch
from scipy import optimize, stats

from uqcal.core.gp.exact import batched_gp_posterior, squared_distances
from uqcal.methods.metareg.episodes import EpisodeData, Episodes, sorted_calibration_loss
from uqcal.methods.metareg.gmm_cdf import (
    empirical_calibration_map,
    gmm_calibration_density,
    gmm_calibration_map,
    invert_monotone,
)
from uqcal.methods.metareg.heads import QuantileHead, make_head
from uqcal.methods.metareg.metacal import MetaCal
from uqcal.methods.metareg.neural import MamlNet, SingleTaskNet, _network
from uqcal.methods.metareg.predictive import from_standardised
from uqcal.methods.metareg.synthetic import episode_split, sine_tasks

torch.set_num_threads(1)
DT = torch.float64


@pytest.fixture(scope="module")
def data():
    X, y, task = sine_tasks(30, 70, 2, seed=3)
    split = episode_split(task, n_support=10, n_query=30, seed=1)
    return EpisodeData(X, y, task, split)


def _gpytorch_posterior(x_s, y_s, x_q, noise, lengthscale=1.0, outputscale=1.0):
    """Reference: gpytorch ExactGP predictive of y (latent + noise), zero mean."""

    class Model(gpytorch.models.ExactGP):
        def __init__(self, x, y, likelihood):
            super().__init__(x, y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = Model(x_s, y_s, likelihood).double()
    model.covar_module.base_kernel.lengthscale = lengthscale
    model.covar_module.outputscale = outputscale
    likelihood.noise = noise
    model.eval()
    likelihood.eval()
    with torch.no_grad(), gpytorch.settings.fast_computations(False, False, False):
        pred = likelihood(model(x_q))
    return pred.mean, pred.variance


def test_batched_posterior_matches_gpytorch_exact_gp():
    gen = torch.Generator().manual_seed(0)
    B, S, Q, D = 4, 12, 9, 3
    xs, xq = torch.randn(B, S, D, generator=gen, dtype=DT), torch.randn(B, Q, D, generator=gen, dtype=DT)
    ys = torch.randn(B, S, generator=gen, dtype=DT)
    noise, scale, ls = 0.07, 1.3, 0.8
    K_ss = scale * torch.exp(-0.5 * squared_distances(xs / ls, xs / ls)) + noise * torch.eye(S, dtype=DT)
    K_sq = scale * torch.exp(-0.5 * squared_distances(xs / ls, xq / ls))
    mean, var = batched_gp_posterior(K_ss, K_sq, torch.full((B, Q), scale + noise, dtype=DT), ys)
    for b in range(B):
        ref_mean, ref_var = _gpytorch_posterior(xs[b], ys[b], xq[b], noise, ls, scale)
        torch.testing.assert_close(mean[b], ref_mean, atol=1e-5, rtol=0)
        torch.testing.assert_close(var[b], ref_var, atol=1e-5, rtol=0)


def test_deep_kernel_posterior_is_gpytorch_on_encoded_inputs_with_neural_mean(data):
    method = MetaCal({})
    torch.manual_seed(0)
    model = method.build(data).double()
    ep = data.val[:3]
    f, v = model.posterior(ep.xs, ep.ys, ep.xq)
    with torch.no_grad():
        zs, zq = model.encoder(ep.xs), model.encoder(ep.xq)
        ms, mq = model.mean_fn(ep.xs).squeeze(-1), model.mean_fn(ep.xq).squeeze(-1)
        for b in range(
            3
        ):  # Eq. (5): f = mu(x) + k^T K^{-1}(y - m), so a zero-mean GP on y - m, shifted by mu
            ref_mean, ref_var = _gpytorch_posterior(zs[b], ep.ys[b] - ms[b], zq[b], model.beta.item())
            torch.testing.assert_close(f[b].detach(), ref_mean + mq[b], atol=1e-5, rtol=0)
            torch.testing.assert_close(v[b].detach(), ref_var, atol=1e-5, rtol=0)


def test_episode_sampler_equals_a_full_argsort_of_the_random_keys():
    # Alg. 1 lines 3-4: support and query are the first N_S + N_Q rows of a random permutation of the task's
    # rows; the sampler takes them with topk. Reference: the same keys, fully sorted. Ragged task sizes, so
    # padding (key 2.0) is present in the smaller tasks.
    X, y, task = sine_tasks(12, 45, 1, seed=5)
    keep = np.concatenate([np.flatnonzero(task == t)[: 40 + (i % 5)] for i, t in enumerate(np.unique(task))])
    X, y, task = X[keep], y[keep], task[keep]
    data = EpisodeData(X, y, task, episode_split(task, n_support=10, n_query=25, seed=0))
    index = torch.arange(len(data.train_tasks))
    episodes = data.sample(index, 10, 25, torch.Generator().manual_seed(7))
    generator = torch.Generator().manual_seed(7)
    counts, width = data.train_counts[index], data.train_X.shape[1]
    keys = torch.rand(len(index), width, generator=generator, dtype=torch.float64)
    keys = keys.masked_fill(torch.arange(width) >= counts[:, None], 2.0)
    chosen = keys.argsort(-1)[:, :35]
    assert (chosen < counts[:, None]).all()  # never a padding row
    assert torch.equal(episodes.xs, data.train_X[index[:, None], chosen][:, :10])
    assert torch.equal(episodes.yq, data.train_y[index[:, None], chosen][:, 10:])


def test_posterior_also_at_support_equals_predicting_the_support_points_as_queries(data):
    # The GMM centres (Eq. 7) are the predictive CDF at the support points: the shortcut that reuses the
    # support rows' network outputs and kernel block must equal passing those points again as queries.
    torch.manual_seed(0)
    model = MetaCal({}).build(data).double()
    ep = data.val[:4]
    f, v = model.posterior(ep.xs, ep.ys, ep.xq, also_at_support=True)
    f_ref, v_ref = model.posterior(ep.xs, ep.ys, torch.cat([ep.xq, ep.xs], 1))
    assert f.shape == f_ref.shape == (4, ep.xq.shape[1] + ep.xs.shape[1])
    torch.testing.assert_close(f, f_ref, atol=1e-12, rtol=0)
    torch.testing.assert_close(v, v_ref, atol=1e-12, rtol=0)
    # and its gradients reach the networks the same way
    grads = torch.autograd.grad((f * v).sum(), list(model.parameters()), allow_unused=True)
    grads_ref = torch.autograd.grad((f_ref * v_ref).sum(), list(model.parameters()), allow_unused=True)
    for g, g_ref in zip(grads, grads_ref, strict=True):
        if g_ref is None:
            assert g is None
        else:
            torch.testing.assert_close(g, g_ref, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("normalise", [True, False])
def test_calibration_map_monotone_and_in_unit_interval(normalise):
    gen = torch.Generator().manual_seed(1)
    centers = torch.rand(5, 20, generator=gen, dtype=DT)
    p = torch.linspace(0, 1, 2001, dtype=DT).expand(5, -1)
    for sigma in (1e-3, 0.05, 0.3, 2.0):
        r = gmm_calibration_map(p, centers, sigma, normalise)
        assert (r.diff(dim=-1) >= -1e-15).all()
        assert (r >= 0).all() and (r <= 1).all()
        assert (gmm_calibration_density(p, centers, sigma, normalise) >= 0).all()
    if normalise:
        r = gmm_calibration_map(torch.tensor([[0.0, 1.0]], dtype=DT), centers[:1], 0.3, True)
        torch.testing.assert_close(r, torch.tensor([[0.0, 1.0]], dtype=DT))


@pytest.mark.parametrize("normalise", [True, False])
def test_calibration_map_tends_to_empirical_model_eq2(normalise):
    rng = np.random.default_rng(2)
    centers = np.sort(rng.uniform(size=15))
    # Independent Eq. (2): r_emp(p) = n/N for p in [p_(n), p_(n+1)); evaluate away from the jumps.
    p = np.linspace(0, 1, 997)
    p = p[np.min(np.abs(p[:, None] - centers[None]), axis=1) > 1e-3]
    r_emp = np.searchsorted(centers, p, side="right") / len(centers)
    c, pt = torch.tensor(centers[None]), torch.tensor(p[None])
    errors = [
        float((gmm_calibration_map(pt, c, s, normalise)[0].numpy() - r_emp).__abs__().max())
        for s in (1e-2, 1e-3, 1e-5)
    ]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-6
    np.testing.assert_allclose(empirical_calibration_map(pt, c)[0].numpy(), r_emp)


def test_gradient_of_the_gmm_map_matches_finite_differences():
    centers = torch.rand(2, 7, dtype=DT)
    p = torch.rand(2, 5, dtype=DT)
    sigma = torch.tensor(0.2, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda s, q: gmm_calibration_map(q, centers, s), (sigma, p.requires_grad_())
    )


def _trained_like_model(data, **overrides):
    method = MetaCal({"init_sigma2": 0.02, "init_alpha": 0.3, "n_quantile_grid": 20, **overrides})
    torch.manual_seed(0)
    return method, method.build(data).double()


def _predictives(method, model, ep: Episodes) -> list:
    """The predictive objects of a batch of episodes, in the standardised units the episodes are in."""
    return method._predictives(method._predict_episodes(model, ep), 0.0, 1.0)


@pytest.mark.parametrize("calibration", ["gmm", "emp"])
def test_h_is_a_valid_cdf_in_y_and_logpdf_is_its_derivative(data, calibration):
    method, model = _trained_like_model(data, calibration=calibration)
    ep = data.val[:3]
    grid = torch.linspace(-40, 40, 40001, dtype=DT).expand(3, -1)
    # Each task's first query point repeated along a grid of targets.
    predictions = _predictives(method, model, Episodes(ep.xs, ep.ys, ep.xq[:, :1].expand(3, grid.shape[1], -1)))
    h = torch.stack([torch.as_tensor(p.cdf(g.numpy())) for p, g in zip(predictions, grid, strict=True)])
    assert (h.diff(dim=-1) >= -1e-14).all(), "h not monotone in y"
    assert float(h[:, 0].max()) < 1e-8 and float(h[:, -1].min()) > 1 - 1e-8, "h does not go from 0 to 1"
    if calibration == "gmm":
        density = torch.stack([torch.as_tensor(p.logpdf(g.numpy())) for p, g in zip(predictions, grid, strict=True)]).exp()
        mass = torch.trapezoid(density, grid, dim=-1)
        torch.testing.assert_close(mass, torch.ones(3, dtype=DT), atol=1e-4, rtol=0)
        numeric = h.diff(dim=-1) / grid.diff(dim=-1)
        midpoint = 0.5 * (density[:, 1:] + density[:, :-1])
        assert float((numeric - midpoint).abs().max()) < 1e-3


def test_quantile_inverse_error_below_1e_minus_4(data):
    method, model = _trained_like_model(data)
    ep = data.val[:4]
    predictions = _predictives(method, model, ep)
    levels = (0.025, 0.05, 0.16, 0.84, 0.95, 0.975)
    quantiles = np.stack([p.ppf(np.array(levels)) for p in predictions])  # (B, Q, levels)
    f, v, centers = method.adapt(model, ep)
    f, v, centers, sigma, alpha = (t.detach().numpy() for t in (f, v, centers, model.sigma, model.alpha))
    # Independent reference: numpy/scipy Eqs. (6), (8) (normalised), (9) and brentq for one point per task.
    for b in range(4):

        def h(y, b=b):
            u = stats.norm.cdf((y - f[b, 0]) / math.sqrt(v[b, 0]))
            raw = lambda t: stats.norm.cdf((t - centers[b]) / sigma).mean()  # noqa: E731
            r = (raw(u) - raw(0.0)) / (raw(1.0) - raw(0.0))
            return alpha * u + (1 - alpha) * r

        for level in levels:
            reference = optimize.brentq(lambda y, lv=level: h(y) - lv, -50, 50, xtol=1e-12)
            assert abs(float(quantiles[b, 0, levels.index(level)]) - reference) < 1e-4
    for i, level in enumerate(levels):  # h(h^{-1}(p)) = p for every query point
        back = np.stack([p.cdf(quantiles[b, :, i]) for b, p in enumerate(predictions)])
        assert float(np.abs(back - level).max()) < 1e-4
    crps = np.stack([p.crps(ep.yq[b].numpy()) for b, p in enumerate(predictions)])
    assert np.isfinite(crps).all() and (crps > 0).all()


def test_bisection_inverts_a_known_function():
    targets = torch.linspace(0.01, 0.99, 50, dtype=DT)
    u = invert_monotone(lambda t: t**3, targets)
    torch.testing.assert_close(u, targets ** (1 / 3), atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"objective": "nll", "calibration": "none"},
        {"split_support": True},
        {"kernel_net": False, "mean_net": False, "learn_outputscale": True},
    ],
)
def test_gradients_reach_every_meta_parameter(data, overrides):
    method = MetaCal(overrides)
    model = method.build(data).double()
    loss = method.loss(model, data.sample(torch.arange(8), 10, 30, torch.Generator().manual_seed(0)))
    loss.backward()
    trainable = [(n, p) for n, p in model.named_parameters()]
    used = {"raw_sigma2", "raw_alpha"} if method.params["calibration"] != "none" else set()
    for name, param in trainable:
        if name in ("raw_sigma2", "raw_alpha") and name not in used:
            continue  # without r the calibration parameters are unused by design
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert float(param.grad.abs().sum()) > 0, f"no gradient reaches {name}"


def test_calibration_loss_eq10_by_hand():
    pit = torch.tensor([[0.9, 0.1, 0.5, 0.3]], dtype=DT)
    # sorted 0.1, 0.3, 0.5, 0.9 against 1/4, 2/4, 3/4, 4/4
    expected = (0.15 + 0.2 + 0.25 + 0.1) / 4
    assert abs(float(sorted_calibration_loss(pit)) - expected) < 1e-12


def test_episode_sampler_disjoint_and_within_task(data):
    gen = torch.Generator().manual_seed(0)
    idx = torch.arange(len(data.train_tasks))
    ep = data.sample(idx, 10, 30, gen)
    for b in range(len(idx)):
        count = int(data.train_counts[b])
        pool = {tuple(r) for r in data.train_X[b, :count].numpy().round(12)}
        rows = [tuple(r) for r in torch.cat([ep.xs[b], ep.xq[b]]).numpy().round(12)]
        assert set(rows) <= pool and len(set(rows)) == 40  # drawn without replacement from its own task


@pytest.mark.parametrize("head", ["ng", "sqr", "bd"])
def test_maml_inner_loop_reduces_support_loss(data, head):
    method = MamlNet({"head": head, "inner_steps": 5, "inner_lr": 1e-2})
    torch.manual_seed(0)
    model = method.build(data).double()
    ep = data.val
    torch.manual_seed(1)
    fast, batched_loss, _ = method.adapt(model, ep, create_graph=False)
    start = {k: v.unsqueeze(0).expand(len(ep), *v.shape) for k, v in model.net.named_parameters()}
    model.net.eval()  # deterministic comparison (no dropout noise)
    before = batched_loss(start, ep.xs, ep.ys).detach()
    after = batched_loss(fast, ep.xs, ep.ys).detach()
    assert (after < before).all(), (before, after)


def test_single_task_batched_training_equals_training_each_task_alone(data):
    """vmap-batched per-task training must give each task exactly what training it alone gives."""
    method = SingleTaskNet({"head": "ng", "epochs": 15})
    method.data_ = data
    ep = data.val[:3]
    torch.manual_seed(5)
    together = method._predict_episodes(None, ep)
    for b in range(3):
        torch.manual_seed(5)
        for _ in range(b):  # advance the RNG past the first b networks' initialisations
            _network(make_head("ng"), data, method.params)
        alone = method._predict_episodes(None, ep[b : b + 1])
        torch.testing.assert_close(alone["mean"][0], together["mean"][b], atol=1e-8, rtol=0)
        torch.testing.assert_close(alone["std"][0], together["std"][b], atol=1e-8, rtol=0)


def test_quantile_head_reads_a_gaussian_cdf_back():
    head = QuantileHead()
    grid = head.grid.to(DT)
    mean, std = 0.3, 1.7
    q = torch.tensor(stats.norm.ppf(grid.numpy(), mean, std), dtype=DT).expand(1, 5, -1)
    y = np.array([-3.0, -0.5, 0.3, 1.0, 4.0])
    outputs = head.summarise(q)
    prediction = from_standardised({k: v.numpy() for k, v in outputs.items()}, 0.0, 1.0)[0]
    np.testing.assert_allclose(prediction.cdf(y), stats.norm.cdf(y, mean, std), atol=2e-3)
    np.testing.assert_allclose(prediction.logpdf(y)[1:4], stats.norm.logpdf(y[1:4], mean, std), atol=2e-2)
    np.testing.assert_allclose(prediction.ppf(0.975), stats.norm.ppf(0.975, mean, std), atol=1e-5)
    assert abs(float(prediction.point()[0]) - mean) < 1e-5
    # Beyond the grid's ends (levels 1/200 and 199/200) the exponential tails keep the CDF inside (0, 1).
    far = prediction.cdf(np.array([-30.0, -20.0, 0.3, 20.0, 30.0]))
    assert 0 < far[0] < far[1] < 1 / 200 and 199 / 200 < far[3] < far[4] < 1

"""Correctness of the MD-BFSC core against independent references (dense algebra, torch, gpytorch)."""

from __future__ import annotations

import math

import gpytorch
import numpy as np
import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence
from torch.nn import functional as F

from uqcal.methods.fewshot.common import check_class_disjoint
from uqcal.methods.fewshot.dkt import exact_mll
from uqcal.methods.fewshot.gp_core import (
    ClassKernels,
    SiteState,
    full_covariance_samples,
    kl_to_prior,
    marginal_samples,
    md_elbo,
    run_mirror_descent,
    site_posterior,
    site_predictive,
    softmax_expectations,
    softmax_expectations_fn,
)

torch.set_num_threads(1)


def random_kernel(n_classes=3, n=8, dim=5, seed=0, kind="rbf"):
    torch.manual_seed(seed)
    kernels = ClassKernels(kind, n_classes).double()
    with torch.no_grad():
        kernels.kernel.outputscale = torch.linspace(0.5, 2.0, n_classes, dtype=torch.float64)
    (x,) = kernels.prepare(torch.randn(n, dim, dtype=torch.float64))
    with torch.no_grad():
        return kernels(x), kernels, x


def test_one_md_step_with_gaussian_likelihood_and_rho_1_is_the_exact_gp_posterior():
    kernel, _, _ = random_kernel()
    noise = 0.3
    targets = torch.randn(kernel.shape[0], kernel.shape[-1], dtype=torch.float64)

    def gaussian_expectations(post):  # log N(y | f, noise): g_m = (y - m) / noise, g_v = -1 / (2 noise)
        return (targets - post.mean) / noise, torch.full_like(post.mean, -0.5 / noise)

    post = run_mirror_descent(kernel, gaussian_expectations, steps=1, rho=1.0)
    eye = torch.eye(kernel.shape[-1], dtype=torch.float64)
    for c in range(kernel.shape[0]):  # dense reference: Sigma = (K^-1 + I/noise)^-1, m = K (K + noise I)^-1 y
        sigma = torch.linalg.inv(torch.linalg.inv(kernel[c] + 1e-10 * eye) + eye / noise)
        mean = kernel[c] @ torch.linalg.solve(kernel[c] + noise * eye, targets[c])
        torch.testing.assert_close(post.mean[c], mean, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(post.covariance()[c], sigma, atol=1e-6, rtol=1e-6)


def test_site_predictive_matches_gpytorch_exact_gp():
    kernel, kernels, x = random_kernel(n_classes=1, n=10)
    noise = 0.2
    y = torch.randn(10, dtype=torch.float64)
    sites = SiteState(y.unsqueeze(0) / noise, torch.full((1, 10), 1.0 / noise, dtype=torch.float64))
    post = site_posterior(kernel, sites, None)
    x_new = torch.nn.functional.normalize(torch.randn(4, x.shape[1], dtype=torch.float64), dim=-1)
    with torch.no_grad():
        mu, var = site_predictive(post, kernels(x, x_new), kernels(x_new, diag=True))

    class Exact(gpytorch.models.ExactGP):
        def __init__(self, likelihood):
            super().__init__(x, y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, z):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(z), self.covar_module(z))

    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = noise
    model = Exact(likelihood).double()
    model.covar_module.outputscale = kernels.kernel.outputscale.detach()[0]
    model.covar_module.base_kernel.lengthscale = kernels.kernel.base_kernel.lengthscale.detach()
    model.eval()
    with torch.no_grad(), gpytorch.settings.fast_computations(False, False, False):
        pred = model(x_new)
    torch.testing.assert_close(mu[0], pred.mean, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(var[0], pred.variance, atol=1e-6, rtol=1e-5)


def test_b_form_kl_matches_torch_distributions():
    kernel, _, _ = random_kernel(n=6)
    gen = torch.Generator().manual_seed(3)
    sites = SiteState(
        torch.randn(3, 6, generator=gen, dtype=torch.float64),
        torch.rand(3, 6, generator=gen, dtype=torch.float64) * 0.25,
    )
    post = site_posterior(kernel, sites, None)
    eye = 1e-9 * torch.eye(6, dtype=torch.float64)
    reference = sum(
        kl_divergence(
            MultivariateNormal(post.mean[c], post.covariance()[c] + eye),
            MultivariateNormal(torch.zeros(6, dtype=torch.float64), kernel[c] + eye),
        )
        for c in range(3)
    )
    torch.testing.assert_close(kl_to_prior(post), reference, atol=1e-5, rtol=1e-5)


def test_small_rho_increases_the_elbo_monotonically():
    kernel, _, _ = random_kernel(n_classes=4, n=12, kind="cosine")
    labels = torch.arange(12) % 4
    onehot = F.one_hot(labels, 4).T.double()
    elbos = []
    expectations = softmax_expectations_fn(
        onehot, "marginal", 20000, generator=torch.Generator().manual_seed(0)
    )
    run_mirror_descent(
        kernel,
        expectations,
        steps=30,
        rho=0.05,
        callback=lambda _s, post: elbos.append(
            float(md_elbo(post, onehot, 50000, torch.Generator().manual_seed(1)))
        ),
    )
    diffs = np.diff(elbos)
    assert np.all(diffs > 0), f"ELBO not monotone: {np.round(elbos, 4)}"
    assert elbos[-1] > elbos[0] + 0.5


def test_marginal_and_full_covariance_mc_agree_on_gm_gv():
    kernel, _, _ = random_kernel(n_classes=3, n=9, kind="cosine")
    labels = torch.arange(9) % 3
    onehot = F.one_hot(labels, 3).T.double()
    post = run_mirror_descent(kernel, softmax_expectations_fn(onehot, "marginal", 4000), steps=2, rho=0.7)
    n = 40000
    m_samples = marginal_samples(post.mean, post.var, n, torch.Generator().manual_seed(5))
    f_samples = full_covariance_samples(post, n, None, torch.Generator().manual_seed(6))
    for which in (0, 1):
        a = softmax_expectations(m_samples, onehot)[which]
        b = softmax_expectations(f_samples, onehot)[which]
        probs = torch.softmax(m_samples, 1)
        per_sample = (onehot - probs) if which == 0 else 0.5 * (probs**2 - probs)
        se = per_sample.std(0) / math.sqrt(n)
        assert torch.all((a - b).abs() < 5 * math.sqrt(2) * se + 1e-9), (which, (a - b).abs().max(), se.max())
    # and they are not trivially equal: the full-covariance draws really are joint samples
    assert not torch.allclose(m_samples, f_samples)


def test_dkt_marginal_likelihood_matches_gpytorch():
    kernel, kernels, x = random_kernel(n_classes=2, n=7)
    targets = torch.randn(2, 7, dtype=torch.float64)
    noise = torch.tensor([0.3, 0.6], dtype=torch.float64)
    ours = exact_mll(kernel, noise, targets, None)
    eye = torch.eye(7, dtype=torch.float64)
    reference = sum(
        MultivariateNormal(torch.zeros(7, dtype=torch.float64), kernel[c] + noise[c] * eye).log_prob(
            targets[c]
        )
        for c in range(2)
    )
    torch.testing.assert_close(ours, reference, atol=1e-8, rtol=1e-8)


@pytest.mark.parametrize("centre", [False, True])
def test_cosine_kernel_is_a_fixed_variance_linear_kernel_on_normalised_features(centre):
    """k_c(x, x') = outputscale_c * <u, u'> with u = (x - centre) / |x - centre| (the authors' ``Kernel``:
    LinearKernel variance fixed at 1.0; centre = the conditioning (support) points' mean with ``centre``,
    0 without, the authors' code): k(u, u) = outputscale; a hand-computed reference; the variance is not a
    trained parameter; query features never change the support's (they are centred with the support mean)."""
    kernels = ClassKernels("cosine", 3, centre=centre).double()
    with torch.no_grad():
        kernels.kernel.outputscale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    support, query = torch.randn(6, 4, generator=gen).double() + 3.0, torch.randn(2, 4, generator=gen).double()
    xs, xq = kernels.prepare(support, query)
    shift = support.mean(0, keepdim=True) if centre else torch.zeros(1, 4, dtype=torch.float64)
    unit_s = (support - shift) / (support - shift).norm(dim=1, keepdim=True)
    unit_q = (query - shift) / (query - shift).norm(dim=1, keepdim=True)
    torch.testing.assert_close(xs, unit_s)
    torch.testing.assert_close(kernels.prepare(support)[0], unit_s)  # a query set never changes the support's
    with torch.no_grad():
        cross = kernels(xs, xq)
        diag = kernels(xq, diag=True)
    for c, scale in enumerate([0.5, 1.0, 2.0]):
        torch.testing.assert_close(cross[c], scale * unit_s @ unit_q.T)
        torch.testing.assert_close(diag[c], torch.full((2,), scale, dtype=torch.float64))
    trainable = {name for name, p in kernels.named_parameters() if p.requires_grad}
    assert not any("variance" in name for name in trainable) and any("outputscale" in name for name in trainable)
    # RBF features are only normalised
    rbf_features = ClassKernels("rbf", 3, centre=True).prepare(support)[0]
    assert torch.allclose(rbf_features, support / support.norm(dim=1, keepdim=True))


def test_split_with_overlapping_classes_or_stray_episode_is_rejected():
    good = {
        "classes": {"train": ["a", "b"], "val": ["c"], "test": ["d", "e"]},
        "val_episodes": [{"classes": ["c"]}],
        "test_episodes": [{"classes": ["d", "e"]}],
    }
    check_class_disjoint(good)
    overlap = {**good, "classes": {"train": ["a", "d"], "val": ["c"], "test": ["d", "e"]}}
    with pytest.raises(ValueError, match="overlap"):
        check_class_disjoint(overlap)
    stray = {**good, "test_episodes": [{"classes": ["d", "a"]}]}
    with pytest.raises(ValueError, match="outside the test classes"):
        check_class_disjoint(stray)

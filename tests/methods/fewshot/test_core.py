"""Correctness of the MD-BFSC core against independent references (dense algebra, torch, gpytorch)."""

from __future__ import annotations

import math

import gpytorch
import numpy as np
import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence
from torch.nn import functional as F

from uqcal.methods.fewshot.base import check_class_disjoint
from uqcal.methods.fewshot.dkt import exact_mll
from uqcal.methods.fewshot.gp_core import (
    ClassKernels,
    SiteState,
    dense_moment_elbo,
    full_covariance_samples,
    kl_to_prior,
    marginal_samples,
    md_elbo,
    moment_gradients,
    run_mirror_descent,
    run_moment_gradient_descent,
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


def _moment_state(n_classes=3, n=6, seed=4):
    """A well-conditioned RBF kernel and a q = N(m, Sigma) away from the prior (Sigma != K, m != 0)."""
    kernel, _, _ = random_kernel(n_classes=n_classes, n=n, kind="rbf", seed=seed)
    kernel = kernel + 1e-3 * torch.eye(n, dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    mean = 0.5 * torch.randn(n_classes, n, generator=gen, dtype=torch.float64)
    a = torch.randn(n_classes, n, n, generator=gen, dtype=torch.float64)
    cov = 0.5 * kernel + 0.1 * a @ a.transpose(-1, -2) / n
    onehot = F.one_hot(torch.arange(n) % n_classes, n_classes).T.double()
    return kernel, mean, cov, onehot


def test_moment_gradients_are_the_euclidean_gradients_of_the_elbo():
    """The authors' closed-form (m, Sigma) gradients against autograd of Eq. 9 written independently:
    MC expected log-softmax over q's marginals minus torch.distributions' KL(N(m, Sigma) || N(0, K))."""
    kernel, mean, cov, onehot = _moment_state()
    n_samples, seed = 400_000, 11
    grad_mean, grad_cov = moment_gradients(torch.linalg.inv(kernel), mean, torch.linalg.cholesky(cov), onehot,
                                           n_samples, torch.Generator().manual_seed(seed))
    m = mean.clone().requires_grad_(True)
    sigma = cov.clone().requires_grad_(True)
    eps = torch.randn((n_samples, *mean.shape), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    var = sigma.diagonal(dim1=-2, dim2=-1)
    samples = m + var.sqrt() * eps  # the same normals: the mean gradient is the same MC sum
    ell = (torch.log_softmax(samples, dim=-2) * onehot).sum(-2).mean(0).sum()
    kl = sum(kl_divergence(MultivariateNormal(m[c], sigma[c]), MultivariateNormal(torch.zeros_like(m[c]), kernel[c]))
             for c in range(kernel.shape[0]))
    ref_mean, ref_cov = torch.autograd.grad(ell - kl, [m, sigma])
    torch.testing.assert_close(grad_mean, ref_mean, atol=1e-9, rtol=1e-9)
    # Off the diagonal only the KL depends on Sigma: exact.
    off = ~torch.eye(mean.shape[-1], dtype=torch.bool)
    torch.testing.assert_close(grad_cov[:, off], ref_cov[:, off], atol=1e-9, rtol=1e-9)
    # On the diagonal the authors use Price's estimator 1/2 E[d2 log p] and autograd the reparameterisation
    # estimator E[d log p * eps / (2 sd)]: equal in expectation, so compare within their MC error.
    probs = torch.softmax(samples.detach(), dim=-2)
    price = 0.5 * (probs**2 - probs)
    reparam = (onehot - probs) * eps / (2 * var.detach().sqrt())
    se = ((price.var(0) + reparam.var(0)) / n_samples).sqrt()
    diff = (grad_cov.diagonal(dim1=-2, dim2=-1) - ref_cov.diagonal(dim1=-2, dim2=-1)).abs()
    assert torch.all(diff < 5 * se), (diff.max(), se.max())
    assert price.mean(0).abs().min() > 10 * se.max()  # the tolerance is far below the quantity itself


def test_moment_gd_ascends_on_a_well_conditioned_kernel_and_stops_where_sigma_breaks():
    kernel, _, _, onehot = _moment_state(n=9)
    elbos, broke = [], []

    def record(step, kernel_chol, mean, cov_chol):
        if cov_chol is None:
            broke.append(step)
        else:
            elbos.append(float(dense_moment_elbo(kernel_chol, mean, cov_chol, onehot, 50_000,
                                                 torch.Generator().manual_seed(1))))

    run_moment_gradient_descent(kernel, onehot, steps=30, lr=0.005, n_samples=20_000,
                                generator=torch.Generator().manual_seed(0), callback=record)
    assert not broke and len(elbos) == 31
    assert elbos[-1] > elbos[0] + 0.05 and np.all(np.diff(elbos) > -1e-3), np.round(elbos, 4)
    # The prior's ELBO is minus nothing but the expected log-likelihood under the prior (KL = 0).
    n = kernel.shape[-1]
    chol = torch.linalg.cholesky(kernel)
    assert elbos[0] == pytest.approx(float(dense_moment_elbo(chol, torch.zeros(3, n, dtype=torch.float64), chol,
                                                             onehot, 50_000, torch.Generator().manual_seed(1))))
    # A centred cosine kernel on 9 points is singular (its rank is at most 8): the first step's
    # Sigma = K + rho diag(g_v), g_v < 0, is not positive definite and the run ends there.
    singular, _, _ = random_kernel(n_classes=3, n=9, dim=20, kind="cosine")
    assert torch.linalg.eigvalsh(singular).min() < 1e-8
    elbos.clear()
    run_moment_gradient_descent(singular, onehot, steps=30, lr=0.005, n_samples=2_000,
                                generator=torch.Generator().manual_seed(0), callback=record)
    assert broke == [1] and len(elbos) == 1


def test_dense_moment_elbo_is_the_expected_log_likelihood_minus_torch_kl():
    kernel, mean, cov, onehot = _moment_state()
    elbo = dense_moment_elbo(torch.linalg.cholesky(kernel), mean, torch.linalg.cholesky(cov), onehot, 5000,
                             torch.Generator().manual_seed(0))
    samples = marginal_samples(mean, cov.diagonal(dim1=-2, dim2=-1), 5000, torch.Generator().manual_seed(0))
    ell = (torch.log_softmax(samples, dim=-2) * onehot).sum(-2).mean(0).sum()
    kl = sum(kl_divergence(MultivariateNormal(mean[c], cov[c]), MultivariateNormal(torch.zeros_like(mean[c]), kernel[c]))
             for c in range(kernel.shape[0]))
    torch.testing.assert_close(elbo, ell - kl, atol=1e-9, rtol=1e-9)

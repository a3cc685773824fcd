"""Multi-class GP classification core of MD-BFSC (Ke, Cao & Zhou): kernels, mirror descent, GD, ELBO.

Shapes: C classes (one independent GP each), N support points, M query points, S Monte-Carlo samples.
The variational posterior of class c is q(f^c) = N(m^c, Sigma^c) over the N support points.

Mirror descent (Eq. 4) keeps, per class and point, the natural parameters of a Gaussian site
    theta1 = pseudo_target / pseudo_noise,   lam = -2 * theta2 = 1 / pseudo_noise,
so q is *exactly* the GP-regression posterior with pseudo-targets theta1 / lam and pseudo-noise 1 / lam.
We use the stable "B-form" of GP regression, B = I + S K S with S = diag(sqrt(lam)) (GPML, Alg. 3.2),
which needs no inverse of K. Because g_v in [-1/8, 0], lam <= 1/4 and B's eigenvalues lie in
[1, 1 + max(K)/4]: its Cholesky essentially never needs jitter, K's would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gpytorch
import torch
from torch import nn
from torch.nn import functional as F

from uqcal.core.gp.linalg import JitterCounter, psd_safe_cholesky

KERNELS = ("cosine", "rbf", "polynomial")
SAMPLING = ("marginal", "full_covariance")


# --------------------------------------------------------------------------------------------- kernels
class ClassKernels(nn.Module):
    """One ScaleKernel per class over a shared base kernel on L2-normalised deep features (App. E.4).

    The cosine kernel is gpytorch's LinearKernel with its variance fixed at 1.0, as in the authors' code
    (methods/mirror.py, ``Kernel``), so k(x, x) = the class's output scale. With ``centre`` (default) the
    cosine kernel's features are first centred, as App. E.4 says ("a variant of the kernel with batch
    normalization that centers the input vectors", DKT's bncossim): by the mean of the points the GP
    conditions on -- the whole episode in training, the support set at test, where queries are centred with
    the support's mean and never influence each other. One rule for training and test; the authors' code
    only L2-normalises (``centre=False``), which measured 4 points less accuracy on glyphs 5-way 5-shot
    (docs/fewshot.md). RBF and polynomial features are only L2-normalised, as in the paper.

    Parameters
    ----------
    kind : {"cosine", "rbf", "polynomial"}
        The base kernel.
    n_classes : int
        C, one output scale per class.
    polynomial_power : int, default 2
        The polynomial kernel's degree.
    centre : bool, default True
        Centre the cosine kernel's features by the conditioning points' mean.
    """

    def __init__(self, kind: str, n_classes: int, polynomial_power: int = 2, centre: bool = True):
        super().__init__()
        if kind not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kind!r}")
        self.kind = kind
        self.centre = bool(centre) and kind == "cosine"
        if kind == "cosine":
            base = gpytorch.kernels.LinearKernel()
            base.variance = 1.0
            base.raw_variance.requires_grad_(False)  # the per-class ScaleKernel carries the scale
        elif kind == "rbf":
            base = gpytorch.kernels.RBFKernel()
        else:
            base = gpytorch.kernels.PolynomialKernel(power=polynomial_power)
        self.kernel = gpytorch.kernels.ScaleKernel(base, batch_shape=torch.Size([n_classes]))

    def prepare(self, conditioning: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
        """The features of the points the GP conditions on, then of the points it predicts: centred by the
        conditioning points' mean (cosine with ``centre``), then L2-normalised.

        Parameters
        ----------
        conditioning : torch.Tensor of shape (N, d)
            Deep features of the points the GP conditions on.
        *others : torch.Tensor of shape (M, d)
            Deep features of points it predicts.

        Returns
        -------
        list of torch.Tensor
            The prepared features, conditioning first, each of its input's shape.
        """
        sets = [conditioning, *others]
        if self.centre and conditioning.shape[0] > 1:
            mean = conditioning.mean(0, keepdim=True)
            sets = [s - mean for s in sets]
        return [F.normalize(s, dim=-1) for s in sets]

    def forward(self, x1: torch.Tensor, x2: torch.Tensor | None = None, diag: bool = False) -> torch.Tensor:
        """The C class kernels between two feature sets.

        Parameters
        ----------
        x1 : torch.Tensor of shape (N, d)
            Prepared features.
        x2 : torch.Tensor of shape (M, d) or None, default None
            Prepared features (None: ``x1``).
        diag : bool, default False
            Only k(x1_n, x1_n).

        Returns
        -------
        torch.Tensor
            The class kernels, (C, N, M) dense, or (C, N) with ``diag``.
        """
        if diag:
            return self.kernel(x1, x1, diag=True)
        return self.kernel(x1, x1 if x2 is None else x2).to_dense()


# ----------------------------------------------------------------------- q in mirror-descent form
@dataclass
class SiteState:
    """Natural parameters theta~ of the Gaussian sites (Eq. 4), per class and support point: (C, N)."""

    theta1: torch.Tensor
    lam: torch.Tensor  # = -2 theta~2 >= 0 (pseudo-precision)

    @classmethod
    def zeros(cls, shape: tuple[int, ...], like: torch.Tensor) -> SiteState:
        z = torch.zeros(shape, dtype=like.dtype, device=like.device)
        return cls(z, z.clone())


@dataclass
class Posterior:
    """q(f^c) = N(m, Sigma) for all classes, with the pieces prediction and the ELBO need."""

    mean: torch.Tensor  # (C, N)
    var: torch.Tensor  # (C, N) marginal variances
    chol_b: torch.Tensor  # (C, N, N) Cholesky of B = I + S K S
    sqrt_lam: torch.Tensor  # (C, N)
    alpha: torch.Tensor  # (C, N) = K^{-1} m
    kernel: torch.Tensor  # (C, N, N)
    w: torch.Tensor  # (C, N, N) = L_B^{-1} S K, so Sigma = K - w^T w

    def covariance(self) -> torch.Tensor:
        return self.kernel - self.w.transpose(-1, -2) @ self.w


def site_posterior(kernel: torch.Tensor, sites: SiteState, counter: JitterCounter | None) -> Posterior:
    """Conjugate update q = prior x sites (Theorem 3.2): GP regression on pseudo-targets / pseudo-noise."""
    sqrt_lam = sites.lam.clamp_min(0.0).add(1e-12).sqrt()
    n = kernel.shape[-1]
    eye = torch.eye(n, dtype=kernel.dtype, device=kernel.device)
    b = eye + sqrt_lam.unsqueeze(-1) * kernel * sqrt_lam.unsqueeze(-2)
    chol_b = psd_safe_cholesky(b, counter=counter)
    k_theta = (kernel @ sites.theta1.unsqueeze(-1)).squeeze(-1)
    inner = torch.cholesky_solve((sqrt_lam * k_theta).unsqueeze(-1), chol_b).squeeze(-1)
    alpha = sites.theta1 - sqrt_lam * inner  # K^{-1} m = (I - S B^{-1} S K) theta1
    mean = k_theta - (kernel @ (sqrt_lam * inner).unsqueeze(-1)).squeeze(-1)  # m = Sigma theta1
    w = torch.linalg.solve_triangular(chol_b, sqrt_lam.unsqueeze(-1) * kernel, upper=False)
    var = kernel.diagonal(dim1=-2, dim2=-1) - (w**2).sum(-2)
    return Posterior(mean, var.clamp_min(1e-10), chol_b, sqrt_lam, alpha, kernel, w)


def kl_to_prior(post: Posterior) -> torch.Tensor:
    """sum_c KL(q_c || N(0, K_c)) in B-form: 0.5 [tr B^-1 + m^T K^-1 m - N + log|B|] (Eq. 9)."""
    n = post.mean.shape[-1]
    eye = torch.eye(n, dtype=post.mean.dtype, device=post.mean.device)
    chol_b_inv = torch.linalg.solve_triangular(post.chol_b, eye.expand_as(post.chol_b), upper=False)
    trace = (chol_b_inv**2).sum((-2, -1))
    maha = (post.mean * post.alpha).sum(-1)
    logdet_b = 2.0 * post.chol_b.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    return 0.5 * (trace + maha - n + logdet_b).sum()


# ------------------------------------------------------------------------ softmax expectations
def marginal_samples(mean, var, n_samples, generator=None) -> torch.Tensor:
    """f_n ~ prod_c N(m_n^c, v_n^c): the only distribution E_q[log p(y_n|f_n)] depends on. (S, C, N)."""
    eps = torch.randn((n_samples, *mean.shape), generator=generator, dtype=mean.dtype, device="cpu")
    return mean + var.sqrt() * eps.to(mean.device)


def full_covariance_samples(post: Posterior, n_samples, counter, generator=None) -> torch.Tensor:
    """The authors' sampler: joint draws f^c ~ N(m^c, Sigma^c) over all N points. (S, C, N)."""
    chol = psd_safe_cholesky(post.covariance(), counter=counter)
    # Drawn on the CPU (the generator's device: the same normals on every device), then moved.
    eps = torch.randn((n_samples, *post.mean.shape), generator=generator, dtype=post.mean.dtype, device="cpu")
    eps = eps.to(post.mean.device)
    return post.mean + (chol.unsqueeze(0) @ eps.unsqueeze(-1)).squeeze(-1)


def softmax_expectations(samples: torch.Tensor, onehot: torch.Tensor):
    """g_m = E[y - softmax(f)], g_v = 1/2 E[softmax(f)^2 - softmax(f)] (Sec. 3.3, App. C). (C, N) each."""
    probs = torch.softmax(samples, dim=-2)  # over classes
    g_m = (onehot.unsqueeze(-3) - probs).mean(-3)
    g_v = 0.5 * (probs**2 - probs).mean(-3)
    return g_m, g_v


def expected_log_softmax(samples: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
    """sum_n E_q[log p(y_n | f_n)] by MC (S, C, N samples)."""
    log_probs = torch.log_softmax(samples, dim=-2)
    return (log_probs * onehot.unsqueeze(-3)).sum(-2).mean(-2).sum()


# ----------------------------------------------------------------------------- mirror descent
Expectations = Callable[[Posterior], tuple[torch.Tensor, torch.Tensor]]


def mirror_descent_step(sites: SiteState, post: Posterior, g_m, g_v, rho: float) -> SiteState:
    """Eq. 4: theta~ <- (1 - rho) theta~ + rho * grad_mu E_q[log p], grad_mu = (g_m - 2 g_v m, g_v)."""
    theta1 = (1.0 - rho) * sites.theta1 + rho * (g_m - 2.0 * g_v * post.mean)
    lam = (1.0 - rho) * sites.lam + rho * (-2.0 * g_v)
    return SiteState(theta1, lam)


def run_mirror_descent(
    kernel: torch.Tensor,
    expectations: Expectations,
    steps: int,
    rho: float,
    counter: JitterCounter | None = None,
    callback: Callable[[int, Posterior], None] | None = None,
) -> Posterior:
    """theta~_0 = 0, so q starts at the prior (Alg. 1); returns q after `steps` updates.

    Parameters
    ----------
    kernel : torch.Tensor of shape (C, N, N)
        The class kernels on the support points.
    expectations : callable
        q -> (g_m, g_v), the MC gradients of E_q[log p(y | f)] (``softmax_expectations_fn``).
    steps : int
        Mirror-descent updates (Eq. 4).
    rho : float
        The step size.
    counter : JitterCounter or None, default None
        Counts the Cholesky jitter escalations.
    callback : callable or None, default None
        ``callback(step, q)`` after the start (step 0) and each update.

    Returns
    -------
    Posterior
        q after ``steps`` updates.
    """
    sites = SiteState.zeros(kernel.shape[:-1], kernel)
    post = site_posterior(kernel, sites, counter)
    if callback is not None:
        callback(0, post)
    for step in range(steps):
        g_m, g_v = expectations(post)
        sites = mirror_descent_step(sites, post, g_m, g_v, rho)
        post = site_posterior(kernel, sites, counter)
        if callback is not None:
            callback(step + 1, post)
    return post


def softmax_expectations_fn(
    onehot: torch.Tensor,
    sampling: str,
    n_samples: int,
    counter: JitterCounter | None = None,
    generator: torch.Generator | None = None,
) -> Expectations:
    """The function that gives mirror descent its MC expectations under q.

    Parameters
    ----------
    onehot : torch.Tensor of shape (C, N)
        The support labels, one-hot per class.
    sampling : {"marginal", "full_covariance"}
        Draw f from q's marginals or from its full covariance.
    n_samples : int
        MC samples per call.
    counter : JitterCounter or None, default None
        Counts the Cholesky jitter escalations (full covariance).
    generator : torch.Generator or None, default None
        The samples' stream.

    Returns
    -------
    callable
        q -> (g_m, g_v), each (C, N): the MC estimates of the softmax likelihood's expected gradient and half
        Hessian diagonal with respect to f, the inputs of the mirror-descent step (Eq. 4).
    """
    if sampling not in SAMPLING:
        raise ValueError(f"sampling must be one of {SAMPLING}, got {sampling!r}")

    def expectations(post: Posterior):
        if sampling == "marginal":
            samples = marginal_samples(post.mean, post.var, n_samples, generator)
        else:
            samples = full_covariance_samples(post, n_samples, counter, generator)
        return softmax_expectations(samples, onehot)

    return expectations


def md_elbo(post: Posterior, onehot, n_samples, generator=None) -> torch.Tensor:
    """Eq. 9 / Eq. 5 for q in site form: MC expected log-likelihood minus the closed-form KL."""
    samples = marginal_samples(post.mean, post.var, n_samples, generator)
    return expected_log_softmax(samples, onehot) - kl_to_prior(post)


# --------------------------------------------------------------- Euclidean GD baseline (same q)
# q_c = N(L_K m~, L_K S~ L_K^T), S~ = L~ L~^T: the whitened parametrisation (GPflow's SVGP default). It spans
# the same Gaussian family as MD; plain (m, L_q) coordinates put K^-1 into the gradient and diverge at any
# usable step size because linear (cosine) kernels of d features on N > d points are rank-deficient.
def whitened_moments(kernel_chol, white_mean, white_tril):
    mean = (kernel_chol @ white_mean.unsqueeze(-1)).squeeze(-1)
    var = ((kernel_chol @ white_tril) ** 2).sum(-1)
    return mean, var


def dense_elbo(kernel_chol, white_mean, white_tril, onehot, n_samples, generator=None) -> torch.Tensor:
    """Eq. 9 for the whitened parametrisation: KL(q||p) = KL(N(m~, S~) || N(0, I))."""
    n = white_mean.shape[-1]
    mean, var = whitened_moments(kernel_chol, white_mean, white_tril)
    ell = expected_log_softmax(marginal_samples(mean, var, n_samples, generator), onehot)
    logdet = 2.0 * white_tril.diagonal(dim1=-2, dim2=-1).abs().clamp_min(1e-12).log().sum(-1)
    kl = 0.5 * ((white_tril**2).sum((-2, -1)) + (white_mean**2).sum(-1) - n - logdet)
    return ell - kl.sum()


def run_gradient_descent(
    kernel: torch.Tensor,
    onehot: torch.Tensor,
    steps: int,
    lr: float,
    n_samples: int,
    counter: JitterCounter | None = None,
    generator: torch.Generator | None = None,
    create_graph: bool = False,
    callback: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], None] | None = None,
):
    """Euclidean gradient ascent on the ELBO over (m~, L~), starting from the prior (m~ = 0, L~ = I)."""
    kernel_chol = psd_safe_cholesky(kernel, counter=counter)
    n = kernel.shape[-1]
    white_mean = torch.zeros(kernel.shape[:-1], dtype=kernel.dtype, device=kernel.device, requires_grad=True)
    eye = torch.eye(n, dtype=kernel.dtype, device=kernel.device)
    white_tril = eye.expand(kernel.shape).clone().requires_grad_(True)
    if callback is not None:
        callback(0, kernel_chol, white_mean, white_tril)
    for step in range(steps):
        elbo = dense_elbo(kernel_chol, white_mean, white_tril, onehot, n_samples, generator)
        g_mean, g_tril = torch.autograd.grad(elbo, [white_mean, white_tril], create_graph=create_graph)
        white_mean = white_mean + lr * g_mean
        white_tril = torch.tril(white_tril + lr * g_tril)
        if not create_graph:
            white_mean = white_mean.detach().requires_grad_(True)
            white_tril = white_tril.detach().requires_grad_(True)
        if callback is not None:
            callback(step + 1, kernel_chol, white_mean, white_tril)
    return kernel_chol, white_mean, white_tril


def gd_posterior_predictive(kernel_chol, white_mean, white_tril, k_sq, k_qq_diag):
    """q(f*): mu* = (L_K^-1 k*)^T m~, var* = k** - |L_K^-1 k*|^2 + |L~^T L_K^-1 k*|^2 (Eq. 6b)."""
    v = torch.linalg.solve_triangular(kernel_chol, k_sq, upper=False)  # (C, N, M)
    mu = (v * white_mean.unsqueeze(-1)).sum(-2)
    var = k_qq_diag - (v**2).sum(-2) + ((white_tril.transpose(-1, -2) @ v) ** 2).sum(-2)
    return mu, var.clamp_min(1e-10)


# ------------------------------------------- the authors' Euclidean GD on (m, Sigma) (Sec. 4.3 baseline)
# Their `GradientDescentELBO` (methods/mirrorGD.py) ascends the ELBO in the plain moment coordinates of q with
# the closed-form gradients grad_m = g_m - K^-1 m and grad_Sigma = diag(g_v) - (K^-1 - Sigma^-1) / 2 (Bonnet /
# Price: dE[log p]/dvar = E[d2 log p]/2 = g_v). Directions where K is nearly singular get steps of
# rho / eigenvalue, so this baseline is only stable at small rho, the paper's 0.005.
def dense_moment_elbo(kernel_chol, mean, cov_chol, onehot, n_samples, generator=None) -> torch.Tensor:
    """Eq. 9 for q_c = N(m_c, Sigma_c), Sigma_c = cov_chol cov_chol^T: the same q in whitened coordinates,
    m~ = L_K^-1 m and L~ = L_K^-1 cov_chol (lower triangular), scored by ``dense_elbo``."""
    white_mean = torch.linalg.solve_triangular(kernel_chol, mean.unsqueeze(-1), upper=False).squeeze(-1)
    white_tril = torch.linalg.solve_triangular(kernel_chol, cov_chol, upper=False)
    return dense_elbo(kernel_chol, white_mean, white_tril, onehot, n_samples, generator)


def moment_gradients(kernel_inv, mean, cov_chol, onehot, n_samples, generator=None):
    """Euclidean ELBO gradients in (m, Sigma) as the authors compute them: grad_m = g_m - K^-1 m,
    grad_Sigma = diag(g_v) - (K^-1 - Sigma^-1) / 2, with g_m, g_v by MC over q's marginals."""
    var = (cov_chol**2).sum(-1)
    g_m, g_v = softmax_expectations(marginal_samples(mean, var, n_samples, generator), onehot)
    eye = torch.eye(mean.shape[-1], dtype=mean.dtype, device=mean.device)
    cov_inv = torch.cholesky_solve(eye.expand(cov_chol.shape), cov_chol)
    grad_mean = g_m - (kernel_inv @ mean.unsqueeze(-1)).squeeze(-1)
    return grad_mean, torch.diag_embed(g_v) - 0.5 * (kernel_inv - cov_inv)


def run_moment_gradient_descent(
    kernel: torch.Tensor,
    onehot: torch.Tensor,
    steps: int,
    lr: float,
    n_samples: int,
    counter: JitterCounter | None = None,
    generator: torch.Generator | None = None,
    callback: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor | None], None] | None = None,
):
    """The authors' vanilla GD: m <- m + lr grad_m, Sigma <- Sigma + lr grad_Sigma from the prior (m = 0,
    Sigma = K). A step that leaves Sigma not positive definite ends the run: the callback then gets
    ``cov_chol`` None (the ELBO is undefined there) and the remaining steps are not taken."""
    kernel_chol = psd_safe_cholesky(kernel, counter=counter)
    n = kernel.shape[-1]
    eye = torch.eye(n, dtype=kernel.dtype, device=kernel.device)
    kernel_inv = torch.cholesky_solve(eye.expand(kernel.shape), kernel_chol)
    mean = torch.zeros(kernel.shape[:-1], dtype=kernel.dtype, device=kernel.device)
    cov, cov_chol = kernel_chol @ kernel_chol.transpose(-1, -2), kernel_chol
    if callback is not None:
        callback(0, kernel_chol, mean, cov_chol)
    for step in range(steps):
        grad_mean, grad_cov = moment_gradients(kernel_inv, mean, cov_chol, onehot, n_samples, generator)
        mean = mean + lr * grad_mean
        cov = cov + lr * grad_cov
        cov = 0.5 * (cov + cov.transpose(-1, -2))
        cov_chol, info = torch.linalg.cholesky_ex(cov)
        if bool((info != 0).any()) or not bool(torch.isfinite(mean).all()):
            if callback is not None:
                callback(step + 1, kernel_chol, mean, None)
            break
        if callback is not None:
            callback(step + 1, kernel_chol, mean, cov_chol)
    return kernel_chol, mean, cov_chol


# ---------------------------------------------------------------------------------- prediction
def site_predictive(post: Posterior, k_sq: torch.Tensor, k_qq_diag: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 6b: mu* = k*^T K^-1 m, var* = k** - k*^T (K + Lam^-1)^-1 k* (pseudo-data GP regression).

    Parameters
    ----------
    post : Posterior
        q fitted on the support set.
    k_sq : torch.Tensor of shape (C, N, M)
        The class kernels between the support and query points.
    k_qq_diag : torch.Tensor of shape (C, M)
        The class kernels' diagonal at the queries.

    Returns
    -------
    tuple of torch.Tensor
        mu* and var* (floored at 1e-10), each (C, M).
    """
    mu = (k_sq * post.alpha.unsqueeze(-1)).sum(-2)
    v = torch.linalg.solve_triangular(post.chol_b, post.sqrt_lam.unsqueeze(-1) * k_sq, upper=False)
    var = k_qq_diag - (v**2).sum(-2)
    return mu, var.clamp_min(1e-10)


def predictive_logit_samples(mu: torch.Tensor, var: torch.Tensor, n_samples: int,
                             generator: torch.Generator | None = None) -> torch.Tensor:
    """Samples of f* (S, M, C) from prod_c N(mu*_c, var*_c); Eq. 6a averages softmax over them.

    Parameters
    ----------
    mu, var : torch.Tensor of shape (C, M)
        The predictive means and variances of the M queries (``site_predictive``).
    n_samples : int
        S.
    generator : torch.Generator or None, default None
        The samples' stream (CPU draws, moved to ``mu``'s device).

    Returns
    -------
    torch.Tensor of shape (S, M, C)
        Logit samples.
    """
    samples = marginal_samples(mu, var, n_samples, generator)  # (S, C, M)
    return samples.transpose(-2, -1)


def mc_softmax(logit_samples: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Eq. 6a: p(y* = r) ~= mean_s softmax(f*_s / T)_r; T = 1 is the untempered prediction.

    Parameters
    ----------
    logit_samples : torch.Tensor of shape (S, M, C)
        Logit samples.
    temperature : float, default 1.0
        T.

    Returns
    -------
    torch.Tensor of shape (M, C)
        Class probabilities, rows summing to 1.
    """
    return torch.softmax(logit_samples / temperature, dim=-1).mean(0)

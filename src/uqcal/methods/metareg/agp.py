"""AGP (Table 5): a sparse GP (Snelson & Ghahramani's FITC / gpytorch SGPR) whose pseudo-inputs and
kernel are fitted on the pooled meta-training data, then conditioned on each meta-test task's own
support set: the task-shared pseudo-inputs define the Nystrom kernel, the support instances are
task-specific."""

from __future__ import annotations

import time

import gpytorch
import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)

from uqcal.core.gp.exact import batched_cholesky, batched_gp_posterior
from uqcal.methods.metareg.episodes import Episodes, MetaRegMethod


class _SparseGP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, inducing):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.base_kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=x.shape[-1]))
        self.covar_module = gpytorch.kernels.InducingPointKernel(self.base_kernel, inducing, likelihood)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


class AGP(MetaRegMethod):
    """AGP (Table 5): an SGPR with ``n_inducing`` pseudo-inputs fitted by ``iterations`` Adam steps (learning rate
    ``lr``) on at most ``n_pool_max`` rows of the pooled meta-training data, then conditioned on each task's
    support set (FITC).

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (task subset, initial weights, episodes).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        ``n_inducing``, ``n_pool_max``, ``iterations``, ``lr``, ``max_train_tasks``.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.metareg import AGP
    >>> rng = np.random.default_rng(0)
    >>> tasks = [(x, np.sin(x[:, 0] + rng.uniform(0, 3))) for x in rng.uniform(-3, 3, (8, 50, 1))]
    >>> gp = AGP(iterations=5, n_inducing=8).fit(tasks)
    >>> x = rng.uniform(-3, 3, (15, 1))
    >>> gp.predict(x[:5], np.sin(x[:5, 0]), x[5:]).std.shape
    (10,)
    """

    defaults = {"n_inducing": 32, "n_pool_max": 1000, "iterations": 200, "lr": 0.05, "max_train_tasks": None}

    def _train_model(self, data, generator):
        p = self.params
        X, y = data.pooled()
        if len(y) > p["n_pool_max"]:
            rows = torch.randperm(len(y), generator=generator)[: p["n_pool_max"]].to(data.device)
            X, y = X[rows], y[rows]
        inducing = X[torch.randperm(len(y), generator=generator)[: p["n_inducing"]].to(data.device)].clone()
        likelihood = gpytorch.likelihoods.GaussianLikelihood().to(device=data.device, dtype=data.dtype)
        model = _SparseGP(X, y, likelihood, inducing).to(device=data.device, dtype=data.dtype)
        model.train()
        likelihood.train()
        optimiser = torch.optim.Adam(model.parameters(), lr=p["lr"])
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        start = time.perf_counter()
        for _ in range(p["iterations"]):
            optimiser.zero_grad()
            loss = -mll(model(X), y)
            loss.backward()
            optimiser.step()
        model.eval()
        return model, {"train_seconds": time.perf_counter() - start, "final_train_nmll": float(loss.detach())}

    @torch.no_grad()
    def _predict_episodes(self, model: _SparseGP, episodes: Episodes):
        base = model.base_kernel
        inducing = model.covar_module.inducing_points
        noise = model.likelihood.noise.squeeze()
        constant = model.mean_module.constant.squeeze()
        k_zz = base(inducing, inducing).to_dense()
        chol_zz = batched_cholesky(k_zz.unsqueeze(0))[0]

        def nystrom_half(x):  # L_zz^{-1} K_zx, so Q_ab = half_a^T half_b
            k_zx = base(inducing, x).to_dense()  # (B, M, N)
            return torch.linalg.solve_triangular(chol_zz.expand(k_zx.shape[0], -1, -1), k_zx, upper=False)

        half_s, half_q = nystrom_half(episodes.xs), nystrom_half(episodes.xq)
        q_ss = half_s.transpose(-1, -2) @ half_s
        prior_var = base.outputscale.squeeze()
        # FITC: exact prior variance on the diagonal, Nystrom covariance off it.
        fitc_diag = (prior_var - torch.diagonal(q_ss, dim1=-2, dim2=-1)).clamp_min(0) + noise
        K_ss = q_ss + torch.diag_embed(fitc_diag)
        K_sq = half_s.transpose(-1, -2) @ half_q
        k_qq = (prior_var + noise).expand(episodes.xq.shape[:2])
        mean, var = batched_gp_posterior(K_ss, K_sq, k_qq, episodes.ys, constant, constant)
        return {"mean": mean, "std": var.sqrt()}

    def extra_stats(self, model: _SparseGP) -> dict:
        """The fitted noise variance and output scale.

        Parameters
        ----------
        model : _SparseGP
            The fitted SGPR.

        Returns
        -------
        dict
            ``noise`` and ``outputscale`` (floats, standardised units).
        """
        return {
            "noise": float(model.likelihood.noise.squeeze().detach()),
            "outputscale": float(model.base_kernel.outputscale.squeeze()),
        }

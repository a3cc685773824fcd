"""Meta-calibrated deep-kernel GP (Iwata & Kumagai, Sec. 4) and its GP relatives (MDKL, GP, ablations).

One class covers all of them; the variants are parameter overrides registered in ``METHODS``:
``objective`` (calib: Eq. 11 | nll: expected test likelihood), ``calibration`` (gmm: Eq. 8 | emp: Eq. 2 |
none), ``mix`` (learned alpha | a fixed alpha), ``split_support``, ``kernel_net`` / ``mean_net``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap
from torch.nn import functional as F

from uqcal.core.gp.exact import batched_gp_posterior, squared_distances
from uqcal.methods.api import UNIT_INTERVAL_OPEN, Bound
from uqcal.methods.metareg.batched import SeedBatchedTraining
from uqcal.methods.metareg.episodes import (
    EpisodeData,
    Episodes,
    EpisodicMetaMethod,
    calibration_loss_per_episode,
    feedforward,
    gaussian_nll_per_episode,
)
from uqcal.methods.metareg.gmm_cdf import invert_monotone, mixed_map, mixed_map_density
from uqcal.methods.metareg.predictive import GmmCalibratedPredictive


def _inverse_softplus(value: float) -> float:
    return math.log(math.expm1(value))


def _logit(value: float) -> float:
    return math.log(value / (1.0 - value))


class DeepKernelGP(nn.Module):
    """GP(mu(x), k(x, x')) with k = s * exp(-1/2 ||g(x) - g(x')||^2) + beta * delta  (Eq. 3; s = 1 there),
    plus the task-shared calibration parameters sigma^2 (Eq. 7) and alpha (Eq. 9).

    Constrained parameters: beta, sigma^2, s = softplus(raw) (> 0); alpha = sigmoid(raw) (in (0, 1)).

    Parameters
    ----------
    in_dim : int
        The number of features D.
    hidden : int, default 32
        Hidden (and embedding) units of the networks.
    kernel_net : bool, default True
        The encoder g of Eq. (3); False: ARD-scaled raw inputs.
    mean_net : bool, default True
        A neural mean mu; False: a learned constant.
    learn_outputscale : bool, default False
        Learn s (Eq. 3 has s = 1).
    encoder_layers, mean_layers : int, default 3 and 4
        Layers of g and mu (Sec. 5.3).
    init_beta, init_sigma2, init_alpha : float, default 0.1, 0.01 and 0.5
        Initial beta, sigma^2 and alpha.
    mix : "learned" or float, default "learned"
        alpha of Eq. (9): learned, or fixed at this value in [0, 1].
    """

    def __init__(
        self,
        in_dim: int,
        hidden: int = 32,
        kernel_net: bool = True,
        mean_net: bool = True,
        learn_outputscale: bool = False,
        encoder_layers: int = 3,
        mean_layers: int = 4,
        init_beta: float = 0.1,
        init_sigma2: float = 0.01,
        init_alpha: float = 0.5,
        mix: str | float = "learned",
    ):
        super().__init__()
        # Encoder g (Sec. 5.3: 3 layers, 32 hidden and output units); without it an ARD scaling x / l.
        self.encoder = feedforward(in_dim, hidden, hidden, encoder_layers) if kernel_net else None
        self.raw_lengthscale = None if kernel_net else nn.Parameter(torch.zeros(in_dim))
        # Mean mu (4 layers, 32 hidden); without it a learned constant.
        self.mean_fn = feedforward(in_dim, 1, hidden, mean_layers) if mean_net else None
        self.constant_mean = None if mean_net else nn.Parameter(torch.zeros(()))
        self.raw_outputscale = (
            nn.Parameter(torch.tensor(_inverse_softplus(1.0))) if learn_outputscale else None
        )
        self.raw_beta = nn.Parameter(torch.tensor(_inverse_softplus(init_beta)))
        self.raw_sigma2 = nn.Parameter(torch.tensor(_inverse_softplus(init_sigma2)))
        if mix == "learned":
            self.raw_alpha = nn.Parameter(torch.tensor(_logit(init_alpha)))
            self.fixed_alpha = None
        else:
            self.raw_alpha, self.fixed_alpha = None, float(mix)

    @property
    def beta(self):
        return F.softplus(self.raw_beta) + 1e-6

    @property
    def sigma(self):
        return torch.sqrt(F.softplus(self.raw_sigma2) + 1e-8)

    @property
    def alpha(self):
        if self.raw_alpha is None:
            return torch.tensor(self.fixed_alpha, dtype=self.raw_beta.dtype, device=self.raw_beta.device)
        return torch.sigmoid(self.raw_alpha)

    @property
    def outputscale(self):
        if self.raw_outputscale is None:
            return torch.ones((), dtype=self.raw_beta.dtype, device=self.raw_beta.device)
        return F.softplus(self.raw_outputscale)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The kernel's input map g(x) (Eq. 3).

        Parameters
        ----------
        x : torch.Tensor of shape (..., D)
            Standardised features.

        Returns
        -------
        torch.Tensor
            g(x), (..., hidden); without the encoder x / lengthscale, (..., D).
        """
        if self.encoder is not None:
            return self.encoder(x)
        return x / (F.softplus(self.raw_lengthscale) + 1e-6)

    def prior_mean(self, x: torch.Tensor) -> torch.Tensor:
        """The GP's prior mean mu(x).

        Parameters
        ----------
        x : torch.Tensor of shape (..., D)
            Standardised features.

        Returns
        -------
        torch.Tensor of shape (...)
            mu(x), standardised target units.
        """
        if self.mean_fn is not None:
            return self.mean_fn(x).squeeze(-1)
        return self.constant_mean.expand(x.shape[:-1])

    def posterior(self, xs: torch.Tensor, ys: torch.Tensor, xq: torch.Tensor,
                  also_at_support: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Eqs. (4)-(5) for every task of the batch at once: f (B, Q), v (B, Q) (v includes beta).

        Support and query inputs go through g and mu together (one pass each), and one kernel block
        k(support, support + query) gives both K and k. ``also_at_support`` appends the predictive at the
        support inputs themselves (columns Q..Q+S; the GMM centres of Eq. 7) from that same block, so the
        support rows go through the networks once, not twice.

        Parameters
        ----------
        xs : torch.Tensor of shape (B, S, D)
            Support features.
        ys : torch.Tensor of shape (B, S)
            Support targets (standardised).
        xq : torch.Tensor of shape (B, Q, D)
            Query features.
        also_at_support : bool, default False
            Append the predictive at the support inputs.

        Returns
        -------
        tuple of torch.Tensor
            The predictive means f and variances v (beta included), (B, Q), or (B, Q + S) with
            ``also_at_support``.
        """
        n_support = xs.shape[1]
        x_all = torch.cat([xs, xq], 1)
        z_all, m_all = self.embed(x_all), self.prior_mean(x_all)
        scale = self.outputscale
        K = scale * torch.exp(-0.5 * squared_distances(z_all[:, :n_support], z_all))  # Eq. (3) without beta
        eye = torch.eye(n_support, dtype=xs.dtype, device=xs.device)
        K_ss = K[..., :n_support] + self.beta * eye
        m_s, m_q = m_all[:, :n_support], m_all[:, n_support:]
        K_sq = K[..., n_support:]
        if also_at_support:  # targets [query, support]: k(support, support) is K's noise-free first block
            K_sq = torch.cat([K_sq, K[..., :n_support]], -1)
            m_q = torch.cat([m_q, m_s], -1)
        k_qq = (scale + self.beta).reshape(-1, 1).expand(K_sq.shape[0], K_sq.shape[-1])  # () or (B, 1, 1)
        return batched_gp_posterior(K_ss, K_sq, k_qq, ys, m_s, m_q)


class _SeedStackedGP:
    """K seeds' DeepKernelGPs as one model of K * B episodes, seed-major (``MetaCal.seed_losses``): DeepKernelGP's
    own formulas (borrowed below), each seed's parameters repeated for its B episodes and shaped to broadcast
    per episode, its networks vmapped over the seeds. The GP algebra (Eqs. 3-5, the Cholesky with its jitter
    retries) then runs on the K * B episodes as on one seed's B."""

    beta = DeepKernelGP.beta
    sigma = DeepKernelGP.sigma
    alpha = DeepKernelGP.alpha
    outputscale = DeepKernelGP.outputscale
    embed = DeepKernelGP.embed
    prior_mean = DeepKernelGP.prior_mean
    posterior = DeepKernelGP.posterior

    # per-episode shapes of the scalar parameters: (K*B, 1, 1) where they scale (B, S, N) blocks, (K*B, 1)
    # where they scale (B, M) rows; the ARD lengthscale (K*B, 1, D)
    _SHAPES = {"raw_beta": (1, 1), "raw_sigma2": (1, 1), "raw_outputscale": (1, 1), "raw_alpha": (1,),
               "constant_mean": (1,), "raw_lengthscale": (1, -1)}

    def __init__(self, template: DeepKernelGP, stacked: dict, buffers: dict, n_seeds: int, batch: int):
        self.n_seeds = n_seeds
        self.fixed_alpha = template.fixed_alpha
        for name, shape in self._SHAPES.items():
            value = stacked.get(name)
            if value is not None:
                value = value.repeat_interleave(batch, 0).reshape(n_seeds * batch, *shape)
            setattr(self, name, value)
        self.encoder = self._network(template.encoder, "encoder.", stacked, buffers)
        self.mean_fn = self._network(template.mean_fn, "mean_fn.", stacked, buffers)

    def _network(self, module, prefix: str, stacked: dict, buffers: dict):
        if module is None:
            return None
        params = {n[len(prefix):]: v for n, v in stacked.items() if n.startswith(prefix)}
        bufs = {n[len(prefix):]: v for n, v in buffers.items() if n.startswith(prefix)}
        per_seed = vmap(lambda p, b, x: functional_call(module, (p, b), (x,)))

        def apply(x):  # (K*B, N, D) -> (K*B, N, out): each seed's network on its own B episodes
            out = per_seed(params, bufs, x.reshape(self.n_seeds, -1, *x.shape[1:]))
            return out.reshape(-1, *out.shape[2:])

        return apply


class _StackedDeepKernelGP:
    """K seeds' DeepKernelGPs (with networks) as one model over episodes (K, B, ...), each seed's losses and
    gradients bit for bit its own model's on the CPU (docs/experiments/metacal_batch_invariance.py): the
    networks seed by seed (nn.Linear's kernels), the GP algebra (Eqs. 3-5: squared distances, exp, Cholesky,
    solves and bmm, each per episode) on the K * B episodes at once, beta seed by seed, sigma and alpha
    broadcast per seed as (K, 1, ...)."""

    def __init__(self, template: DeepKernelGP, stacked: dict):
        self.template, self.stacked = template, stacked
        self.n_seeds = next(iter(stacked.values())).shape[0]

    def _scalar(self, raw: str, transform, ndim: int) -> torch.Tensor | None:
        value = self.stacked.get(raw)
        return None if value is None else transform(value).reshape(self.n_seeds, *([1] * ndim))

    def _network(self, prefix: str, module: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
        """``module`` of each seed on its rows x (K, B, N, D) -> (K, B, N, out), seed by seed: nn.Linear's own
        addmm of each seed's rows (a baddbmm over the seeds gives the same outputs, but its weight gradient, a
        bmm, rounds differently from the mm of one seed's: docs/experiments/metacal_batch_invariance.py)."""
        layers = [(self.stacked[f"{prefix}{i}.weight"].unbind(0), self.stacked[f"{prefix}{i}.bias"].unbind(0))
                  for i, m in enumerate(module) if isinstance(m, nn.Linear)]
        outputs = []
        for seed, h in enumerate(x.unbind(0)):  # unbind: one backward node per tensor, not K zero-filled selects
            for position, (weights, biases) in enumerate(layers):
                h = F.linear(h, weights[seed], biases[seed])
                if position < len(layers) - 1:
                    h = torch.relu(h)
            outputs.append(h)
        return torch.stack(outputs)

    def posterior(self, xs, ys, xq, also_at_support: bool = False):
        """``DeepKernelGP.posterior`` of every seed: xs (K, B, S, D), ys (K, B, S), xq (K, B, Q, D) -> f, v
        (K, B, Q) (or (K, B, Q + S) ``also_at_support``)."""
        template, n_seeds, batch, n_support = self.template, *xs.shape[:3]
        if template.encoder is None or template.mean_fn is None or template.raw_outputscale is not None:
            raise ValueError("the stacked deep-kernel GP needs both networks and s = 1 (Eq. 3); the other "
                             "variants train per seed (MetaCal.seed_batchable)")
        x_all = torch.cat([xs, xq], 2)
        z_all = self._network("encoder.", template.encoder, x_all)
        m_all = self._network("mean_fn.", template.mean_fn, x_all).squeeze(-1)
        flat_z = z_all.reshape(n_seeds * batch, *z_all.shape[2:])
        distances = squared_distances(flat_z[:, :n_support], flat_z)
        K = torch.exp(-0.5 * distances.reshape(n_seeds, batch, *distances.shape[1:]))  # s = 1: s * K is K
        eye = torch.eye(n_support, dtype=xs.dtype, device=xs.device)
        m_s, m_q = m_all[..., :n_support], m_all[..., n_support:]
        K_sq = K[..., n_support:]
        if also_at_support:
            K_sq = torch.cat([K_sq, K[..., :n_support]], -1)
            m_q = torch.cat([m_q, m_s], -1)
        # beta seed by seed, and computed twice as DeepKernelGP.posterior reads its ``beta`` property twice: its
        # gradient then sums each seed's (B, S, S) and (B, M) terms as one seed's run does (a (K, 1, 1, 1)
        # broadcast reduces over other dimensions, and one shared softplus node adds the two terms before its
        # derivative: both round differently)
        betas = (F.softplus(self.stacked["raw_beta"]) + 1e-6).unbind(0)
        K_ss = torch.stack([K[k, ..., :n_support] + betas[k] * eye for k in range(n_seeds)])
        betas = (F.softplus(self.stacked["raw_beta"]) + 1e-6).unbind(0)
        k_qq = torch.stack([(1.0 + betas[k]).reshape(-1, 1).expand(batch, K_sq.shape[-1])  # s + beta
                            for k in range(n_seeds)])
        fold = n_seeds * batch
        f, v = batched_gp_posterior(K_ss.reshape(fold, n_support, n_support), K_sq.reshape(fold, n_support, -1),
                                    k_qq.reshape(fold, -1), ys.reshape(fold, n_support),
                                    m_s.reshape(fold, n_support), m_q.reshape(fold, -1))
        return f.reshape(n_seeds, batch, -1), v.reshape(n_seeds, batch, -1)

    @property
    def sigma(self):  # (K, 1, 1, 1): divides the (K, B, M, S) GMM terms of Eq. (8)
        return self._scalar("raw_sigma2", lambda r: torch.sqrt(F.softplus(r) + 1e-8), 3)

    @property
    def alpha(self):  # (K, 1, 1): mixes (K, B, M) rows (Eq. 9)
        if self.template.raw_alpha is None:
            raw_sigma2 = self.stacked["raw_sigma2"]
            return torch.tensor(self.template.fixed_alpha, dtype=raw_sigma2.dtype, device=raw_sigma2.device)
        return self._scalar("raw_alpha", torch.sigmoid, 2)


class MetaCal(SeedBatchedTraining, EpisodicMetaMethod):
    """The meta-calibrated deep-kernel GP (Iwata & Kumagai, Alg. 1) and its relatives: ``fit(tasks)`` meta-learns
    the encoder g, the mean mu, beta, sigma^2 and alpha; ``predict`` adapts the GP to a task's support set
    (Eqs. 4-5) and calibrates its CDF with the support points' GMM (Eqs. 7-9).

    ``objective``: calib (Eq. 11, weight ``lam`` of the MSE) | nll (expected query likelihood: MDKL, GP);
    ``calibration``: gmm (Eq. 8) | emp (Eq. 2) | none (a Gaussian predictive); ``mix``: "learned" alpha or a
    fixed one in [0, 1]; ``split_support``: half the support set adapts, half calibrates; ``kernel_net`` /
    ``mean_net``: the encoder g and the neural mean (False: ARD inputs, a constant mean).

    ``train_batch`` trains a pipeline job's seeds as one model of K * B episodes (``seed_losses``) where that
    reproduces every seed's own run within rel 1e-6 in predictions and metrics (``seed_batchable``: the GP
    baseline, and metacal / MDKL bit for bit on the CPU); the other variants train their seeds one after
    another. A Cholesky jitter retry would jitter every seed's matrices of the batch, not one seed's; it does
    not occur in float64 for finite inputs: K has entries in [0, s] and is PSD up to rounding (~S * 1e-16),
    and beta >= 1e-6 keeps K + beta I's smallest eigenvalue far above that.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (task subset, initial weights, episodes).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        The class's ``defaults`` keys and ``EpisodicMetaMethod.defaults`` (``epochs``, ``lr``, ``batch_tasks``,
        early stopping, ``max_train_tasks``, ``hidden``).

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.metareg import MetaCal
    >>> rng = np.random.default_rng(0)
    >>> tasks = [(x, np.sin(x[:, 0] + rng.uniform(0, 3))) for x in rng.uniform(-3, 3, (8, 50, 1))]
    >>> model = MetaCal(epochs=3, random_state=0).fit(tasks, n_support=5, n_query=10)
    >>> x = rng.uniform(-3, 3, (15, 1))
    >>> prediction = model.predict(x[:5], np.sin(x[:5, 0]), x[5:])   # h of Eq. (9), a RecalibratedPredictive
    >>> lower, upper = prediction.interval(0.9)
    >>> bool((lower < upper).all())
    True
    """

    defaults = {
        **EpisodicMetaMethod.defaults,
        "lam": 0.5,  # lambda of Eq. (11); the paper does not state its value (Fig. 6: flat)
        "objective": "calib",  # calib: Eq. (11) | nll: expected test likelihood (MDKL, GP)
        "calibration": "gmm",  # gmm: Eq. (8) | emp: Eq. (2) | none: h = h_U
        "mix": "learned",  # Eq. (9) alpha: "learned" or a fixed number in [0, 1]
        "split_support": False,  # w/-Split: first half adapts the GP, second half calibrates
        "kernel_net": True,  # encoder g in Eq. (3); False: ARD-scaled raw inputs (w/o-Net, GP)
        "mean_net": True,  # neural mean mu; False: learned constant
        "learn_outputscale": False,  # Eq. (3) has none; the RBF GP baseline learns one
        "normalise_r": True,  # rescale r so r(0)=0, r(1)=1 (h is then a proper CDF)
        "init_beta": 0.1,
        "init_sigma2": 0.01,
        "init_alpha": 0.5,
        "encoder_layers": 3,
        "mean_layers": 4,
        "n_quantile_grid": 400,  # quantile levels for the CRPS / std integrals of the calibrated h
    }
    bounds = {"lam": Bound(low=0, high=1), "init_alpha": UNIT_INTERVAL_OPEN}
    choices = {"objective": ("calib", "nll"), "calibration": ("gmm", "emp", "none")}

    def build(self, data: EpisodeData) -> DeepKernelGP:
        p = self.params
        return DeepKernelGP(
            data.n_features,
            p["hidden"],
            p["kernel_net"],
            p["mean_net"],
            p["learn_outputscale"],
            p["encoder_layers"],
            p["mean_layers"],
            p["init_beta"],
            p["init_sigma2"],
            p["init_alpha"],
            p["mix"],
        )

    # ---- the forward pass of Fig. 2 -------------------------------------------------------------------
    def adapt(self, model: DeepKernelGP, episodes: Episodes) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Returns f, v at the query points and the GMM centers (support CDF values, Eq. 7).

        Parameters
        ----------
        model : DeepKernelGP
            The meta-trained GP.
        episodes : Episodes
            B standardised episodes (with ``split_support``, the support's second half calibrates).

        Returns
        -------
        tuple of torch.Tensor
            f and v (B, Q) (Eqs. 4-5), and the centres u_n = Phi((y_n - f_n) / sqrt(v_n)) of the calibration
            points (B, S or S / 2; Eq. 6), None with ``calibration="none"``.
        """
        xs, ys, xq = episodes.xs, episodes.ys, episodes.xq
        if self.params["split_support"]:
            half = xs.shape[-2] // 2
            if half < 2:
                raise ValueError("split_support needs at least 4 support points")
            xs, ys, xc, yc = xs[..., :half, :], ys[..., :half], xs[..., half:, :], ys[..., half:]
        else:
            xc, yc = xs, ys
        if self.params["calibration"] == "none":
            f, v = model.posterior(xs, ys, xq)
            return f, v, None
        # One batched solve for the query points and the calibration points together.
        if xc is xs:  # centres at the support points: reuse their network outputs and kernel block
            f_all, v_all = model.posterior(xs, ys, xq, also_at_support=True)
        else:
            f_all, v_all = model.posterior(xs, ys, torch.cat([xq, xc], -2))
        n_query = xq.shape[-2]  # leading dims: (B,) one seed's episodes, (K, B) the stacked seeds'
        f, v = f_all[..., :n_query], v_all[..., :n_query]
        centers = torch.special.ndtr((yc - f_all[..., n_query:]) / v_all[..., n_query:].sqrt())  # Eq. (6)
        return f, v, centers

    def calibrated_cdf(self, model: DeepKernelGP, u: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
        """Eq. (9) applied to uncalibrated CDF values u (B, M).

        Parameters
        ----------
        model : DeepKernelGP
            Holds sigma (Eq. 7) and alpha (Eq. 9).
        u : torch.Tensor of shape (B, M)
            Uncalibrated CDF values in [0, 1].
        centers : torch.Tensor of shape (B, S)
            The GMM centres of each task (``adapt``).

        Returns
        -------
        torch.Tensor of shape (B, M)
            The calibrated CDF values h(u).
        """
        p = self.params
        return mixed_map(u, centers, model.sigma, model.alpha, p["calibration"], p["normalise_r"])

    def episode_losses(self, model: DeepKernelGP, episodes: Episodes) -> torch.Tensor:
        f, v, centers = self.adapt(model, episodes)
        if self.params["objective"] == "nll":
            return gaussian_nll_per_episode(episodes.yq, f, v)
        u = torch.special.ndtr((episodes.yq - f) / v.sqrt())  # Eq. (6)
        h = u if centers is None else self.calibrated_cdf(model, u, centers)
        lam = float(self.params["lam"])
        mse = ((f - episodes.yq) ** 2).mean(-1)
        return lam * mse + (1.0 - lam) * calibration_loss_per_episode(h)  # Eq. (11), arguments as intended

    def seed_batchable(self) -> bool:
        """Which configurations' seeds train batched. The net-free GP baseline (``_SeedStackedGP``): within rel
        1e-6 of its own runs (measured on the default jobs: <= 6e-11 in predictions, 1,000 Adam steps). MetaCal
        and MDKL (both networks, s = 1, learned alpha, no split): bit-identical to their own runs on the CPU
        (``_StackedDeepKernelGP``: every operation's bits per seed as alone, docs/experiments/
        metacal_batch_invariance.py; the 8 default jobs: all 40 seeds' metrics and predictions identical), which
        their training needs, since it amplifies rounding (a vmapped version, rel 1e-15 at step 10, put
        ozone/ns20 seed 3's metrics up to 48 % apart). The stated tolerance stays rel 1e-6 (another CPU's
        kernels). The ablations of the same structure batch too (w/o-R, w/o-LC, the lambda sweep); the others
        (w/o-Net, w/o-Mix, w/-Split, w/-R_emp) train their seeds one after another, as ``train``
        (tests/methods/metareg/test_batched_seeds.py).

        Returns
        -------
        bool
            True for the GP baseline's parameters and for MetaCal's / MDKL's structure.
        """
        p = self.params
        if p["kernel_net"] and p["mean_net"]:
            return (not p["learn_outputscale"] and p["mix"] == "learned" and not p["split_support"]
                    and p["calibration"] in ("gmm", "none"))
        return p["objective"] == "nll" and not (p["kernel_net"] or p["mean_net"])

    def batches_on(self, device: torch.device) -> bool:
        """The stacked deep-kernel GP only on the CPU, where each seed's bits were shown to be its own run's (a
        GPU's batched Cholesky and products may pick kernels by batch size, which training would amplify).

        Parameters
        ----------
        device : torch.device
            Where the job trains.

        Returns
        -------
        bool
            True: the seeds train as one batched model; False: one after another (``train`` each).
        """
        return device.type == "cpu" or not (self.params["kernel_net"] and self.params["mean_net"])

    def seed_losses(self, template: DeepKernelGP) -> Callable[[dict, dict, list[Episodes]], torch.Tensor]:
        """Each seed's training loss (K,) for ``meta_train_batch``, each the mean over its own B episodes, as
        ``loss``. With the networks: ``_StackedDeepKernelGP`` on episodes stacked (K, B, ...), bit for bit each
        seed's own loss and gradient. The GP baseline: its episodes folded into one batch of K * B
        (``_SeedStackedGP``; the Cholesky's jitter retries are data-dependent Python control flow, which vmap
        cannot batch).

        Parameters
        ----------
        template : DeepKernelGP
            The seeds' architecture, on the meta device (its networks run each seed's stacked parameters).

        Returns
        -------
        callable
            ``losses(stacked, buffers, episodes)``: the stacked parameters and buffers ({name: (K, ...)}) and
            one Episodes of B per seed -> the K losses.
        """

        def deep_losses(stacked: dict, buffers: dict, episodes: list[Episodes]) -> torch.Tensor:
            stacked_episodes = Episodes(*(torch.stack([getattr(e, name) for e in episodes])
                                          for name in ("xs", "ys", "xq", "yq")))
            return self.episode_losses(_StackedDeepKernelGP(template, stacked), stacked_episodes).mean(-1)

        def losses(stacked: dict, buffers: dict, episodes: list[Episodes]) -> torch.Tensor:
            n_seeds, batch = len(episodes), len(episodes[0])
            folded = Episodes(*(torch.cat([getattr(e, name) for e in episodes]) for name in ("xs", "ys", "xq", "yq")))
            model = _SeedStackedGP(template, stacked, buffers, n_seeds, batch)
            return self.episode_losses(model, folded).reshape(n_seeds, batch).mean(1)

        return deep_losses if template.encoder is not None and template.mean_fn is not None else losses

    # ---- prediction ----------------------------------------------------------------------------------
    @torch.no_grad()
    def _predict_episodes(self, model, episodes: Episodes):
        f, v, centers = self.adapt(model, episodes)
        return {"mean": f, "std": v.sqrt(), "centers": centers, "sigma": model.sigma.detach(),
                "alpha": model.alpha.detach()}

    def _predictives(self, outputs, y_mean, y_std):
        """Gaussian h_U (Eq. 6) without calibration; else h = G(h_U) (Eq. 9) with G of each task's centres."""
        if outputs["centers"] is None:
            return super()._predictives({"mean": outputs["mean"], "std": outputs["std"]}, y_mean, y_std)
        gaussians = super()._predictives({"mean": outputs["mean"], "std": outputs["std"]}, y_mean, y_std)
        return [GmmCalibratedPredictive(base, *self._task_maps(outputs["centers"][b : b + 1], outputs["sigma"],
                                                               outputs["alpha"]),
                                        n_grid=int(self.params["n_quantile_grid"]))
                for b, base in enumerate(gaussians)]

    def _task_maps(self, centers: torch.Tensor, sigma: torch.Tensor, alpha: torch.Tensor):
        """G, G^{-1} and dG/du of one task (``centers`` (1, N)) as maps of numpy arrays of CDF values."""
        p = self.params

        def G(u):
            return mixed_map(u, centers, sigma, alpha, p["calibration"], p["normalise_r"])

        def tensor(values):
            return torch.as_tensor(np.asarray(values, dtype=np.float64), dtype=centers.dtype,
                                   device=centers.device).reshape(1, -1)

        def as_numpy(values):
            return values.reshape(-1).detach().cpu().numpy()

        @torch.no_grad()
        def cdf_map(u):
            return as_numpy(G(tensor(u)))

        @torch.no_grad()
        def inverse_map(levels):
            return as_numpy(invert_monotone(G, tensor(levels)).clamp(1e-12, 1 - 1e-12))  # u = G^-1(p)

        @torch.no_grad()
        def density_map(u):
            return as_numpy(mixed_map_density(tensor(u), centers, sigma, alpha, p["calibration"], p["normalise_r"]))

        return cdf_map, inverse_map, density_map

    def extra_stats(self, model: DeepKernelGP) -> dict:
        """The learned task-shared parameters.

        Parameters
        ----------
        model : DeepKernelGP
            The meta-trained GP.

        Returns
        -------
        dict
            ``beta``, ``sigma2``, ``alpha`` and, when learned, ``outputscale`` (floats).
        """
        stats = {"beta": model.beta.item(), "sigma2": model.sigma.item() ** 2, "alpha": model.alpha.item()}
        if model.raw_outputscale is not None:
            stats["outputscale"] = model.outputscale.item()
        return {k: float(np.asarray(v)) for k, v in stats.items()}

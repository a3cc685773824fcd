"""Meta-calibrated deep-kernel GP (Iwata & Kumagai, Sec. 4) and its GP relatives (MDKL, GP, ablations).

One class covers all of them; the variants are parameter overrides registered in ``METHODS``:
``objective`` (calib: Eq. 11 | nll: expected test likelihood), ``calibration`` (gmm: Eq. 8 | emp: Eq. 2 |
none), ``mix`` (learned alpha | a fixed alpha), ``split_support``, ``kernel_net`` / ``mean_net``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from uqcal.core.gp.exact import batched_gp_posterior, squared_distances
from uqcal.methods.metareg.episodes import (
    QUANTILE_LEVELS,
    EpisodeData,
    Episodes,
    EpisodicMetaMethod,
    calibration_loss_per_episode,
    feedforward,
    gaussian_nll_per_episode,
)
from uqcal.methods.metareg.gmm_cdf import invert_monotone, mixed_map, mixed_map_density


def _inverse_softplus(value: float) -> float:
    return math.log(math.expm1(value))


def _logit(value: float) -> float:
    return math.log(value / (1.0 - value))


class DeepKernelGP(nn.Module):
    """GP(mu(x), k(x, x')) with k = s * exp(-1/2 ||g(x) - g(x')||^2) + beta * delta  (Eq. 3; s = 1 there),
    plus the task-shared calibration parameters sigma^2 (Eq. 7) and alpha (Eq. 9).

    Constrained parameters: beta, sigma^2, s = softplus(raw) (> 0); alpha = sigmoid(raw) (in (0, 1)).
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

    def embed(self, x):
        if self.encoder is not None:
            return self.encoder(x)
        return x / (F.softplus(self.raw_lengthscale) + 1e-6)

    def prior_mean(self, x):
        if self.mean_fn is not None:
            return self.mean_fn(x).squeeze(-1)
        return self.constant_mean.expand(x.shape[:-1])

    def posterior(self, xs, ys, xq, also_at_support: bool = False):
        """Eqs. (4)-(5) for every task of the batch at once: f (B, Q), v (B, Q) (v includes beta).

        Support and query inputs go through g and mu together (one pass each), and one kernel block
        k(support, support + query) gives both K and k. ``also_at_support`` appends the predictive at the
        support inputs themselves (columns Q..Q+S; the GMM centres of Eq. 7) from that same block, so the
        support rows go through the networks once, not twice.
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
        k_qq = (scale + self.beta).expand(K_sq.shape[0], K_sq.shape[-1])
        return batched_gp_posterior(K_ss, K_sq, k_qq, ys, m_s, m_q)


class MetaCal(EpisodicMetaMethod):
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

    def __init__(self, params=None):
        super().__init__(params)
        p = self.params
        if p["objective"] not in ("calib", "nll"):
            raise ValueError(f"objective must be 'calib' or 'nll', got {p['objective']!r}")
        if p["calibration"] not in ("gmm", "emp", "none"):
            raise ValueError(f"calibration must be gmm, emp or none, got {p['calibration']!r}")
        if p["mix"] != "learned" and not (0.0 <= float(p["mix"]) <= 1.0):
            raise ValueError(f"mix must be 'learned' or in [0, 1], got {p['mix']!r}")
        if not 0.0 <= float(p["lam"]) <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {p['lam']}")

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
    def adapt(self, model: DeepKernelGP, episodes: Episodes):
        """Returns f, v at the query points and the GMM centers (support CDF values, Eq. 7)."""
        xs, ys, xq = episodes.xs, episodes.ys, episodes.xq
        if self.params["split_support"]:
            half = xs.shape[1] // 2
            if half < 2:
                raise ValueError("split_support needs at least 4 support points")
            xs, ys, xc, yc = xs[:, :half], ys[:, :half], xs[:, half:], ys[:, half:]
        else:
            xc, yc = xs, ys
        if self.params["calibration"] == "none":
            f, v = model.posterior(xs, ys, xq)
            return f, v, None
        # One batched solve for the query points and the calibration points together.
        if xc is xs:  # centres at the support points: reuse their network outputs and kernel block
            f_all, v_all = model.posterior(xs, ys, xq, also_at_support=True)
        else:
            f_all, v_all = model.posterior(xs, ys, torch.cat([xq, xc], 1))
        n_query = xq.shape[1]
        f, v = f_all[:, :n_query], v_all[:, :n_query]
        centers = torch.special.ndtr((yc - f_all[:, n_query:]) / v_all[:, n_query:].sqrt())  # Eq. (6)
        return f, v, centers

    def calibrated_cdf(self, model, u, centers):
        """Eq. (9) applied to uncalibrated CDF values u (B, M)."""
        p = self.params
        return mixed_map(u, centers, model.sigma, model.alpha, p["calibration"], p["normalise_r"])

    def episode_losses(self, model, episodes: Episodes):
        f, v, centers = self.adapt(model, episodes)
        if self.params["objective"] == "nll":
            return gaussian_nll_per_episode(episodes.yq, f, v)
        u = torch.special.ndtr((episodes.yq - f) / v.sqrt())  # Eq. (6)
        h = u if centers is None else self.calibrated_cdf(model, u, centers)
        lam = float(self.params["lam"])
        mse = ((f - episodes.yq) ** 2).mean(-1)
        return lam * mse + (1.0 - lam) * calibration_loss_per_episode(h)  # Eq. (11), arguments as intended

    # ---- prediction ----------------------------------------------------------------------------------
    def quantile_u(self, model, centers, levels: torch.Tensor) -> torch.Tensor:
        """u = G^{-1}(p) per task (B, P): h^{-1}(p|x) = f + sqrt(v) * Phi^{-1}(u) for every x of the task,
        because h(y|x) = G(h_U(y|x)) with G monotone and shared by the task's points."""
        targets = levels.expand(centers.shape[0], -1).contiguous()
        u = invert_monotone(lambda t: self.calibrated_cdf(model, t, centers), targets)
        return u.clamp(1e-12, 1 - 1e-12)

    @torch.no_grad()
    def predict(self, model, episodes: Episodes):
        f, v, centers = self.adapt(model, episodes)
        std = v.sqrt()
        if centers is None:
            return {"mean": f, "std": std}
        y = episodes.yq
        p = self.params
        z = (y - f) / std
        u = torch.special.ndtr(z)
        pit = self.calibrated_cdf(model, u, centers)
        # log dh/dy = log G'(u) + log N(y | f, v)
        density = mixed_map_density(u, centers, model.sigma, model.alpha, p["calibration"], p["normalise_r"])
        logpdf = (
            torch.log(density.clamp_min(1e-300)) - 0.5 * z * z - torch.log(std) - 0.5 * math.log(2 * math.pi)
        )
        # pit_uncal / std_uncal: the uncalibrated h_U (Eq. 6) for the report's Figs. 3-4
        columns = {"mean": f, "pit": pit, "logpdf": logpdf, "pit_uncal": u, "std_uncal": std}
        levels = torch.tensor(QUANTILE_LEVELS, dtype=f.dtype, device=f.device)
        u_levels = self.quantile_u(model, centers, levels)
        quantiles = f.unsqueeze(-1) + std.unsqueeze(-1) * torch.special.ndtri(u_levels).unsqueeze(1)
        for i, level in enumerate(QUANTILE_LEVELS):
            columns[f"q{level}"] = quantiles[..., i]
        # CRPS = 2 * int_0^1 (1{y <= q_p} - p)(q_p - y) dp and the std of h, on a midpoint grid of levels.
        k = int(p["n_quantile_grid"])
        grid = (torch.arange(k, dtype=f.dtype, device=f.device) + 0.5) / k
        q_grid = f.unsqueeze(-1) + std.unsqueeze(-1) * torch.special.ndtri(
            self.quantile_u(model, centers, grid)
        ).unsqueeze(1)
        indicator = (y.unsqueeze(-1) <= q_grid).to(f.dtype)
        columns["crps"] = 2.0 * ((indicator - grid) * (q_grid - y.unsqueeze(-1))).mean(-1)
        columns["std"] = q_grid.std(-1, unbiased=False)
        return columns

    def extra_stats(self, model) -> dict:
        stats = {"beta": model.beta.item(), "sigma2": model.sigma.item() ** 2, "alpha": model.alpha.item()}
        if model.raw_outputscale is not None:
            stats["outputscale"] = model.outputscale.item()
        return {k: float(np.asarray(v)) for k, v in stats.items()}

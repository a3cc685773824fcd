"""DKT (Patacchiola et al. 2020): one GP regression per class on +-1 one-hot targets over a deep kernel.

Training maximises the exact marginal likelihood of the whole episode (support + queries), summed over
the C class GPs; at test the posterior on the support gives q(f*_c) = N(mu*, var*) and, to score
calibration on the same footing as MD-BFSC, probabilities = mean_s softmax(f*_s) over latent samples
(Eq. 6a applied to DKT's posterior). Targets are +1 for the class and -1 otherwise, as in DKT's code.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from uqcal.core.gp.linalg import psd_safe_cholesky

from .backbones import build_backbone
from .episodic import Episode, EpisodicMethod
from .gp_core import KERNELS, ClassKernels, predictive_logit_samples


class DeepKernelRegression(nn.Module):
    def __init__(self, backbone: nn.Module, kernels: ClassKernels, noise_init: float = 0.1):
        super().__init__()
        self.backbone = backbone
        self.kernels = kernels
        self.raw_noise = nn.Parameter(
            torch.full((kernels.kernel.outputscale.shape[0],), math.log(noise_init))
        )

    @property
    def noise(self) -> torch.Tensor:  # (C,)
        return self.raw_noise.exp() + 1e-4


def signed_onehot(labels: torch.Tensor, n_way: int) -> torch.Tensor:
    return 2.0 * F.one_hot(labels, n_way).T.float() - 1.0  # (C, N)


def exact_mll(kernel, noise, targets, counter) -> torch.Tensor:
    """sum_c log N(y_c | 0, K_c + noise_c I)."""
    n = kernel.shape[-1]
    cov = kernel + noise[:, None, None] * torch.eye(n, dtype=kernel.dtype, device=kernel.device)
    chol = psd_safe_cholesky(cov, counter=counter)
    alpha = torch.cholesky_solve(targets.unsqueeze(-1), chol).squeeze(-1)
    logdet = 2.0 * chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    return (-0.5 * (targets * alpha).sum(-1) - 0.5 * logdet - 0.5 * n * math.log(2 * math.pi)).sum()


def exact_predictive(kernel, noise, targets, k_sq, k_qq_diag, counter):
    n = kernel.shape[-1]
    cov = kernel + noise[:, None, None] * torch.eye(n, dtype=kernel.dtype, device=kernel.device)
    chol = psd_safe_cholesky(cov, counter=counter)
    alpha = torch.cholesky_solve(targets.unsqueeze(-1), chol).squeeze(-1)
    mu = (k_sq * alpha.unsqueeze(-1)).sum(-2)
    v = torch.linalg.solve_triangular(chol, k_sq, upper=False)
    return mu, (k_qq_diag - (v**2).sum(-2)).clamp_min(1e-10)


class DKT(EpisodicMethod):
    """Deep kernel transfer: one GP regression per class on +-1 targets over a deep kernel, meta-trained by
    the exact marginal likelihood; probabilities average the softmax over posterior draws (Eq. 6a).

    Example (random images stand in for a dataset; fit draws 3-way 1-shot episodes with 4 queries a class)::

        >>> import numpy as np
        >>> from uqcal.methods.fewshot import DKT
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.random((60, 28, 28)), np.repeat(np.arange(6), 10)  # 6 base classes, 10 images each
        >>> model = DKT(train_episodes=2, width=8, n_pred_samples=50).fit(X, y, n_way=3, k_shot=1, n_query=4)
        >>> X_support, y_support = rng.random((3, 28, 28)), np.array([10, 11, 12])  # a new episode's classes
        >>> prediction = model.predict(X_support, y_support, rng.random((5, 28, 28)))
        >>> prediction.probs.shape, prediction.classes.tolist()
        ((5, 3), [10, 11, 12])

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (episodes, initial weights, MC samples).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        The class's ``defaults`` keys and ``EpisodicMethod.defaults``' keys.
    """
    batch_backbone = True  # logit_samples reads the images through model.backbone only
    defaults = {
        **EpisodicMethod.defaults,
        "kernel": "cosine",
        "centre_features": True,  # cosine: centre by the conditioning points' mean (App. E.4); False = authors' code
        "polynomial_power": 2,
        "lr_kernel": 1e-4,
        "noise_init": 0.5,
    }
    choices = {**EpisodicMethod.choices, "kernel": KERNELS}
    stochastic_prediction = True

    def build_model(self, n_way: int, image_size: int) -> nn.Module:
        backbone = build_backbone(self.params["backbone"], image_size, int(self.params["width"]))
        kernels = ClassKernels(
            self.params["kernel"], n_way, int(self.params["polynomial_power"]), bool(self.params["centre_features"])
        )
        return DeepKernelRegression(backbone, kernels, float(self.params["noise_init"]))

    def param_groups(self, model: DeepKernelRegression) -> list[dict]:
        kernel_params = [p for p in model.kernels.parameters() if p.requires_grad] + [model.raw_noise]
        return [
            {"params": list(model.backbone.parameters()), "lr": self.params["lr_backbone"]},
            {"params": kernel_params, "lr": self.params["lr_kernel"]},
        ]

    def episode_loss(self, model: DeepKernelRegression, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        images = torch.cat([episode.support_x, episode.query_x])
        labels = torch.cat([episode.support_y, episode.query_y])
        (features,) = model.kernels.prepare(model.backbone(images))
        kernel = model.kernels(features)
        targets = signed_onehot(labels, episode.n_way).to(kernel.dtype)
        return -exact_mll(kernel, model.noise, targets, self.counter) / labels.numel()

    def logit_samples(self, model: DeepKernelRegression, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        support, query = model.kernels.prepare(
            model.backbone(episode.support_x), model.backbone(episode.query_x)
        )
        kernel = model.kernels(support)
        targets = signed_onehot(episode.support_y, episode.n_way).to(kernel.dtype)
        mu, var = exact_predictive(
            kernel,
            model.noise,
            targets,
            model.kernels(support, query),
            model.kernels(query, diag=True),
            self.counter,
        )
        return predictive_logit_samples(mu, var, int(self.params["n_pred_samples"]), generator)

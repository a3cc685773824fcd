"""Neural process baseline (conditional NP, Garnelo et al. 2018): the support set is encoded into a
task representation (mean of per-point codes), the decoder outputs a Gaussian mean and std per query
point; trained by the expected query log-likelihood, like MDKL."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from uqcal.methods.metareg.batched import SeedBatchedTraining
from uqcal.methods.metareg.episodes import (
    EpisodeData,
    Episodes,
    EpisodicMetaMethod,
    feedforward,
    gaussian_nll_per_episode,
)


class ConditionalNP(nn.Module):
    def __init__(self, in_dim: int, hidden: int = 32, encoder_layers: int = 3, decoder_layers: int = 4):
        super().__init__()
        self.encoder = feedforward(in_dim + 1, hidden, hidden, encoder_layers)  # Sec. 5.3: 3 layers, 32 units
        self.decoder = feedforward(in_dim + hidden, 2, hidden, decoder_layers)

    def forward(self, xs, ys, xq):
        representation = self.encoder(torch.cat([xs, ys.unsqueeze(-1)], -1)).mean(1, keepdim=True)
        out = self.decoder(torch.cat([xq, representation.expand(-1, xq.shape[1], -1)], -1))
        return out[..., 0], F.softplus(out[..., 1]) + 1e-3


class NeuralProcess(SeedBatchedTraining, EpisodicMetaMethod):
    """NP (Sec. 5.2): a conditional neural process; the support set's mean code (``encoder_layers`` layers of
    ``hidden`` units) conditions a decoder (``decoder_layers`` layers) of a Gaussian mean and std per query point.
    Meta-trained by ``meta_train`` (``epochs``, ``lr``, ``batch_tasks`` tasks a step, early stopping).

    ``train_batch`` (a pipeline job's seeds as one vmapped model, ``batched.meta_train_batch``) gives every seed
    its own run's predictions and metrics within rel 1e-6: only the floating-point reduction order differs (a
    batched matmul for per-seed ones, float64), and training amplifies it to at most 1.2e-9 (measured on the
    default jobs; tests/methods/metareg/test_batched_seeds.py).

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (task subset, initial weights, episodes).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        ``encoder_layers``, ``decoder_layers`` and ``EpisodicMetaMethod.defaults`` (``epochs``, ``lr``,
        ``batch_tasks``, early stopping, ``hidden``).

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.metareg import NeuralProcess
    >>> rng = np.random.default_rng(0)
    >>> tasks = [(x, np.sin(x[:, 0] + rng.uniform(0, 3))) for x in rng.uniform(-3, 3, (8, 50, 1))]
    >>> process = NeuralProcess(epochs=3, random_state=1).fit(tasks, n_support=5, n_query=10)
    >>> x = rng.uniform(-3, 3, (15, 1))
    >>> process.predict(x[:5], np.sin(x[:5, 0]), x[5:]).mean.shape
    (10,)
    """

    defaults = {**EpisodicMetaMethod.defaults, "encoder_layers": 3, "decoder_layers": 4}

    def build(self, data: EpisodeData) -> ConditionalNP:
        return ConditionalNP(
            data.n_features,
            self.params["hidden"],
            self.params["encoder_layers"],
            self.params["decoder_layers"],
        )

    def episode_losses(self, model: ConditionalNP, episodes: Episodes) -> torch.Tensor:
        mean, std = model(episodes.xs, episodes.ys, episodes.xq)
        return gaussian_nll_per_episode(episodes.yq, mean, std**2)

    @torch.no_grad()
    def _predict_episodes(self, model, episodes):
        mean, std = model(episodes.xs, episodes.ys, episodes.xq)
        return {"mean": mean, "std": std}

"""Neural process baseline (conditional NP, Garnelo et al. 2018): the support set is encoded into a
task representation (mean of per-point codes), the decoder outputs a Gaussian mean and std per query
point; trained by the expected query log-likelihood, like MDKL."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from uqcal.methods.metareg.episodes import EpisodicMetaMethod, feedforward, gaussian_nll_per_episode


class ConditionalNP(nn.Module):
    def __init__(self, in_dim: int, hidden: int = 32, encoder_layers: int = 3, decoder_layers: int = 4):
        super().__init__()
        self.encoder = feedforward(in_dim + 1, hidden, hidden, encoder_layers)  # Sec. 5.3: 3 layers, 32 units
        self.decoder = feedforward(in_dim + hidden, 2, hidden, decoder_layers)

    def forward(self, xs, ys, xq):
        representation = self.encoder(torch.cat([xs, ys.unsqueeze(-1)], -1)).mean(1, keepdim=True)
        out = self.decoder(torch.cat([xq, representation.expand(-1, xq.shape[1], -1)], -1))
        return out[..., 0], F.softplus(out[..., 1]) + 1e-3


class NeuralProcess(EpisodicMetaMethod):
    defaults = {**EpisodicMetaMethod.defaults, "encoder_layers": 3, "decoder_layers": 4}

    def build(self, data):
        return ConditionalNP(
            data.n_features,
            self.params["hidden"],
            self.params["encoder_layers"],
            self.params["decoder_layers"],
        )

    def episode_losses(self, model, episodes):
        mean, std = model(episodes.xs, episodes.ys, episodes.xq)
        return gaussian_nll_per_episode(episodes.yq, mean, std**2)

    @torch.no_grad()
    def predict(self, model, episodes):
        mean, std = model(episodes.xs, episodes.ys, episodes.xq)
        return {"mean": mean, "std": std}

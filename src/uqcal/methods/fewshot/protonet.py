"""Prototypical networks (Snell et al. 2017): logits = -squared Euclidean distance to class prototypes."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .backbones import build_backbone
from .episodic import Episode, EpisodicMethod


def prototype_logits(support_features, support_y, query_features, n_way: int) -> torch.Tensor:
    onehot = F.one_hot(support_y, n_way).to(support_features.dtype)  # (N, C)
    prototypes = (onehot.T @ support_features) / onehot.sum(0).unsqueeze(-1)
    return -torch.cdist(query_features, prototypes).pow(2)


class ProtoNet(EpisodicMethod):
    defaults = dict(EpisodicMethod.defaults)

    def build_model(self, n_way: int, image_size: int) -> nn.Module:
        return build_backbone(self.params["backbone"], image_size, int(self.params["width"]))

    def _logits(self, model, episode: Episode) -> torch.Tensor:
        return prototype_logits(
            model(episode.support_x), episode.support_y, model(episode.query_x), episode.n_way
        )

    def episode_loss(self, model, episode: Episode, generator) -> torch.Tensor:
        return F.cross_entropy(self._logits(model, episode), episode.query_y)

    def logit_samples(self, model, episode: Episode, generator) -> torch.Tensor:
        return self._logits(model, episode).unsqueeze(0)

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
    """Prototypical networks: softmax of minus the squared distance to each class's mean embedding.

    Example (random images stand in for a dataset; fit draws 3-way 1-shot episodes with 4 queries a class)::

        >>> import numpy as np
        >>> from uqcal.methods.fewshot import ProtoNet
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.random((60, 28, 28)), np.repeat(np.arange(6), 10)  # 6 base classes, 10 images each
        >>> model = ProtoNet(train_episodes=2, width=8).fit(X, y, n_way=3, k_shot=1, n_query=4)
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
    defaults = dict(EpisodicMethod.defaults)

    def build_model(self, n_way: int, image_size: int) -> nn.Module:
        return build_backbone(self.params["backbone"], image_size, int(self.params["width"]))

    def _logits(self, model, episode: Episode) -> torch.Tensor:
        return prototype_logits(
            model(episode.support_x), episode.support_y, model(episode.query_x), episode.n_way
        )

    def episode_loss(self, model: nn.Module, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        return F.cross_entropy(self._logits(model, episode), episode.query_y)

    def head_model(self, model: nn.Module) -> tuple[nn.Module, nn.Module]:
        """The backbone and the head: the model is the backbone.

        Parameters
        ----------
        model : torch.nn.Module
            The backbone (ProtoNet's whole model).

        Returns
        -------
        tuple of torch.nn.Module
            The backbone and an identity head: the prototypes are computed from the features.
        """
        return model, nn.Identity()  # the model is the backbone; the prototypes are the head

    def logit_samples(self, model: nn.Module, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        return self._logits(model, episode).unsqueeze(0)

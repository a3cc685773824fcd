"""MAML (Finn et al. 2017) with a Conv4 backbone and a linear head, via torch.func.functional_call.

`first_order: true` (default, for the CPU budget) is FOMAML: the outer gradient is taken at the adapted
weights without differentiating through the inner SGD steps; `first_order: false` is second-order MAML.
Batch norm uses the statistics of the batch it sees (support or query), as in the reference MAML code.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from .backbones import build_backbone
from .episodic import Episode, EpisodicMethod


class ConvClassifier(nn.Module):
    def __init__(self, backbone: nn.Module, feature_dim: int, n_way: int):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(feature_dim, n_way)

    def forward(self, images):
        return self.head(self.backbone(images))


class MAML(EpisodicMethod):
    """MAML (first-order by default): a Conv4 classifier whose weights take ``inner_steps_test`` SGD steps on
    each episode's support set before predicting its queries.

    Example (random images stand in for a dataset; fit draws 3-way 1-shot episodes with 4 queries a class)::

        >>> import numpy as np
        >>> from uqcal.methods.fewshot import MAML
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.random((60, 28, 28)), np.repeat(np.arange(6), 10)  # 6 base classes, 10 images each
        >>> model = MAML(train_episodes=2, width=8, inner_steps_test=2).fit(X, y, n_way=3, k_shot=1, n_query=4)
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
    defaults = {
        **EpisodicMethod.defaults,
        "inner_lr": 0.1,
        "inner_steps_train": 5,
        "inner_steps_test": 10,
        "first_order": True,
    }

    def build_model(self, n_way: int, image_size: int) -> nn.Module:
        backbone = build_backbone(self.params["backbone"], image_size, int(self.params["width"]))
        with torch.no_grad():
            # The backbone is still on the CPU here (``train`` moves the whole model afterwards).
            dim = backbone(torch.zeros(2, image_size, image_size, device="cpu")).shape[-1]
        return ConvClassifier(backbone, dim, n_way)

    def adapt(self, model: ConvClassifier, episode: Episode, steps: int, create_graph: bool) -> dict:
        """The inner loop: SGD on the support set's cross-entropy from the model's weights.

        Parameters
        ----------
        model : ConvClassifier
            The meta-learned initialisation.
        episode : Episode
            The episode whose support set the steps use.
        steps : int
            SGD steps of learning rate ``inner_lr``.
        create_graph : bool
            Keep the graph for second-order meta-gradients (otherwise the gradients are detached).

        Returns
        -------
        dict
            The adapted weights, {parameter name: tensor}.
        """
        params = dict(model.named_parameters())
        for _ in range(steps):
            logits = functional_call(model, params, (episode.support_x,))
            loss = F.cross_entropy(logits, episode.support_y)
            grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
            params = {
                name: (p - self.params["inner_lr"] * g)
                if create_graph
                else (p - self.params["inner_lr"] * g.detach())
                for (name, p), g in zip(params.items(), grads, strict=True)
            }
        return params

    def episode_loss(self, model: ConvClassifier, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        first_order = bool(self.params["first_order"])
        params = self.adapt(
            model, episode, int(self.params["inner_steps_train"]), create_graph=not first_order
        )
        if first_order:
            # FOMAML: treat the adapted weights as (detached update) + original weights, so the outer
            # gradient w.r.t. the original weights equals the gradient at the adapted weights.
            originals = dict(model.named_parameters())
            params = {n: originals[n] + (p - originals[n]).detach() for n, p in params.items()}
        logits = functional_call(model, params, (episode.query_x,))
        return F.cross_entropy(logits, episode.query_y)

    def logit_samples(self, model: ConvClassifier, episode: Episode, generator: torch.Generator) -> torch.Tensor:
        model.train()  # batch statistics, as in training (transductive BN, the MAML convention)
        with torch.enable_grad():
            params = self.adapt(model, episode, int(self.params["inner_steps_test"]), create_graph=False)
        with torch.no_grad():
            logits = functional_call(model, {n: p.detach() for n, p in params.items()}, (episode.query_x,))
        return logits.unsqueeze(0)

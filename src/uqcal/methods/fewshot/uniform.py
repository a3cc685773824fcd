"""The fewshot family's honest reference predictor: 1/C for every class of an episode."""

from __future__ import annotations

import numpy as np

from uqcal.methods.api import REFERENCE_RESOURCES

from .base import EpisodePredictive, FewShotClassifier, check_episode_shape, check_images, check_labels, support_classes


class UniformClassifier(FewShotClassifier):
    """Probability 1/C for each of the C classes of an episode's support set, whatever the images: the
    accuracy of chance and, for balanced queries, a perfectly calibrated predictive with no sharpness.

    Example (any (n, H, W) images and integer labels; it learns nothing)::

        >>> import numpy as np
        >>> from uqcal.methods.fewshot import UniformClassifier
        >>> rng = np.random.default_rng(0)
        >>> model = UniformClassifier().fit(rng.random((40, 28, 28)), np.repeat(np.arange(5), 8))
        >>> prediction = model.predict(rng.random((10, 28, 28)), np.repeat([3, 7], 5), rng.random((4, 28, 28)))
        >>> prediction.classes.tolist(), prediction.probs[0].tolist()
        ([3, 7], [0.5, 0.5])
    """

    defaults: dict = {}
    cpu_only = True  # numpy only: a cluster job never asks a GPU for it
    job_resources = REFERENCE_RESOURCES

    def fit(self, X, y, validation=None, *, n_way: int = 5, k_shot: int = 1, n_query: int = 16,
            n_val_episodes: int = 100) -> UniformClassifier:
        """Check the pool (X: (n, H, W) float images, y: (n,) integer labels) and the episode shape; nothing
        is learnt, and ``validation`` is not used."""
        check_episode_shape(n_way, k_shot, n_query, n_val_episodes)
        check_labels("y", y, len(check_images("X", X)))
        self.n_way_ = int(n_way)
        self.fitted_ = True
        return self

    def predict(self, X_support, y_support, X_query) -> EpisodePredictive:
        """(q, C) probabilities 1/C over ``classes`` = the sorted support labels (integers) for the q queries."""
        self.check_fitted()
        support = check_images("X_support", X_support)
        classes = support_classes(check_labels("y_support", y_support, len(support)))
        n_query = len(check_images("X_query", X_query))
        return EpisodePredictive(np.full((n_query, len(classes)), 1.0 / len(classes)), classes)

    def run_outputs(self, n_test_episodes: int, test_seconds: float) -> tuple[dict, dict]:
        return {"n_way": self.n_way_}, {}

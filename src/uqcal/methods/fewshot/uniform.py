"""The fewshot family's honest reference predictor: 1/C for every class of an episode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from uqcal.methods.api import REFERENCE_RESOURCES

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

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

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (episodes, initial weights, MC samples).
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        None (it has no parameters).
    """

    defaults: dict = {}
    cpu_only = True  # numpy only: a cluster job never asks a GPU for it
    job_resources = REFERENCE_RESOURCES

    def fit(self, X: ArrayLike, y: ArrayLike, validation: tuple | Sequence | None = None, *, n_way: int = 5,
            k_shot: int = 1, n_query: int = 16, n_val_episodes: int = 100) -> UniformClassifier:
        """Check the pool (X: (n, H, W) float images, y: (n,) integer labels) and the episode shape; nothing
        is learnt, and ``validation`` is not used.

        Parameters
        ----------
        X : array_like of shape (n, H, W)
            Float grayscale images (only checked).
        y : array_like of shape (n,)
            Their integer class labels.
        validation : tuple, sequence of tuple or None, default None
            Not used.
        n_way, k_shot, n_query : int, default 5, 1 and 16
            The episodes' classes, support images a class and query images a class.
        n_val_episodes : int, default 100
            Episodes drawn from a validation pool.

        Returns
        -------
        UniformClassifier
            self, fitted.
        """
        check_episode_shape(n_way, k_shot, n_query, n_val_episodes)
        check_labels("y", y, len(check_images("X", X)))
        self.n_way_ = int(n_way)
        self.fitted_ = True
        return self

    def predict(self, X_support: ArrayLike, y_support: ArrayLike, X_query: ArrayLike) -> EpisodePredictive:
        """(q, C) probabilities 1/C over ``classes`` = the sorted support labels (integers) for the q queries.

        Parameters
        ----------
        X_support : array_like of shape (m, H, W)
            The support images.
        y_support : array_like of shape (m,)
            Their integer labels.
        X_query : array_like of shape (q, H, W)
            The query images.

        Returns
        -------
        EpisodePredictive
            (q, C) probabilities over ``classes`` = the sorted support labels, all 1/C.
        """
        self.check_fitted()
        support = check_images("X_support", X_support)
        classes = support_classes(check_labels("y_support", y_support, len(support)))
        n_query = len(check_images("X_query", X_query))
        return EpisodePredictive(np.full((n_query, len(classes)), 1.0 / len(classes)), classes)

    def run_outputs(self, n_test_episodes: int, test_seconds: float) -> tuple[dict, dict]:
        """What a pipeline run saves beside its predictions.

        Parameters
        ----------
        n_test_episodes : int
            The number of test episodes predicted.
        test_seconds : float
            The seconds their prediction took.

        Returns
        -------
        tuple of (object, dict)
            ``{"n_way": C}`` for model.pt and no stats.
        """
        return {"n_way": self.n_way_}, {}

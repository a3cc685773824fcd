"""Predictive objects to and from skpro's distributions (``pip install skpro``; not a dependency of uqcal).

skpro (scikit-learn's probabilistic-regression companion) represents a predictive as a distribution over a
DataFrame of targets; ``to_skpro`` turns a ``GaussianPredictive`` into its ``skpro.distributions.Normal`` (one
column) and ``from_skpro`` turns such a Normal back, so skpro's metrics and uqcal's score the same numbers.
"""

from __future__ import annotations

import numpy as np

from uqcal.core.predictive import GaussianPredictive

__all__ = ["from_skpro", "to_skpro"]


def to_skpro(prediction: GaussianPredictive, column: str = "y"):
    """The skpro ``Normal`` of a Gaussian predictive.

    Parameters
    ----------
    prediction : GaussianPredictive
    column : str, default "y"
        The target's column name.

    Returns
    -------
    skpro.distributions.Normal
        n rows, one column.
    """
    import pandas as pd
    from skpro.distributions import Normal

    if not isinstance(prediction, GaussianPredictive):
        raise TypeError(f"to_skpro: a GaussianPredictive converts to skpro's Normal, got {type(prediction).__name__}")
    return Normal(mu=prediction.mean[:, None], sigma=prediction.std[:, None], columns=pd.Index([column]))


def from_skpro(distribution) -> GaussianPredictive:
    """The Gaussian predictive of a one-column skpro ``Normal``.

    Parameters
    ----------
    distribution : skpro.distributions.Normal

    Returns
    -------
    GaussianPredictive
    """
    from skpro.distributions import Normal

    if not isinstance(distribution, Normal):
        raise TypeError(f"from_skpro: expected skpro's Normal, got {type(distribution).__name__}")
    mean, std = np.asarray(distribution.mu, dtype=np.float64), np.asarray(distribution.sigma, dtype=np.float64)
    if mean.ndim == 2 and mean.shape[1] != 1:
        raise ValueError(f"from_skpro: a one-column distribution converts, got {mean.shape[1]} columns")
    return GaussianPredictive(mean.reshape(-1), np.broadcast_to(std, mean.shape).reshape(-1))

"""Predictive objects to and from skpro's distributions (the ``skpro`` extra; not a dependency of the base install).

skpro (scikit-learn's probabilistic-regression companion) represents a predictive as a distribution over a
DataFrame of targets (n rows, one column here). Each regression predictive kind that skpro can hold exactly converts
to its counterpart and back; ``tests/core/test_interop.py`` scores both sides with skpro's metrics and with
``uqcal.metrics.all_metrics``.

====================================================  ===================================================================
uqcal                                                 skpro
====================================================  ===================================================================
``GaussianPredictive(mean, std)``                     ``Normal(mu, sigma)``: the same distribution.
``QuantilePredictive(levels, quantiles)``             ``HistogramQPD(quantiles, tails="uniform")``: the same quantile
                                                      function on [levels[0], levels[-1]] and the same CDF between the
                                                      outer quantiles; see ``to_skpro`` for the tails.
``RecalibratedPredictive`` of a Gaussian by an        ``Mixture`` of ``TruncatedNormal`` pieces: the same distribution
isotonic map (``IsotonicRecalibrator``,               (R(F(y)) with R piecewise linear through knots (p_k, r_k) is the
``MonotoneMap``)                                      base truncated to [F^-1(p_{k-1}), F^-1(p_k)], weights r_k - r_{k-1})
====================================================  ===================================================================

No faithful counterpart, refused with an error naming the reason rather than converted approximately: a recalibrated
predictive through any other map (MetaCal's GMM-CDF, a user's callable), of a non-Gaussian base, or with a
``logpdf_floor``; a quantile predictive with tied quantiles (skpro's histogram needs increasing ones) or with
its own tails (a subclass with its own ``cdf`` beyond the outer levels); class probabilities (``CategoricalPredictive``:
skpro's distributions are over real targets). uqcal builds no sample-based predictive, so skpro's ``Empirical``
has no uqcal counterpart.
"""

from __future__ import annotations

import numpy as np

from uqcal.core.calibration import MonotoneMap
from uqcal.core.predictive import (
    GaussianPredictive,
    Predictive,
    QuantilePredictive,
    RecalibratedPredictive,
    RegressionPredictive,
)

__all__ = ["from_skpro", "to_skpro"]

# Truncation points of neighbouring mixture pieces are one level F^-1(p_k) computed per row; rows that name
# different levels (beyond round-off) are not an isotonic recalibration of one base.
_LEVEL_TOLERANCE = 1e-9


def to_skpro(prediction: Predictive, column: str = "y"):
    """The skpro distribution of a uqcal predictive (one column, one row per point).

    - ``GaussianPredictive`` -> ``skpro.distributions.Normal``.
    - ``QuantilePredictive`` -> ``skpro.distributions.HistogramQPD`` with ``tails="uniform"``: uniform density
      between neighbouring quantiles (uqcal's linear CDF), so the quantiles at the predicted levels, the quantile
      function between them and the CDF between the outer quantiles are uqcal's. Outside the outer quantiles
      uqcal's CDF is flat at the outer levels (it predicts nothing there); skpro's continues at the outer piece's
      density until the tail mass is spent, so skpro's PIT, CRPS and log loss are those of that completed
      distribution, while uqcal's CRPS is the mean quantile score over its levels (scoringrules'
      ``crps_quantile``), which approaches it for many levels at the midpoints of equal cells.
    - ``RecalibratedPredictive`` of a ``GaussianPredictive`` through a ``MonotoneMap`` (what
      ``IsotonicRecalibrator`` returns) -> ``skpro.distributions.Mixture`` of ``TruncatedNormal`` pieces, one per
      piece of the map: F'(y) = R(F(y)) with R linear from (p_{k-1}, r_{k-1}) to (p_k, r_k) is the base truncated to
      [F^-1(p_{k-1}), F^-1(p_k)] with weight r_k - r_{k-1}. The same CDF and density; skpro computes its CRPS and
      quantiles only approximately (Monte Carlo, bisection) for a mixture.

    Parameters
    ----------
    prediction : Predictive
        One of the kinds above.
    column : str, default "y"
        The target's column name.

    Returns
    -------
    skpro.distributions.BaseDistribution
        n rows, one column.

    Raises
    ------
    TypeError
        For a kind skpro holds no faithful counterpart of (module docstring), naming it and why.
    ValueError
        For a quantile predictive with tied quantiles, a recalibration map with a jump, or a ``logpdf_floor``.
    """
    import pandas as pd

    columns = pd.Index([column])
    if isinstance(prediction, GaussianPredictive):
        from skpro.distributions import Normal

        return Normal(mu=prediction.mean[:, None], sigma=prediction.std[:, None], columns=columns)
    if type(prediction) is QuantilePredictive:
        return _quantiles_to_skpro(prediction, columns)
    if isinstance(prediction, RecalibratedPredictive):
        return _recalibrated_to_skpro(prediction, columns)
    if isinstance(prediction, QuantilePredictive):
        raise TypeError(f"to_skpro: a {type(prediction).__name__} has tails of its own that skpro's HistogramQPD "
                        "does not hold; only a plain QuantilePredictive converts")
    if isinstance(prediction, RegressionPredictive):
        raise TypeError(f"to_skpro: no skpro counterpart of a {type(prediction).__name__}; GaussianPredictive, "
                        "QuantilePredictive and isotonic-recalibrated Gaussian predictives convert")
    raise TypeError(f"to_skpro: a {type(prediction).__name__} has no skpro counterpart (skpro's distributions are over "
                    "real targets, not class labels)")


def _quantiles_to_skpro(prediction: QuantilePredictive, columns):
    import pandas as pd
    from skpro.distributions import HistogramQPD

    if (np.diff(prediction.quantiles, axis=1) <= 0).any():
        raise ValueError("to_skpro: the quantiles of a QuantilePredictive must be strictly increasing along the levels "
                         "for skpro's HistogramQPD (a tie is an atom it cannot hold)")
    n, n_levels = prediction.quantiles.shape
    index = pd.MultiIndex.from_product([prediction.levels, range(n)], names=["quantile", "sample"])
    frame = pd.DataFrame(prediction.quantiles.T.reshape(n_levels * n, 1), index=index, columns=columns)
    return HistogramQPD(frame, tails="uniform", index=pd.RangeIndex(n), columns=columns)


def _recalibrated_to_skpro(prediction: RecalibratedPredictive, columns):
    from scipy.special import ndtri
    from skpro.distributions import Mixture, TruncatedNormal

    base, recalibration = prediction.base, prediction.cdf_map
    if not isinstance(recalibration, MonotoneMap) or type(base) is not GaussianPredictive:
        raise TypeError(f"to_skpro: a {type(prediction).__name__} converts (to skpro's Mixture of TruncatedNormal "
                        f"pieces) only as a piecewise-linear MonotoneMap of a GaussianPredictive (IsotonicRecalibrator's), "
                        f"got the map {type(recalibration).__name__} of a {type(base).__name__}")
    if prediction.logpdf_floor is not None:
        raise ValueError(f"to_skpro: logpdf_floor={prediction.logpdf_floor} floors uqcal's log density, which skpro's "
                         "mixture does not; convert dataclasses.replace(prediction, logpdf_floor=None)")
    if (np.diff(recalibration.x) <= 0).any():
        raise ValueError("to_skpro: the recalibration map jumps (two knots at one level): an atom, which skpro's "
                         "mixture of truncated normals cannot hold")
    z = ndtri(recalibration.x)  # -inf at p = 0, +inf at p = 1: the outer pieces are half-open
    mu, sigma = base.mean[:, None], base.std[:, None]
    pieces = [(f"piece{k}", TruncatedNormal(mu=mu, sigma=sigma, l_trunc=mu + sigma * z[k], r_trunc=mu + sigma * z[k + 1],
                                            columns=columns))
              for k in range(z.size - 1)]
    return Mixture(pieces, weights=np.diff(recalibration.y), columns=columns)


def from_skpro(distribution) -> RegressionPredictive:
    """The uqcal predictive of a one-column skpro distribution: the inverse of ``to_skpro``.

    - ``Normal`` -> ``GaussianPredictive``.
    - ``HistogramQPD`` -> ``QuantilePredictive`` at its quantile points (its tails are not kept: a
      ``QuantilePredictive`` predicts nothing beyond its outer levels).
    - ``Mixture`` of ``TruncatedNormal`` pieces of one normal on neighbouring intervals (what ``to_skpro`` makes of
      an isotonic recalibration) -> ``RecalibratedPredictive`` of the ``GaussianPredictive`` through the
      ``MonotoneMap`` with knots p_k = Phi((b_k - mu) / sigma) at the pieces' bounds and r_k the cumulative weights.

    Parameters
    ----------
    distribution : skpro.distributions.BaseDistribution
        One column.

    Returns
    -------
    RegressionPredictive

    Raises
    ------
    TypeError
        For any other distribution, naming it.
    ValueError
        For more than one column, or a mixture that is not an isotonic recalibration of one normal.
    """
    from skpro.distributions import HistogramQPD, Mixture, Normal

    if len(distribution.columns) != 1:
        raise ValueError(f"from_skpro: a one-column distribution converts, got {len(distribution.columns)} columns")
    if isinstance(distribution, Normal):
        mean, std = _column(distribution.mu, distribution), _column(distribution.sigma, distribution)
        return GaussianPredictive(mean, std)
    if isinstance(distribution, HistogramQPD):
        frame = distribution.quantiles
        levels = np.array(sorted(frame.index.get_level_values(0).unique()), dtype=np.float64)
        rows = distribution.index
        quantiles = np.column_stack([frame.loc[level].reindex(rows).to_numpy(np.float64)[:, 0] for level in levels])
        return QuantilePredictive(levels, quantiles)
    if isinstance(distribution, Mixture):
        return _recalibrated_from_skpro(distribution)
    raise TypeError(f"from_skpro: no uqcal predictive for skpro's {type(distribution).__name__}; Normal, HistogramQPD and "
                    "a Mixture of TruncatedNormal pieces (to_skpro's forms) convert")


def _column(values, distribution) -> np.ndarray:
    """A parameter (scalar, (n,) or (n, 1)) as one value per row of ``distribution``."""
    return np.broadcast_to(np.asarray(values, dtype=np.float64).reshape(-1, 1), (len(distribution.index), 1))[:, 0].copy()


def _recalibrated_from_skpro(distribution) -> RecalibratedPredictive:
    from scipy.special import ndtr
    from skpro.distributions import TruncatedNormal

    pieces = [entry[1] if isinstance(entry, tuple) else entry for entry in distribution.distributions]
    if not all(isinstance(piece, TruncatedNormal) for piece in pieces):
        names = sorted({type(piece).__name__ for piece in pieces})
        raise TypeError(f"from_skpro: a Mixture converts only as TruncatedNormal pieces (to_skpro's isotonic "
                        f"recalibration), got pieces {names}")
    mu, sigma = _column(pieces[0].mu, distribution), _column(pieces[0].sigma, distribution)
    lower = np.column_stack([_column(piece.l_trunc, distribution) for piece in pieces])
    upper = np.column_stack([_column(piece.r_trunc, distribution) for piece in pieces])
    same_normal = all(np.allclose(_column(p.mu, distribution), mu, rtol=0, atol=_LEVEL_TOLERANCE)
                      and np.allclose(_column(p.sigma, distribution), sigma, rtol=0, atol=_LEVEL_TOLERANCE) for p in pieces)
    levels = ndtr((np.column_stack([lower, upper[:, -1:]]) - mu[:, None]) / sigma[:, None])  # (n, K + 1)
    neighbours = np.allclose(lower[:, 1:], upper[:, :-1], rtol=0, atol=_LEVEL_TOLERANCE)
    if not (same_normal and neighbours and np.all(np.abs(levels - levels[:1]) <= _LEVEL_TOLERANCE)):
        raise ValueError("from_skpro: the Mixture's TruncatedNormal pieces are not one normal cut into neighbouring "
                         "pieces at the same levels in every row (an isotonic recalibration, to_skpro's form)")
    weights = np.ones(len(pieces)) if distribution.weights is None else np.asarray(distribution.weights, dtype=np.float64)
    weights = weights / weights.sum()
    recalibration = MonotoneMap(levels[0], np.concatenate([[0.0], np.cumsum(weights)]))
    return RecalibratedPredictive(GaussianPredictive(mu, sigma), recalibration, recalibration.inverse)

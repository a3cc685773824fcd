"""The predictive objects of the metareg family (uqcal.core.predictive), in the targets' original units, and the
columns of the pipeline's predictions frame that are read from them (standardised units; docs/metareg.md).

Two predictives go beyond the core ones (the contract has no density or CRPS for them, so they live here):
``GmmCalibratedPredictive``, MetaCal's calibrated CDF h(y|x) = G(h_U(y|x)) of Eq. (9), and
``GridQuantilePredictive``, SQR's quantiles on a fine grid of levels with exponential tails.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uqcal.core.predictive import GaussianPredictive, QuantilePredictive, RecalibratedPredictive, _targets

QUANTILE_LEVELS = (0.025, 0.05, 0.16, 0.84, 0.95, 0.975)  # the frame's quantile columns q<level>


@dataclass(frozen=True, eq=False)
class GmmCalibratedPredictive(RecalibratedPredictive):
    """h(y|x) = G(h_U(y|x)) (Iwata & Kumagai Eq. 9) for the query points of one task: ``base`` is the GP's
    Gaussian predictive h_U (Eqs. 4-6), ``cdf_map`` G (shared by the task's points), ``inverse_map`` G^-1,
    ``density_map`` dG/du. ``n_grid`` midpoint levels integrate the CRPS and the spread."""

    density_map: Callable[[np.ndarray], np.ndarray] | None = None
    n_grid: int = 400

    def point(self) -> np.ndarray:
        """The target prediction f of Eq. (5) (the GP mean): what the paper's MSE scores."""
        return self.base.point()

    def logpdf(self, y) -> np.ndarray:
        """log dh/dy = log G'(h_U(y)) + log N(y | f, v)."""
        density = np.asarray(self.density_map(self.base.cdf(y)), dtype=np.float64)
        return np.log(np.maximum(density, 1e-300)) + self.base.logpdf(y)

    def _grid(self) -> np.ndarray:
        return (np.arange(self.n_grid) + 0.5) / self.n_grid

    def crps(self, y) -> np.ndarray:
        """CRPS = 2 * int_0^1 (1{y <= q_p} - p)(q_p - y) dp, on a midpoint grid of levels."""
        y = _targets("GmmCalibratedPredictive", y, len(self))[:, None]
        grid, q = self._grid(), self.ppf(self._grid())
        return 2.0 * (((y <= q).astype(np.float64) - grid) * (q - y)).mean(-1)

    def spread(self) -> np.ndarray:
        """The standard deviation of h, from the same grid of quantiles."""
        return self.ppf(self._grid()).std(-1)


@dataclass(frozen=True, eq=False)
class GridQuantilePredictive(QuantilePredictive):
    """Quantiles at a fine grid of levels (SQR's monotone rearrangement): the CDF is linear between them, with
    exponential tails beyond the grid's ends (no less wide than ``min_tail_scale``), so it spans (0, 1)."""

    min_tail_scale: float = 1e-3

    def _tails(self):
        q, grid = self.quantiles, self.levels
        middle = q[:, q.shape[1] // 2]
        left = np.maximum((middle - q[:, 0]) / math.log(0.5 / grid[0]), self.min_tail_scale)
        right = np.maximum((q[:, -1] - middle) / math.log(0.5 / (1 - grid[-1])), self.min_tail_scale)
        return left, right

    def _cdf_and_logpdf(self, y):
        y = _targets("GridQuantilePredictive", y, len(self))
        q, grid, rows = self.quantiles, self.levels, np.arange(len(self))
        idx = (q < y[:, None]).sum(1)  # searchsorted (left) in each sorted row
        inner = np.clip(idx, 1, q.shape[1] - 1)
        q0, q1 = q[rows, inner - 1], q[rows, inner]
        p0, p1 = grid[inner - 1], grid[inner]
        slope = (p1 - p0) / (q1 - q0)
        left, right = self._tails()
        # log of the tail CDFs, written in log space so far tails stay finite
        log_tail_lo = math.log(grid[0]) + (y - q[:, 0]) / left
        log_tail_hi = math.log(1 - grid[-1]) - (y - q[:, -1]) / right
        below, above = idx == 0, idx == q.shape[1]
        # (each tail's log CDF is <= its end level's where it is used; capped at 0 so the unused side can't overflow)
        tail_lo, tail_hi = np.exp(np.minimum(log_tail_lo, 0.0)), np.exp(np.minimum(log_tail_hi, 0.0))
        cdf = np.where(below, tail_lo, np.where(above, 1 - tail_hi, p0 + slope * (y - q0)))
        logpdf = np.where(below, log_tail_lo - np.log(left),
                          np.where(above, log_tail_hi - np.log(right), np.log(slope)))
        return np.clip(cdf, 0.0, 1.0), logpdf

    def cdf(self, y) -> np.ndarray:
        return self._cdf_and_logpdf(y)[0]

    def logpdf(self, y) -> np.ndarray:
        return self._cdf_and_logpdf(y)[1]

    def crps(self, y) -> np.ndarray:
        """CRPS = 2 * mean over the grid of (1{y <= q_p} - p)(q_p - y)."""
        y = _targets("GridQuantilePredictive", y, len(self))[:, None]
        q = self.quantiles
        return 2.0 * (((y <= q).astype(np.float64) - self.levels) * (q - y)).mean(-1)

    def spread(self) -> np.ndarray:
        return self.quantiles.std(-1)


def from_standardised(outputs: dict, y_mean: float, y_std: float) -> list:
    """One predictive per episode, in original units, from a method's standardised outputs (arrays with the
    episode first): ``mean`` and ``std`` (Gaussian) or ``quantiles`` and ``levels`` (a quantile grid)."""
    if "quantiles" in outputs:
        levels = np.asarray(outputs["levels"], dtype=np.float64)
        return [GridQuantilePredictive(levels, np.asarray(q, dtype=np.float64) * y_std + y_mean, 1e-3 * y_std)
                for q in outputs["quantiles"]]
    return [GaussianPredictive(np.asarray(m, dtype=np.float64) * y_std + y_mean, np.asarray(s, dtype=np.float64) * y_std)
            for m, s in zip(outputs["mean"], outputs["std"], strict=True)]


def frame_columns(prediction, y, y_mean: float, y_std: float) -> dict[str, np.ndarray]:
    """The predictions frame's columns of one episode (docs/ARCHITECTURE.md, regression), in the family's
    standardised units: ``mean`` and ``std``, and for a non-Gaussian predictive ``pit``, ``logpdf``,
    ``crps`` and the quantiles q<level> (MetaCal's also its uncalibrated ``pit_uncal`` / ``std_uncal``)."""
    def location(values):
        return (np.asarray(values, dtype=np.float64) - y_mean) / y_std

    y = np.asarray(y, dtype=np.float64)
    if isinstance(prediction, GaussianPredictive):
        return {"mean": location(prediction.mean), "std": prediction.std / y_std}
    quantiles = prediction.ppf(np.array(QUANTILE_LEVELS))
    named = {f"q{level}": location(quantiles[:, i]) for i, level in enumerate(QUANTILE_LEVELS)}
    if isinstance(prediction, GmmCalibratedPredictive):
        return {"mean": location(prediction.point()), "pit": prediction.pit(y),
                "logpdf": prediction.logpdf(y) + math.log(y_std), "pit_uncal": prediction.base.cdf(y),
                "std_uncal": prediction.base.std / y_std, **named, "crps": prediction.crps(y) / y_std,
                "std": prediction.spread() / y_std}
    if isinstance(prediction, GridQuantilePredictive):
        return {"mean": location(prediction.point()), **named, "pit": prediction.pit(y),
                "logpdf": prediction.logpdf(y) + math.log(y_std), "crps": prediction.crps(y) / y_std,
                "std": prediction.spread() / y_std}
    raise TypeError(f"frame_columns: no frame for a {type(prediction).__name__}")

"""Predictive objects: what every method's ``predict`` returns, and what the metrics, the recalibrators and the
plots take. numpy and scipy only (the base install).

- ``GaussianPredictive(mean, std)``: a normal predictive per point (regression).
- ``QuantilePredictive(levels, quantiles)``: predictive quantiles at fixed levels, the CDF interpolated
  linearly between them (regression).
- ``RecalibratedPredictive(base, cdf_map, inverse_map)``: a base predictive whose CDF is composed with a
  monotone map of [0, 1] onto itself, F'(y) = R(F(y)) (Kuleshov et al. 2018; the GMM-CDF of Iwata & Kumagai
  Eq. (9); an isotonic map). Its quantiles are F^-1(R^-1(q)).
- ``CategoricalPredictive(probs)``: class probabilities per point (classification).

Every constructor validates its arrays and names the bad one. Every regression predictive has ``cdf``, ``ppf``,
``pit``, ``interval`` and ``point``; ``logpdf``, ``crps`` and ``var`` where its distribution defines them (a
``QuantilePredictive`` knows no density or variance, only its quantiles: its ``crps`` is the quantile-score
integral over its levels). ``uqcal.metrics.all_metrics`` scores any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "CategoricalPredictive",
    "NotFittedError",
    "GaussianPredictive",
    "Predictive",
    "QuantilePredictive",
    "RecalibratedPredictive",
    "RegressionPredictive",
]


# Levels closer than this count as the same level (round-off: (1 - 0.9) / 2 = 0.04999999999999999).
LEVEL_TOLERANCE = 1e-9
# Quadrature levels of a recalibrated predictive's CRPS and variance (RecalibratedPredictive._quantile_nodes).
QUADRATURE_NODES = 2000
_CHUNK = 2048  # points per block of the quadrature: 2048 x 2000 floats = 33 MB


class NotFittedError(ValueError, AttributeError):
    """An estimator or a recalibrator used before ``fit`` (a ValueError and an AttributeError, as in
    scikit-learn)."""


def _vector(owner: str, name: str, values) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{owner}: {name} cannot be converted to a float array ({exc})") from exc
    if arr.ndim != 1:
        raise ValueError(f"{owner}: {name} must be 1-D (one value per point), got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{owner}: {name} has {int(bad.sum())} non-finite value(s), the first at index "
                         f"{int(np.argmax(bad))}")
    return arr


def _targets(owner: str, y, n: int) -> np.ndarray:
    arr = _vector(owner, "y", y)
    if arr.shape[0] != n:
        raise ValueError(f"{owner}: y has {arr.shape[0]} values for {n} predicted points")
    return arr


class Predictive:
    """Base class: a predictive distribution for each of ``len(self)`` points."""

    def __len__(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError


class RegressionPredictive(Predictive):
    """A predictive distribution of a real target per point: ``cdf``, ``pit``, ``ppf`` and ``interval``."""

    def cdf(self, y: ArrayLike) -> np.ndarray:  # pragma: no cover - abstract
        """F_i(y_i) for each point i.

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        raise NotImplementedError

    def ppf(self, q: ArrayLike) -> np.ndarray:  # pragma: no cover - abstract
        """Quantiles F_i^-1(q) of each point.

        Parameters
        ----------
        q : float or array_like of shape (L,)
            Levels in (0, 1).

        Returns
        -------
        numpy.ndarray
            (n,) for a scalar level, (n, L) for L levels.
        """
        raise NotImplementedError

    def pit(self, y: ArrayLike) -> np.ndarray:
        """The probability integral transform F_i(y_i): uniform on [0, 1] for a calibrated predictive.

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return self.cdf(y)

    def interval(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        """The central ``level`` interval of each point: its (1 - level)/2 and (1 + level)/2 quantiles.

        Parameters
        ----------
        level : float
            In (0, 1).

        Returns
        -------
        tuple of numpy.ndarray
            Lower and upper bounds, each of shape (n,).
        """
        if not 0.0 < float(level) < 1.0:
            raise ValueError(f"{type(self).__name__}.interval: level must be in (0, 1), got {level!r}")
        return self.ppf((1.0 - level) / 2.0), self.ppf((1.0 + level) / 2.0)

    def median(self) -> np.ndarray:
        """The median of each point.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return self.ppf(0.5)

    def point(self) -> np.ndarray:
        """The point prediction the metrics score (MSE, RMSE): the mean where there is one, else the median.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return self.median()

    def logpdf(self, y: ArrayLike) -> np.ndarray:
        """log f_i(y_i), the log predictive density at each target (NotImplementedError where none is defined).

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        raise NotImplementedError(f"{type(self).__name__} defines no density")

    def crps(self, y: ArrayLike) -> np.ndarray:
        """CRPS(F_i, y_i) = int (F_i(t) - 1{t >= y_i})^2 dt for each point (Gneiting & Raftery 2007; lower is better).

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        raise NotImplementedError(f"{type(self).__name__} defines no CRPS")

    def var(self) -> np.ndarray:
        """The predictive variance of each point (NotImplementedError where none is defined).

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        raise NotImplementedError(f"{type(self).__name__} defines no variance")


@dataclass(frozen=True, eq=False)
class GaussianPredictive(RegressionPredictive):
    """N(mean_i, std_i^2) for each point i.

    Parameters
    ----------
    mean, std : array_like of shape (n,)
        Finite; std > 0.

    Examples
    --------
    >>> import numpy as np
    >>> GaussianPredictive(np.zeros(2), np.ones(2)).interval(0.9)[1].round(3).tolist()
    [1.645, 1.645]
    """

    mean: np.ndarray
    std: np.ndarray

    def __post_init__(self):
        owner = "GaussianPredictive"
        mean, std = _vector(owner, "mean", self.mean), _vector(owner, "std", self.std)
        if mean.shape != std.shape:
            raise ValueError(f"{owner}: mean has shape {mean.shape} but std has shape {std.shape}")
        if (std <= 0).any():
            raise ValueError(f"{owner}: std must be > 0 everywhere; {int((std <= 0).sum())} value(s) are not, "
                             f"the first at index {int(np.argmax(std <= 0))} ({std[np.argmax(std <= 0)]:g})")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)

    def __len__(self) -> int:
        return int(self.mean.shape[0])

    def cdf(self, y: ArrayLike) -> np.ndarray:
        from scipy.special import ndtr

        return ndtr((_targets("GaussianPredictive", y, len(self)) - self.mean) / self.std)

    def logpdf(self, y: ArrayLike) -> np.ndarray:
        z = (_targets("GaussianPredictive", y, len(self)) - self.mean) / self.std
        return -0.5 * z**2 - np.log(self.std) - 0.5 * np.log(2.0 * np.pi)

    def ppf(self, q: ArrayLike) -> np.ndarray:
        from scipy.special import ndtri

        q = np.asarray(q, dtype=np.float64)
        if np.any((q <= 0) | (q >= 1)):
            raise ValueError(f"GaussianPredictive.ppf: levels must lie in (0, 1), got {q.tolist()}")
        if q.ndim == 0:
            return self.mean + self.std * ndtri(q)
        return self.mean[:, None] + self.std[:, None] * ndtri(q)[None, :]

    def point(self) -> np.ndarray:
        return self.mean

    def crps(self, y: ArrayLike) -> np.ndarray:
        """Closed form: std [z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)], z = (y - mean) / std.

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
            CRPS(F_i, y_i) of each point, in the target's units.
        """
        from scipy.special import ndtr

        z = (_targets("GaussianPredictive", y, len(self)) - self.mean) / self.std
        pdf = np.exp(-0.5 * z**2) / np.sqrt(2.0 * np.pi)
        return self.std * (z * (2.0 * ndtr(z) - 1.0) + 2.0 * pdf - 1.0 / np.sqrt(np.pi))

    def var(self) -> np.ndarray:
        return self.std**2


@dataclass(frozen=True, eq=False)
class QuantilePredictive(RegressionPredictive):
    """Predictive quantiles ``quantiles[i, j]`` at ``levels[j]``; the CDF is linear between them and flat (at
    the outer levels) outside them, so its PIT values lie in [levels[0], levels[-1]].

    Parameters
    ----------
    levels : array_like of shape (L,)
        At least two strictly increasing levels in (0, 1).
    quantiles : array_like of shape (n, L)
        Finite, non-decreasing along the levels in every row.

    Examples
    --------
    >>> import numpy as np
    >>> QuantilePredictive([0.25, 0.75], [[-1.0, 1.0]]).cdf(np.array([0.0])).tolist()
    [0.5]
    """

    levels: np.ndarray
    quantiles: np.ndarray

    def __post_init__(self):
        owner = "QuantilePredictive"
        levels = _vector(owner, "levels", self.levels)
        if levels.size < 2 or (levels <= 0).any() or (levels >= 1).any() or (np.diff(levels) <= 0).any():
            raise ValueError(f"{owner}: levels must be at least two strictly increasing values in (0, 1), "
                             f"got {levels.tolist()}")
        quantiles = np.asarray(self.quantiles, dtype=np.float64)
        if quantiles.ndim != 2 or quantiles.shape[1] != levels.size:
            raise ValueError(f"{owner}: quantiles must have shape (n, {levels.size}) (one column per level), "
                             f"got {quantiles.shape}")
        if not np.isfinite(quantiles).all():
            raise ValueError(f"{owner}: quantiles has non-finite values")
        if (np.diff(quantiles, axis=1) < 0).any():
            raise ValueError(f"{owner}: quantiles must be non-decreasing along the levels in every row")
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "quantiles", quantiles)

    def __len__(self) -> int:
        return int(self.quantiles.shape[0])

    def cdf(self, y: ArrayLike) -> np.ndarray:
        """F_i(y_i): linear between the quantiles, right-continuous at ties, ``levels[0]`` below the first and
        ``levels[-1]`` above the last (vectorised: 10^5 points x 99 levels in well under a second).

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
            Levels in [levels[0], levels[-1]].
        """
        y = _targets("QuantilePredictive", y, len(self))
        rows = np.arange(len(self))
        above = np.count_nonzero(self.quantiles <= y[:, None], axis=1)  # j: q_{j-1} <= y < q_j
        inner = np.clip(above, 1, self.levels.size - 1)
        low, high = self.quantiles[rows, inner - 1], self.quantiles[rows, inner]
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(high > low, (y - low) / (high - low), 1.0)
        level = self.levels[inner - 1] + np.clip(fraction, 0.0, 1.0) * np.diff(self.levels)[inner - 1]
        return np.where(above == 0, self.levels[0], np.where(above == self.levels.size, self.levels[-1], level))

    def ppf(self, q: ArrayLike) -> np.ndarray:
        q = np.asarray(q, dtype=np.float64)
        # Round-off such as (1 - 0.9) / 2 = 0.04999999999999999 still names the outer level.
        if np.any((q < self.levels[0] - LEVEL_TOLERANCE) | (q > self.levels[-1] + LEVEL_TOLERANCE)):
            raise ValueError(f"QuantilePredictive.ppf: levels must lie in [{self.levels[0]:g}, "
                             f"{self.levels[-1]:g}] (the predicted range), got {q.tolist()}")
        flat = np.clip(np.atleast_1d(q), self.levels[0], self.levels[-1])
        # The same linear interpolation between two level columns for every row.
        upper = np.clip(np.searchsorted(self.levels, flat, side="left"), 1, self.levels.size - 1)
        weight = (flat - self.levels[upper - 1]) / (self.levels[upper] - self.levels[upper - 1])
        out = self.quantiles[:, upper - 1] * (1.0 - weight) + self.quantiles[:, upper] * weight
        return out[:, 0] if q.ndim == 0 else out

    def crps(self, y: ArrayLike) -> np.ndarray:
        """The quantile-score integral over the predicted levels, 2 / L sum_j QS_{tau_j}(q_j, y) with the pinball
        loss QS_tau(q, y) = (1{y < q} - tau)(q - y): CRPS = 2 int_0^1 QS_tau(F^-1(tau), y) dtau (Gneiting &
        Ranjan 2011), approximated by the mean over the levels, as scoringrules' ``crps_quantile`` does. A fair
        approximation for levels that are the midpoints of equal cells (0.005, 0.015, ..., 0.995).

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
            The approximate CRPS of each point, in the target's units.
        """
        y = _targets("QuantilePredictive", y, len(self))
        diff = self.quantiles - y[:, None]
        return 2.0 * np.mean(((y[:, None] < self.quantiles) - self.levels) * diff, axis=1)

    def covers(self, q: ArrayLike) -> bool:
        """Whether every level of ``q`` lies within the predicted level range (to round-off).

        Parameters
        ----------
        q : float or array_like
            Levels to check.

        Returns
        -------
        bool
            True when every level lies in [levels[0], levels[-1]] up to ``LEVEL_TOLERANCE``.
        """
        q = np.asarray(q, dtype=np.float64)
        return bool(np.all((q >= self.levels[0] - LEVEL_TOLERANCE) & (q <= self.levels[-1] + LEVEL_TOLERANCE)))


@dataclass(frozen=True, eq=False)
class RecalibratedPredictive(RegressionPredictive):
    """F'(y) = R(F(y)): ``base`` (any regression predictive) with its CDF composed with ``cdf_map`` R, a
    non-decreasing map of [0, 1] onto [0, 1]; ``inverse_map`` R^-1 gives its quantiles F^-1(R^-1(q)).

    Its density is R'(F(y)) f(y) (R's ``derivative`` where it has one, else a central difference); its CRPS and
    variance are quadratures of its quantile function (``QUADRATURE_NODES`` levels), finite for any base with
    full support (Gaussian, or recalibrated Gaussian). ``logpdf_floor`` (None: none) floors the log density.

    Parameters
    ----------
    base : RegressionPredictive
        The predictive to recalibrate, with CDF F.
    cdf_map : callable
        R, a non-decreasing map of [0, 1] onto [0, 1] applied to F's levels (numpy array in, array out); its
        ``derivative`` attribute, where present, gives R' for the density.
    inverse_map : callable
        R^-1, numpy array of levels in, array of levels out.
    logpdf_floor : float or None, optional
        Keyword only. A floor of ``logpdf`` (None: no floor); the QR pipeline floors at -20 (App. B.2).

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.core.predictive import GaussianPredictive, RecalibratedPredictive
    >>> base = GaussianPredictive(np.zeros(2), np.ones(2))
    >>> squared = RecalibratedPredictive(base, lambda p: p**2, np.sqrt)  # the maximum of two draws
    >>> squared.cdf(np.array([0.0, 0.0])).tolist()
    [0.25, 0.25]
    """

    base: RegressionPredictive
    cdf_map: Callable[[np.ndarray], np.ndarray]
    inverse_map: Callable[[np.ndarray], np.ndarray]
    # A floor of logpdf (None: none): the QR paper's isotonic map without its endpoint fix cuts the support at the
    # largest recalibration PIT, where the density is 0 (App. B.2); the QR pipeline floors its log density at -20.
    logpdf_floor: float | None = field(default=None, kw_only=True)

    def __post_init__(self):
        if not isinstance(self.base, RegressionPredictive):
            raise TypeError(f"RecalibratedPredictive: base must be a regression predictive, got "
                            f"{type(self.base).__name__}")

    def __len__(self) -> int:
        return len(self.base)

    def cdf(self, y: ArrayLike) -> np.ndarray:
        return np.clip(np.asarray(self.cdf_map(self.base.cdf(y)), dtype=np.float64), 0.0, 1.0)

    def ppf(self, q: ArrayLike) -> np.ndarray:
        q = np.asarray(q, dtype=np.float64)
        inner = np.clip(np.asarray(self.inverse_map(np.atleast_1d(q)), dtype=np.float64), 1e-12, 1 - 1e-12)
        out = self.base.ppf(inner)
        return out[:, 0] if q.ndim == 0 else out

    def _map_slope(self, p: np.ndarray) -> np.ndarray:
        """R'(p): the map's own ``derivative`` where it has one, else a central difference (step 1e-6)."""
        derivative = getattr(self.cdf_map, "derivative", None)
        if derivative is not None:
            return np.asarray(derivative(p), dtype=np.float64)
        step = 1e-6
        low, high = np.clip(p - step, 0.0, 1.0), np.clip(p + step, 0.0, 1.0)
        return (np.asarray(self.cdf_map(high), float) - np.asarray(self.cdf_map(low), float)) / (high - low)

    def logpdf(self, y: ArrayLike) -> np.ndarray:
        """log f'(y) = log R'(F(y)) + log f(y), the chain rule on F'(y) = R(F(y)) (-inf where R is flat).

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
            The log density of each point, floored at ``logpdf_floor`` when it is set.
        """
        with np.errstate(divide="ignore"):
            logpdf = self.base.logpdf(y) + np.log(self._map_slope(self.base.cdf(y)))
        return logpdf if self.logpdf_floor is None else np.maximum(logpdf, self.logpdf_floor)

    def _quantile_nodes(self) -> tuple[np.ndarray, np.ndarray]:
        """Levels tau_k and weights w_k of a quadrature over (0, 1): midpoints of u, tau = (1 - cos(pi u)) / 2, so
        the nodes crowd towards 0 and 1 where the quantile function runs off to infinity."""
        self._require_full_support()
        u = (np.arange(QUADRATURE_NODES) + 0.5) / QUADRATURE_NODES
        return (1.0 - np.cos(np.pi * u)) / 2.0, np.pi / 2.0 * np.sin(np.pi * u) / QUADRATURE_NODES

    def _require_full_support(self) -> None:
        base = self.base
        while isinstance(base, RecalibratedPredictive):
            base = base.base
        if isinstance(base, QuantilePredictive):
            raise NotImplementedError("RecalibratedPredictive of a QuantilePredictive: its quantiles end at the base's "
                                      "outer levels, so no CRPS or variance over the whole of (0, 1)")

    def crps(self, y: ArrayLike) -> np.ndarray:
        """CRPS = 2 int_0^1 QS_tau(F'^-1(tau), y) dtau (the quantile-score integral; Gneiting & Ranjan 2011) by
        quadrature over ``QUADRATURE_NODES`` levels crowded towards 0 and 1 (``_quantile_nodes``), in chunks of
        points so memory stays bounded.

        Parameters
        ----------
        y : array_like of shape (n,)
            One target per point.

        Returns
        -------
        numpy.ndarray of shape (n,)
            The CRPS of each point, in the target's units.
        """
        y = _targets("RecalibratedPredictive", y, len(self))
        tau, weight = self._quantile_nodes()
        out = np.empty(len(self))
        for start in range(0, len(self), _CHUNK):
            part = slice(start, start + _CHUNK)
            quantiles = self._ppf_rows(tau, part)
            diff = quantiles - y[part, None]
            out[part] = 2.0 * np.sum(((y[part, None] < quantiles) - tau) * diff * weight, axis=1)
        return out

    def var(self) -> np.ndarray:
        """int_0^1 Q(tau)^2 dtau - (int_0^1 Q(tau) dtau)^2 for the recalibrated quantile function Q, by the same
        quadrature as ``crps``.

        Returns
        -------
        numpy.ndarray of shape (n,)
            The variance of each point, in squared target units (>= 0).
        """
        tau, weight = self._quantile_nodes()
        out = np.empty(len(self))
        for start in range(0, len(self), _CHUNK):
            quantiles = self._ppf_rows(tau, slice(start, start + _CHUNK))
            mean = quantiles @ weight
            out[start : start + _CHUNK] = np.maximum((quantiles**2) @ weight - mean**2, 0.0)
        return out

    def _ppf_rows(self, tau: np.ndarray, rows: slice) -> np.ndarray:
        inner = np.clip(np.asarray(self.inverse_map(tau), dtype=np.float64), 1e-15, 1 - 1e-15)
        return _take_rows(self.base, rows).ppf(inner)


@dataclass(frozen=True, eq=False)
class CategoricalPredictive(Predictive):
    """Class probabilities ``probs[i, c]`` of point i being class c (rows sum to 1); ``classes`` names the
    columns (default 0..C-1).

    Parameters
    ----------
    probs : array_like of shape (n, C)
        Finite, >= 0, rows summing to 1; C >= 2.
    classes : array_like of shape (C,), optional
        The class of each column.

    Examples
    --------
    >>> import numpy as np
    >>> CategoricalPredictive(np.array([[0.2, 0.8]]), classes=np.array([3, 7])).predicted_class().tolist()
    [7]
    """

    probs: np.ndarray
    classes: np.ndarray | None = None

    def __post_init__(self):
        owner = "CategoricalPredictive"
        probs = np.asarray(self.probs, dtype=np.float64)
        if probs.ndim != 2 or probs.shape[1] < 2:
            raise ValueError(f"{owner}: probs must have shape (n, C) with C >= 2 classes, got {probs.shape}")
        if not np.isfinite(probs).all() or (probs < 0).any():
            raise ValueError(f"{owner}: probs must be finite and >= 0")
        sums = probs.sum(axis=1)
        if np.any(np.abs(sums - 1.0) > 1e-5):
            worst = int(np.argmax(np.abs(sums - 1.0)))
            raise ValueError(f"{owner}: every row of probs must sum to 1; row {worst} sums to {sums[worst]:.6g}")
        classes = np.arange(probs.shape[1]) if self.classes is None else np.asarray(self.classes)
        if classes.shape != (probs.shape[1],):
            raise ValueError(f"{owner}: classes must name the {probs.shape[1]} columns of probs, got shape "
                             f"{classes.shape}")
        object.__setattr__(self, "probs", probs)
        object.__setattr__(self, "classes", classes)

    def __len__(self) -> int:
        return int(self.probs.shape[0])

    def labels(self, y: ArrayLike) -> np.ndarray:
        """``y`` as column indices into ``probs``: integer labels (not floats, not booleans) that name a class.

        Parameters
        ----------
        y : array_like of shape (n,)
            Integer class labels, each one of ``classes``.

        Returns
        -------
        numpy.ndarray of shape (n,)
            The column of ``probs`` of each label, int64.
        """
        arr = np.asarray(y)
        if arr.ndim != 1 or arr.shape[0] != len(self):
            raise ValueError(f"CategoricalPredictive: y must be 1-D with {len(self)} labels, got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
            raise ValueError(f"CategoricalPredictive: class labels must be integers, got dtype {arr.dtype}")
        index = {int(c): j for j, c in enumerate(self.classes)}
        unknown = sorted({int(v) for v in arr} - set(index))
        if unknown:
            raise ValueError(f"CategoricalPredictive: labels {unknown[:5]} are not among the classes "
                             f"{self.classes.tolist()}")
        return np.array([index[int(v)] for v in arr], dtype=np.int64)

    def predicted_class(self) -> np.ndarray:
        """The most probable class of each point (the first on ties).

        Returns
        -------
        numpy.ndarray of shape (n,)
            Entries of ``classes``.
        """
        return self.classes[np.argmax(self.probs, axis=1)]

    def confidence(self) -> np.ndarray:
        """The probability of the predicted class of each point.

        Returns
        -------
        numpy.ndarray of shape (n,)
            The row maxima of ``probs``, in [1 / C, 1].
        """
        return self.probs.max(axis=1)


def _take_rows(prediction: RegressionPredictive, rows: slice) -> RegressionPredictive:
    """The predictive of the points ``rows`` (a slice) of ``prediction``."""
    if isinstance(prediction, GaussianPredictive):
        return GaussianPredictive(prediction.mean[rows], prediction.std[rows])
    if isinstance(prediction, QuantilePredictive):
        return QuantilePredictive(prediction.levels, prediction.quantiles[rows])
    if isinstance(prediction, RecalibratedPredictive):
        return RecalibratedPredictive(_take_rows(prediction.base, rows), prediction.cdf_map, prediction.inverse_map,
                                      logpdf_floor=prediction.logpdf_floor)
    raise TypeError(f"cannot take rows of a {type(prediction).__name__}")

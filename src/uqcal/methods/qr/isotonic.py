"""Isotonic recalibration of a trained qr base model (Kuleshov et al. 2018; QR paper Sec. 3, Tables 4-5).

Reuses the base run (``depends_on``): its test predictions (mu, sigma) and the PIT values it stored for
recalibration. ``fit_on: train`` fits R on the training PITs, as the paper does; ``fit_on: calibration``
on a part of the training split that the base model did not train on (base ``calibration_fraction`` > 0).
``endpoint_fix`` adds the point (1, 1) to the recalibration data (levels i/(m+1)), which removes the
truncation of App. B.2.

The recalibrated forecast is not Gaussian: predictions carry ``pit`` (R(F(y))), ``logpdf`` (log density in
original units, clipped at ``logpdf_floor`` where it is -inf — the zero-density points are counted
separately), quantiles, ``crps`` (numerical) and ``mean`` = mu - delta * sigma (Claim 3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from uqcal.core.io import load_torch
from uqcal.core.predictive import GaussianPredictive, RecalibratedPredictive
from uqcal.methods.api import RunContext
from uqcal.methods.estimator import ProbabilisticRegressor
from uqcal.methods.qr.isotonic_gaussian import StandardisedRecalibration, isotonic_knots

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from uqcal.methods.qr.gaussian_nets import GaussianNetMethod

QUANTILE_LEVELS = (0.025, 0.05, 0.16, 0.84, 0.95, 0.975)
FIT_ON = ("train", "calibration")


def recalibrated_predictions(y: np.ndarray, mean: np.ndarray, std: np.ndarray,
                             recalibration: StandardisedRecalibration,
                             logpdf_floor: float) -> tuple[pd.DataFrame, dict]:
    """Predictions table and diagnostics of R o N(mean, std^2) at targets y (all in original units)."""
    z = (y - mean) / std
    logpdf_raw = recalibration.logpdf(z) - np.log(std)
    zero_density = ~np.isfinite(logpdf_raw)
    frame = pd.DataFrame({
        "y": y,
        "mean": mean - recalibration.delta * std,
        "std": recalibration.std_factor * std,
        "pit": recalibration.cdf(z),
        "logpdf": np.maximum(np.where(zero_density, -np.inf, logpdf_raw), logpdf_floor),
        "crps": std * recalibration.crps(z),
        "base_mean": mean,
        "base_std": std,
    })
    for level in QUANTILE_LEVELS:
        frame[f"q{level:g}"] = mean + std * recalibration.quantile(np.full(y.shape, level))
    finite = logpdf_raw[~zero_density]
    diagnostics = {
        "delta": recalibration.delta,
        "std_factor": recalibration.std_factor,
        "truncated_support": float(recalibration.truncated),
        "zero_density_fraction": float(zero_density.mean()),
        "max_density": float(np.exp(finite.max())) if finite.size else 0.0,
        "nll_finite_only": float(-finite.mean()) if finite.size else float("nan"),
        "logpdf_floor": float(logpdf_floor),
        "rmse_base_mean": float(np.sqrt(np.mean((y - mean) ** 2))),
        "rmse_shifted_mean": float(np.sqrt(np.mean((y - frame["mean"].to_numpy()) ** 2))),
        "n_knots": float(recalibration.u.size),
    }
    return frame, diagnostics


class _SavedBaseRun:
    """The pipeline's base: a qr run that already trained (``depends_on``), as it saved itself: the PITs it
    stored for recalibration and its test predictions (reused, not recomputed: MC dropout would draw anew)."""

    fitted_ = True

    def __init__(self, run_dir):
        saved = load_torch(run_dir / "model.pt")  # weights_only: the base run may be a pulled file
        self.train_pit_, self.calibration_pit_ = (np.asarray(saved[k], float) for k in ("train_pit", "calibration_pit"))
        self.predictions = pd.read_parquet(run_dir / "predictions.parquet")

    def predict_proba(self, X) -> GaussianPredictive:
        if len(X) != len(self.predictions):
            raise ValueError(f"the base run predicted {len(self.predictions)} rows, asked for {len(X)}")
        return GaussianPredictive(self.predictions["mean"].to_numpy(float), self.predictions["std"].to_numpy(float))


class IsotonicRecalibrated(ProbabilisticRegressor):
    """A qr Gaussian model recalibrated by an isotonic map of its PITs (Kuleshov et al. 2018; QR Tables 4-5).

    ``fit(X, y)``: X (n, d), y (n,); fits ``base`` on them unless it is fitted already (then X and y are not
    used), and fits the map on the PITs the base kept from its own fit. ``predict_proba(X)`` ->
    ``RecalibratedPredictive``: the base's Gaussian with its CDF composed with the map.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    base : DropoutVI or DeepEnsemble, optional
        The Gaussian model to recalibrate, fitted or not (None: the pipeline's ``train`` loads the base run).
    **kwargs
        ``fit_on`` (``"train"``: the PITs of the rows the base trained on, as the paper; ``"calibration"``: of
        the part the base held out, ``calibration_fraction`` > 0), ``endpoint_fix`` (the knot (1, 1) with
        levels i/(m+1): no truncated support, Sec. 3), ``logpdf_floor`` (the floor of the log density, as the
        pipeline's predictions), ``random_state`` and ``device``.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.qr import DeepEnsemble, IsotonicRecalibrated
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (80, 1)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    >>> base = DeepEnsemble(epochs=2, n_members=2, calibration_fraction=0.25, random_state=0)
    >>> model = IsotonicRecalibrated(base=base, fit_on="calibration").fit(X, y)
    >>> prediction = model.predict_proba(X[:3])
    >>> bool(np.all((prediction.pit(y[:3]) >= 0) & (prediction.pit(y[:3]) <= 1)))
    True
    """

    defaults = {"fit_on": "train", "endpoint_fix": False, "logpdf_floor": -20.0}
    cpu_only = True  # numpy on the base run's saved PITs: its cluster job never asks for a GPU

    def __init__(self, params: dict | None = None, /, *, base: GaussianNetMethod | None = None, **kwargs):
        super().__init__(params, **kwargs)
        if self.params["fit_on"] not in FIT_ON:
            raise ValueError(f"{type(self).__name__}.fit_on: expected one of {list(FIT_ON)}, "
                             f"got {self.params['fit_on']!r}")
        self.base = base

    def fit(self, X: ArrayLike, y: ArrayLike) -> IsotonicRecalibrated:
        """Fit ``base`` (a clone, unless it is fitted) and the isotonic map of its kept PITs.

        Parameters
        ----------
        X : array_like of shape (n, d)
        y : array_like of shape (n,)

        Returns
        -------
        IsotonicRecalibrated
            self, fitted (``base_`` the base used).
        """
        if self.base is None:
            raise ValueError(f"{type(self).__name__}: base is None; pass base=DropoutVI(...) or DeepEnsemble(...)")
        X, y = self.fit_arrays(X, y)
        if getattr(self.base, "fitted_", False):
            self.base_ = self.base
        else:
            from sklearn.base import clone

            self.base_ = clone(self.base).fit(X, y)
        fit_on = self.params["fit_on"]
        pit = np.asarray(self.base_.train_pit_ if fit_on == "train" else self.base_.calibration_pit_, float)
        if pit.size < 2:
            raise ValueError(f"{type(self).__name__}: the base kept {pit.size} {fit_on} PITs; fit_on: calibration "
                             "needs a base with calibration_fraction > 0")
        self.recalibration_ = StandardisedRecalibration(*isotonic_knots(pit, endpoint_fix=bool(self.params["endpoint_fix"])))
        self.n_recalibration_ = int(pit.size)
        self.fitted_ = True
        return self

    def predict_proba(self, X: ArrayLike) -> RecalibratedPredictive:
        """The base's Gaussian with its CDF composed with the isotonic map.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        RecalibratedPredictive
        """
        X = self.predict_array(X)
        return self.recalibration_.recalibrate(self.base_.predict_proba(X), float(self.params["logpdf_floor"]))

    def train(self, ctx: RunContext) -> None:
        """The pipeline's train job: recalibrate a saved base run's test predictions with the map fitted on its
        kept PITs, and save them.

        Parameters
        ----------
        ctx : RunContext
            The run: its ``depends_dir`` is the base run (its saved PITs and test predictions), its data and split
            give the training and test rows.
        """
        if ctx.depends_dir is None:
            raise ValueError(f"qr method {ctx.method!r} needs depends_on: a base run to recalibrate")
        self.runtime = ctx.runtime
        self.base = _SavedBaseRun(ctx.depends_dir)
        table, split = ctx.load_data(), ctx.load_split()
        X, y = np.asarray(table.X, float), np.asarray(table.y, float)
        train_rows, test_rows = np.asarray(split["train"], int), np.asarray(split["test"], int)
        try:
            prediction = self.fit(X[train_rows], y[train_rows]).predict_proba(X[test_rows])
        except ValueError as exc:
            raise ValueError(f"{ctx.method}: base run {ctx.depends_dir}: {exc}") from exc
        frame, diagnostics = recalibrated_predictions(y[test_rows], prediction.base.mean,
                                                      prediction.base.std, self.recalibration_,
                                                      float(self.params["logpdf_floor"]))
        p = self.params
        stats = {**diagnostics, "n_recalibration": self.n_recalibration_, "fit_on": p["fit_on"],
                 "endpoint_fix": float(bool(p["endpoint_fix"]))}
        knots = {"knots_u": self.recalibration_.u, "knots_r": self.recalibration_.r}
        ctx.save_outputs(frame, {**knots, "base_run": str(ctx.depends_dir)}, stats)

    def evaluate(self, ctx: RunContext, predictions: pd.DataFrame | None = None) -> dict[str, float]:
        """The qr family's metrics of the run (``uqcal.methods.qr.metrics.qr_metrics``).

        Parameters
        ----------
        ctx : RunContext
            The run whose predictions are scored.
        predictions : pandas.DataFrame or None, optional
            The run's prediction frame; None reads it from the run directory.

        Returns
        -------
        dict of str to float
            The family's metrics with ``nll`` (the NLPD), the names the QR tables print.
        """
        from uqcal.methods.qr.metrics import qr_metrics

        return qr_metrics(super().evaluate, ctx, predictions)

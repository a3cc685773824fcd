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

import numpy as np
import pandas as pd

from uqcal.core.io import load_torch
from uqcal.methods.api import Method, RunContext
from uqcal.methods.qr.isotonic_gaussian import StandardisedRecalibration, isotonic_knots

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


class IsotonicRecalibrated(Method):
    defaults = {"fit_on": "train", "endpoint_fix": False, "logpdf_floor": -20.0}
    cpu_only = True  # numpy on the base run's saved PITs: its cluster job never asks for a GPU

    def train(self, ctx: RunContext) -> None:
        p = ctx.params
        if p["fit_on"] not in FIT_ON:
            raise ValueError(f"fit_on must be one of {FIT_ON}, got {p['fit_on']!r}")
        if ctx.depends_dir is None:
            raise ValueError(f"qr method {ctx.method!r} needs depends_on: a base run to recalibrate")
        base = load_torch(ctx.depends_dir / "model.pt")  # weights_only: the base run may be a pulled file
        base_pred = pd.read_parquet(ctx.depends_dir / "predictions.parquet")
        pit = np.asarray(base["train_pit" if p["fit_on"] == "train" else "calibration_pit"], float)
        if pit.size < 2:
            raise ValueError(
                f"{ctx.method}: base run {ctx.depends_dir} stored {pit.size} {p['fit_on']} PITs; "
                "fit_on: calibration needs a base with calibration_fraction > 0"
            )
        u, r = isotonic_knots(pit, endpoint_fix=bool(p["endpoint_fix"]))
        recalibration = StandardisedRecalibration(u, r)
        frame, diagnostics = recalibrated_predictions(
            base_pred["y"].to_numpy(float), base_pred["mean"].to_numpy(float),
            base_pred["std"].to_numpy(float), recalibration, float(p["logpdf_floor"]))
        stats = {**diagnostics, "n_recalibration": int(pit.size), "fit_on": p["fit_on"],
                 "endpoint_fix": float(bool(p["endpoint_fix"]))}
        ctx.save_outputs(frame, {"knots_u": u, "knots_r": r, "base_run": str(ctx.depends_dir)}, stats)

    def evaluate(self, ctx: RunContext, predictions=None) -> dict[str, float]:
        from uqcal.methods.qr.metrics import qr_metrics

        return qr_metrics(super().evaluate, ctx, predictions)

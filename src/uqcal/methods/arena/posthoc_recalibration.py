"""Post-hoc recalibration of any Gaussian predictive model of the arena, fitted on the validation part.

A recalibration method depends on a trained base run (``depends_on``). That run predicted the arena split's
``test`` rows, its validation rows first (uqcal.data.splits.train_val_test_split); the map is fitted on those and
applied to every row, and only the test rows are scored (uqcal.metrics.evaluation.test_part).

- ``VarianceScaling``: N(mu, s^2 sigma^2) with the one factor s that minimises the validation NLL. The
  Gaussian NLL sum_i [log(s sigma_i) + (y_i - mu_i)^2 / (2 s^2 sigma_i^2)] has d/ds = 0 at
  s^2 = mean_i ((y_i - mu_i) / sigma_i)^2 (the mean squared z-score), its only stationary point, a minimum.
- ``IsotonicOnValidation``: G(y) = R(Phi((y - mu) / sigma)) with R the isotonic map of Kuleshov et al. (2018)
  fitted on the validation PITs (uqcal.core.calibration: the map and the recalibrated Gaussian's density,
  moments, quantiles and CRPS are written once there, the qr family uses the same). ``endpoint_fix`` (default)
  uses levels i/(m+1) and the knot (1, 1), so the recalibrated support is not truncated (QR paper Sec. 3).
  The result is not Gaussian: the predictions carry ``pit``, ``logpdf``, quantiles and ``crps``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from uqcal.core.recalibration import variance_scale
from uqcal.methods.api import Method, RunContext

QUANTILE_LEVELS = (0.025, 0.05, 0.16, 0.84, 0.95, 0.975)


class PostHocRecalibration(Method):
    """Reads the base run's predictions, fits on their validation rows, writes predictions for every row."""

    cpu_only = True  # numpy on the base run's predictions

    def train(self, ctx: RunContext) -> None:
        from uqcal.metrics.evaluation import validation_part

        if ctx.depends_dir is None:
            raise ValueError(f"arena method {ctx.method!r} needs depends_on: a base run to recalibrate")
        base = pd.read_parquet(ctx.depends_dir / "predictions.parquet")
        missing = [c for c in ("y", "mean", "std") if c not in base]
        if missing or "pit" in base:
            raise ValueError(f"{ctx.depends_dir}: not a Gaussian predictive (missing {missing} or has pit)")
        validation = validation_part(base, ctx.load_split())
        start = time.perf_counter()
        frame, model, stats = self.recalibrate(validation, base)
        stats = {**stats, "recal_seconds": time.perf_counter() - start, "n_validation": int(len(validation))}
        ctx.save_outputs(frame, {**model, "base_run": str(ctx.depends_dir)}, stats)

    def recalibrate(self, validation: pd.DataFrame, base: pd.DataFrame) -> tuple[pd.DataFrame, dict, dict]:
        raise NotImplementedError  # pragma: no cover - abstract


def _columns(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return frame["y"].to_numpy(float), frame["mean"].to_numpy(float), frame["std"].to_numpy(float)


class VarianceScaling(PostHocRecalibration):
    defaults: dict = {}

    def recalibrate(self, validation, base):
        scale = variance_scale(*_columns(validation))
        y, mean, std = _columns(base)
        frame = pd.DataFrame({"y": y, "mean": mean, "std": scale * std, "base_std": std})
        return frame, {"variance_scale": scale}, {"variance_scale": scale}


class IsotonicOnValidation(PostHocRecalibration):
    defaults: dict = {"endpoint_fix": True, "logpdf_floor": -20.0}

    def recalibrate(self, validation, base):
        from scipy.special import ndtr

        from uqcal.core.calibration import StandardisedRecalibration, isotonic_knots

        y_val, mean_val, std_val = _columns(validation)
        u, r = isotonic_knots(ndtr((y_val - mean_val) / std_val), endpoint_fix=bool(self.params["endpoint_fix"]))
        recalibration = StandardisedRecalibration(u, r)
        y, mean, std = _columns(base)
        z = (y - mean) / std
        with np.errstate(divide="ignore"):
            logpdf = recalibration.logpdf(z) - np.log(std)
        zero_density = ~np.isfinite(logpdf)
        frame = pd.DataFrame({
            "y": y,
            "mean": mean - recalibration.delta * std,  # E[G] = mu - delta sigma (QR Claim 3)
            "std": recalibration.std_factor * std,
            "pit": recalibration.cdf(z),
            "logpdf": np.maximum(np.where(zero_density, -np.inf, logpdf), float(self.params["logpdf_floor"])),
            "crps": std * recalibration.crps(z),
            "base_mean": mean,
            "base_std": std,
        })
        for level in QUANTILE_LEVELS:
            frame[f"q{level:g}"] = mean + std * recalibration.quantile(np.full(y.shape, level))
        stats = {"delta": recalibration.delta, "std_factor": recalibration.std_factor,
                 "n_knots": float(u.size), "zero_density_fraction": float(zero_density.mean())}
        return frame, {"knots_u": u, "knots_r": r}, stats

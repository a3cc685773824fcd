"""Every metric of a predictive object in one call: ``all_metrics(prediction, y)``."""

from __future__ import annotations

import numpy as np

from uqcal.core.predictive import CategoricalPredictive, GaussianPredictive, Predictive, RegressionPredictive
from uqcal.metrics.classification import classification_metrics
from uqcal.metrics.regression import (
    calibration_score,
    ce_qr,
    ece_iwata,
    interval_coverage,
    mse,
    regression_metrics_gaussian,
)

__all__ = ["all_metrics"]


def all_metrics(prediction: Predictive, y) -> dict[str, float]:
    """Every metric that applies to ``prediction`` (a uqcal.core.predictive object) against targets or integer
    class labels ``y``."""
    if isinstance(prediction, GaussianPredictive):
        return regression_metrics_gaussian(y, prediction.mean, prediction.std)
    if isinstance(prediction, RegressionPredictive):
        y = np.asarray(y, dtype=np.float64)
        pit = prediction.pit(y)
        out = {"mse": mse(y, prediction.point()), "ece": ece_iwata(pit), "ce": ce_qr(pit),
               "cal_score": calibration_score(pit)}
        out["rmse"] = float(np.sqrt(out["mse"]))
        for level, key in ((0.95, "cov95"), (0.90, "cov90"), (0.68, "cov68")):
            lower, upper = prediction.interval(level)
            out[key] = interval_coverage(y, lower, upper)
        return out
    if isinstance(prediction, CategoricalPredictive):
        return classification_metrics(prediction.probs, prediction.labels(y))
    raise TypeError(f"all_metrics: expected a uqcal.core.predictive object, got {type(prediction).__name__}")

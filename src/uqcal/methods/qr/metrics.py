"""The qr family's metric set: ce (QR's CE), rmse, nll (original units), ece, sharpness, crps.

The default regression evaluator (uqcal.metrics.evaluation) computes all of them from the predictions schema; this
adds the paper's name ``nll`` for the mean negative log density and the isotonic diagnostics stored in
train_stats.json (merged by ``Method.evaluate``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

QR_METRICS = ("ce", "rmse", "nll", "ece", "sharpness", "crps")


def ce_percent(pit: np.ndarray) -> float:
    """QR's tabled CE: 100 x sum over p in {0.1, ..., 1.0} of (fraction of PIT <= p - p)^2."""
    from uqcal.metrics import ce_qr

    return float(ce_qr(np.asarray(pit, float)))


def qr_metrics(default_evaluate: Callable, ctx, predictions=None) -> dict[str, float]:
    metrics = dict(default_evaluate(ctx, predictions))
    if "nlpd" in metrics:
        metrics["nll"] = metrics["nlpd"]
    missing = [name for name in QR_METRICS if name not in metrics]
    if missing:
        raise ValueError(f"qr evaluation of {ctx.run_dir} lacks metrics {missing}")
    return metrics

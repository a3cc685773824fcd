"""Default evaluators: metrics from a run's predictions table (schemas in docs/ARCHITECTURE.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from uqcal import metrics as M

REGRESSION_FAMILIES = ("metareg", "rio", "qr")
COVERAGE_LEVELS = {"cov95": (0.025, 0.975), "cov90": (0.05, 0.95), "cov68": (0.16, 0.84)}


def regression_metrics(pred: pd.DataFrame) -> dict[str, float]:
    """Every regression metric the families report, from either a Gaussian or a general predictive."""
    for col in ("y", "mean"):
        if col not in pred:
            raise ValueError(f"predictions table lacks required column {col!r}")
    y, mean = pred["y"].to_numpy(float), pred["mean"].to_numpy(float)
    gaussian = "pit" not in pred
    if gaussian and "std" not in pred:
        raise ValueError("predictions need `std` (Gaussian) or `pit` and `logpdf` (general predictive)")
    out = {"mse": M.mse(y, mean), "rmse": M.rmse(y, mean)}
    if gaussian:
        std = pred["std"].to_numpy(float)
        pit = M.gaussian_pit(y, mean, std)
        out["nlpd"] = M.gaussian_nlpd(y, mean, std)
        out["crps"] = M.gaussian_crps(y, mean, std)
        for name, (lo, hi) in COVERAGE_LEVELS.items():
            out[name] = M.gaussian_interval_coverage(y, mean, std, hi - lo)
    else:
        pit = pred["pit"].to_numpy(float)
        if "logpdf" in pred:
            out["nlpd"] = M.nlpd_from_logpdf(pred["logpdf"].to_numpy(float))
        if "crps" in pred:
            out["crps"] = float(pred["crps"].mean())
        for name, (lo, hi) in COVERAGE_LEVELS.items():
            lo_col, hi_col = f"q{lo:g}", f"q{hi:g}"
            if lo_col in pred and hi_col in pred:
                out[name] = M.interval_coverage(y, pred[lo_col].to_numpy(float), pred[hi_col].to_numpy(float))
            else:  # the PIT gives the same central-interval coverage for a continuous CDF
                out[name] = float(np.mean((pit > lo) & (pit <= hi)))
        std = pred["std"].to_numpy(float) if "std" in pred else None
    if "nlpd" in out:
        out["nll"] = out["nlpd"]  # the QR paper's name for the same quantity (original units)
    out["ece"] = M.ece_iwata(pit)
    out["te"] = M.total_error(out["mse"], out["ece"])
    out["ce"] = M.ce_qr(pit)
    out["cal_score"] = M.calibration_score(pit)
    if std is not None:
        out["sharpness"] = M.sharpness(std)
    return out


def classification_metrics(pred: pd.DataFrame) -> dict[str, float]:
    prob_cols = sorted((c for c in pred.columns if c.startswith("p") and c[1:].isdigit()), key=lambda c: int(c[1:]))
    if not prob_cols or "label" not in pred:
        raise ValueError("few-shot predictions need `label` and probability columns p0..p{C-1}")
    probs = pred[prob_cols].to_numpy(float)
    labels = pred["label"].to_numpy(int)
    return {
        "acc": M.accuracy(probs, labels),
        "ece": M.classification_ece(probs, labels, n_bins=15),
        "mce": M.classification_mce(probs, labels, n_bins=15),
        "nll": M.classification_nll(probs, labels),
    }


def evaluate_predictions(family: str, pred: pd.DataFrame, ctx=None) -> dict[str, float]:
    if family == "metareg" and "episode" in pred:
        # Iwata & Kumagai evaluate on the query set of each meta-test episode; average per episode.
        per_episode = pd.DataFrame([regression_metrics(g) for _, g in pred.groupby("episode", sort=True)])
        return {k: float(v) for k, v in per_episode.mean().items()}
    if family in REGRESSION_FAMILIES:
        return regression_metrics(pred)
    if family == "fewshot":
        return classification_metrics(pred)
    if family == "bo":
        return bo_trace_metrics(pred)
    raise ValueError(f"no evaluator for family {family!r}")


def bo_trace_metrics(pred: pd.DataFrame) -> dict[str, float]:
    """Minimal BO metrics from a trace; the bo family adds regret and calibration metrics."""
    best = pred["best_so_far"].to_numpy(float)
    return {"final_best": float(best[-1]), "best_auc": float(np.mean(best))}

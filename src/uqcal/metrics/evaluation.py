"""Default evaluators: metrics from a run's predictions table (schemas in docs/ARCHITECTURE.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from uqcal import metrics as M

COVERAGE_LEVELS = {"cov95": (0.025, 0.975), "cov90": (0.05, 0.95), "cov68": (0.16, 0.84)}


def regression_metrics(pred: pd.DataFrame, *, rounded_z: bool = False) -> dict[str, float]:
    """Every regression metric the families report, from either a Gaussian or a general predictive.

    The metric bundles live in uqcal.metrics; this only maps predictions.parquet columns onto them.
    ``rounded_z``: Gaussian interval coverages at the rounded z = 1.96 / 1.65 / 1.0 (RIO's App. D.2).
    """
    for col in ("y", "mean"):
        if col not in pred:
            raise ValueError(f"predictions table lacks required column {col!r}")
    y, mean = pred["y"].to_numpy(float), pred["mean"].to_numpy(float)
    if "pit" not in pred:
        if "std" not in pred:
            raise ValueError("predictions need `std` (Gaussian) or `pit` and `logpdf` (general predictive)")
        out = M.regression_metrics_gaussian(y, mean, pred["std"].to_numpy(float), rounded_z=rounded_z)
    else:
        if "logpdf" not in pred:
            raise ValueError("a general (non-Gaussian) predictive needs `logpdf` beside `pit`")
        pit = pred["pit"].to_numpy(float)
        out = M.regression_metrics_general(
            y, mean, pit, pred["logpdf"].to_numpy(float),
            std=pred["std"].to_numpy(float) if "std" in pred else None,
            quantiles={c: pred[c].to_numpy(float) for c in pred.columns if c.startswith("q")},
            crps=pred["crps"].to_numpy(float) if "crps" in pred else None,
        )
        for name, (lo, hi) in COVERAGE_LEVELS.items():
            # Without quantile columns, the PIT gives the same central-interval coverage for a continuous CDF.
            out.setdefault(name, float(np.mean((pit > lo) & (pit <= hi))))
    out["nll"] = out["nlpd"]  # the QR paper's name for the same quantity (original units)
    return out


def classification_metrics(pred: pd.DataFrame) -> dict[str, float]:
    prob_cols = sorted((c for c in pred.columns if c.startswith("p") and c[1:].isdigit()), key=lambda c: int(c[1:]))
    if not prob_cols or "label" not in pred:
        raise ValueError("few-shot predictions need `label` and probability columns p0..p{C-1}")
    out = M.classification_metrics(pred[prob_cols].to_numpy(float), pred["label"].to_numpy(int), n_bins=15)
    out["acc"] = out.pop("accuracy")
    return out


# ---- evaluators: ``(predictions, ctx) -> metrics``; a family names its own (uqcal.methods.api.Family.evaluator)
def score_regression(pred: pd.DataFrame, ctx=None) -> dict[str, float]:
    return regression_metrics(pred)


def score_regression_at_rounded_z(pred: pd.DataFrame, ctx=None) -> dict[str, float]:
    """Regression metrics with Gaussian interval coverages at the rounded z = 1.96 / 1.65 / 1.0."""
    return regression_metrics(pred, rounded_z=True)


def score_episodes(pred: pd.DataFrame, ctx=None) -> dict[str, float]:
    """Regression metrics of an episodic run: per test episode (query set), averaged; a table without an
    ``episode`` column is scored as one regression."""
    if "episode" not in pred:
        return regression_metrics(pred)
    # Iwata & Kumagai evaluate on the query set of each meta-test episode; average per episode.
    per_episode = pd.DataFrame([regression_metrics(g) for _, g in pred.groupby("episode", sort=True)])
    metrics = {k: float(v) for k, v in per_episode.mean().items()}
    # Not in the paper: ECE over all query points of the run at once. Its floor for a calibrated
    # predictive falls with the number of points (0.061 at 30, 0.011 at 900), so it resolves
    # differences that the per-query-set ECE's binomial floor hides.
    metrics["ece_pooled"] = regression_metrics(pred)["ece"]
    # Query points per episode and in all: the report's ECE floors (M.ece_floor) are taken at these sizes.
    metrics["n_query"] = float(pred.groupby("episode").size().mean())
    metrics["n_query_pooled"] = float(len(pred))
    return metrics


def score_test_part(pred: pd.DataFrame, ctx) -> dict[str, float]:
    """Regression metrics of the test rows of a train / validation / test split's predictions."""
    return regression_metrics(test_part(pred, ctx.load_split()))


def score_classification(pred: pd.DataFrame, ctx=None) -> dict[str, float]:
    return classification_metrics(pred)


def score_trace(pred: pd.DataFrame, ctx=None) -> dict[str, float]:
    return trace_metrics(pred)


def _validation_rows(pred: pd.DataFrame, split: dict) -> int:
    """How many of a run's prediction rows are validation rows: its methods predict ``split["test"]``,
    the validation rows first and then the test rows (uqcal.data.splits.train_val_test_split)."""
    n_val, n_test = len(split["val"]), len(split["holdout"])
    if len(pred) != n_val + n_test:
        raise ValueError(f"predictions have {len(pred)} rows; the split's validation + test parts have "
                         f"{n_val} + {n_test}")
    return n_val


def test_part(pred: pd.DataFrame, split: dict) -> pd.DataFrame:
    """The test rows of a train / validation / test run's predictions (the only rows scored)."""
    return pred.iloc[_validation_rows(pred, split):].reset_index(drop=True)


def validation_part(pred: pd.DataFrame, split: dict) -> pd.DataFrame:
    """The validation rows of a train / validation / test run's predictions (what a post-hoc recalibration is
    fitted on)."""
    return pred.iloc[: _validation_rows(pred, split)].reset_index(drop=True)


def trace_metrics(pred: pd.DataFrame) -> dict[str, float]:
    """Minimal optimisation metrics from a trace (``best_so_far``); a method adds its own."""
    best = pred["best_so_far"].to_numpy(float)
    return {"final_best": float(best[-1]), "best_auc": float(np.mean(best))}

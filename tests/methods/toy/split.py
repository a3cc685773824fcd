"""The toy family's own splitter (every ``every``-th row, shifted by the seed, is a test row) and evaluator."""

import numpy as np

from uqcal.data.splits import Splitter
from uqcal.metrics.evaluation import regression_metrics


def interleaved_split(table, params: dict, seed: int) -> dict:
    every = int(params.get("every", 4))
    rows = np.arange(len(table.frame))
    test = (rows + seed) % every == 0
    return {"train": rows[~test].tolist(), "test": rows[test].tolist()}


def split_problems(params: dict, key: str) -> list[str]:
    every = params.get("every", 4)
    if isinstance(every, int) and not isinstance(every, bool) and every >= 2:
        return []
    return [f"{key}.every: must be an integer >= 2, got {every!r}"]


SPLITTER = Splitter(interleaved_split, {"every": {"type": "integer"}}, split_problems)


def evaluate(predictions, ctx=None) -> dict[str, float]:
    """The shared regression metrics plus the largest absolute error (a metric no uqcal family reports)."""
    metrics = regression_metrics(predictions)
    metrics["max_abs_error"] = float(np.max(np.abs(predictions["y"] - predictions["mean"])))
    return metrics

"""Shared plumbing of the rio family: the standardised holdout data and per-dataset parameter overrides."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class HoldoutData:
    x_train: np.ndarray  # standardised with training statistics
    y_train: np.ndarray  # raw units
    x_test: np.ndarray
    y_test: np.ndarray
    train_rows: np.ndarray
    test_rows: np.ndarray

    @property
    def split_digest(self) -> str:
        """Identifies the split, so a dependent run can check it reuses the network of the same split."""
        h = hashlib.sha256(self.train_rows.astype(np.int64).tobytes())
        h.update(self.test_rows.astype(np.int64).tobytes())
        return h.hexdigest()[:16]


def load_holdout(ctx) -> HoldoutData:
    """Train/test rows of the split; inputs standardised with the split's training stats, targets raw."""
    table = ctx.load_data()
    split = ctx.load_split()
    for key in ("train", "test", "x_mean", "x_std"):
        if key not in split:
            raise KeyError(f"{ctx.split_path}: rio split lacks {key!r}")
    train_rows = np.asarray(split["train"], dtype=np.int64)
    test_rows = np.asarray(split["test"], dtype=np.int64)
    x = np.asarray(table.X, dtype=float)
    y = np.asarray(table.y, dtype=float).reshape(-1)
    x_mean = np.asarray(split["x_mean"], dtype=float)
    x_std = np.asarray(split["x_std"], dtype=float)
    if x_mean.shape != (x.shape[1],) or x_std.shape != (x.shape[1],):
        raise ValueError(f"{ctx.split_path}: x_mean/x_std have {x_mean.shape}; data has {x.shape[1]} columns")
    x_std = np.where(x_std > 0, x_std, 1.0)  # constant columns stay at 0 after centring
    xs = (x - x_mean) / x_std
    return HoldoutData(xs[train_rows], y[train_rows], xs[test_rows], y[test_rows], train_rows, test_rows)


def apply_per_dataset(params: dict[str, Any], dataset: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """``params["per_dataset"][dataset]`` overrides other parameters for that dataset (e.g. network size)."""
    table = params.get("per_dataset") or {}
    if not isinstance(table, dict):
        raise TypeError(f"per_dataset must map dataset -> {{param: value}}, got {type(table).__name__}")
    override = table.get(dataset) or {}
    unknown = sorted(set(override) - set(defaults) - {"per_dataset"})
    if unknown:
        raise KeyError(f"per_dataset.{dataset}: unknown parameter(s) {unknown}; accepted: {sorted(defaults)}")
    return {**params, **override}

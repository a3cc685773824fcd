"""Shared plumbing of the rio family: the standardised holdout data and per-dataset parameter overrides."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class HoldoutData:
    x_train: np.ndarray  # raw units
    y_train: np.ndarray
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
    """Train/test rows of the split, inputs and targets raw (each estimator standardises its inputs with the
    training rows' statistics, the split's ``x_mean`` / ``x_std``)."""
    table = ctx.load_data()
    split = ctx.load_split()
    for key in ("train", "test"):
        if key not in split:
            raise KeyError(f"{ctx.split_path}: rio split lacks {key!r}")
    train_rows = np.asarray(split["train"], dtype=np.int64)
    test_rows = np.asarray(split["test"], dtype=np.int64)
    x = np.asarray(table.X, dtype=float)
    y = np.asarray(table.y, dtype=float).reshape(-1)
    return HoldoutData(x[train_rows], y[train_rows], x[test_rows], y[test_rows], train_rows, test_rows)


def input_standardisation(x_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and std (ddof 0) of the training inputs; a constant column keeps std 1 (stays at 0)."""
    x_std = x_train.std(axis=0)
    return x_train.mean(axis=0), np.where(x_std > 0, x_std, 1.0)


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

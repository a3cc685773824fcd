"""Read the artifact contract: ``results/<family>/summary.csv`` and the per-run ``metrics.json`` files."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.metrics import ece_floor
from uqcal.pipeline.layout import RunLayout

SUMMARY_COLUMNS = ["dataset", "setting", "method", "metric", "mean", "std", "n"]
RUN_COLUMNS = ["dataset", "setting", "method", "seed", "metric", "value"]


def run_dirs(results_dir: Path, family: str) -> list[Path]:
    """Every ``<dataset>/<setting>/<method>/seed<k>`` directory of a family, sorted."""
    return RunLayout(results_dir).run_dirs(family)


def read_train_stats(run_dir: Path) -> dict:
    """A run's ``train_stats.json`` as a dict; {} when it is missing, not JSON or not an object (the report
    then shows what it cannot read as not recorded rather than failing)."""
    path = run_dir / RunLayout.TRAIN_STATS
    if not path.exists():
        return {}
    try:
        stats = json.loads(path.read_text())
    except json.JSONDecodeError:
        return {}
    return stats if isinstance(stats, dict) else {}


def load_runs(results_dir: Path, family: str) -> pd.DataFrame:
    """Long table of per-run metrics (one row per run and metric) from every ``metrics.json``."""
    rows = []
    for run_dir in run_dirs(results_dir, family):
        path = run_dir / RunLayout.METRICS
        if not path.exists():
            continue
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from err
        if not isinstance(record.get("metrics"), dict):
            raise ValueError(f"{path}: expected a 'metrics' object")
        dataset, setting, method, seed = RunLayout.run_key(run_dir)
        for metric, value in record["metrics"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append((dataset, setting, method, seed, metric, float(value)))
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def summarise_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std and count over seeds (the fallback when summary.csv is missing)."""
    if runs.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    grouped = runs.groupby(["dataset", "setting", "method", "metric"], sort=False)["value"]
    out = grouped.agg(mean="mean", std="std", n="count").reset_index()
    return out[SUMMARY_COLUMNS]


def load_summary(results_dir: Path, family: str, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """``summary.csv`` if present (validated), else summarised from the runs."""
    path = RunLayout(results_dir).summary(family)
    if path.exists():
        frame = pd.read_csv(path, dtype={"dataset": str, "setting": str, "method": str, "metric": str})
        missing = [c for c in SUMMARY_COLUMNS if c not in frame.columns]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}; expected {SUMMARY_COLUMNS}")
        return frame[SUMMARY_COLUMNS]
    return summarise_runs(load_runs(results_dir, family) if runs is None else runs)


FLOOR_METHOD = "floor"


@functools.cache
def _floor(n: int) -> float:
    return ece_floor(n)[0]  # ~0.6 s a size; the rows share a few sizes


def with_ece_floors(summary: pd.DataFrame, floors: dict | None) -> pd.DataFrame:
    """Add the pseudo-method ``floor``: the expected ECE of a perfectly calibrated predictive per row.

    ``floors`` maps an ECE metric to the count metric giving its number of points (metareg:
    ``{ece: n_query, ece_pooled: n_query_pooled}``); the floor is :func:`uqcal.metrics.ece_floor` at that
    count (rounded mean over the row's runs), so an ECE table shows it as one more column.
    """
    if not floors or summary.empty:
        return summary
    rows = []
    for metric, count_metric in floors.items():
        counts = summary[(summary["metric"] == count_metric) & (summary["method"] != FLOOR_METHOD)]
        for (dataset, setting), group in counts.groupby(["dataset", "setting"], sort=False):
            n = int(round(float(group["mean"].median())))
            rows.append({"dataset": dataset, "setting": setting, "method": FLOOR_METHOD, "metric": metric,
                         "mean": _floor(n), "std": np.nan, "n": np.nan})
    if not rows:
        return summary
    return pd.concat([summary, pd.DataFrame(rows, columns=SUMMARY_COLUMNS)], ignore_index=True)


def load_predictions(
    results_dir: Path,
    family: str,
    dataset: str,
    setting: str,
    method: str,
    filename: str = RunLayout.PREDICTIONS,
) -> pd.DataFrame | None:
    """All seeds' rows of one per-run file, with a ``seed`` column; None when no run has the file."""
    frames = []
    for path in RunLayout(results_dir).seed_files(family, dataset, setting, method, filename):
        frame = pd.read_parquet(path) if filename.endswith(".parquet") else pd.read_csv(path)
        frame["seed"] = RunLayout.seed_of(path.parent)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else None

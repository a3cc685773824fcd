"""Aggregate per-run metrics.json files into results/<family>/runs.parquet (every run's numbers) and
results/<family>/summary.csv (their means over seeds), the artifact contract the report reads."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.core.io import read_json, write_parquet, write_text
from uqcal.methods.api import is_timing_key
from uqcal.pipeline.layout import RunLayout

SUMMARY_COLUMNS = ["dataset", "setting", "method", "metric", "mean", "std", "n"]
RUN_COLUMNS = ["dataset", "setting", "method", "seed", "metric", "value"]


def collect_runs(family: str, runs: Iterable[tuple[str, str, str, int]], results_dir: Path) -> pd.DataFrame:
    """Long table (dataset, setting, method, seed, metric, value) of the given runs: their metrics.json, then the
    timings of their train_stats.json; one row per run and metric, sorted by dataset, setting, method and seed
    (a run's metrics in file order). Every run needs its metrics.json."""
    rows = []
    missing = []
    for dataset, setting, method, seed in runs:
        path = RunLayout(results_dir).run_dir(family, dataset, setting, method, seed) / RunLayout.METRICS
        if not path.exists():
            missing.append(str(path))
            continue
        record = read_json(path)
        for metric, value in record["metrics"].items():
            rows.append((dataset, setting, method, seed, metric, value))
        # Timings live in train_stats.json only, so that metrics.json stays deterministic (uqcal.methods.api).
        stats_path = path.with_name(RunLayout.TRAIN_STATS)
        for key, value in (read_json(stats_path) if stats_path.exists() else {}).items():
            if is_timing_key(key) and isinstance(value, (int, float)) and key not in record["metrics"]:
                rows.append((dataset, setting, method, seed, key, float(value)))
    if missing:
        raise FileNotFoundError(f"{len(missing)} planned runs have no metrics.json, e.g. {missing[0]}")
    long = pd.DataFrame(rows, columns=RUN_COLUMNS).astype({"setting": str, "seed": int, "value": float})
    return long.sort_values(["dataset", "setting", "method", "seed"], kind="stable", ignore_index=True)


def collect_metrics(family: str, family_config: dict, results_dir: Path) -> pd.DataFrame:
    """:func:`collect_runs` over the family's planned runs; a planned run without metrics.json is an error."""
    from uqcal.pipeline.config.runs import iter_runs

    planned = [(r.dataset, r.setting, r.method, r.seed) for r in iter_runs({"families": {family: family_config}})]
    return collect_runs(family, planned, results_dir)


def summarise(long: pd.DataFrame) -> pd.DataFrame:
    def stats(values: pd.Series) -> pd.Series:
        v = values.to_numpy(float)
        finite = v[np.isfinite(v)]
        n = len(finite)
        return pd.Series({
            "mean": finite.mean() if n else np.nan,
            "std": finite.std(ddof=1) if n > 1 else 0.0,
            "n": n,
        })

    grouped = long.groupby(["dataset", "setting", "method", "metric"], sort=True)["value"]
    summary = grouped.apply(stats).unstack().reset_index()
    summary["n"] = summary["n"].astype(int)
    return summary[SUMMARY_COLUMNS]


SUMMARY_FLOAT_FORMAT = "%.6g"  # the digits summary.csv keeps


def write_tables(long: pd.DataFrame, summary_path: Path) -> pd.DataFrame:
    """``summary_path`` (summary.csv) and, beside it, runs.parquet (the long table as it is); returns the summary."""
    summary = summarise(long)
    write_parquet(Path(summary_path).with_name(RunLayout.RUNS), long)
    write_text(summary_path, summary.to_csv(index=False, float_format=SUMMARY_FLOAT_FORMAT))
    return summary


def aggregate_family(family: str, family_config: dict, results_dir: Path, out: Path) -> pd.DataFrame:
    """Write ``out`` (summary.csv) and runs.parquet beside it from the family's planned runs."""
    return write_tables(collect_metrics(family, family_config, results_dir), Path(out))

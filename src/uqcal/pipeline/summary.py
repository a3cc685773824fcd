"""Aggregate per-run metrics.json files into results/<family>/summary.csv (the artifact contract)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.core.io import read_json, write_text
from uqcal.methods.api import is_timing_key

SUMMARY_COLUMNS = ["dataset", "setting", "method", "metric", "mean", "std", "n"]


def collect_metrics(family: str, family_config: dict, results_dir: Path, missing_ok: bool = False) -> pd.DataFrame:
    """Long table (dataset, setting, method, seed, metric, value) over the family's planned runs; a planned
    run without metrics.json is an error unless ``missing_ok`` (the report of a partial run)."""
    from uqcal.pipeline.config.runs import iter_runs
    from uqcal.pipeline.layout import RunLayout

    layout = RunLayout(results_dir)
    rows = []
    missing = []
    for run in iter_runs({"families": {family: family_config}}):
        path = layout.run_dir(family, run.dataset, run.setting, run.method, run.seed) / RunLayout.METRICS
        if not path.exists():
            missing.append(str(path))
            continue
        record = read_json(path)
        for metric, value in record["metrics"].items():
            rows.append((run.dataset, run.setting, run.method, run.seed, metric, value))
        # Timings live in train_stats.json only, so that metrics.json stays deterministic (uqcal.methods.api).
        stats_path = path.with_name(RunLayout.TRAIN_STATS)
        for key, value in (read_json(stats_path) if stats_path.exists() else {}).items():
            if is_timing_key(key) and isinstance(value, (int, float)) and key not in record["metrics"]:
                rows.append((run.dataset, run.setting, run.method, run.seed, key, float(value)))
    if missing and not missing_ok:
        raise FileNotFoundError(f"{len(missing)} planned runs have no metrics.json, e.g. {missing[0]}")
    return pd.DataFrame(rows, columns=["dataset", "setting", "method", "seed", "metric", "value"])


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


def aggregate_family(family: str, family_config: dict, results_dir: Path, out: Path) -> pd.DataFrame:
    summary = summarise(collect_metrics(family, family_config, results_dir))
    write_text(out, summary.to_csv(index=False, float_format="%.6g"))
    return summary

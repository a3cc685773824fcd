"""Two finished runs' non-timing summary.csv, row by row (issue 48: the same config on two CPUs).

    python docs/experiments/compare_summaries.py RESULTS_A RESULTS_B

A family of RESULTS_B without summary.csv (a run still going) is summarised from its methods whose every seed
has finished (as many metrics.json as RESULTS_A's rows count), at summary.csv's printed precision.

Per family: rows compared (dataset, setting, method, metric), rows whose mean or std differ at the csv's
printed precision, the largest relative difference of a mean, and the metrics that differ most.
Timing rows (`uqcal.methods.api.is_timing_key`) are left out: they differ between any two runs.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.methods.api import is_timing_key

KEY = ["dataset", "setting", "method", "metric"]


def finished_summary(family_dir: Path, reference: pd.DataFrame) -> pd.DataFrame:
    """summary.csv's rows for the methods of a running run's family whose every seed has its metrics.json."""
    from uqcal.pipeline.summary import SUMMARY_FLOAT_FORMAT, collect_runs, summarise

    seeds = reference.groupby(["dataset", "setting", "method"])["n"].max()
    runs = []
    for (dataset, setting, method), n in seeds.items():
        found = [int(p.parent.name.removeprefix("seed"))
                 for p in (family_dir / dataset / str(setting) / method).glob("seed*/metrics.json")]
        if len(found) == n:
            runs += [(dataset, str(setting), method, seed) for seed in sorted(found)]
    if not runs:
        return reference.iloc[:0]
    summary = summarise(collect_runs(family_dir.name, runs, family_dir.parent))
    return pd.read_csv(io.StringIO(summary.to_csv(index=False, float_format=SUMMARY_FLOAT_FORMAT)))


def compare_family(a: Path, b: Path) -> dict:
    left = pd.read_csv(a)
    right = pd.read_csv(b) if b.exists() else finished_summary(b.parent, left)
    if not b.exists():  # only the rows the running run has
        if right.empty:
            return {"rows": 0, "only_one": 0, "differ": 0, "methods": [], "max_rel": 0.0, "worst": []}
        left = left.merge(right[KEY].drop_duplicates(), on=KEY)
    left, right = (df[~df["metric"].map(is_timing_key)].astype({"setting": str}) for df in (left, right))
    both = left.merge(right, on=KEY, how="outer", suffixes=("_a", "_b"), indicator=True)
    paired = both[both["_merge"] == "both"]
    mean_a, mean_b = paired["mean_a"].to_numpy(float), paired["mean_b"].to_numpy(float)
    same_mean = (mean_a == mean_b) | (np.isnan(mean_a) & np.isnan(mean_b))
    same_std = (paired["std_a"].to_numpy(float) == paired["std_b"].to_numpy(float)) | paired["std_a"].isna().to_numpy()
    differ = paired[~(same_mean & same_std)]
    scale = np.maximum(np.abs(mean_a), np.abs(mean_b))
    rel = np.where(same_mean, 0.0, np.abs(mean_a - mean_b) / np.where(scale > 0, scale, 1.0))
    worst = paired.assign(rel=rel).sort_values("rel", ascending=False).head(3)
    return {"rows": len(paired), "only_one": int((both["_merge"] != "both").sum()), "differ": len(differ),
            "methods": sorted(differ["method"].unique()), "max_rel": float(np.nanmax(rel)) if len(rel) else 0.0,
            "worst": [f"{r.dataset}/{r.setting}/{r.method}/{r.metric}: {r.mean_a:.6g} vs {r.mean_b:.6g}"
                      for r in worst.itertuples() if r.rel > 0]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_a", type=Path)
    parser.add_argument("results_b", type=Path)
    args = parser.parse_args(argv)
    print("| family | rows | rows that differ | largest relative difference of a mean | methods that differ |")
    print("|---|---|---|---|---|")
    details = []
    for path in sorted(args.results_a.glob("*/summary.csv")):
        other = args.results_b / path.parent.name / "summary.csv"
        if not other.parent.is_dir():
            print(f"| {path.parent.name} | - | only in {args.results_a} | | |")
            continue
        found = compare_family(path, other)
        if not other.exists():
            found["methods"] = [*found["methods"], "(finished methods only)"]
        extra = f" (+{found['only_one']} in one run only)" if found["only_one"] else ""
        print(f"| {path.parent.name} | {found['rows']}{extra} | {found['differ']} | {found['max_rel']:.2g} | "
              f"{', '.join(found['methods'])} |")
        details += [f"{path.parent.name}: {w}" for w in found["worst"]]
    print("\nLargest differences:\n" + "\n".join(details))


if __name__ == "__main__":
    main()

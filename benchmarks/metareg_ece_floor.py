"""Why metacal's ECE is or is not below MDKL's, per row of a finished metareg run. Prints a table.

Per (dataset, N_S) row of ``<results>/metareg``: the expected ECE of a perfectly calibrated predictive at
the row's own query-set size (``uqcal.metrics.ece_floor``, simulated with the metric itself), metacal's and
MDKL's mean per-query-set ECE (Sec. 5.4) and their excess over that floor, the paired difference over splits
with its p-value (paired t), the smallest difference detectable at 80 % power and the splits the observed
difference would need for 80 % power; then the same for the pooled ECE (all query points of a run at once,
floor at the pooled count). Nothing is trained; reads metrics.json only.

    PYTHONPATH=src python benchmarks/metareg_ece_floor.py [--results results] [--a metacal] [--b mdkl]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from uqcal.metrics import ece_floor
from uqcal.metrics.stats import paired_comparison


def per_seed(row: Path, method: str) -> dict[int, dict]:
    out = {}
    for path in sorted((row / method).glob("seed*/metrics.json")):
        out[int(path.parent.name[4:])] = json.loads(path.read_text())["metrics"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="results")
    parser.add_argument("--a", default="metacal")
    parser.add_argument("--b", default="mdkl")
    args = parser.parse_args()
    base = Path(args.results) / "metareg"
    print(f"| data / N_S | metric | points | floor | {args.a} (excess) | {args.b} (excess) | diff [95 % CI] | p | "
          "MDE (80 %) | splits for 80 % power |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in sorted(p for p in base.glob("*/*") if (p / args.a).is_dir() and (p / args.b).is_dir()):
        runs_a, runs_b = per_seed(row, args.a), per_seed(row, args.b)
        seeds = sorted(set(runs_a) & set(runs_b))
        if len(seeds) < 2:
            continue
        for metric, count in (("ece", "n_query"), ("ece_pooled", "n_query_pooled")):
            a = np.array([runs_a[s][metric] for s in seeds])
            b = np.array([runs_b[s][metric] for s in seeds])
            # Runs written before the evaluator recorded the counts: N_Q = 30 per query set (config), and
            # the pooled count is the length of predictions.parquet.
            n = runs_a[seeds[0]].get(count)
            if n is None:
                n = 30 if metric == "ece" else _pooled_count(row / args.a / f"seed{seeds[0]}")
            floor, _ = ece_floor(int(round(n)))
            cmp = paired_comparison(a, b, "ttest", 0.05, -1)
            need = "–" if cmp.n_needed is None or not np.isfinite(cmp.n_needed) else f"{cmp.n_needed:.0f}"
            print(f"| {row.parent.name} / {row.name} | {metric} | {int(round(n))} | {floor:.4f} | "
                  f"{a.mean():.4f} ({a.mean() - floor:+.4f}) | {b.mean():.4f} ({b.mean() - floor:+.4f}) | "
                  f"{cmp.mean_diff:+.4f} [{cmp.ci[0]:+.4f}, {cmp.ci[1]:+.4f}] | {cmp.pvalue:.3f} | {cmp.mde:.4f} | "
                  f"{need} |", flush=True)


def _pooled_count(run: Path) -> int:
    import pandas as pd

    return len(pd.read_parquet(run / "predictions.parquet", columns=["y"]))


if __name__ == "__main__":
    main()

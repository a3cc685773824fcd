"""Why metacal's ECE is or is not below MDKL's, per row of a finished metareg run. Prints a table.

Per (dataset, N_S) row of ``<results>/metareg``: the expected ECE of a perfectly calibrated predictive at
the row's own query-set size (``uqcal.metrics.ece_floor``, simulated with the metric itself), metacal's and
MDKL's mean per-query-set ECE (Sec. 5.4) and their excess over that floor, the paired difference over splits
with its p-value (paired t), the smallest difference detectable at 80 % power and the splits the observed
difference would need for 80 % power; then the same for the pooled ECE (all query points of a run at once,
floor at the pooled count). Then, per row, the calibration map's share: metacal's per-query-set ECE of the
same meta-trained GP before its map r (Eq. 6's h_U, the ``pit_uncal`` column of predictions.parquet) and
after it, r's paired effect, and the uncalibrated GP against MDKL. Nothing is trained; reads metrics.json and
metacal's predictions.parquet.

    PYTHONPATH=src python docs/experiments/metareg_ece_floor.py [--results results] [--a metacal] [--b mdkl]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from uqcal.metrics import ece_floor, ece_iwata
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
    rows = sorted(p for p in base.glob("*/*") if (p / args.a).is_dir() and (p / args.b).is_dir())
    runs = {row: (per_seed(row, args.a), per_seed(row, args.b)) for row in rows}
    for row in rows:
        runs_a, runs_b = runs[row]
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

    print()
    print(f"| data / N_S | {args.a} ECE before r | after r | r's effect [95 % CI], p | before r − {args.b} [95 % CI], p |")
    print("|---|---|---|---|---|")
    for row in rows:
        runs_a, runs_b = runs[row]
        seeds = sorted(s for s in set(runs_a) & set(runs_b) if (row / args.a / f"seed{s}" / "predictions.parquet").exists())
        before = np.array([ece_before_map(row / args.a / f"seed{s}") for s in seeds])
        if len(seeds) < 2 or np.isnan(before).any():
            continue  # a method without a calibration map (no pit_uncal column)
        after = np.array([runs_a[s]["ece"] for s in seeds])
        other = np.array([runs_b[s]["ece"] for s in seeds])
        effect = paired_comparison(after, before, "ttest", 0.05, -1)
        base_gap = paired_comparison(before, other, "ttest", 0.05, -1)
        print(f"| {row.parent.name} / {row.name} | {before.mean():.4f} | {after.mean():.4f} | "
              f"{effect.mean_diff:+.4f} [{effect.ci[0]:+.4f}, {effect.ci[1]:+.4f}], {effect.pvalue:.3f} | "
              f"{base_gap.mean_diff:+.4f} [{base_gap.ci[0]:+.4f}, {base_gap.ci[1]:+.4f}], {base_gap.pvalue:.3f} |",
              flush=True)


def ece_before_map(run: Path) -> float:
    """Per-query-set ECE (Sec. 5.4, the evaluator's per-episode mean) of the uncalibrated CDF h_U; NaN when the
    run has no ``pit_uncal`` column."""
    import pandas as pd

    pred = pd.read_parquet(run / "predictions.parquet")
    if "pit_uncal" not in pred:
        return float("nan")
    return float(np.mean([ece_iwata(g["pit_uncal"].to_numpy(float)) for _, g in pred.groupby("episode", sort=True)]))


def _pooled_count(run: Path) -> int:
    import pandas as pd

    return len(pd.read_parquet(run / "predictions.parquet", columns=["y"]))


if __name__ == "__main__":
    main()

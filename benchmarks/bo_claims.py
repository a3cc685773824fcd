"""Paired comparison of calibrated vs uncalibrated BO on finished runs (the paper's claims, issue 7).

Reads results/bo/<dataset>/<setting>/<method>/seed*/ (metrics.json and predictions.parquet) and prints,
per setting: mean final regret, regret AUC and steps-to-target of calibrated / uncalibrated / random,
paired t-test and Wilcoxon p-values (calibrated vs uncalibrated, same seed = same initial design), the
fraction of budgets where the calibrated mean best-so-far is at least as good, the % fewer steps to the
target, and how many repeats reached the target (the basin-escape claim on Forrester).
    PYTHONPATH=src python benchmarks/bo_claims.py [--results results/bo] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.stats import paired_ttest, wilcoxon_test


def load_runs(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    metrics, traces = [], []
    for path in sorted(root.glob("*/*/*/seed*/metrics.json")):
        dataset, setting, method, seed = path.parts[-5:-1]
        record = json.loads(path.read_text())["metrics"]
        metrics.append({"dataset": dataset, "setting": setting, "method": method,
                        "seed": int(seed[4:]), **record})
        pred = pd.read_parquet(path.parent / "predictions.parquet")
        trace = pred.groupby("iteration")["best_so_far"].min().reset_index()
        trace[["dataset", "setting", "method", "seed"]] = dataset, setting, method, int(seed[4:])
        traces.append(trace)
    return pd.DataFrame(metrics), pd.concat(traces, ignore_index=True)


def _p(test, a, b) -> float:
    try:
        return test(a, b)[1]
    except ValueError:
        return float("nan")


def compare(metrics: pd.DataFrame, traces: pd.DataFrame, treat: str = "calibrated",
            base: str = "uncalibrated") -> pd.DataFrame:
    rows = []
    for (dataset, setting), group in metrics.groupby(["dataset", "setting"]):
        wide = {m: g.set_index("seed") for m, g in group.groupby("method")}
        if treat not in wide or base not in wide:
            continue
        seeds = wide[treat].index.intersection(wide[base].index)
        row = {"dataset": dataset, "setting": setting, "n_pairs": len(seeds)}
        for metric in ("final_regret", "regret_auc", "steps_to_target", "final_best"):
            if metric not in wide[treat]:
                continue
            a, b = wide[treat].loc[seeds, metric].to_numpy(), wide[base].loc[seeds, metric].to_numpy()
            row[f"{metric}_{treat}"] = a.mean()
            row[f"{metric}_{base}"] = b.mean()
            if "random" in wide and metric in wide["random"]:
                row[f"{metric}_random"] = wide["random"][metric].mean()
            row[f"{metric}_p_ttest"] = _p(paired_ttest, a, b)
            row[f"{metric}_p_wilcoxon"] = _p(wilcoxon_test, a, b)
        if "steps_to_target" in wide[treat]:
            a = wide[treat].loc[seeds, "steps_to_target"].mean()
            b = wide[base].loc[seeds, "steps_to_target"].mean()
            row["fewer_steps_pct"] = 100.0 * (b - a) / b if b > 0 else float("nan")
            row[f"reached_{treat}"] = int(wide[treat].loc[seeds, "reached_target"].sum())
            row[f"reached_{base}"] = int(wide[base].loc[seeds, "reached_target"].sum())
        for method in (treat, base):
            if "cal_score" in wide[method]:
                row[f"cal_score_{method}"] = wide[method].loc[seeds, "cal_score"].mean()
        t = traces[(traces.dataset == dataset) & (traces.setting == setting)]
        curve = t.groupby(["method", "iteration"])["best_so_far"].mean().unstack("method")
        row["frac_budgets_cal_le_uncal"] = float(np.mean(curve[treat] <= curve[base] + 1e-12))
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", default="results/bo")
    parser.add_argument("--csv", default=None)
    parser.add_argument("--treat", default="calibrated")
    args = parser.parse_args()
    metrics, traces = load_runs(Path(args.results))
    table = compare(metrics, traces, treat=args.treat)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 60)
    cols = [c for c in table.columns if not c.startswith("final_best")]
    print(table[cols].round(4).to_string(index=False))
    if args.csv:
        table.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()

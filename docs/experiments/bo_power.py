"""Power analysis of the bo claims: how many paired repeats each measured effect needs (issue 27).

Reads finished runs (results/bo/<dataset>/<setting>/<method>/seed*/metrics.json) and, for every ablation a
against uncalibrated BO on the same seeds and every claim metric, prints the paired differences' mean and
standard deviation, the standardised effect d = mean / sd, the Wilcoxon p-value, the power the current n
has at d, and the pairs needed for 80 % power at d (two-sided, alpha 0.05; paired t-test power from the
noncentral t, divided by the Wilcoxon test's asymptotic relative efficiency 3/pi for the Wilcoxon test, as
in the report's claims: ``uqcal.metrics.stats``). ``needed`` = inf: no difference was observed (d = 0). The last
columns are the planning numbers: pairs for 80 % power at d = 0.5 and d = 0.8 (a "medium" and "large"
effect) do not depend on the data.
    PYTHONPATH=src python docs/experiments/bo_power.py [--results results/bo] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.metrics.stats import WILCOXON_ARE, paired_pvalue, paired_t_power, pairs_for_power

METRICS = ("regret_auc", "final_regret", "steps_to_target", "stuck", "cal_score")
TREATMENTS = ("calibrated", "calibrated_fastloo", "calibrated_isoslope", "calibrated_legacy")


def load_metrics(root: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(root.glob("*/*/*/seed*/metrics.json")):
        dataset, setting, method, seed = path.parts[-5:-1]
        for metric, value in json.loads(path.read_text())["metrics"].items():
            rows.append((dataset, setting, method, int(seed[4:]), metric, float(value)))
    return pd.DataFrame(rows, columns=["dataset", "setting", "method", "seed", "metric", "value"])


def power_table(runs: pd.DataFrame, base: str = "uncalibrated", alpha: float = 0.05) -> pd.DataFrame:
    out = []
    for (dataset, setting, metric), block in runs[runs["metric"].isin(METRICS)].groupby(
            ["dataset", "setting", "metric"]):
        per_method = {m: g.set_index("seed")["value"] for m, g in block.groupby("method")}
        if base not in per_method:
            continue
        for treat in TREATMENTS:
            if treat not in per_method:
                continue
            pairs = pd.concat([per_method[treat], per_method[base]], axis=1, join="inner").dropna()
            if len(pairs) < 2:
                continue
            a, b = pairs.iloc[:, 0].to_numpy(), pairs.iloc[:, 1].to_numpy()
            diff = a - b
            mean, sd = float(diff.mean()), float(diff.std(ddof=1))
            effect = mean / sd if sd > 0 else (0.0 if mean == 0 else np.inf)
            n = len(diff)
            n_eff = max(2, int(round(n * WILCOXON_ARE)))
            out.append({
                "setting": f"{dataset}/{setting}", "metric": metric, "method": treat, "n": n,
                "mean_diff": mean, "sd_diff": sd, "d": effect, "p_wilcoxon": paired_pvalue(a, b, "wilcoxon"),
                "power_now": paired_t_power(effect, n_eff, alpha) if np.isfinite(effect) else 1.0,
                "needed": np.ceil(pairs_for_power(effect, alpha) / WILCOXON_ARE) if effect != 0 else np.inf,
            })
    table = pd.DataFrame(out)
    plan = {d: np.ceil(pairs_for_power(d, alpha) / WILCOXON_ARE) for d in (0.5, 0.8)}
    table["needed_d0.5"], table["needed_d0.8"] = plan[0.5], plan[0.8]
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", default="results/bo")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args()
    table = power_table(load_metrics(Path(args.results)))
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 500)
    print(table.round({"mean_diff": 4, "sd_diff": 4, "d": 2, "p_wilcoxon": 3, "power_now": 2}).to_string(index=False))
    if args.csv:
        table.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()

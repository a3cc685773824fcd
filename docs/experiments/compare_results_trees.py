"""Compare every seed's metrics.json, predictions.parquet and train_stats.json (timings excluded) of one job in
two results trees, bit for bit (issue 53: a batched job against its per-seed run).
Run: .venv/bin/python docs/experiments/compare_results_trees.py RESULTS_A RESULTS_B metareg/exam/ns10/metacal"""
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

a_root, b_root, job = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
TIMING = ("seconds", "train_seconds", "predict_seconds_per_task")
for seed_dir in sorted((a_root / job).glob("seed*")):
    b_dir = b_root / job / seed_dir.name
    ma = json.loads((seed_dir / "metrics.json").read_text())["metrics"]
    mb = json.loads((b_dir / "metrics.json").read_text())["metrics"]
    diff_m = {k: (ma[k], mb.get(k)) for k in ma if ma[k] != mb.get(k) and not any(t in k for t in TIMING)}
    pa, pb = pd.read_parquet(seed_dir / "predictions.parquet"), pd.read_parquet(b_dir / "predictions.parquet")
    diff_p = [c for c in pa.columns if not pa[c].equals(pb[c])]
    worst = max((float(np.max(np.abs(pa[c] - pb[c]) / np.maximum(np.abs(pa[c]), 1e-300))) for c in diff_p
                 if pa[c].dtype.kind == "f"), default=0.0)
    sa = json.loads((seed_dir / "train_stats.json").read_text())
    sb = json.loads((b_dir / "train_stats.json").read_text())
    diff_s = [k for k in sa if sa[k] != sb.get(k) and not any(t in k for t in TIMING)]
    print(f"{job}/{seed_dir.name}: metrics differing {len(diff_m)} {list(diff_m)[:5]}, prediction columns "
          f"differing {diff_p} (max rel {worst:.1e}), train_stats differing {diff_s}")

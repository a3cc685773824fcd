"""Our qr results (mean ± std over the seeds found under results/qr/) beside the paper's Tables 1, 2, 4, 5.

  PYTHONPATH=src python benchmarks/qr_compare.py [--results results] [--datasets concrete boston diabetes]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

# (dataset, method) -> {metric: (mean, std)}; paper Tables 1, 2 (CE, RMSE, NLL) and 4, 5 (CE, RMSE, max lik.).
PAPER = {
    ("boston", "dvi"): {"ce": (21.35, 4.89), "rmse": (4.59, 0.23), "nll": (3.23, 0.05)},
    ("boston", "dvi_qr"): {"ce": (19.96, 3.36), "rmse": (4.58, 0.12), "nll": (3.16, 0.05)},
    ("concrete", "dvi"): {"ce": (25.78, 2.01), "rmse": (8.74, 0.18), "nll": (3.61, 0.03)},
    ("concrete", "dvi_qr"): {"ce": (15.90, 3.72), "rmse": (9.21, 0.13), "nll": (3.66, 0.02)},
    ("boston", "de"): {"ce": (37.76, 4.55), "rmse": (4.83, 0.10), "nll": (4.60, 0.21)},
    ("boston", "de_qr"): {"ce": (25.25, 2.95), "rmse": (4.49, 0.11), "nll": (3.89, 0.16)},
    ("concrete", "de"): {"ce": (37.27, 2.94), "rmse": (9.02, 0.10), "nll": (4.82, 0.05)},
    ("concrete", "de_qr"): {"ce": (22.76, 3.32), "rmse": (8.48, 0.19), "nll": (3.76, 0.07)},
    ("boston", "dvi_iso"): {"ce": (29.80, 4.91), "rmse": (4.52, 0.19), "max_density": (115.08, None)},
    ("boston", "dvi_qr_iso"): {"ce": (23.26, 5.11), "rmse": (4.55, 0.09), "max_density": (6748.73, None)},
    ("concrete", "dvi_iso"): {"ce": (34.41, 3.06), "rmse": (8.70, 0.09), "max_density": (238.10, None)},
    ("concrete", "dvi_qr_iso"): {"ce": (21.54, 6.37), "rmse": (9.18, 0.19), "max_density": (52.91, None)},
    ("boston", "de_iso"): {"ce": (52.05, 2.40), "rmse": (4.83, 0.13), "max_density": (164.63, None)},
    ("boston", "de_qr_iso"): {"ce": (30.81, 3.77), "rmse": (4.47, 0.10), "max_density": (221.09, None)},
    ("concrete", "de_iso"): {"ce": (50.10, 2.26), "rmse": (9.00, 0.08), "max_density": (24956.94, None)},
    ("concrete", "de_qr_iso"): {"ce": (31.11, 2.44), "rmse": (8.53, 0.15), "max_density": (13536.36, None)},
}
METRICS = ("ce", "rmse", "nll", "ece", "crps", "zero_density_fraction", "max_density")


def collect(results: Path, dataset: str, method: str) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}
    for path in sorted((results / "qr" / dataset / "cv5" / method).glob("seed*/metrics.json")):
        for key, value in json.loads(path.read_text())["metrics"].items():
            values.setdefault(key, []).append(value)
    return values


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", default="results", type=Path)
    parser.add_argument("--datasets", nargs="+", default=["concrete", "boston", "diabetes"])
    args = parser.parse_args()
    for dataset in args.datasets:
        methods = sorted(p.name for p in (args.results / "qr" / dataset / "cv5").glob("*") if p.is_dir())
        print(f"\n## {dataset}\n")
        print("| method | n | " + " | ".join(METRICS) + " | paper CE | paper RMSE | paper NLL / max lik. |")
        print("|---|---|" + "---|" * (len(METRICS) + 3))
        for method in methods:
            values = collect(args.results, dataset, method)
            if not values:
                continue
            n = len(values.get("rmse", []))
            cells = []
            for metric in METRICS:
                v = np.asarray(values.get(metric, []), float)
                cells.append(f"{v.mean():.3g} ± {v.std(ddof=1) if v.size > 1 else 0:.2g}" if v.size else "")
            paper = PAPER.get((dataset, method), {})
            third = paper.get("nll") or paper.get("max_density")
            ref = [f"{paper[m][0]:g} ± {paper[m][1]:g}" if m in paper else "" for m in ("ce", "rmse")]
            ref.append("" if third is None else (f"{third[0]:g}" + (f" ± {third[1]:g}" if third[1] else "")))
            print(f"| {method} | {n} | " + " | ".join(cells) + " | " + " | ".join(ref) + " |")


if __name__ == "__main__":
    main()

"""Run rio-family runs in one process through the CLI's own step functions (same artifacts as Snakemake).

    python benchmarks/rio_inprocess.py --config config/config.yaml --datasets concrete --seeds 0 1 2

Skips the per-job interpreter start-up (torch + gpytorch imports) that dominates small runs on a busy
2-core machine; writes splits, results/rio/<dataset>/holdout/<method>/seed<k>/ and then summary.csv, then
prints each method's seconds. Runs whose metrics.json exists are skipped (resumable).
"""

from __future__ import annotations

import argparse
import time
from argparse import Namespace
from pathlib import Path

from uqcal import cli
from uqcal.pipeline.config import load_config, methods_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--datasets", nargs="*")
    ap.add_argument("--seeds", nargs="*", type=int)
    ap.add_argument("--methods", nargs="*")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--results-dir", default="results")
    ap.add_argument("--no-aggregate", action="store_true")
    args = ap.parse_args()
    config = load_config(args.config)
    fam = config["families"]["rio"]
    datasets = args.datasets or fam["datasets"]
    seeds = args.seeds if args.seeds is not None else list(range(fam["seeds"]))
    common = {"config": args.config, "job": None, "data_dir": args.data_dir, "results_dir": args.results_dir}
    seconds: dict[str, float] = {}
    for dataset in datasets:
        if not Path(args.data_dir, "raw", f"{dataset}.parquet").exists():
            cli.cmd_materialise(Namespace(**common, dataset=dataset, out=None))
        for setting in ["holdout"]:
            methods = methods_for(config, "rio", dataset, setting)
            methods = [m for m in methods if not args.methods or m in args.methods]
            # `nn` first: every GP method depends on it.
            methods.sort(key=lambda m: m != "nn")
            for seed in seeds:
                base = dict(common, family="rio", dataset=dataset, setting=setting, seed=seed)
                split = Path(args.data_dir, "splits", "rio", dataset, setting, f"seed{seed}.json")
                if not split.exists():
                    cli.cmd_split(Namespace(**base, out=None))
                for method in methods:
                    run_dir = Path(args.results_dir, "rio", dataset, setting, method, f"seed{seed}")
                    if (run_dir / "metrics.json").exists():
                        continue
                    t = time.perf_counter()
                    cli.cmd_train(Namespace(**base, method=method))
                    cli.cmd_evaluate(Namespace(**base, method=method))
                    seconds[method] = seconds.get(method, 0.0) + time.perf_counter() - t
    if not args.no_aggregate:
        cli.cmd_aggregate(Namespace(**common, family="rio", out=None))
    for method, s in seconds.items():
        print(f"{method:>10}: {s:8.1f} s")


if __name__ == "__main__":
    main()

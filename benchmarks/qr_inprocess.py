"""Run qr runs of a config in ONE process (no per-job Python/torch start-up) and print per-method timings.

It calls the same `uqcal split/train/evaluate` code paths as the Snakefile rules, so the artifacts under
results/qr/ are the pipeline's own. Use it to measure compute apart from start-up, or to fill results on a
loaded machine; then `uqcal aggregate --family qr` (or snakemake) builds the summary.

  PYTHONPATH=src python benchmarks/qr_inprocess.py --config config/config.yaml \
      --datasets concrete boston --methods dvi dvi_qr de de_qr dvi_iso --seeds 0-4
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

from uqcal import cli
from uqcal.api import get_entry
from uqcal.config import load_config


def _seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--datasets", nargs="+", required=True)
    parser.add_argument("--methods", nargs="+", required=True)
    parser.add_argument("--seeds", default="0-14")
    parser.add_argument("--setting", default="cv5")
    args = parser.parse_args()
    config = load_config(args.config)
    family = config["families"]["qr"]
    # Bases first: a depends_on method needs its base's run directory.
    ordered = sorted(args.methods, key=lambda m: get_entry("qr", m).depends_on is not None)
    timings: dict[str, list[float]] = defaultdict(list)
    for dataset in args.datasets:
        if not Path(f"data/raw/{dataset}.parquet").exists():
            materialise_args = dict(config=args.config, job=None, dataset=dataset, data_dir="data")
            cli.cmd_materialise(argparse.Namespace(**materialise_args))
    for seed in _seeds(args.seeds):  # seeds outermost: an interrupted run still covers every dataset
        for dataset in args.datasets:
            common = dict(config=args.config, job=None, family="qr", dataset=dataset, setting=args.setting,
                          seed=seed, data_dir="data", results_dir="results")
            if not Path(f"data/splits/qr/{dataset}/{args.setting}/seed{seed}.json").exists():
                cli.cmd_split(argparse.Namespace(**common, out=None))
            for method in ordered:
                if method not in family["methods"]:
                    raise SystemExit(f"families.qr.methods.{method}: not in {args.config}")
                ns = argparse.Namespace(**common, method=method)
                start = time.perf_counter()
                cli.cmd_train(ns)
                cli.cmd_evaluate(ns)
                timings[method].append(time.perf_counter() - start)
    print(f"{'method':<16} {'runs':>5} {'mean s/run':>11} {'total s':>9}")
    for method in ordered:
        t = timings[method]
        print(f"{method:<16} {len(t):>5} {sum(t) / len(t):>11.2f} {sum(t):>9.1f}")


if __name__ == "__main__":
    main()

"""Issue 53 for metareg: one train job's seeds trained one after another against batched (``train_batch``): each
run's CPU seconds and the largest relative difference of every metric between the two.

Each run is a fresh `uqcal train` process (numerics pinned as the command pins them); the per-seed run shadows the
method's ``train_batch`` with None in its own process, which is what the train step checks. Run one job at a time
on a quiet machine (CPU seconds, not wall); the data directory needs the job's splits (`uqcal split`).

    PYTHONPATH=src python benchmarks/metareg_batched_seeds.py --dataset exam --setting ns10 --method gp \\
        --data-dir data --out /tmp/metareg-batched
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

CHILD = """
import sys
from uqcal.core.numerics import activate
activate("portable")  # as the `uqcal` command, before torch loads
if sys.argv[1] == "per-seed":
    from uqcal.methods.metareg.batched import SeedBatchedTraining
    SeedBatchedTraining.train_batch = None  # the train step then trains the seeds one by one
from uqcal.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run(mode: str, args, results: Path) -> float:
    """CPU seconds (user + system) of one `uqcal train` of the job into ``results``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", CHILD, mode, "--data-dir", str(args.data_dir), "--results-dir",
                    str(results), "train", "--config", args.config, "--family", "metareg", "--dataset", args.dataset,
                    "--setting", args.setting, "--method", args.method], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def metric_differences(a: Path, b: Path) -> dict[str, float]:
    """Metric -> the largest relative difference over the seeds of two runs of one job."""
    worst: dict[str, float] = {}
    for seed_dir in sorted(a.glob("seed*")):
        first = json.loads((seed_dir / "metrics.json").read_text())["metrics"]
        second = json.loads((b / seed_dir.name / "metrics.json").read_text())["metrics"]
        if first.keys() != second.keys():
            raise SystemExit(f"{seed_dir.name}: different metrics {sorted(first.keys() ^ second.keys())}")
        for key, value in first.items():
            difference = abs(second[key] - value) / max(abs(value), 1e-12)
            worst[key] = max(worst.get(key, 0.0), difference)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--setting", required=True)
    parser.add_argument("--method", required=True)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--out", type=Path, required=True, help="a scratch folder for the two runs' results")
    args = parser.parse_args()
    cpu = {mode: run(mode, args, args.out / mode) for mode in ("per-seed", "batched")}
    job = Path("metareg", args.dataset, args.setting, args.method)
    worst = metric_differences(args.out / "per-seed" / job, args.out / "batched" / job)
    print(f"{job}: CPU s per-seed {cpu['per-seed']:.1f}, batched {cpu['batched']:.1f} "
          f"({1 - cpu['batched'] / cpu['per-seed']:.0%} less)")
    for key, value in sorted(worst.items(), key=lambda item: -item[1]):
        print(f"  {key:24s} max rel difference {value:.1e}")


if __name__ == "__main__":
    main()

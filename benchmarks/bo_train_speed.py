"""CPU seconds per seed of a `bo` training job, measured in-process (imports and first-call warm-up excluded).

Runs `uqcal train` for one warm-up seed and then times each further seed with ``time.process_time`` (CPU
time of this process: robust to other jobs sharing the cores). Outputs go to ``--results-dir``
(default a temporary directory, so results/ is left alone). Needs the setting's splits
(`snakemake --cores 1 data/splits/bo/<dataset>/<setting>`). Run:
    PYTHONPATH=src python benchmarks/bo_train_speed.py --dataset sixhump --setting sixhump-ei \
        --method calibrated --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time


def main() -> None:
    from uqcal.cli import main as uqcal_main

    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="sixhump")
    parser.add_argument("--setting", default="sixhump-ei")
    parser.add_argument("--method", default="calibrated")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--warmup-seed", type=int, default=9)
    parser.add_argument("--results-dir", default=None)
    args = parser.parse_args()
    logging.disable(logging.INFO)
    results = args.results_dir or tempfile.mkdtemp(prefix="bo_train_speed_")

    def train(seed: int) -> float:
        start = time.process_time()
        rc = uqcal_main(["--results-dir", results, "train", "--family", "bo", "--dataset", args.dataset,
                         "--setting", args.setting, "--method", args.method, "--seed", str(seed)])
        if rc:
            raise SystemExit(f"uqcal train failed (exit {rc}) for seed {seed}")
        return time.process_time() - start

    warm = train(args.warmup_seed)
    times = {seed: train(seed) for seed in args.seeds}
    print(f"{args.dataset}/{args.setting}/{args.method}: warm-up seed {args.warmup_seed} {warm:.2f} s CPU")
    for seed, t in times.items():
        print(f"  seed {seed}: {t:.2f} s CPU")
    print(f"  mean {sum(times.values()) / len(times):.2f} s CPU per seed (results in {results})")


if __name__ == "__main__":
    main()

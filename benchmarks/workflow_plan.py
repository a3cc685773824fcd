"""How long `snakemake -n` takes to plan each shipped config, and how many jobs it plans (issue 9, "Load").

Target: the paper protocols (config/paper.yaml) plan in < 60 s. Prints one row per config: planned runs
(seeds), train jobs, all jobs, wall and CPU seconds of the dry run.
    PYTHONPATH=src python benchmarks/workflow_plan.py [--configs config/paper.yaml ...]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from uqcal.pipeline.config.load import load_config  # noqa: E402
from uqcal.pipeline.config.runs import iter_batches, iter_runs  # noqa: E402


def plan(config: str) -> dict:
    snakemake = Path(sys.executable).parent / "snakemake"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([str(snakemake), "-n", "--quiet", "rules", "--configfile", config], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, flags=re.M))
    cfg = load_config(ROOT / config)
    return {
        "config": config,
        "runs": sum(1 for _ in iter_runs(cfg)),
        "train_jobs": sum(1 for _ in iter_batches(cfg)),
        "jobs": int(counts.get("total", 0)),
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["config/smoke.yaml", "config/config.yaml", "config/paper.yaml"])
    args = parser.parse_args()
    rows = [plan(c) for c in args.configs]
    print(f"{'config':<22}{'runs':>8}{'train jobs':>12}{'all jobs':>10}{'wall s':>9}{'cpu s':>8}")
    for r in rows:
        print(f"{r['config']:<22}{r['runs']:>8}{r['train_jobs']:>12}{r['jobs']:>10}{r['wall_s']:>9.1f}{r['cpu_s']:>8.1f}")


if __name__ == "__main__":
    main()

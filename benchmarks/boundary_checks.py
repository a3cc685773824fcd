"""CPU cost of issue 49's checks on a run, against the default run's ~2,600 CPU s (target: <= 1 %).

Measures, each in a fresh process (CPU seconds, best of --repeat):
  - validation: `load_config` of the config (names, seed counts, duplicate YAML keys, the schema, ...), with
    this tree's src and, given --base <dir of another checkout>, with that one's (the checks' own cost is the
    difference);
  - the dvc.yaml that the Snakefile's start-up now regenerates (`build_dvc_yaml` after `load_config`);
  - the integrity check each step makes of its upstream files (`check_upstream`: sha256 of every upstream
    output against its record), for every job of a finished run in --run (a repository that holds one).
Other checks (magnitude of features and targets, a download's first bytes, the checkout lock) cost
microseconds per job or dataset.
    PYTHONPATH=src python benchmarks/boundary_checks.py --config config/config.yaml --base /tmp/base --run <repo>
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VALIDATE = """
import time, sys
t = time.process_time()
from uqcal.pipeline.config.load import load_config
config = load_config(sys.argv[1])
print(time.process_time() - t)
"""
DVC_YAML = """
import time, sys
from uqcal.pipeline.config.load import load_config
config = load_config(sys.argv[1])
t = time.process_time()
from uqcal.pipeline.dvc import build_dvc_yaml
build_dvc_yaml(config, sys.argv[1])
print(time.process_time() - t)
"""
UPSTREAM = """
import json, time, sys
from pathlib import Path
from uqcal.pipeline.plan import Job
from uqcal.pipeline.records import check_upstream
t = time.process_time()
jobs = 0
for path in sorted(Path(".uqcal/records").rglob("*.json")):
    record = json.loads(path.read_text())
    spec = json.loads(Path(str(path).replace("/records/", "/specs/")).read_text())
    check_upstream(spec["upstream"], Job(record["rule"], tuple(record["key"])))
    jobs += 1
print(time.process_time() - t, jobs)
"""


def cpu(code: str, src: Path, cwd: Path, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True)
    return proc.stdout.split()


def best(code: str, src: Path, cwd: Path, repeat: int, *args: str) -> list[float]:
    runs = [[float(v) for v in cpu(code, src, cwd, *args)] for _ in range(repeat)]
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--base", type=Path, help="a checkout of the code before the checks")
    parser.add_argument("--run", type=Path, help="a repository holding a finished run (records and specs)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    found = {"validate_s": best(VALIDATE, ROOT / "src", ROOT, args.repeat, args.config)[0]}
    if args.base:
        found["validate_base_s"] = best(VALIDATE, args.base / "src", args.base, args.repeat, args.config)[0]
    found["dvc_yaml_at_start_s"] = best(DVC_YAML, ROOT / "src", ROOT, args.repeat, args.config)[0]
    if args.run:
        seconds, jobs = best(UPSTREAM, ROOT / "src", args.run, 1)
        size = sum(p.stat().st_size for p in (args.run / "results").rglob("*") if p.is_file())
        found.update(upstream_check_s=seconds, upstream_jobs=int(jobs), results_mb=round(size / 2**20, 1))
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()

"""CPU seconds a pipeline job spends before its work starts (interpreter, imports, reading its job), per kind.

Without a preload worker every Snakemake job is a fresh `uqcal` process; this is what each pays. A job's
process is run as Snakemake runs it, with its work function replaced by one that reports the process's CPU
time and exits: `uqcal.data.materialise`, `uqcal.data.splits.make_split`, `RunContext.seed_everything` (right
before `Method.train`; torch is imported by then), `uqcal.pipeline.summary.aggregate_family`,
`uqcal.pipeline.report.build.build_reports`. The minimum of --repeat runs is kept (other load only adds).

    python benchmarks/job_startup.py --workdir COPY [--config config/config.yaml] [--src other/src] [--repeat 3]

--workdir: a scratch copy of the repository whose data/ holds the config's materialised datasets and splits
(the probes create lock and resume folders there). --src measures another checkout's code with this
environment (e.g. the code before a change). Prints one
row per job kind (train: per method class), and the start-up summed over every job of the config.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # default --src: ROOT/src

PROBE = """
import os, sys, time
class Started(BaseException):
    pass
def stop(*args, **kwargs):
    raise Started
import importlib
module, _, name = {hook!r}.partition(":")
owner, _, attr = name.rpartition(".")
target = importlib.import_module(module)
if owner:
    target = getattr(target, owner)
setattr(target, attr, stop)
from uqcal.cli import main
try:
    main({argv!r})
except Started:
    pass
t = os.times()
print("CPU", t.user + t.system)
"""
HOOKS = {"materialise": "uqcal.data:materialise", "split": "uqcal.data.splits:make_split",
         "train": "uqcal.methods.api:RunContext.seed_everything", "aggregate": "uqcal.pipeline.summary:aggregate_family",
         "report": "uqcal.pipeline.report.build:build_reports"}


def job_argv(config: dict, config_path: str, rule: str, key: tuple, workdir: Path, new_code: bool) -> list[str]:
    """The command line Snakemake gives the job: --spec FILE (uqcal.pipeline.identity.build_spec) or --job JSON
    (before specs)."""
    if new_code:
        try:
            from uqcal.pipeline.identity import build_spec
            from uqcal.pipeline.plan import Job
        except ImportError:  # --src of a revision before jobs.py was split (issue 38)
            from uqcal.pipeline.jobs import Job, build_spec

        job = Job(rule, key)
        spec = build_spec(config, job, config_path)
        path = workdir / f"{job.stage}.json"
        path.write_text(json.dumps(spec))
        extra = ["--jobs", "1"] if rule == "report" else []
        return [rule, "--spec", str(path), *extra]
    from uqcal.pipeline.config import payloads as P

    if rule == "report":
        return ["report", "--config", config_path]
    job = {"materialise": lambda: P.dataset_job(config, *key), "split": lambda: P.split_batch_job(config, *key),
           "train": lambda: P.batch_job(config, *key),
           "aggregate": lambda: {"family": key[0], "family_config": config["families"][key[0]]}}[rule]()
    return [rule, "--job", json.dumps(job)]


def measure(argv: list[str], rule: str, src: Path, repeat: int, workdir: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    found = []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", PROBE.format(hook=HOOKS[rule], argv=argv)], env=env,
                              capture_output=True, text=True, cwd=workdir)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("CPU ")]
        if not lines:
            raise SystemExit(f"{rule} {argv[:3]} failed:\n{proc.stderr[-3000:]}")
        found.append(float(lines[-1].split()[1]))
    return min(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the uqcal code to measure")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, required=True, help="scratch repository copy with data/")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src))
    os.chdir(args.workdir)
    from uqcal.methods.api import get_entry
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.config.runs import iter_batches

    new_code = any((args.src / "uqcal/pipeline" / name).exists() for name in ("identity.py", "jobs.py"))
    config = load_config(args.config)
    kinds: Counter = Counter()
    examples: dict[str, tuple[str, tuple]] = {}

    def add(kind: str, rule: str, key: tuple) -> None:
        kinds[kind] += 1
        examples.setdefault(kind, (rule, key))

    datasets = sorted({b.dataset for b in iter_batches(config)})
    for dataset in datasets:
        add("materialise", "materialise", (dataset,))
    for family, fam in config["families"].items():
        for dataset in fam["datasets"]:
            for setting in fam["settings"]:
                if dataset in (fam["settings"][setting] or {}).get("datasets", [dataset]):
                    add(f"split {family}", "split", (family, dataset, setting))
        add(f"aggregate {family}", "aggregate", (family,))
    for b in iter_batches(config):
        add(f"train {b.family} {get_entry(b.family, b.method).target.rpartition('.')[2]}", "train",
            (b.family, b.dataset, b.setting, b.method))
    add("report", "report", ())

    print(f"code: {args.src} ({'--spec' if new_code else '--job'}), config {args.config}, "
          f"min of {args.repeat} runs")
    print("| job kind | jobs | start-up CPU s per job | CPU s, all jobs of the kind |")
    print("|---|---|---|---|")
    total = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for kind in sorted(kinds):
            rule, key = examples[kind]
            seconds = measure(job_argv(config, args.config, rule, key, Path(tmp), new_code), rule, args.src,
                              args.repeat, args.workdir)
            total += seconds * kinds[kind]
            print(f"| {kind} | {kinds[kind]} | {seconds:.2f} | {seconds * kinds[kind]:.0f} |", flush=True)
    print(f"| **all {sum(kinds.values())} jobs** | | | **{total:.0f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

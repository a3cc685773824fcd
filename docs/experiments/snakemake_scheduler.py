"""Snakemake's scheduling passes and its own CPU against ``--max-jobs-per-timespan``.

Snakemake 9 (tested: 9.27.1) arms a ``threading.Timer`` of one rate-limiter timespan on every pass of its
scheduling loop (``JobScheduler.schedule`` -> ``_schedule_reevalutation``), and each timer's release runs
another pass, which arms the next timer. Every job that finishes starts one more such chain, so after k jobs
the loop runs about k times per timespan until the end of the run, re-evaluating every waiting job's
resources on each pass (upstream: snakemake/snakemake#3744, "the main loop is triggered multiple times";
#2967, "performance degradation after running snakemake for some time"). The rate limit itself (100 jobs per
second by default) never binds on a local run of tens of jobs; the timespan only sets how often the chains
fire, and the last timer delays Snakemake's exit by up to one timespan (the timer threads are not daemons).

This script runs a toy workflow (``--jobs`` jobs of ``--sleep`` seconds on ``--cores`` cores, each with a
resources function and a priority, like ``workflow/rules/train.smk``) once per timespan and prints the
number of scheduling passes (``--verbose`` "Ready jobs" lines), the CPU seconds of Snakemake and its
children (bash and sleep, the same in every row) and the wall time.

Run: python docs/experiments/snakemake_scheduler.py [--jobs 116] [--sleep 1] [--cores 2] [--timespans 100/1s,300/3s]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SNAKEFILE = """
N = int(config["njobs"])

def mem(wildcards):
    return 100 + int(wildcards.i) % 7

rule all:
    input: expand("out/{i}.txt", i=range(N))

rule job:
    output: "out/{i}.txt"
    resources: mem_mb=mem
    priority: lambda w: int(w.i) % 3
    shell: "sleep {config[seconds]}; echo {wildcards.i} > {output}"
"""


def run_once(workdir: Path, jobs: int, sleep: float, cores: int, timespan: str) -> dict:
    shutil.rmtree(workdir / "out", ignore_errors=True)
    shutil.rmtree(workdir / ".snakemake", ignore_errors=True)
    snakemake = Path(sys.executable).with_name("snakemake")
    cmd = [str(snakemake), "--cores", str(cores), "--verbose", "--max-jobs-per-timespan", timespan,
           "--config", f"njobs={jobs}", f"seconds={sleep}", "--snakefile", "Snakefile"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake failed ({timespan}):\n{proc.stderr[-3000:]}")
    return {
        "timespan": timespan,
        "passes": proc.stderr.count("Ready jobs"),
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=116, help="jobs (the default run has 116 steps)")
    parser.add_argument("--sleep", type=float, default=1.0, help="seconds per job")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--timespans", default="100/1s,200/2s,300/3s,1000/10s")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "Snakefile").write_text(SNAKEFILE)
        for timespan in args.timespans.split(","):
            rows.append(run_once(workdir, args.jobs, args.sleep, args.cores, timespan))
    ideal = args.jobs * args.sleep / args.cores
    print(f"{args.jobs} jobs x {args.sleep:g} s on {args.cores} cores (ideal wall {ideal:.0f} s)")
    print(f"{'--max-jobs-per-timespan':>24} | {'passes':>7} | {'CPU s':>6} | {'wall s':>7}")
    for row in rows:
        print(f"{row['timespan']:>24} | {row['passes']:>7} | {row['cpu_s']:>6.2f} | {row['wall_s']:>7.1f}")


if __name__ == "__main__":
    main()

"""What Snakemake's scheduler timers cost on a run shaped like the default one, with and without the patch.

Snakemake 9 (`--max-jobs-per-timespan 100/1s`, its default) arms a `threading.Timer` at the end of every
scheduling pass while jobs are waiting for cores, and each timer's pass arms the next: every job event adds
a re-evaluation chain that lasts as long as jobs wait (snakemake/scheduling/job_scheduler.py,
`_schedule_reevalutation`, unchanged up to 9.27.1). `uqcal.snakemake_fixes` kept one pending timer.

The jobs here only sleep (for the CPU seconds each train job of a real run took, read from its record or
log), so the CPU measured is Snakemake's own (plus `bash`/`sleep`, the same in both variants):

    python benchmarks/snakemake_timers.py --durations-from /path/to/run [--scale 1.0] [--cores 2]

Prints one row per variant: Snakemake CPU seconds, wall seconds, peak thread count of the Snakemake process.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SNAKEFILE = """
{patch}
DURATIONS = {durations!r}
GROUPS = {groups!r}

rule all:
    input: "report.txt"

rule prep:
    output: "prep/{{g}}.txt"
    shell: "sleep 1; touch {{output}}"

rule train:
    input: lambda w: f"prep/{{GROUPS[int(w.i) % len(GROUPS)]}}.txt"
    output: "train/{{i}}.txt"
    params: seconds=lambda w: DURATIONS[int(w.i)]
    shell: "sleep {{params.seconds}}; touch {{output}}"

rule aggregate:
    input: lambda w: [f"train/{{i}}.txt" for i in range(len(DURATIONS)) if GROUPS[i % len(GROUPS)] == w.g]
    output: "agg/{{g}}.txt"
    shell: "touch {{output}}"

rule report:
    input: expand("agg/{{g}}.txt", g=GROUPS)
    output: "report.txt"
    shell: "touch {{output}}"
"""
PATCH = "from uqcal.snakemake_fixes import single_reevaluation_timer\nsingle_reevaluation_timer()\n"
CPU_LINE = re.compile(r"uqcal train: [0-9.]+ s wall, ([0-9.]+) s CPU")


def train_seconds(run: Path) -> list[float]:
    """CPU seconds of every train job of a finished run: its records (.uqcal/records) or its logs."""
    records = sorted((run / ".uqcal/records/train").rglob("*.json"))
    if records:
        return [json.loads(p.read_text())["resources"]["cpu_seconds"] for p in records]
    found = []
    for path in sorted((run / "logs/train").rglob("*.log")):
        cpu = CPU_LINE.findall(path.read_text(errors="replace"))
        if cpu:
            found.append(float(cpu[-1]))
    return found


def peak_threads(pid: int, stop: threading.Event, out: list[int]) -> None:
    peak = 0
    while not stop.is_set():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            peak = max(peak, int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1)))
        except (OSError, AttributeError):
            pass
        stop.wait(0.5)
    out.append(peak)


def run(durations: list[float], patched: bool, cores: int) -> dict:
    groups = ["metareg", "rio", "qr", "fewshot", "bo"]
    with tempfile.TemporaryDirectory() as tmp:
        text = SNAKEFILE.format(patch=PATCH if patched else "", durations=durations, groups=groups)
        (Path(tmp) / "Snakefile").write_text(text)
        snakemake = Path(sys.executable).parent / "snakemake"
        start = time.perf_counter()
        proc = subprocess.Popen(["/usr/bin/time", "-f", "%U %S", str(snakemake), "--cores", str(cores), "--quiet",
                                 "all"], cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        child = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        stop, peak = threading.Event(), []
        watcher = threading.Thread(target=peak_threads, args=(int(child[0]) if child else proc.pid, stop, peak))
        watcher.start()
        _, err = proc.communicate()
        stop.set()
        watcher.join()
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(err[-3000:])
        user, system = map(float, err.strip().splitlines()[-1].split())
    return {"variant": "patched" if patched else "stock", "cpu_s": user + system, "wall_s": wall,
            "peak_threads": peak[0] if peak else 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations-from", type=Path, required=True, help="a finished run (records or logs)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every duration (e.g. 0.5)")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    durations = [round(max(0.1, s * args.scale), 2) for s in train_seconds(args.durations_from)]
    if not durations:
        raise SystemExit(f"no train job records or logs under {args.durations_from}")
    import snakemake

    print(f"{len(durations)} train jobs, {sum(durations):.0f} s of sleep, {args.cores} cores, "
          f"snakemake {snakemake.__version__}")
    print("| variant | Snakemake CPU s | wall s | peak threads |")
    print("|---|---|---|---|")
    for patched in (False, True):
        row = run(durations, patched, args.cores)
        print(f"| {row['variant']} | {row['cpu_s']:.1f} | {row['wall_s']:.1f} | {row['peak_threads']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`uqcal cost`'s estimate against a measured run: per family, the estimated hours beside the jobs' records.

The estimate is what a fresh clone says before the run (the shipped config/reference_costs.yaml, this checkout's
own .uqcal/records left out unless --with-records); the measure is the finished run's records in CHECKOUT (wall
and CPU seconds of each job, as benchmarks/run_cost.py sums them). Jobs of the config the checkout has no record
of (a run still going) are left out of both sides and counted.
    python benchmarks/cost_estimate.py --config config/config.yaml /path/to/checkout [--with-records]
A run that went through the local job server (uqcal.cli.job_server: `.uqcal/job-server/` holds its account)
is compared with `uqcal cost --job-server`'s estimate, and its server's CPU counts as the job "job-server".
Run it from this checkout's root (the config and the reference table are read from here).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.progress.cost import CostedJob, planned_jobs, reference_work, run_cost, with_work
from uqcal.pipeline.progress.estimate import REFERENCE, cost_book, reference_costs

TOLERANCE = 0.30  # the issue's: the estimate within 30 % of the measured run


def measured(checkout: Path) -> dict[str, dict]:
    """{"<rule>/<job name>": record resources} of the checkout's records."""
    records = checkout / ".uqcal" / "records"
    if not records.is_dir():
        raise SystemExit(f"{checkout}: no .uqcal/records (not a pipeline run)")
    return {path.relative_to(records).with_suffix("").as_posix(): json.loads(path.read_text()).get("resources") or {}
            for path in sorted(records.rglob("*.json"))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a checkout holding the config's (finished) run")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--with-records", action="store_true", help="let this checkout's records inform the estimate")
    args = parser.parse_args(argv)
    book = cost_book() if args.with_records else reference_costs(REFERENCE)
    jobs = planned_jobs(load_config(args.config), args.config)
    book = with_work(book, reference_work())
    runs = measured(args.checkout)
    servers = [json.loads(path.read_text()).get("resources") or {}
               for path in sorted((args.checkout / ".uqcal" / "job-server").glob("*.json"))]
    cost = run_cost(jobs, book, job_server=bool(servers))
    if servers:
        cpu = sum(float(server.get("cpu_seconds", 0.0)) for server in servers)
        runs["job-server"] = {"cpu_seconds": cpu, "wall_seconds": cpu}  # it waits for requests the whole run

    def name(costed: CostedJob) -> str:
        if costed.planned.job.rule == "job-server":
            return "job-server"
        return costed.planned.job.record_path.removeprefix(".uqcal/records/").removesuffix(".json")

    rows: dict[str, list[float]] = {}
    missing = 0
    for costed in cost.jobs:
        resources = runs.get(name(costed))
        if resources is None:
            missing += 1
            continue
        row = rows.setdefault(costed.family, [0, 0.0, 0.0, 0.0])
        row[0] += 1
        row[1] += costed.estimate.seconds
        row[2] += float(resources.get("wall_seconds", 0.0))
        row[3] += float(resources.get("cpu_seconds", 0.0))
    print(f"{args.config} against {args.checkout} ({len(cost.jobs) - missing} of {len(cost.jobs)} jobs recorded there)")
    print(f"{'family':<10}{'jobs':>6}{'estimated s':>13}{'wall s':>10}{'CPU s':>10}{'est/wall':>10}{'est/CPU':>9}")
    total = [0, 0.0, 0.0, 0.0]
    for family, row in sorted(rows.items(), key=lambda item: -item[1][2]):
        total = [a + b for a, b in zip(total, row, strict=True)]
        print(f"{family:<10}{row[0]:>6}{row[1]:>13,.0f}{row[2]:>10,.0f}{row[3]:>10,.0f}"
              f"{row[1] / max(row[2], 1e-9):>10.2f}{row[1] / max(row[3], 1e-9):>9.2f}")
    ratio = total[1] / max(total[3], 1e-9)
    print(f"{'total':<10}{total[0]:>6}{total[1]:>13,.0f}{total[2]:>10,.0f}{total[3]:>10,.0f}"
          f"{total[1] / max(total[2], 1e-9):>10.2f}{ratio:>9.2f}")
    verdict = "within" if abs(ratio - 1) <= TOLERANCE else "outside"
    print(f"estimate / measured CPU seconds = {ratio:.2f}: {verdict} {TOLERANCE:.0%}")


if __name__ == "__main__":
    main()

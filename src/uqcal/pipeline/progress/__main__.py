"""python -m uqcal.pipeline.progress watch [--config FILE] | reference CHECKOUT...

``watch``: the progress line for a run that has no Snakemake hooks (`dvc repro`, one stage at a time): start it
beside the run (``python -m uqcal.pipeline.progress watch & dvc repro``); it follows the jobs that are stale when it
starts and those downstream of them, and ends with the report's path and the claims' headline.
``reference``: rewrite the shipped cost table from checkouts that hold finished runs' records (the default and
the smoke config's; where two give a job with the same parameters, the last one's cost counts).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from uqcal.pipeline.progress.estimate import REFERENCE, record_costs, write_reference


def pending_jobs(config: dict, config_path: str) -> list:
    """The config's jobs that are stale now (``why_stale``), with every job downstream of them, as PlannedJobs."""
    from uqcal.pipeline.identity import build_spec
    from uqcal.pipeline.plan import plan, upstream
    from uqcal.pipeline.progress.estimate import PlannedJob, params_digest, units_of
    from uqcal.pipeline.records import why_stale

    pending, found = set(), []
    for job in plan(config):  # upstream before downstream
        spec = build_spec(config, job, config_path)
        if why_stale(job, spec) is not None or any(up in pending for up in upstream(config, job)):
            pending.add(job)
            found.append(PlannedJob(job, units_of(job.rule, spec.get("job")), 1, params_digest(spec.get("params"))))
    return found


def watch(config_path: str, interval: float | None) -> None:
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.progress.run import RunProgress

    jobs = pending_jobs(load_config(config_path), config_path)
    progress = RunProgress(jobs, 1, lambda line: print(line, file=sys.stderr, flush=True)).start(interval)
    while progress.observe().done < len(jobs):
        time.sleep(2.0)
    progress.finish()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m uqcal.pipeline.progress", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    watcher = sub.add_parser("watch", help="print progress lines for a `dvc repro` run beside it")
    watcher.add_argument("--config", default="config/config.yaml", help="the config the run runs")
    watcher.add_argument("--interval", type=float, default=None, help="seconds between lines (default 60)")
    reference = sub.add_parser("reference", help=f"rewrite {REFERENCE.name} from a finished run's records")
    reference.add_argument("checkouts", nargs="+", type=Path, help="checkouts holding .uqcal/records of finished runs")
    args = parser.parse_args(argv)
    if args.command == "watch":
        watch(args.config, args.interval)
    else:
        records = [checkout / ".uqcal" / "records" for checkout in args.checkouts]
        for found in records:
            if not found.is_dir():
                parser.error(f"{found.parents[1]}: no .uqcal/records (not a finished pipeline run)")
        write_reference([record_costs(found) for found in records])
        print(f"wrote {REFERENCE}")


if __name__ == "__main__":
    main()

"""Where a finished run's CPU went: each job's own account, by family, from its records (`.uqcal/records`).

Every pipeline step writes a record with its process's CPU seconds, wall seconds and peak memory
(`uqcal.pipeline.records.resource_usage`). This sums them per rule and train family, lists the costliest
jobs, and gives the lower bound on the wall time they allow on `--cores` cores (all cores always busy).
A local run's job server (uqcal.cli.job_server: the libraries loaded once, each step forked from them)
accounts for its own CPU in `.uqcal/job-server/`: the part "job server", counted in the run's total.
With a second checkout, it prints both side by side (e.g. the same config on two days, or before and after
a change): how docs/ARCHITECTURE.md's "Default-run budget" tables are made.
    python benchmarks/run_cost.py /path/to/checkout [/path/to/other/checkout] [--cores 2] [--top 15]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def job_costs(root: Path) -> dict[str, dict[str, float]]:
    """Job name ("train/rio/concrete/holdout/nn", "report/report", ...) -> its record's resources."""
    records = Path(root) / ".uqcal" / "records"
    if not records.is_dir():
        raise SystemExit(f"{root}: no .uqcal/records (not a finished pipeline run)")
    costs = {}
    for path in sorted(records.rglob("*.json")):
        resources = json.loads(path.read_text()).get("resources") or {}
        costs[path.relative_to(records).with_suffix("").as_posix()] = resources
    for path in sorted((Path(root) / ".uqcal" / "job-server").glob("*.json")):
        costs[f"job server/{path.stem}"] = json.loads(path.read_text()).get("resources") or {}
    return costs


def group_of(job: str) -> str:
    """"train <family>" for train jobs, the rule name for the others."""
    parts = job.split("/")
    return f"train {parts[1]}" if parts[0] == "train" else parts[0]


def by_group(costs: dict[str, dict[str, float]]) -> dict[str, tuple[int, float]]:
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for job, resources in costs.items():
        entry = totals[group_of(job)]
        entry[0] += 1
        entry[1] += float(resources.get("cpu_seconds", 0.0))
    return {group: (n, cpu) for group, (n, cpu) in sorted(totals.items())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path, help="one or two checkouts holding a finished run")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--top", type=int, default=15, help="list this many of the costliest jobs")
    args = parser.parse_args(argv)
    if len(args.roots) > 2:
        parser.error("give one or two checkouts")
    runs = [job_costs(root) for root in args.roots]
    groups = [by_group(costs) for costs in runs]
    names = sorted(set().union(*groups))
    header = "".join(f" | {root.name or str(root)}: jobs, CPU s" for root in args.roots)
    print(f"{'part':>16}{header}")
    for name in names:
        cells = "".join(f" | {g.get(name, (0, 0.0))[0]:>5} {g.get(name, (0, 0.0))[1]:>9,.0f}" for g in groups)
        print(f"{name:>16}{cells}")
    totals = [sum(cpu for _, cpu in g.values()) for g in groups]
    print(f"{'all jobs':>16}" + "".join(f" | {len(c):>5} {t:>9,.0f}" for c, t in zip(runs, totals, strict=True)))
    print(f"{'wall bound':>16}" + "".join(f" | {t / args.cores / 60:>10.1f} min on {args.cores} cores"
                                          for t in totals))
    costs = runs[0]
    print(f"\nthe {args.top} costliest jobs of {args.roots[0]} (CPU s, wall s, peak MB):")
    ranked = sorted(costs.items(), key=lambda item: -float(item[1].get("cpu_seconds", 0.0)))
    for job, resources in ranked[: args.top]:
        print(f"  {resources.get('cpu_seconds', 0):>8,.0f} {resources.get('wall_seconds', 0):>8,.0f} "
              f"{resources.get('max_rss_mb', 0):>7,.0f}  {job}")


if __name__ == "__main__":
    main()

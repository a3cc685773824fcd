"""What a config's run costs before it starts: `uqcal cost --config FILE [--cores N] [--gpus G] [--json]`.

Every job the config plans, costed by the progress line's estimator (``uqcal.pipeline.progress.estimate``: this
checkout's records, then the shipped ``config/reference_costs.yaml``), summed per family as CPU hours (one thread
a job, as the records were measured) and, with ``--gpus``, GPU hours for the jobs that request a GPU: their CPU
estimate over their family's measured GPU speed-up (``config/gpu_speedups.yaml``; 1 where none is stated).
A job of the config with no record of its own parameters (a paper-scale job) takes its family's measured cost
per seed, scaled by the ratio of the two jobs' work where the family states a seed's work
(``uqcal.methods.api.Family.work``): the reference records' work is that of the jobs of the configs they were
measured from (``REFERENCE_CONFIGS``), matched by their parameters' digest.

``--job-server`` costs a local run as `snakemake --cores N` runs it here (uqcal.cli.job_server): each train
job's start-up is paid once, by the job server, instead of once a job. Without it, every job pays its own, as
on a cluster.

The wall time on N cores and G GPUs is a longest-first list schedule of the jobs (each on one core or one GPU),
never below the longest job: a job's seeds run in one process, so the longest job bounds the run however many
cores there are.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from uqcal.pipeline.plan import Job
from uqcal.pipeline.progress.estimate import (
    STARTUP_SECONDS,
    Cost,
    Estimate,
    PlannedJob,
    cost_book,
    estimate,
    params_digest,
    units_of,
    work_of,
)

# The configs whose runs' records make up config/reference_costs.yaml (``python -m uqcal.pipeline.progress
# reference``): their jobs' payloads give the reference records' work.
REFERENCE_CONFIGS = ("config/config.yaml", "config/smoke.yaml")
GPU_SPEEDUPS = Path("config") / "gpu_speedups.yaml"


@dataclass(frozen=True)
class CostedJob:
    planned: PlannedJob
    estimate: Estimate
    gpu: bool  # the job requests a GPU (its resources' ``gpu``)

    @property
    def name(self) -> str:
        """"train/<family>/<dataset>/<setting>/<method>", "report"."""
        job = self.planned.job
        return f"{job.rule}/{job.name}" if job.key else job.rule

    @property
    def family(self) -> str:
        """The family of a split, train or aggregate job; "data" for materialise, "report" for the report."""
        if self.planned.job.rule == "materialise":
            return "data"
        return self.planned.job.key[0] if self.planned.job.key else self.planned.job.rule


@dataclass
class FamilyCost:
    jobs: int = 0
    seed_runs: int = 0
    cpu_hours: float = 0.0
    gpu_hours: float = 0.0
    longest_job_hours: float = 0.0


def gpu_speedups(path: str | Path = GPU_SPEEDUPS) -> dict[str, float]:
    """{"<family>" or "<family>/<dataset>": GPU / CPU-thread speed-up} ({} when the file is absent)."""
    import yaml

    try:
        return {str(k): float(v) for k, v in (yaml.safe_load(Path(path).read_text()) or {}).items()}
    except FileNotFoundError:
        return {}


@dataclass
class RunCost:
    jobs: list[CostedJob]
    cores: int
    gpus: int
    speedups: dict[str, float] = field(default_factory=dict)  # gpu_speedups()
    per_family: dict[str, FamilyCost] = field(default_factory=dict)

    def __post_init__(self):
        for costed in self.jobs:
            fam = self.per_family.setdefault(costed.family, FamilyCost())
            hours = self.seconds(costed) / 3600
            fam.jobs += 1
            fam.seed_runs += costed.planned.units if costed.planned.job.rule == "train" else 0
            if self.on_gpu(costed):
                fam.gpu_hours += hours
            else:
                fam.cpu_hours += hours
            fam.longest_job_hours = max(fam.longest_job_hours, hours)

    def on_gpu(self, costed: CostedJob) -> bool:
        return costed.gpu and self.gpus > 0

    def seconds(self, costed: CostedJob) -> float:
        """The job's wall seconds where it runs: its CPU estimate, over its speed-up on a GPU."""
        if not self.on_gpu(costed):
            return costed.estimate.seconds
        key = costed.planned.job.key
        speedup = self.speedups.get("/".join(key[:2]), self.speedups.get(key[0], 1.0))
        return costed.estimate.seconds / speedup

    @property
    def cpu_hours(self) -> float:
        return sum(fam.cpu_hours for fam in self.per_family.values())

    @property
    def gpu_hours(self) -> float:
        return sum(fam.gpu_hours for fam in self.per_family.values())

    @property
    def longest(self) -> CostedJob:
        return max(self.jobs, key=self.seconds)

    @property
    def wall_hours(self) -> float:
        cpu = [self.seconds(c) for c in self.jobs if not self.on_gpu(c)]
        gpu = [self.seconds(c) for c in self.jobs if self.on_gpu(c)]
        return max(makespan(cpu, self.cores), makespan(gpu, self.gpus)) / 3600

    @property
    def longest_seed_hours(self) -> float:
        """The longest single seed (a job's hours over its seeds): the longest job if every job ran one seed."""
        return max(self.seconds(c) / max(c.planned.units, 1) for c in self.jobs) / 3600

    def sources(self) -> dict[str, int]:
        """How many jobs each level of the estimator costed (``Estimate.source``)."""
        found: dict[str, int] = {}
        for costed in self.jobs:
            found[costed.estimate.source] = found.get(costed.estimate.source, 0) + 1
        return dict(sorted(found.items(), key=lambda item: -item[1]))

    def as_dict(self) -> dict:
        longest = self.longest
        return {"cpu_hours": round(self.cpu_hours, 3), "gpu_hours": round(self.gpu_hours, 3),
                "longest_job_hours": round(self.seconds(longest) / 3600, 3),
                "longest_job": longest.name,
                "longest_seed_hours": round(self.longest_seed_hours, 3),
                "wall_hours": round(self.wall_hours, 3), "cores": self.cores, "gpus": self.gpus,
                "per_family": {name: {key: round(value, 3) if isinstance(value, float) else value
                                      for key, value in vars(fam).items()} for name, fam in self.per_family.items()},
                "sources": self.sources()}


def makespan(seconds: Iterable[float], workers: int) -> float:
    """Wall seconds of a longest-first list schedule of jobs of ``seconds`` on ``workers`` (0 jobs: 0)."""
    ordered = sorted(seconds, reverse=True)
    if not ordered:
        return 0.0
    if workers < 1:
        raise ValueError(f"{len(ordered)} jobs and no worker to run them")
    loads = [0.0] * min(workers, len(ordered))
    for length in ordered:
        heapq.heapreplace(loads, loads[0] + length)
    return max(loads)


# ------------------------------------------------------------------------------------------ planning
def planned_jobs(config: dict, config_path: str) -> list[tuple[PlannedJob, bool]]:
    """Every job of the config as the estimator sees it (seeds, parameters' digest, a seed's work), and whether
    it requests a GPU."""
    from uqcal.pipeline.identity import spec_params
    from uqcal.pipeline.plan import payload, plan, resources

    found = []
    for job in plan(config):
        job_payload = payload(config, job)
        gpu = job.rule == "train" and int(resources(config, job.key[0], job.key[1], job.key[3])["gpu"]) > 0
        found.append((PlannedJob(job, units_of(job.rule, job_payload), 1,
                                 params_digest(spec_params(config, job, config_path)),
                                 work_of(job.rule, job_payload)), gpu))
    return found


def reference_work(config_paths: Iterable[str] = REFERENCE_CONFIGS) -> dict[tuple[Job, str], float]:
    """{(job, parameters' digest): a seed's work} of the train jobs of ``config_paths`` whose family states work.
    By job and digest: the digest is of the job's config values, which methods configured alike share (an
    ensemble and its isotonic recalibration, both ``{}`` in the config), and their work differs."""
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.identity import spec_params
    from uqcal.pipeline.plan import payload, plan

    found = {}
    for path in config_paths:
        config = load_config(path)
        for job in plan(config):
            if job.rule == "train":
                work = work_of(job.rule, payload(config, job))
                if work is not None:
                    found[(job, params_digest(spec_params(config, job, path)))] = work
    return found


def with_work(book: dict[Job, list[Cost]], work: dict[tuple[Job, str], float]) -> dict[Job, list[Cost]]:
    """The book with the work of each cost that states none but whose job and parameters' digest ``work`` knows."""
    return {job: [cost if cost.work is not None or (job, cost.params) not in work else
                  Cost(cost.seconds_per_unit, cost.params, work[(job, cost.params)], cost.units) for cost in costs]
            for job, costs in book.items()}


def run_cost(jobs: list[tuple[PlannedJob, bool]], book: dict[Job, list[Cost]], cores: int = 1,
             gpus: int = 0, speedups: dict[str, float] | None = None, job_server: bool = False) -> RunCost:
    """The jobs costed by ``book``. ``job_server``: as a local run here runs them (uqcal.cli.job_server), a train
    job's start-up (``STARTUP_SECONDS``) paid once, by the server (its own job, "job-server"), not once a job."""
    costed = [CostedJob(planned, estimate(planned, book), gpu) for planned, gpu in jobs]
    if job_server:
        costed = [CostedJob(c.planned, Estimate(max(c.estimate.seconds - STARTUP_SECONDS, 0.0),
                                                f"{c.estimate.source}, forked by the job server"), c.gpu)
                  if c.planned.job.rule == "train" else c for c in costed]
        costed.append(CostedJob(PlannedJob(Job("job-server", ())), Estimate(STARTUP_SECONDS, "its imports, once"),
                                False))
    return RunCost(costed, cores, gpus, speedups or {})


# ------------------------------------------------------------------------------------------ the command
def format_table(cost: RunCost) -> str:
    rows = [("family", "jobs", "seed runs", "CPU h", "GPU h", "longest job h")]
    for name, fam in sorted(cost.per_family.items(), key=lambda item: -(item[1].cpu_hours + item[1].gpu_hours)):
        rows.append((name, str(fam.jobs), str(fam.seed_runs), f"{fam.cpu_hours:,.1f}", f"{fam.gpu_hours:,.1f}",
                     f"{fam.longest_job_hours:,.1f}"))
    rows.append(("total", str(len(cost.jobs)), str(sum(f.seed_runs for f in cost.per_family.values())),
                 f"{cost.cpu_hours:,.1f}", f"{cost.gpu_hours:,.1f}", f"{cost.seconds(cost.longest) / 3600:,.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    longest = cost.longest
    lines += ["",
              f"Longest job: {longest.name}, "
              f"{cost.seconds(longest) / 3600:,.1f} h ({longest.planned.units} seed(s); {longest.estimate.source}"
              + (", on a GPU" if cost.on_gpu(longest) else "") + ")",
              f"Longest single seed: {cost.longest_seed_hours:,.1f} h (the longest job, were every job one seed)",
              f"Wall time on {cost.cores} core(s)" + (f" and {cost.gpus} GPU(s)" if cost.gpus else "")
              + f": {cost.wall_hours:,.1f} h (longest first, never below the longest job)",
              "Estimated from: " + ", ".join(f"{n} jobs by {source}" for source, n in cost.sources().items()),
              *scaling_lines(cost)]
    if cost.gpus:
        lines.append(f"GPU hours: the CPU estimate over the family's measured GPU speed-up ({GPU_SPEEDUPS}).")
    return "\n".join(lines)


def scaling_lines(cost: RunCost) -> list[str]:
    """Which families' estimates were scaled by work, and by what (``Family.work``); which only per seed."""
    from uqcal.methods.api import get_family

    scaled, per_seed = {}, set()
    for costed in cost.jobs:
        if costed.planned.job.rule != "train" or costed.estimate.source == "its record":
            continue
        family = costed.planned.job.key[0]
        if costed.estimate.source.endswith("scaled by work"):
            scaled[family] = get_family(family).work.partition(":")[0]
        else:
            per_seed.add(family)
    lines = [f"Scaled by a seed's work (see its docstring): {', '.join(f'{f} ({m})' for f, m in sorted(scaled.items()))}"]
    if per_seed - set(scaled):
        lines.append(f"Per seed of other jobs, not scaled (no work stated): {', '.join(sorted(per_seed - set(scaled)))}")
    return lines if scaled else lines[1:]


def run(args) -> int:
    from uqcal.pipeline.config.load import load_config

    config_path = args.config or "config/config.yaml"
    jobs = planned_jobs(load_config(config_path), config_path)
    book = cost_book()
    if any(planned.work is not None for planned, _ in jobs):
        book = with_work(book, reference_work())
    cost = run_cost(jobs, book, args.cores, args.gpus, gpu_speedups(), job_server=args.job_server)
    print(json.dumps(cost.as_dict(), indent=1) if args.json else format_table(cost))
    return 0

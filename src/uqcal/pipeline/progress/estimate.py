"""What each job of a run is expected to cost, from earlier jobs' records.

A job's cost is the CPU time its record states (`uqcal.pipeline.records.resource_usage`; its wall time where a
record states no CPU time), per seed for a train job (a train job runs all seeds of one method, so the same method
with another seed count scales). CPU seconds, not wall: a job of one thread takes its CPU time on an unloaded core,
and a loaded machine's wall time is the load's, not the job's (benchmarks/run_cost.py sums the same CPU seconds). A pending
job's estimate is the first of these that exists:

1. its own earlier record, made from the same parameters (a config change of epochs or data makes it moot);
2. the median per seed of the same family's same method (other datasets or settings, or other parameters);
3. the median per seed of the same family's train jobs (another rule: the same rule's jobs of the same family);
4. the median of the same rule's jobs;
5. ``DEFAULT_SECONDS``, a rough figure per rule.

The records come from this checkout (``.uqcal/records``, e.g. after an earlier run or `dvc pull`) and, below them,
from ``config/reference_costs.yaml``: a default run's records shipped with the checkout (``write_reference``), so that a
fresh clone's first run also has a cost per method. Both are measured on some machine at some load; the run's
progress corrects them by how long its own finished jobs took (``uqcal.pipeline.progress.run.snapshot``).

At levels 2 and 3 another job's cost per seed stands in for this one's; where the family states a seed's work
(``uqcal.methods.api.Family.work``: e.g. a few-shot family's episodes, image size and sampling, a BO family's iterations and
objective evaluations) and both jobs' work is known, the stand-in is scaled by the ratio of the two (its source
then ends in "scaled by work"): a paper-scale job of 40,000 episodes is not costed as a default one of 2,700.
Only the part of a job past its process's start-up (``STARTUP_SECONDS``: interpreter, imports, reading the job;
benchmarks/job_startup.py) scales with work; the start-up is paid once a job. Without this, a smoke job's 3 s
of start-up over a few seconds of work would cost a paper-scale job at several times its compute. For the same
reason only the stand-ins of the most work count (``SCALE_FROM_SHARE``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from uqcal.pipeline.identity import digest
from uqcal.pipeline.plan import RECORDS, Job

# Data about the checkout's configs' jobs (it names families and datasets), beside the configs; relative to the
# checkout, as RECORDS is (the workflow runs in it).
REFERENCE = Path("config") / "reference_costs.yaml"
# Wall seconds per seed (train) or per job (the others) when nothing of the kind was ever recorded.
DEFAULT_SECONDS = {"materialise": 10.0, "split": 5.0, "train": 10.0, "aggregate": 2.0, "report": 30.0}
FALLBACK_SECONDS = 10.0  # a rule not in DEFAULT_SECONDS
# CPU seconds a train job's process spends before its first seed (interpreter, torch's import, reading its job):
# 2.1-3.4 s by benchmarks/job_startup.py on this project's 2-core VM (2026-12); paid once a job, whatever its work.
STARTUP_SECONDS = 3.0
# Scaling by work uses the stand-ins whose work is at least this share of the largest stand-in's: a smoke job of
# a thousandth of a default job's work is start-up and bookkeeping, and would scale a paper job by its overheads.
SCALE_FROM_SHARE = 0.1


@dataclass(frozen=True)
class Cost:
    """A finished job's CPU seconds per unit (a seed of a train job, else the whole job), its parameters' digest,
    its units' count and the family's work of one of them."""

    seconds_per_unit: float
    params: str | None = None
    work: float | None = None  # the family's work of one seed of the job (None: not stated)
    units: int = 1  # the seeds it ran (1: not a train job, or not stated)

    @property
    def compute_seconds(self) -> float:
        """The job's seconds past its start-up (``STARTUP_SECONDS``): what scales with its work."""
        return max(self.seconds_per_unit * self.units - STARTUP_SECONDS, 0.0)


@dataclass(frozen=True)
class PlannedJob:
    """A job a run is to do: ``units`` is its seeds' count for a train job (1 otherwise), ``threads`` the cores it
    holds, ``params`` the digest of the parameters it runs with (its spec's ``params``; None: unknown)."""

    job: Job
    units: int = 1
    threads: int = 1
    params: str | None = None
    work: float | None = None  # the family's work of one seed (``Family.work``; None: not stated)


@dataclass(frozen=True)
class Estimate:
    seconds: float  # expected wall seconds of the whole job
    source: str  # which of the module docstring's levels gave it


def params_digest(params) -> str | None:
    return None if params is None else digest(params)[:16]


def units_of(rule: str, job_payload) -> int:
    """A train job's seeds' count (its payload's ``seeds``), else 1."""
    if rule == "train" and isinstance(job_payload, dict) and job_payload.get("seeds"):
        return len(job_payload["seeds"])
    return 1


def work_of(rule: str, job_payload) -> float | None:
    """The work of one seed of a train job by its family's ``work`` (None: another rule, or not stated)."""
    if rule != "train" or not isinstance(job_payload, dict) or "family" not in job_payload:
        return None
    from uqcal.methods.api import get_family

    try:
        return get_family(job_payload["family"]).work_per_seed(job_payload)
    except (KeyError, TypeError, ValueError, ImportError):  # another version's payload, a missing plug-in: unscaled
        return None


def cost_of_record(record: dict) -> tuple[Job, Cost] | None:
    """A record's job and cost (its CPU seconds, else its wall seconds); None when it states neither."""
    try:
        job = Job(record["rule"], tuple(record["key"]))
        resources = record["resources"]
        seconds = float(resources["cpu_seconds"] if "cpu_seconds" in resources else resources["wall_seconds"])
    except (KeyError, TypeError, ValueError):
        return None
    if resources.get("job_server") and job.rule == "train":
        seconds += STARTUP_SECONDS  # the book holds a job's cost in a process of its own (a cluster's)
    units = units_of(job.rule, record.get("job"))
    return job, Cost(seconds / units, params_digest(record.get("params")), work_of(job.rule, record.get("job")), units)


def record_costs(records_dir: str | Path = RECORDS) -> dict[Job, Cost]:
    """The cost of every job with a record under ``records_dir`` (unreadable records are skipped)."""
    found = {}
    for path in sorted(Path(records_dir).rglob("*.json")):
        try:
            entry = cost_of_record(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
        if entry is not None:
            found[entry[0]] = entry[1]
    return found


def reference_costs(path: str | Path = REFERENCE) -> dict[Job, list[Cost]]:
    """The shipped table: ``{"<rule>/<job name>": {<params digest>: [CPU seconds per unit, units], ...}}`` ({} when
    absent; a bare number is seconds per unit of one unit).

    A job may have several entries, one per parameters it was recorded with (the default and the smoke config
    run some jobs of the same name with other epochs or data)."""
    import yaml

    try:
        table = yaml.safe_load(Path(path).read_text()) or {}
    except FileNotFoundError:
        return {}
    found = {}
    for name, variants in table.items():
        rule, _, rest = name.partition("/")
        found[Job(rule, tuple(rest.split("/")) if rest else ())] = [
            Cost(float(value[0]), None if params == "any" else str(params), None, int(value[1]))
            if isinstance(value, list) else Cost(float(value), None if params == "any" else str(params))
            for params, value in variants.items()]
    return found


def write_reference(runs: list[dict[Job, Cost]], path: str | Path = REFERENCE) -> None:
    """Write the costs of one or more finished runs (``record_costs`` of each) as the shipped table."""
    import yaml

    table: dict[str, dict[str, object]] = {}
    for costs in runs:
        for job, cost in sorted(costs.items(), key=lambda item: (item[0].rule, item[0].key)):
            name = f"{job.rule}/{job.name}" if job.key else job.rule
            seconds = round(cost.seconds_per_unit, 3)
            table.setdefault(name, {})[cost.params or "any"] = [seconds, cost.units] if cost.units > 1 else seconds
    header = ("# CPU seconds per seed (train jobs: [seconds, seeds]) or per job, by the digest of the parameters the\n"
              "# job ran with, from\n"
              "# finished runs' records: the costs a run falls back on where this checkout has no record of its own\n"
              "# (uqcal.pipeline.progress.estimate). Rewrite with\n"
              "# python -m uqcal.pipeline.progress reference <checkout holding a finished run> [<another> ...]\n")
    Path(path).write_text(header + yaml.safe_dump(dict(sorted(table.items())), sort_keys=False,
                                                  default_flow_style=None, width=200))


def cost_book(records_dir: str | Path = RECORDS, reference: str | Path | None = REFERENCE) -> dict[Job, list[Cost]]:
    """Each job's known costs: the shipped reference's, then this checkout's record (which wins a tie)."""
    book = reference_costs(reference) if reference else {}
    for job, cost in record_costs(records_dir).items():
        book[job] = [*book.get(job, []), cost]
    return book


def _levels(job: Job) -> list[tuple[str, object]]:
    """The docstring's levels 2-4 for ``job``: (name, which other jobs count)."""
    same_rule = [("same rule", lambda other: other.rule == job.rule)]
    if job.rule != "train" or len(job.key) < 4:
        if job.key and job.rule in ("split", "aggregate"):
            same_rule.insert(0, ("same family", lambda other: other.rule == job.rule and other.key[:1] == job.key[:1]))
        return same_rule
    family, method = job.key[0], job.key[3]
    return [("same method", lambda other: other.rule == "train" and other.key[:1] == (family,)
             and other.key[3:4] == (method,)),
            ("same family", lambda other: other.rule == "train" and other.key[:1] == (family,)),
            *same_rule]


def estimate(planned: PlannedJob, book: dict[Job, list[Cost]]) -> Estimate:
    """``planned``'s expected wall seconds: the first level of the module docstring that has data."""
    own = [cost for cost in book.get(planned.job, [])
           if cost.params is None or planned.params is None or cost.params == planned.params]
    if own:
        return Estimate(own[-1].seconds_per_unit * planned.units, "its record")
    for name, matches in _levels(planned.job):
        stand_ins = [cost for other, costs in book.items() if matches(other) for cost in costs]
        if not stand_ins:
            continue
        scalable = [cost for cost in stand_ins if cost.work and planned.work is not None]
        if scalable:  # the stand-ins of the most work only: a smoke job's seconds are overheads, not its work's
            most = max(cost.work * cost.units for cost in scalable)
            scalable = [cost for cost in scalable if cost.work * cost.units >= SCALE_FROM_SHARE * most]
            # their compute seconds per work, together, times this job's work, plus a start-up
            per_work = (sum(cost.compute_seconds for cost in scalable)
                        / sum(cost.work * cost.units for cost in scalable))
            startup = STARTUP_SECONDS if planned.job.rule == "train" else 0.0
            return Estimate(startup + per_work * planned.work * planned.units, f"{name}, scaled by work")
        return Estimate(statistics.median(cost.seconds_per_unit for cost in stand_ins) * planned.units, name)
    return Estimate(DEFAULT_SECONDS.get(planned.job.rule, FALLBACK_SECONDS) * planned.units, "default")


def estimates(jobs: Iterable[PlannedJob], book: dict[Job, list[Cost]]) -> dict[Job, Estimate]:
    return {planned.job: estimate(planned, book) for planned in jobs}

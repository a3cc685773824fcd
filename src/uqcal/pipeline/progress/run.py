"""A run's progress: how much of its estimated work is done, and when it will end.

``snapshot`` is the arithmetic; ``RunProgress`` watches a run's files (a finished job's record, a running job's
lock) from a thread and prints a ``[progress ...]`` line at a steady rate; ``start_snakemake`` starts it from the
Snakefile's ``onstart`` with the jobs Snakemake is about to run. At the end (``finish``), the run's last lines name
the report and the claims' headline (``end_lines``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from uqcal.pipeline.layout import RunLayout
from uqcal.pipeline.plan import Job
from uqcal.pipeline.progress.estimate import PlannedJob, cost_book, estimates, params_digest, units_of

INTERVAL_ENV = "UQCAL_PROGRESS_SECONDS"
INTERVAL_SECONDS = 60.0
# How much the estimates count against what the run's own finished jobs took: as much as this share of all the
# estimated work. Once that much work has finished, the observed speed weighs as much as the estimates.
PRIOR_SHARE = 0.1
# A job that runs past its estimate is given at least this share of its elapsed time still to go.
OVERRUN_SHARE = 0.1
WILDCARDS = ("family", "dataset", "setting", "method")  # a job's key, in the order of uqcal.pipeline.plan.Job
# Snakemake rules that run a uqcal rule's job under another name: train_seed, one seed of a train job (its key
# then ends in the seed's folder name, seed<k>; workflow/rules/train.smk).
RULE_OF = {"train_seed": "train"}
STAMP = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True)
class Snapshot:
    percent: float  # of the estimated work, 0-100
    done: int  # jobs finished
    running: int
    total: int
    elapsed: float  # wall seconds since the run started
    eta: float  # expected wall seconds still to go
    speed: float  # actual / estimated time of the jobs finished so far (1: as estimated)


def snapshot(estimated: dict[Job, float], threads: dict[Job, int], finished: dict[Job, float],
             running: dict[Job, float], elapsed: float, capacity: int) -> Snapshot:
    """Progress and ETA from each job's estimated wall seconds, the finished jobs' actual ones and the running
    jobs' elapsed ones.

    Work is wall seconds times the cores a job holds (``threads``), and ``capacity`` cores do it. The estimates
    are scaled by ``speed``: the finished jobs' actual work over their estimated work, both plus a prior of
    ``PRIOR_SHARE`` of all estimated work at speed 1. The ETA is the remaining work over the capacity, but never
    less than the longest single job still to go (a job runs on its own cores, however many are idle).
    """
    def work(job: Job, seconds: float) -> float:
        return seconds * threads.get(job, 1)

    prior = PRIOR_SHARE * sum(work(job, s) for job, s in estimated.items())
    actual = sum(work(job, s) for job, s in finished.items())
    expected = sum(work(job, estimated[job]) for job in finished)
    speed = (actual + prior) / (expected + prior) if expected + prior > 0 else 1.0
    to_go = {job: estimated[job] * speed for job in estimated if job not in finished and job not in running}
    to_go.update({job: max(estimated[job] * speed - spent, OVERRUN_SHARE * spent) for job, spent in running.items()})
    remaining = sum(work(job, s) for job, s in to_go.items())
    done = actual + sum(work(job, s) for job, s in running.items())
    percent = 100.0 * done / (done + remaining) if done + remaining > 0 else 100.0
    eta = max([remaining / max(capacity, 1), *to_go.values()], default=0.0)
    return Snapshot(percent, len(finished), len(running), len(estimated), elapsed, eta, speed)


# ------------------------------------------------------------------------------------------ the line
def format_duration(seconds: float) -> str:
    """'45 s', '4 min 20 s' (under 10 min), '23 min', '2 h 05 min'."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 600:
        return f"{seconds // 60} min {seconds % 60} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


_DURATION = re.compile(r"^(?:(\d+) h)? ?(?:(\d+) min)? ?(?:(\d+) s)?$")


def parse_duration(text: str) -> float:
    """Seconds of a ``format_duration`` text."""
    match = _DURATION.match(text.strip())
    if not match or not any(match.groups()):
        raise ValueError(f"not a duration: {text!r}")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return 3600.0 * hours + 60.0 * minutes + seconds


def progress_line(snap: Snapshot, now: float | None = None) -> str:
    stamp = time.strftime(STAMP, time.localtime(now))
    return (f"[progress {stamp}] {snap.percent:.0f} % of estimated work, {snap.done} of {snap.total} jobs done, "
            f"{snap.running} running, elapsed {format_duration(snap.elapsed)}, ETA {format_duration(snap.eta)}")


_LINE = re.compile(r"\[progress (?P<stamp>[\d-]+ [\d:]+)\] (?P<percent>\d+) % of estimated work, (?P<done>\d+) of "
                   r"(?P<total>\d+) jobs done, (?P<running>\d+) running, elapsed (?P<elapsed>[^,]+), "
                   r"ETA (?P<eta>.+?)\s*$")


@dataclass(frozen=True)
class LoggedLine:
    at: float  # seconds since the epoch (local time as printed)
    percent: float
    done: int
    total: int
    elapsed: float
    eta: float


def parse_line(line: str) -> LoggedLine | None:
    """A ``progress_line`` read back from a log (None for any other line)."""
    match = _LINE.search(line)
    if not match:
        return None
    at = time.mktime(time.strptime(match["stamp"], STAMP))
    return LoggedLine(at, float(match["percent"]), int(match["done"]), int(match["total"]),
                      parse_duration(match["elapsed"]), parse_duration(match["eta"]))


# ------------------------------------------------------------------------------------------ the end
def claims_headline(summary: dict[str, dict[str, str]], noun: str = "claims") -> str:
    """'9 reproduced, 12 consistent, ..., 22 not run (59 claims of 5 papers)' from the report's claims_summary.json
    (or checks_summary.json, ``noun`` "checks")."""
    from uqcal.metrics.replication import VERDICTS

    verdicts = [verdict for claims in summary.values() for verdict in claims.values()]
    order = [*VERDICTS, *sorted(set(verdicts) - set(VERDICTS))]
    counts = ", ".join(f"{verdicts.count(v)} {v.replace('_', ' ')}" for v in order if v in verdicts)
    return f"{counts or 'none'} ({len(verdicts)} {noun if len(verdicts) != 1 else noun[:-1]} of {len(summary)} papers)"


def end_lines(report_dir: str | Path = "reports") -> list[str]:
    """The report's path, the papers' claims' headline and our own checks' (``ours`` claims), where the run left
    a report."""
    index = Path(report_dir) / "index.html"
    if not index.is_file():
        return []
    lines = [f"Report: {index.as_posix()} ({index.resolve().as_uri()})"]
    for name, label, noun in (("claims_summary.json", "Claims", "claims"),
                              ("checks_summary.json", "Our checks", "checks")):
        try:
            summary = json.loads((Path(report_dir) / name).read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if any(summary.values()):
            lines.append(f"{label}: {claims_headline(summary, noun)}")
    return lines


# ------------------------------------------------------------------------------------------ watching a run
def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def interval_seconds() -> float:
    """``UQCAL_PROGRESS_SECONDS`` (0: no periodic lines, only the first and the last), else 60."""
    value = os.environ.get(INTERVAL_ENV, "").strip()
    try:
        return float(value) if value else INTERVAL_SECONDS
    except ValueError:
        raise ValueError(f"{INTERVAL_ENV}={value!r}: expected a number of seconds") from None


class RunProgress:
    """Watches the jobs of one run through their files and says where the run stands.

    A job has finished when its record (``.uqcal/records/...``, its last output) was written after the run
    started, and runs when its lock (``.uqcal/locks/...``, written as its process starts) was. Both are files on
    the shared filesystem, so this works the same for local and cluster jobs, and never touches the locks.
    """

    def __init__(self, jobs: Iterable[PlannedJob], capacity: int, say: Callable[[str], object],
                 book: dict | None = None, clock: Callable[[], float] = time.time):
        jobs = list(jobs)
        self.estimated = {job: est.seconds for job, est in estimates(jobs, cost_book() if book is None else book).items()}
        self.threads = {planned.job: planned.threads for planned in jobs}
        self.capacity, self.say, self.clock = capacity, say, clock
        self.started = clock()
        self.finished: dict[Job, float] = {}
        self._stop = threading.Event()
        self._observing = threading.Lock()  # the thread's lines and the caller's calls both update ``finished``
        self._thread: threading.Thread | None = None

    def observe(self) -> Snapshot:
        with self._observing:
            return self._observe()

    def _observe(self) -> Snapshot:
        now = self.clock()
        since = self.started - 1.0  # file times are rounded on some filesystems
        running = {}
        for job in self.estimated:
            if job in self.finished:
                continue
            written = _mtime(job.record_path)
            if written is not None and written >= since:
                self.finished[job] = self._actual_seconds(job, written)
                continue
            locked = _mtime(job.lock_path)
            if locked is not None and locked >= since:
                running[job] = max(0.0, now - locked)
        return snapshot(self.estimated, self.threads, self.finished, running, now - self.started, self.capacity)

    def _actual_seconds(self, job: Job, written: float) -> float:
        try:
            return float(json.loads(Path(job.record_path).read_text())["resources"]["wall_seconds"])
        except (OSError, KeyError, TypeError, ValueError):
            locked = _mtime(job.lock_path)  # a record being written: its lock dates the job's start
            return max(0.0, written - locked) if locked is not None else self.estimated[job]

    def report(self) -> Snapshot:
        snap = self.observe()
        self.say(progress_line(snap, self.clock()))
        return snap

    def start(self, interval: float | None = None) -> RunProgress:
        """Say where the run stands now and then every ``interval`` seconds (``interval_seconds()``) until stopped."""
        interval = interval_seconds() if interval is None else interval
        self.report()
        if interval > 0:
            self._thread = threading.Thread(target=self._loop, args=(interval,), name="uqcal-progress", daemon=True)
            self._thread.start()
        return self

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.report()
            except Exception as exc:  # never let the progress line take the run down
                self.say(f"[progress] stopped: {exc}")
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def finish(self, report_dir: str | Path = "reports") -> None:
        """The run succeeded: its last lines give its time, the report's path and the claims' headline."""
        self.stop()
        snap = self.observe()
        stamp = time.strftime(STAMP, time.localtime(self.clock()))
        self.say(f"[progress {stamp}] done: {snap.done} of {snap.total} jobs in {format_duration(snap.elapsed)}")
        for line in end_lines(report_dir):
            self.say(line)

    def fail(self) -> None:
        self.stop()
        snap = self.observe()
        stamp = time.strftime(STAMP, time.localtime(self.clock()))
        self.say(f"[progress {stamp}] failed after {format_duration(snap.elapsed)}: {snap.done} of {snap.total} "
                 f"jobs done")


# ------------------------------------------------------------------------------------------ Snakemake
def planned_from_spec(job: Job, threads: int = 1) -> PlannedJob:
    """A job as its spec file (written as the Snakefile loads) states it: its seeds' count and parameters."""
    try:
        spec = json.loads(Path(job.spec_path).read_text())
    except (OSError, json.JSONDecodeError):
        return PlannedJob(job, threads=threads)
    return PlannedJob(job, units_of(job.rule, spec.get("job")), threads, params_digest(spec.get("params")))


def start_snakemake(workflow, say: Callable[[str], object]) -> RunProgress | None:
    """From the Snakefile's ``onstart``: watch the uqcal jobs Snakemake is about to run (its DAG's), on the cores
    it has (``--cores``) or, on a cluster, as many jobs at a time as it may submit (``--jobs``)."""
    if not workflow.is_main_process:
        return None
    try:
        jobs, capacity = _snakemake_jobs(workflow)
    except Exception as exc:  # Snakemake's DAG is not a public API: a change there costs the line, not the run
        say(f"[progress] no progress line: Snakemake's plan could not be read ({type(exc).__name__}: {exc})")
        return None
    return RunProgress(jobs, capacity, say).start()


def _snakemake_jobs(workflow) -> tuple[list[PlannedJob], int]:
    jobs = []
    for sm_job in workflow.dag.needrun_jobs():
        wildcards = dict(sm_job.wildcards_dict)
        key = tuple(wildcards[name] for name in WILDCARDS if name in wildcards)
        if "seed" in wildcards:
            key += (RunLayout.seed_dir_name(wildcards["seed"]),)
        job = Job(RULE_OF.get(sm_job.rule.name, sm_job.rule.name), key)
        if os.path.exists(job.spec_path):  # a uqcal step (not `all`)
            jobs.append(planned_from_spec(job, int(sm_job.threads) if workflow.local_exec else 1))
    capacity = (workflow._cores or 1) if workflow.local_exec else workflow.nodes  # `.cores` raises when unset
    return jobs, int(capacity)

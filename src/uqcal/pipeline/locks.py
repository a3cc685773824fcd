"""Running a job: its lock, the processes it runs under, its log's attempts, and `running`, which every step
runs its job in (lock, run, record).

No two writers: a step holds an exclusive lock on ``.uqcal/locks/<rule>/<job>.lock`` (``flock``) while it
writes, and a job started while a killed run's orphaned job still writes the same outputs waits for it
(bounded: ``UQCAL_LOCK_WAIT``). docs/ARCHITECTURE.md, "Who decides what is stale", and README, "Reruns and
crashes".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from uqcal.pipeline.identity import build_spec
from uqcal.pipeline.plan import Job, outputs
from uqcal.pipeline.records import (
    JobError,
    check_upstream,
    input_digests,
    job_server,
    load_spec,
    refresh_specs,
    write_record,
)

LOG = logging.getLogger("uqcal")


class LockWaitTimeout(JobError):
    """An earlier run's job still holds this job's lock after the longest wait allowed."""


LOCK_WAIT_ENV = "UQCAL_LOCK_WAIT"
LOCK_WAIT_SECONDS = 3600.0


def lock_wait_seconds() -> float:
    """How long a job waits for an earlier run's job writing the same outputs: ``UQCAL_LOCK_WAIT`` seconds."""
    value = os.environ.get(LOCK_WAIT_ENV, "").strip()
    try:
        return float(value) if value else LOCK_WAIT_SECONDS
    except ValueError:
        raise JobError(f"{LOCK_WAIT_ENV}={value!r}: expected a number of seconds") from None


def lock_holder(job: Job) -> str | None:
    """The process id written in the job's lock while a process holds it; None when the lock is free."""
    try:
        fd = os.open(job.lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _acquire(fh, job: Job, say) -> bool:
    """Take the job's lock on ``fh``, waiting (at most lock_wait_seconds) for another holder; True if it waited."""
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        pass
    fh.seek(0)
    holder = fh.read().strip() or "?"
    seconds = lock_wait_seconds()
    say(f"{job.rule} {job.name}: waiting for process {holder}, an earlier run's job writing the same outputs "
        f"({', '.join(outputs(job))}), for at most {seconds:.0f} s ({LOCK_WAIT_ENV} sets it)")
    deadline = time.monotonic() + seconds
    while True:
        time.sleep(0.5)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockWaitTimeout(
                    f"{job.rule} {job.name}: process {holder} still writes {', '.join(outputs(job))} (it holds "
                    f"{job.lock_path}) after {seconds:.0f} s; nothing was touched. It is an earlier run's job (a "
                    f"killed Snakemake's jobs go on): let it finish, or `kill {holder}`, then run again; "
                    f"{LOCK_WAIT_ENV}=<seconds> waits longer.") from None


@contextlib.contextmanager
def exclusive(job: Job) -> Iterator[None]:
    """Hold the job's lock while it writes: a second writer of the same outputs waits for the first (bounded).

    A killed Snakemake leaves its jobs running; a job of the next run for the same outputs then waits here
    until the orphan has finished instead of writing beside it (README, "Reruns and crashes"). Snakemake's
    own start waits earlier, before it deletes the outputs of a job it reruns (``await_earlier_job``).
    """
    path = Path(job.lock_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        if _acquire(fh, job, LOG.warning):
            LOG.info("%s %s: the earlier job has finished; starting", job.rule, job.name)
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def await_earlier_job(config: dict, config_path: str, job: Job, dry_run: bool, say) -> None:
    """Before Snakemake touches a job's outputs: wait (bounded) while an earlier run's job still writes them.

    Snakemake deletes the outputs and the log of a job it is about to run before the job's process starts, so
    the job's own lock (``exclusive``) comes too late to protect an orphan of a killed Snakemake. Called while
    Snakemake builds its plan (the rules' input functions), this waits for the orphan instead, then rewrites the
    job's spec from the record the orphan left. A dry run only says that a run would wait.
    """
    holder = lock_holder(job)
    if holder is None:
        return
    if dry_run:
        say(f"{job.rule} {job.name}: process {holder}, an earlier run's job, still writes its outputs; a run "
            f"waits for it (at most {lock_wait_seconds():.0f} s) before it touches them")
        return
    with open(job.lock_path, "a+") as fh:
        _acquire(fh, job, say)
        fcntl.flock(fh, fcntl.LOCK_UN)
    say(f"{job.rule} {job.name}: the earlier job has finished")
    refresh_specs(config, config_path, [job])


class CheckoutBusy(JobError):
    """Another Snakemake command holds this checkout (it plans or runs); this one must write nothing."""


CHECKOUT_LOCK = "checkout.lock"
CHECKOUT_BUSY_EXIT = 2


def hold_checkout(config_path: str, dry_run: bool, locks: Path | None = None):
    """One writer per checkout: take ``.uqcal/locks/checkout.lock`` for this Snakemake command, before it writes a
    spec, and keep it until the process ends (the handle returned; the kernel frees the lock when the process
    dies, killed or not). A second command, a dry run included, while a run plans or runs here raises
    `CheckoutBusy` having written nothing: its start-up would rewrite the specs that the running jobs read.

    The handle is not inherited by the jobs (Python opens files close-on-exec), so a killed Snakemake's orphaned
    jobs do not keep the checkout; their own job locks (`exclusive`) make the next run wait for them.
    """
    from uqcal.pipeline.plan import LOCKS

    path = (locks or LOCKS) / CHECKOUT_LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise CheckoutBusy(
            f"this checkout is busy: {holder} (it holds {path}); nothing was planned or written. Wait for it to "
            "end, or run the second config in another clone.") from None
    fh.seek(0)
    fh.truncate()
    stamp = time.strftime("%H:%M:%S UTC", time.gmtime())
    fh.write(f"process {os.getpid()} {'plans a dry run' if dry_run else 'runs'} {config_path}, since {stamp}\n")
    fh.flush()
    return fh


def ancestry() -> list[int]:
    """This process's parent and grandparent (Linux: /proc; [] elsewhere).

    A job started by Snakemake or DVC runs under a shell that they started: when the tool is killed alone,
    the shell is re-parented, and the job can tell that whoever started it is gone (``orphaned``).

    A job the local job server forked (uqcal.cli.job_server) stands in for the step's process that asked for
    it, and takes that process's parent and grandparent: the shell and the tool, as a job of its own would.
    """
    server = job_server()
    client = server.CLIENT_PID if server is not None else None
    try:
        found = [_parent(client) if client else os.getppid()]
        found.append(_parent(found[0]))
    except (OSError, ValueError, IndexError):
        return []
    return found


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rpartition(")")[2].split()[1])


def orphaned(started_under: list[int]) -> bool:
    """True when the processes this job started under (``ancestry()`` then) are no longer its parents."""
    return bool(started_under) and ancestry() != started_under


class LogHistory:
    """Every attempt at a Snakemake job in its log, each under a header, until an attempt completes.

    Snakemake deletes a job's log before it runs the job again (after a crash, a kill, or for an orphan's
    outputs), and the shell's ``2>> log`` then starts an empty file. The log therefore has a second, hidden name
    (``.<log>.attempts``, a hard link): a new attempt finds the earlier ones there, carries on in the same file
    and gives it back its name. A completed job drops the hidden name, so the next rerun starts a new log;
    an orphaned job keeps it (its rerun follows).
    """

    def __init__(self, job: Job):
        self.job = job
        self.history: Path | None = None

    def attach(self) -> None:
        try:
            stderr = os.fstat(2)
            log = Path(os.readlink("/proc/self/fd/2"))
        except OSError:
            return  # stderr is not a file this process can name (a terminal, a pipe, not Linux)
        if not log.is_absolute() or not log.is_file() or not os.path.samestat(log.stat(), stderr):
            return
        history = log.with_name(f".{log.name}.attempts")
        try:
            if history.exists() and not os.path.samestat(history.stat(), stderr):
                sys.stderr.flush()
                with open(history, "ab") as out, open(log, "rb") as fresh:
                    out.write(fresh.read())  # what this attempt wrote before getting here
                fd = os.open(history, os.O_WRONLY | os.O_APPEND)
                os.dup2(fd, 2)
                os.close(fd)
                tmp = log.with_name(f".{log.name}.{os.getpid()}.tmp")
                os.link(history, tmp)
                os.replace(tmp, log)
            elif not history.exists():
                os.link(log, history)
        except OSError as error:  # no hard links here: this attempt's log is its own
            LOG.debug("log history unavailable: %s", error)
            return
        self.history = history
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(f"===== uqcal {self.job.rule} {self.job.name}: attempt started {stamp}, process {os.getpid()} =====",
              file=sys.stderr, flush=True)

    def completed(self) -> None:
        if self.history is not None:
            self.history.unlink(missing_ok=True)



@contextlib.contextmanager
def running(args, rule: str, key: tuple[str, ...], elsewhere: bool = False) -> Iterator[dict]:
    """A step's job from ``--spec`` (Snakemake) or ``--config`` (DVC, people): lock, run, then record.

    Yields the spec; the step reads ``spec["job"]``. The record is written only if the block succeeds, and
    not at all when the outputs go somewhere else than the pipeline's folders (``elsewhere``, --results-dir).
    """
    if getattr(args, "spec", None):
        job, spec = load_spec(args.spec)
    else:
        from uqcal.pipeline.config.load import load_config

        job = Job(rule, key)
        config_path = args.config or "config/config.yaml"
        # A DVC stage (or a person) runs one job: only its own family's method parameters are checked again
        # (importing every family's methods costs seconds per stage); dvc-sync checked the whole config.
        families = None if rule == "report" else () if rule == "materialise" else key[:1]
        spec = build_spec(load_config(config_path, method_families=families), job, _relative(config_path))
        # As a spec file gives it (write_spec, load_spec): the step sees the same job, key order included, from
        # either tool, so that what it saves (a model's parameters in model.pt) is the same bytes.
        spec = json.loads(json.dumps(spec, sort_keys=True))
    if elsewhere or (args.results_dir, args.data_dir) != ("results", "data"):
        yield spec
        return
    started_under = ancestry()
    log = LogHistory(job)
    if getattr(args, "spec", None):  # a Snakemake job: its stderr is its log
        log.attach()
    with exclusive(job):
        check_upstream(spec["upstream"], job)  # never read a file that is not what its job wrote
        inputs = input_digests(spec["upstream"])  # read as the job starts: upstream jobs may have just rerun
        yield spec
        write_record(job, spec, inputs, getattr(args, "started", time.perf_counter()))
    if not orphaned(started_under):  # an orphan's rerun follows: its log carries on under the next header
        log.completed()


def _relative(path: str) -> str:
    """A config path as the Snakefile and dvc.yaml write it: relative to the repository when inside it."""
    resolved, cwd = Path(path).resolve(), Path.cwd().resolve()
    return resolved.relative_to(cwd).as_posix() if resolved.is_relative_to(cwd) else str(path)

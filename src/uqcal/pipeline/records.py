"""A job's record, its spec file and whether it is stale.

Every job leaves a record, ``.uqcal/records/<rule>/<key>.json`` (an output of the job for Snakemake and of
the stage for DVC, so it travels with `dvc push`/`pull` and DVC's run-cache): what it was made from
(`uqcal.pipeline.identity.build_spec`, and the upstream records' output digests), the size and sha256 of every
file the job wrote, and the job's wall time, CPU time and peak memory. When the Snakefile starts it compares
each job's record with the current state (`why_stale`) and writes the job's spec file,
``.uqcal/specs/<rule>/<key>.json`` (what the step runs from), dated *now* when the job is stale and at
1970-01-01 when it is not. The spec is the only input whose date Snakemake compares (data inputs are
``ancient``), so Snakemake's mtime check answers the content question whatever order DVC or git wrote the
files in: in a fresh clone after `dvc pull`, after `dvc repro` or a run-cache checkout
(docs/ARCHITECTURE.md, "Who decides what is stale").
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

from uqcal.pipeline.identity import SRC, build_spec, digest, file_sha256, identity
from uqcal.pipeline.plan import Job, outputs, plan

# Date of current specs and of records (seconds after the epoch; 0 would make Snakemake skip its date check)
FRESH_MTIME = 1
SKIPPED_FILES = {".snakemake_timestamp", ".gitignore"}  # Snakemake's and DVC's bookkeeping, not content


class JobError(RuntimeError):
    """A job cannot run, or its outputs cannot be committed, as things stand; the message says why and what to do."""


def read_record(job: Job) -> dict | None:
    return _read_json(job.record_path)


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, json.JSONDecodeError):
        return None


def input_digests(record_paths: list[str]) -> dict[str, str | None]:
    """Each upstream job's output digest as its record states it (None: not produced yet)."""
    found = {}
    for path in record_paths:
        record = _read_json(path)
        found[path] = record.get("outputs_digest") if record else None
    return found


def why_stale(job: Job, spec: dict) -> str | None:
    """None when the job's outputs were made from what it is made from now; else the first difference."""
    record = read_record(job)
    if record is None:
        return "no record of its outputs"
    for rel, (size, _) in record.get("outputs", {}).items():
        try:
            if os.stat(rel).st_size != size:
                return f"{rel} changed size"
        except OSError:
            return f"{rel} is missing"
    inputs = input_digests(spec["upstream"])
    if record.get("identity") == identity(spec, inputs):
        return None
    for name in ("params", "job", "code", "files", "inputs"):
        before, now = record.get(name) or {}, spec.get(name) if name != "inputs" else inputs
        if before != now:
            if isinstance(before, dict) and isinstance(now, dict):
                changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
                if changed:
                    return f"{name} changed: {', '.join(changed[:3])}{' ...' if len(changed) > 3 else ''}"
            return f"{name} changed"
    return "its record is from another job"


def write_spec(job: Job, spec: dict, reason: str | None) -> None:
    """Write the job's spec: dated now if the job is stale (``reason``), else at 1970 with its record.

    A stale spec also carries the reason and the time, so that its content differs from any spec the job
    ran from before (Snakemake skips a newer input whose checksum it has seen, .snakemake/metadata).
    """
    from uqcal.core.io import write_text

    if reason is not None:
        spec = {**spec, "rerun": {"reason": reason, "at": time.time_ns()}}
    path = Path(job.spec_path)
    text = json.dumps(spec, sort_keys=True, indent=1) + "\n"
    try:
        current = path.read_text()
    except OSError:
        current = None
    if current != text:
        write_text(path, text)
    if reason is None:
        _date_fresh(path)
        _date_fresh(Path(job.record_path))


def _date_fresh(path: Path) -> None:
    stamp = FRESH_MTIME * 1_000_000_000
    try:
        if path.stat().st_mtime_ns != stamp:
            os.utime(path, ns=(stamp, stamp))
    except FileNotFoundError:
        pass


def refresh_specs(config: dict, config_path: str, jobs: list[Job] | None = None) -> dict[Job, str]:
    """Write every job's spec (the Snakefile's start-up); returns {stale job: reason} for jobs with outputs."""
    stale = {}
    for job in jobs if jobs is not None else plan(config):
        spec = build_spec(config, job, config_path)
        reason = why_stale(job, spec)
        write_spec(job, {**spec, "inputs": input_digests(spec["upstream"])}, reason)
        if reason is not None and any(os.path.exists(out) for out in outputs(job)):
            stale[job] = reason
    return stale


def load_spec(path: str | Path) -> tuple[Job, dict]:
    with open(path) as fh:
        spec = json.load(fh)
    return Job(spec["rule"], tuple(spec["key"])), spec



def output_files(job: Job) -> dict[str, list]:
    """{path: [size, sha256]} of every file the job's outputs hold (folders walked, bookkeeping skipped)."""
    return files_of(outputs(job))


def files_of(outs: list[str]) -> dict[str, list]:
    found = {}
    for out in outs:
        paths = sorted(Path(out).rglob("*")) if Path(out).is_dir() else [Path(out)]
        for path in paths:
            if path.is_file() and path.name not in SKIPPED_FILES and not path.name.endswith(".tmp"):
                found[path.as_posix()] = [path.stat().st_size, file_sha256(path)]
    return found


class OutputsChangedError(JobError):
    """Files a job wrote differ from what its record says it wrote (edited, added or removed afterwards)."""


def check_outputs(outs: list[str], record_path: str) -> list[str]:
    """How the files ``outs`` hold now differ from those the job's record lists (sha256 by sha256); [] if none."""
    record = _read_json(record_path)
    if record is None or not isinstance(record.get("outputs"), dict):
        return [f"{record_path}: missing or unreadable, so nothing vouches for {', '.join(outs)}"]
    recorded, found = record["outputs"], files_of(outs)
    problems = []
    for path in sorted(recorded.keys() | found.keys()):
        if path not in found:
            problems.append(f"{path}: missing (its job wrote it: {record_path})")
        elif path not in recorded:
            problems.append(f"{path}: not written by its job (not in {record_path})")
        elif found[path][1] != recorded[path][1]:
            problems.append(f"{path}: sha256 {found[path][1][:12]}... is not the {recorded[path][1][:12]}... its job "
                            f"wrote ({record_path})")
    return problems


def changed_outputs_message(action: str, problems: list[str], jobs: list[Job], nothing: str, then: str = "") -> str:
    """The refusal for files that differ from what their job wrote: what they are, and two ways back that work
    as written (DVC's copy, for outputs it has committed; the job run again, always)."""
    shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
    outs = " ".join(out for job in jobs for out in outputs(job))
    return (f"refusing to {action}: {len(problems)} file(s) differ from what their job wrote:\n  {shown}\n"
            f"{nothing} Restore them from DVC's cache (`dvc checkout --force {outs}`, if they were committed) or rerun "
            f"their jobs (`snakemake --cores 1 --configfile <config> --forcerun {outs}`){then}.")


def check_upstream(record_paths: list[str], reader: Job) -> None:
    """Refuse to read an upstream job's files that are not what it wrote (sha256 against its record): a result
    edited by hand (one digit of a metrics.json, same size, which Snakemake does not see) never reaches a
    summary, a report or a model built on it. An upstream job without a record is not judged here."""
    problems, jobs = [], []
    for path in record_paths:
        record = _read_json(path)
        if not record or "rule" not in record:
            continue
        job = Job(record["rule"], tuple(record["key"]))
        found = check_outputs(outputs(job), path)
        if found:
            problems += found
            jobs.append(job)
    if problems:
        raise OutputsChangedError(changed_outputs_message(
            f"run {reader.rule} {reader.name}", problems, jobs, "Nothing was read or written."))


def write_record(job: Job, spec: dict, inputs: dict, started: float) -> dict:
    """Record what the finished job's outputs were made from (its spec and inputs) and what they hold."""
    from uqcal.core.io import write_json
    from uqcal.core.numerics import describe

    files = output_files(job)
    record = {**{k: spec[k] for k in ("rule", "key", "config", "params", "job", "code", "files")},
              "inputs": inputs, "identity": identity(spec, inputs), "outputs": files,
              "outputs_digest": digest(files), "resources": resource_usage(started),
              "imported": imported_sources(), "numerics": describe()}
    write_json(Path(job.record_path), record)
    return record


def imported_sources() -> list[str]:
    """The uqcal source files this process has imported (for people, and for the test that `code` covers them)."""
    found = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        # Only a path naming the package can lie in it: resolving every library's path (thousands of modules,
        # each a chain of lstat calls) cost ~0.4 s a call.
        if not path or "uqcal" not in path:
            continue
        resolved = Path(path).resolve()
        if resolved.is_relative_to(SRC):
            found.add(f"src/uqcal/{resolved.relative_to(SRC).as_posix()}")
    return sorted(found)


# The local job server's module (uqcal.cli.job_server), written in two parts: uqcal.pipeline.identity reads a whole
# module name in the source as an import, and the server hosts a job's process without being the job's code (a
# change to it reruns nothing). Looked up in sys.modules, never imported.
JOB_SERVER_MODULE = "uqcal.cli" + ".job_server"


def job_server():
    """The job server's module where this process is a job it forked (its ``FORKED``, ``CLIENT_PID``), else None."""
    module = sys.modules.get(JOB_SERVER_MODULE)
    return module if getattr(module, "FORKED", False) else None


def resource_usage(started: float) -> dict[str, float]:
    """This process's wall time since ``started`` (perf_counter), CPU seconds and peak RSS (children included);
    ``job_server``: true where the process was forked by the job server (its imports are not in its CPU)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime
    found = {"wall_seconds": round(time.perf_counter() - started, 3), "cpu_seconds": round(cpu, 3),
             "max_rss_mb": round(max(usage.ru_maxrss, children.ru_maxrss) / 1024, 1)}
    if job_server() is not None:  # the libraries' imports are the server's CPU, not this process's
        found["job_server"] = True
    return found

"""The pipeline's jobs: what each is made from, the record it leaves, and whether it is stale.

One definition of "stale" serves Snakemake and DVC (docs/ARCHITECTURE.md, "Who decides what is stale"):
a job is stale when what it is made from differs from what its outputs were made from, by content:

- its parameters: the config keys it reads, exactly the `params:` of its DVC stage, plus the resolved job
  (registry entry, method defaults and overrides) that the step receives;
- its code: the sha256 of every `uqcal` source file its step can import (`source_files`; the same list is
  its DVC stage's code `deps:`);
- its inputs: the digest of each upstream job's outputs, read from that job's record.

Every job leaves a record, ``.uqcal/records/<rule>/<key>.json`` (an output of the job for Snakemake and of
the stage for DVC, so it travels with `dvc push`/`pull` and DVC's run-cache): the above, the size and
sha256 of every file the job wrote, and the job's wall time, CPU time and peak memory. When the Snakefile
starts it compares each job's record with the current state and writes the job's spec file,
``.uqcal/specs/<rule>/<key>.json`` (what the step runs from), dated *now* when the job is stale and at
1970-01-01 when it is not. The spec is the only input whose date Snakemake compares (data inputs are
``ancient``), so Snakemake's mtime check answers the content question whatever order DVC or git wrote the
files in: in a fresh clone after `dvc pull`, after `dvc repro` or a run-cache checkout.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

LOG = logging.getLogger("uqcal")

RECORDS = Path(".uqcal/records")
SPECS = Path(".uqcal/specs")
LOCKS = Path(".uqcal/locks")
# Date of current specs and of records (seconds after the epoch; 0 would make Snakemake skip its date check)
FRESH_MTIME = 1
SKIPPED_FILES = {".snakemake_timestamp", ".gitignore"}  # Snakemake's and DVC's bookkeeping, not content
RULES = ("materialise", "split", "train", "aggregate", "report")


@dataclass(frozen=True)
class Job:
    """One Snakemake job / DVC stage: a rule and its wildcards in rule order."""

    rule: str
    key: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return "/".join(self.key) or self.rule

    @property
    def stage(self) -> str:
        return "-".join((self.rule, *self.key))

    @property
    def record_path(self) -> str:
        return f"{RECORDS}/{self.rule}/{self.name}.json"

    @property
    def spec_path(self) -> str:
        return f"{SPECS}/{self.rule}/{self.name}.json"

    @property
    def lock_path(self) -> str:
        return f"{LOCKS}/{self.rule}/{self.name}.lock"


# ------------------------------------------------------------------------------------------ the plan
def plan(config: dict) -> list[Job]:
    """Every job of a (prepared) config, upstream before downstream."""
    from uqcal.pipeline.config import iter_batches, raw_dependencies, settings_for

    jobs: list[Job] = []
    datasets = sorted({b.dataset for b in iter_batches(config)})
    members = sorted({m for d in datasets for m in raw_dependencies(config, d)} - set(datasets))
    jobs += [Job("materialise", (d,)) for d in members + datasets]
    for family, fam in config["families"].items():
        for dataset in fam["datasets"]:
            jobs += [Job("split", (family, dataset, s)) for s in settings_for(config, family, dataset)]
    batches = list(iter_batches(config))
    # a method built on another's runs comes after it
    jobs += [Job("train", (b.family, b.dataset, b.setting, b.method)) for b in batches if not _depends_on(b)]
    jobs += [Job("train", (b.family, b.dataset, b.setting, b.method)) for b in batches if _depends_on(b)]
    jobs += [Job("aggregate", (family,)) for family in config["families"]]
    jobs.append(Job("report"))
    return jobs


def _depends_on(batch) -> str | None:
    from uqcal.methods.api import get_entry

    return get_entry(batch.family, batch.method).depends_on


def outputs(job: Job) -> list[str]:
    """The job's artifacts (files or folders), its record apart."""
    from uqcal.pipeline.config import split_dir

    if job.rule == "materialise":
        return [f"data/raw/{job.key[0]}.parquet", f"data/raw/{job.key[0]}.json"]
    if job.rule == "split":
        return [split_dir(*job.key)]
    if job.rule == "train":
        return ["results/" + "/".join(job.key)]
    if job.rule == "aggregate":
        return [f"results/{job.key[0]}/summary.csv"]
    return ["reports"]


def upstream(config: dict, job: Job) -> list[Job]:
    """The jobs whose outputs this job reads."""
    from uqcal.pipeline.config import raw_dependencies

    if job.rule == "materialise":
        return [Job("materialise", (m,)) for m in raw_dependencies(config, job.key[0])]
    if job.rule == "split":
        return [Job("materialise", (job.key[1],))]
    if job.rule == "train":
        family, dataset, setting, method = job.key
        found = [Job("materialise", (dataset,)), Job("split", (family, dataset, setting))]
        dep = _entry(family, method).depends_on
        return found + ([Job("train", (family, dataset, setting, dep))] if dep else [])
    if job.rule == "aggregate":
        return [Job("train", (b.family, b.dataset, b.setting, b.method)) for b in _batches(config, job.key[0])]
    return [Job("aggregate", (family,)) for family in config["families"]]


def inputs(config: dict, job: Job) -> list[str]:
    """The upstream artifacts the job reads (a dataset's provenance .json is not read downstream)."""
    found = []
    for up in upstream(config, job):
        found += [out for out in outputs(up) if not (up.rule == "materialise" and out.endswith(".json"))]
    return found


def local_files(config: dict, job: Job) -> list[str]:
    """Files in the repository that a materialise job reads: a source's ``path`` (the csv and array sources).

    Inputs like any other, by content: their sha256 is part of the job's identity (``build_spec``), and they
    are data ``deps:`` of its DVC stage, so editing one reruns the dataset and everything built on it.
    """
    if job.rule != "materialise":
        return []
    path = config["datasets"][job.key[0]]["source"].get("path")
    return [path] if isinstance(path, str) else []


def _entry(family: str, method: str):
    from uqcal.methods.api import get_entry

    return get_entry(family, method)


def get_family(name: str):
    from uqcal.methods.api import get_family

    return get_family(name)


def _batches(config: dict, family: str):
    from uqcal.pipeline.config import iter_batches

    return list(iter_batches(config, [family]))


# ------------------------------------------------------------------------------------------ resources
RESOURCE_DEFAULTS = {"mem_mb": 4000, "runtime": 60, "gpu": 0, "cpus": 1, "cpus_per_gpu": 4, "priority": 0}


def resources(config: dict, family: str, dataset: str, method: str) -> dict:
    """A train job's resources: families.<f>.resources, then its per_dataset and per_method overrides.

    A method whose class is ``cpu_only`` (the reference predictors) never requests a GPU; one with
    ``job_resources`` (the reference predictors) asks for those instead of the family's and per_dataset's.
    """
    declared = config["families"][family].get("resources") or {}
    cls = _entry(family, method).load_class()
    found = {k: v for k, v in declared.items() if k not in ("per_dataset", "per_method")}
    found.update((declared.get("per_dataset") or {}).get(dataset) or {})
    found.update(cls.job_resources or {})  # the reference predictors: small, whatever the family trains
    found.update((declared.get("per_method") or {}).get(method) or {})
    if cls.cpu_only:
        found["gpu"] = 0
    return {**RESOURCE_DEFAULTS, **found}


# ------------------------------------------------------------------------------------------ parameters
def param_keys(config: dict, job: Job, config_path: str) -> list[tuple[str, str]]:
    """(params file, dotted key) pairs the job reads from the config files: its DVC stage's `params:`.

    Only keys that change what the job computes: not the selectors that decide which jobs exist (a setting's
    or a method's ``datasets``, a method's ``settings``), not another dataset's entry of a per-dataset table,
    not a registry entry's report labels (``uqcal.pipeline.config.DISPLAY_KEYS``). So a config that selects
    the same job differently (config/extended.yaml runs cv5_shuffled on every dataset) leaves it current.
    """
    if job.rule == "materialise":
        return _registry_keys(config, job.key[0], config_path)
    if job.rule in ("split", "train"):
        family, dataset, setting = job.key[:3]
        fam = f"families.{family}"
        keys = _entry_keys(config_path, f"{fam}.settings.{setting}", dataset, drop=("datasets",))
        if not any(key.startswith(f"{fam}.settings.{setting}.seeds") for key in keys):
            keys += [f"{fam}.seeds"]  # the family's count applies: the setting names none for this dataset
        keys += [f"{fam}.split"]
        if job.rule == "train":
            keys += _entry_keys(config_path, f"{fam}.methods.{job.key[3]}", dataset, drop=("datasets", "settings"))
            keys += ["device", "torch_threads"]
        return _registry_keys(config, dataset, config_path) + _present(config_path, keys)
    if job.rule == "aggregate":
        family = job.key[0]
        return _present(config_path, [f"families.{family}.datasets", f"families.{family}.seeds",
                                      f"families.{family}.settings", f"families.{family}.methods"])
    # The report reads the whole config (families, methods, datasets, its own section) and the registry.
    return [(config_path, ""), *((path, "") for path in _registry_files(config))]


def _entry_keys(path: str, prefix: str, dataset: str, drop: tuple[str, ...]) -> list[str]:
    """The keys of a setting's or method's entry that a job on ``dataset`` reads: every key but ``drop``; of a
    per-dataset table (``seeds: {dataset: n}``, ``per_dataset``), ``dataset``'s entry only."""
    entry = _lookup(_yaml_file(path), prefix)
    if not isinstance(entry, dict):  # missing (dropped by _present), empty (null) or a plain value
        return [prefix]
    keys = []
    for name, value in entry.items():
        if name in drop:
            continue
        if name in ("seeds", "per_dataset") and isinstance(value, dict):
            keys += [f"{prefix}.{name}.{dataset}"] if dataset in value else []
        else:
            keys.append(f"{prefix}.{name}")
    return keys


def _registry_keys(config: dict, dataset: str, config_path: str) -> list[tuple[str, str]]:
    """A dataset's registry entry, key by key, without the report's labels."""
    from uqcal.pipeline.config import DISPLAY_KEYS

    path, key = _registry_key(config, dataset, config_path)
    entry = _lookup(_yaml_file(path), key)
    return [(path, f"{key}.{name}") for name in entry if name not in DISPLAY_KEYS]


def _registry_files(config: dict) -> list[str]:
    return list(config.get("dataset_registry", ["config/datasets.yaml"]))


def _registry_key(config: dict, dataset: str, config_path: str) -> tuple[str, str]:
    """Where a dataset's registry entry comes from: the config itself, else the last registry file naming it."""
    if dataset in config.get("datasets_inline", []):
        return config_path, f"datasets.{dataset}"
    found = "config/datasets.yaml"
    for path in _registry_files(config):
        if dataset in (_yaml_file(path) or {}):
            found = path
    return found, dataset


def _present(path: str, keys: list[str]) -> list[tuple[str, str]]:
    """Only keys the file has: DVC refuses a stage whose params name a missing key."""
    return [(path, key) for key in keys if _lookup(_yaml_file(path), key) is not _MISSING]


_MISSING = object()


def _lookup(data, dotted: str):
    if not dotted:
        return data
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return _MISSING
        data = data[part]
    return data


def _yaml_file(path: str):
    stat = os.stat(path)
    return _parse_yaml(os.path.abspath(path), stat.st_mtime_ns, stat.st_size)


@cache
def _parse_yaml(path: str, _mtime_ns: int, _size: int):
    with open(path) as fh:
        return yaml.safe_load(fh) or {}


def payload(config: dict, job: Job) -> dict:
    """The resolved slice of config the step runs from (registry entry, method defaults and overrides applied)."""
    from uqcal.pipeline import config as C

    if job.rule == "materialise":
        return C.dataset_job(config, job.key[0])
    if job.rule == "split":
        return C.split_batch_job(config, *job.key)
    if job.rule == "train":
        return C.batch_job(config, *job.key)
    if job.rule == "aggregate":
        fam = config["families"][job.key[0]]
        return {"family": job.key[0], "family_config": {k: v for k, v in fam.items() if k != "resources"}}
    # The report reads the whole (validated, registry-merged) config: it runs from it, not from the file,
    # so that it does not validate again (validation imports every method's module).
    return {"config": config}


# ------------------------------------------------------------------------------------------ code
SRC = Path(__file__).resolve().parent.parent  # .../src/uqcal
STEP_MODULE = {rule: f"uqcal.pipeline.steps.{rule}" for rule in RULES}


def code_roots(job: Job) -> list[str]:
    """Modules a job's process starts from; `source_files` follows their imports."""
    roots = ["uqcal.cli", STEP_MODULE[job.rule]]
    if job.rule == "split":  # the family's splitter is a "module:name" string
        family = get_family(job.key[0])
        roots += [family.package, family.splitter.partition(":")[0]]
    if job.rule == "train":
        family, _, _, method = job.key
        entry = _entry(family, method)
        evaluator = get_family(family).evaluator.partition(":")[0]
        roots += [get_family(family).package, evaluator, entry.target.partition(":")[0]]
        if entry.depends_on:  # a method built on another's runs may load that method's model
            roots.append(_entry(family, entry.depends_on).target.partition(":")[0])
    if job.rule == "report":  # figures a report spec draws with a function ("module:function")
        for spec in sorted((SRC / "methods").glob("*/report.yaml")):
            roots += sorted(set(re.findall(r"\b(uqcal(?:\.\w+)+):\w+", spec.read_text())))
    return roots


def source_files(job: Job) -> list[str]:
    """Repository-relative paths of every uqcal file the job's step can import (its static import closure).

    Imports inside functions count, and so do plain module names written as strings (``importlib`` tables
    such as the data sources'); ``module:Class`` registry targets do not: a job's own method is a root.
    The report also reads the report specs and the papers' numbers that the families' packages hold
    (``report.yaml``, ``paper_numbers.yaml``) and any data files packaged beside its own modules.
    """
    files = sorted(_module_path(m) for m in _closure(tuple(code_roots(job))))
    if job.rule == "report":
        yamls = [*(SRC / "pipeline" / "report").rglob("*.yaml"), *(SRC / "methods").glob("*/report.yaml"),
                 *(SRC / "methods").glob("*/paper_numbers.yaml")]
        files += sorted(f"src/uqcal/{p.relative_to(SRC).as_posix()}" for p in yamls)
    return files


def _module_path(module: str) -> str:
    """src/uqcal/... path of a uqcal module, as the repository (and dvc.yaml) names it."""
    return f"src/uqcal/{_module_file(module).relative_to(SRC).as_posix()}"


def _source_file(rel: str) -> Path:
    """Where a source path of `source_files` is read from: uqcal's own folder (wherever Python imports it from)
    for src/uqcal/..., the working directory (the repository) otherwise."""
    return SRC / rel.removeprefix("src/uqcal/") if rel.startswith("src/uqcal/") else Path(rel)


def _module_file(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != "uqcal":
        return None
    base = SRC.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _closure(roots: tuple[str, ...]) -> frozenset[str]:
    found: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            name = ".".join(parts[:i])
            if name not in found and _module_file(name) is not None:
                found.add(name)
                todo.extend(_imports(name))
    return frozenset(found)


_MODULE_NAME = re.compile(r"^uqcal(\.[A-Za-z_]\w*)+$")


@cache
def _imports(module: str) -> frozenset[str]:
    path = _module_file(module)
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    partial = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
        elif isinstance(node, ast.Constant) and id(node) not in partial and _MODULE_NAME.match(str(node.value)):
            names.add(node.value)  # e.g. {"csv": "uqcal.data.sources.csv"} fed to importlib
    return frozenset(n for n in names if n.startswith("uqcal") and _module_file(n) is not None)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@cache
def _source_sha256(path: Path, _mtime_ns: int, _size: int) -> str:
    return file_sha256(path)


def code_hashes(job: Job) -> dict[str, str]:
    hashes = {}
    for rel in source_files(job):
        path = _source_file(rel).resolve()
        stat = path.stat()
        hashes[rel] = _source_sha256(path, stat.st_mtime_ns, stat.st_size)
    return hashes


# ------------------------------------------------------------------------------------------ specs
def build_spec(config: dict, job: Job, config_path: str) -> dict:
    """What the job is made from, apart from its inputs' content (which the step reads when it runs)."""
    params = {_param_name(path, key, config_path): _value(path, key)
              for path, key in param_keys(config, job, config_path)}
    return {"rule": job.rule, "key": list(job.key), "config": config_path, "params": params,
            "job": payload(config, job), "code": code_hashes(job), "files": file_hashes(local_files(config, job)),
            "upstream": [up.record_path for up in upstream(config, job)]}


def file_hashes(paths: list[str]) -> dict[str, str | None]:
    """{path: sha256} of local input files (None: missing, so that the file appearing changes the job)."""
    hashes = {}
    for rel in paths:
        try:
            stat = os.stat(rel)
        except OSError:
            hashes[rel] = None
            continue
        hashes[rel] = _source_sha256(Path(rel).resolve(), stat.st_mtime_ns, stat.st_size)
    return hashes


def _param_name(path: str, key: str, config_path: str) -> str:
    """A parameter's name in a job's identity: its key, never the file it is read from.

    The same keys and values are the same job whichever config file (or copy of one) holds them, so that a
    config that includes the default's jobs (config/extended.yaml) reruns none of them; a registry entry is
    ``datasets.<name>`` whether it sits in a registry file or inline in the config (DVC's ``params:`` still
    name the file: DVC must know where to read them).
    """
    if path == config_path:
        return key or "(config)"
    return f"datasets.{key}" if key else f"(registry {path})"


def _value(path: str, key: str):
    value = _lookup(_yaml_file(path), key)
    return None if value is _MISSING else value


def input_digests(record_paths: list[str]) -> dict[str, str | None]:
    """Each upstream job's output digest as its record states it (None: not produced yet)."""
    found = {}
    for path in record_paths:
        record = _read_json(path)
        found[path] = record.get("outputs_digest") if record else None
    return found


def identity(spec: dict, inputs: dict) -> str:
    made_of = {k: spec[k] for k in ("rule", "key", "params", "job", "code", "files")}
    return _digest({**made_of, "inputs": inputs})


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def read_record(job: Job) -> dict | None:
    return _read_json(job.record_path)


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, json.JSONDecodeError):
        return None


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


# ------------------------------------------------------------------------------------------ running a job
class JobError(RuntimeError):
    """A job cannot run, or its outputs cannot be committed, as things stand; the message says why and what to do."""


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


def ancestry() -> list[int]:
    """This process's parent and grandparent (Linux: /proc; [] elsewhere).

    A job started by Snakemake or DVC runs under a shell that they started: when the tool is killed alone,
    the shell is re-parented, and the job can tell that whoever started it is gone (``orphaned``).
    """
    found = [os.getppid()]
    try:
        with open(f"/proc/{found[0]}/stat") as fh:
            found.append(int(fh.read().rpartition(")")[2].split()[1]))
    except (OSError, ValueError, IndexError):
        return []
    return found


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


def write_record(job: Job, spec: dict, inputs: dict, started: float) -> dict:
    """Record what the finished job's outputs were made from (its spec and inputs) and what they hold."""
    from uqcal.core.io import write_json

    files = output_files(job)
    record = {**{k: spec[k] for k in ("rule", "key", "config", "params", "job", "code", "files")},
              "inputs": inputs, "identity": identity(spec, inputs), "outputs": files,
              "outputs_digest": _digest(files), "resources": resource_usage(started),
              "imported": imported_sources()}
    write_json(Path(job.record_path), record)
    return record


def imported_sources() -> list[str]:
    """The uqcal source files this process has imported (for people, and for the test that `code` covers them)."""
    found = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and Path(path).resolve().is_relative_to(SRC):
            found.add(f"src/uqcal/{Path(path).resolve().relative_to(SRC).as_posix()}")
    return sorted(found)


def resource_usage(started: float) -> dict[str, float]:
    """This process's wall time since ``started`` (perf_counter), CPU seconds and peak RSS (children included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime
    return {"wall_seconds": round(time.perf_counter() - started, 3), "cpu_seconds": round(cpu, 3),
            "max_rss_mb": round(max(usage.ru_maxrss, children.ru_maxrss) / 1024, 1)}


@contextlib.contextmanager
def running(args, rule: str, key: tuple[str, ...], elsewhere: bool = False) -> Iterator[dict]:
    """A step's job from ``--spec`` (Snakemake) or ``--config`` (DVC, people): lock, run, then record.

    Yields the spec; the step reads ``spec["job"]``. The record is written only if the block succeeds, and
    not at all when the outputs go somewhere else than the pipeline's folders (``elsewhere``, --results-dir).
    """
    if getattr(args, "spec", None):
        job, spec = load_spec(args.spec)
    else:
        from uqcal.pipeline.config import load_config

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
        inputs = input_digests(spec["upstream"])  # read as the job starts: upstream jobs may have just rerun
        yield spec
        write_record(job, spec, inputs, getattr(args, "started", time.perf_counter()))
    if not orphaned(started_under):  # an orphan's rerun follows: its log carries on under the next header
        log.completed()


def _relative(path: str) -> str:
    """A config path as the Snakefile and dvc.yaml write it: relative to the repository when inside it."""
    resolved, cwd = Path(path).resolve(), Path.cwd().resolve()
    return resolved.relative_to(cwd).as_posix() if resolved.is_relative_to(cwd) else str(path)

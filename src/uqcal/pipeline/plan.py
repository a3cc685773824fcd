"""The pipeline's jobs and what each reads: the plan, outputs, inputs, resources, parameters and payload.

One Snakemake job = one DVC stage = one `Job` (a rule and its wildcards). This module says which jobs a config
has (`plan`), what each writes (`outputs`) and reads (`upstream`, `inputs`, `local_files`), the config keys
that are its parameters (`param_keys`, its DVC stage's ``params:``), the resolved slice of config its step runs
from (`payload`) and, for a train job, everything the step needs per seed (`train_seeds`). What a job is made
from is `uqcal.pipeline.identity`; its record and staleness `uqcal.pipeline.records`; its lock and process
`uqcal.pipeline.locks` (docs/ARCHITECTURE.md, "Who decides what is stale").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from uqcal.methods.api import RunContext
    from uqcal.methods.estimator import Method

RECORDS = Path(".uqcal/records")
SPECS = Path(".uqcal/specs")
LOCKS = Path(".uqcal/locks")
RULES = ("materialise", "split", "train", "aggregate", "report")
SEED_PREFIX = "seed"  # a one-seed train job's last key part: seed<k>, its seed's folder (RunLayout.seed_dir_name)


@dataclass(frozen=True)
class Job:
    """One Snakemake job / DVC stage: a rule and its wildcards in rule order."""

    rule: str
    key: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return "/".join(self.key) or self.rule

    @property
    def seed(self) -> int | None:
        """The seed of a train job that runs one seed of its method (``job_shape``), else None."""
        if self.rule == "train" and len(self.key) == 5:
            return int(self.key[4].removeprefix(SEED_PREFIX))
        return None

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
    from uqcal.pipeline.config.registry import raw_dependencies
    from uqcal.pipeline.config.runs import iter_batches, settings_for

    jobs: list[Job] = []
    datasets = sorted({b.dataset for b in iter_batches(config)})
    members = sorted({m for d in datasets for m in raw_dependencies(config, d)} - set(datasets))
    jobs += [Job("materialise", (d,)) for d in members + datasets]
    for family, fam in config["families"].items():
        for dataset in fam["datasets"]:
            jobs += [Job("split", (family, dataset, s)) for s in settings_for(config, family, dataset)]
    batches = list(iter_batches(config))
    # a method built on another's runs comes after it
    jobs += [job for b in batches if not _depends_on(b) for job in train_jobs(config, *_batch_key(b))]
    jobs += [job for b in batches if _depends_on(b) for job in train_jobs(config, *_batch_key(b))]
    jobs += [Job("aggregate", (family,)) for family in config["families"]]
    jobs.append(Job("report"))
    return jobs


def _batch_key(batch) -> tuple[str, str, str, str]:
    return batch.family, batch.dataset, batch.setting, batch.method


def train_jobs(config: dict, family: str, dataset: str, setting: str, method: str) -> list[Job]:
    """The train job(s) of one method's seeds: one job for all of them, or one per seed (`one_seed_per_job`)."""
    job = Job("train", (family, dataset, setting, method))
    if not one_seed_per_job(config, family, dataset, setting, method):
        return [job]
    from uqcal.pipeline.config.runs import seeds_for
    from uqcal.pipeline.layout import RunLayout

    return [Job("train", (*job.key, RunLayout.seed_dir_name(seed)))
            for seed in range(seeds_for(config, family, dataset, setting, method))]


def one_seed_per_job(config: dict, family: str, dataset: str, setting: str, method: str) -> bool:
    """Whether a method's seeds run as one job each: ``job_shape.one_seed_per_job_over_hours`` is set, the method
    runs more than one seed, and its seeds together are expected to take longer than that many CPU hours.

    The expectation is the family's declared work of a seed (``uqcal.methods.api.Family.work``: CPU seconds of
    one thread on the reference machine) times the seeds, from the config alone, so that the jobs (and the DAG)
    never depend on records or measured costs; a family that states no work never splits. A long job split
    this way runs on as many nodes as it has seeds, and its longest job is one seed; each seed's folder holds
    the same files as the whole job's would, so the aggregate and the report read them as before.
    """
    threshold = (config.get("job_shape") or {}).get("one_seed_per_job_over_hours")
    if threshold is None:
        return False
    from uqcal.methods.api import get_family
    from uqcal.pipeline.config.payloads import batch_job

    job = batch_job(config, family, dataset, setting, method)
    if len(job["seeds"]) < 2:
        return False
    work = get_family(family).work_per_seed(job)
    return work is not None and len(job["seeds"]) * work / 3600 > float(threshold)


def _depends_on(batch) -> str | None:
    from uqcal.methods.api import get_entry

    return get_entry(batch.family, batch.method).depends_on


def outputs(job: Job) -> list[str]:
    """The job's artifacts (files or folders), its record apart."""
    from uqcal.pipeline.layout import RunLayout

    layout = RunLayout()
    if job.rule == "materialise":
        return [path.as_posix() for path in layout.raw_files(job.key[0])]
    if job.rule == "split":
        return [layout.split_dir(*job.key).as_posix()]
    if job.rule == "train":  # a one-seed job writes its seed's folder only
        found = layout.method_dir(*job.key[:4]) if job.seed is None else layout.run_dir(*job.key[:4], job.seed)
        return [found.as_posix()]
    if job.rule == "aggregate":
        return [layout.summary(job.key[0]).as_posix(), layout.runs(job.key[0]).as_posix()]
    return ["reports"]


def upstream(config: dict, job: Job) -> list[Job]:
    """The jobs whose outputs this job reads."""
    from uqcal.pipeline.config.registry import raw_dependencies

    if job.rule == "materialise":
        return [Job("materialise", (m,)) for m in raw_dependencies(config, job.key[0])]
    if job.rule == "split":
        return [Job("materialise", (job.key[1],))]
    if job.rule == "train":
        family, dataset, setting, method = job.key[:4]
        found = [Job("materialise", (dataset,)), Job("split", (family, dataset, setting))]
        dep = _entry(family, method).depends_on
        if not dep:
            return found
        # the runs it builds on: a one-seed job reads its own seed's where that method runs one seed a job too
        deps = train_jobs(config, family, dataset, setting, dep)
        if job.seed is not None and deps[0].seed is not None:
            deps = [up for up in deps if up.seed == job.seed]
        return found + deps
    if job.rule == "aggregate":
        return [train for b in _batches(config, job.key[0]) for train in train_jobs(config, *_batch_key(b))]
    # The report: every family's tables, and its runs' folders for what is not a metric (uqcal.pipeline.report.results).
    aggregates = [Job("aggregate", (family,)) for family in config["families"]]
    return aggregates + [up for job in aggregates for up in upstream(config, job)]


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


def _batches(config: dict, family: str):
    from uqcal.pipeline.config.runs import iter_batches

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


def job_threads(config: dict, family: str, dataset: str, method: str) -> int:
    """A train job's intra-op threads: its resources' ``torch_threads`` (``cpus``: as many as the cores it asks for,
    for conv-bound jobs on CPU nodes), else the config's ``torch_threads``."""
    asked = resources(config, family, dataset, method)
    threads = asked.get("torch_threads", config.get("torch_threads", 1))
    return int(asked["cpus"]) if threads == "cpus" else int(threads)


# ------------------------------------------------------------------------------------------ parameters
def param_keys(config: dict, job: Job, config_path: str) -> list[tuple[str, str]]:
    """(params file, dotted key) pairs the job reads from the config files: its DVC stage's `params:`.

    Only keys that change what the job computes: not the selectors that decide which jobs exist (a setting's
    or a method's ``datasets``, a method's ``settings``), not another dataset's entry of a per-dataset table,
    not a registry entry's report labels (``uqcal.pipeline.config.registry.DISPLAY_KEYS``). So a config that
    selects the same job differently (config/extended.yaml runs cv5_shuffled on every dataset) leaves it current.
    A config that ``extends`` others names each key in the file(s) its value comes from
    (``uqcal.pipeline.config.source.ComposedConfig.defined_in``): an inherited value is the parent's parameter.
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
    from uqcal.pipeline.config.registry import registry_files

    return [*((path, "") for path in _config_files(config_path)), *((path, "") for path in registry_files(config))]


def _entry_keys(path: str, prefix: str, dataset: str, drop: tuple[str, ...]) -> list[str]:
    """The keys of a setting's or method's entry that a job on ``dataset`` reads: every key but ``drop``; of a
    per-dataset table (``seeds: {dataset: n}``, ``per_dataset``), ``dataset``'s entry only."""
    entry = _lookup(_composed(path).data, prefix)
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
    from uqcal.pipeline.config.registry import DISPLAY_KEYS

    path, key = _registry_key(config, dataset, config_path)
    if path == config_path:  # the config's own `datasets` (or a config's it extends): where each key is set
        entry = _lookup(_composed(path).data, key)
        return _present(path, [f"{key}.{name}" for name in entry if name not in DISPLAY_KEYS])
    entry = _lookup(_yaml_file(path), key)
    return [(path, f"{key}.{name}") for name in entry if name not in DISPLAY_KEYS]


def _registry_key(config: dict, dataset: str, config_path: str) -> tuple[str, str]:
    """Where a dataset's registry entry comes from: the config itself, else the last registry file naming it."""
    if dataset in config.get("datasets_inline", []):
        return config_path, f"datasets.{dataset}"
    from uqcal.pipeline.config.registry import DEFAULT_REGISTRY, registry_files

    found = DEFAULT_REGISTRY[0]
    for path in registry_files(config):
        if dataset in (_yaml_file(path) or {}):
            found = path
    return found, dataset


def _present(path: str, keys: list[str]) -> list[tuple[str, str]]:
    """The keys the config has, each named in every file its value comes from (the config itself, or a config
    it extends; several when their mappings merge); a missing key is left out: DVC refuses a stage whose params
    name a missing key."""
    composed = _composed(path)
    return [(file, key) for key in keys for file in composed.defined_in(key)]


def _composed(config_path: str):
    """The config as composed from the files it extends (cached until one of them changes)."""
    from uqcal.pipeline.config.source import compose

    return compose(config_path)


def _config_files(config_path: str) -> tuple[str, ...]:
    """The config file and every file it extends."""
    return _composed(config_path).files


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


def param_values(config: dict, job: Job, config_path: str) -> dict:
    """The job's parameters, {name: value}, as its identity holds them (`param_keys`, named by `_param_name`)."""
    composed = _composed(config_path)  # once a job, not once a key: each compose stats every file it is made of
    return {_param_name(path, key, composed.files): _value(path, key, composed)
            for path, key in param_keys(config, job, config_path)}


def _param_name(path: str, key: str, config_files: tuple[str, ...]) -> str:
    """A parameter's name in a job's identity: its key, never the file it is read from.

    The same keys and values are the same job whichever config file (or copy of one) holds them, so that a
    config that includes the default's jobs (config/extended.yaml) reruns none of them; a registry entry is
    ``datasets.<name>`` whether it sits in a registry file or inline in the config (DVC's ``params:`` still
    name the file: DVC must know where to read them).
    """
    if path in config_files:  # a value of the composed config, whichever file sets it
        return key or "(config)"
    return f"datasets.{key}" if key else f"(registry {path})"


def _value(path: str, key: str, composed):
    data = composed.data if path in composed.files else _yaml_file(path)
    value = _lookup(data, key)
    return None if value is _MISSING else value


# ------------------------------------------------------------------------------------------ payload
def payload(config: dict, job: Job) -> dict:
    """The resolved slice of config the step runs from (registry entry, method defaults and overrides applied)."""
    from uqcal.pipeline.config.payloads import batch_job, dataset_job, split_batch_job

    if job.rule == "materialise":
        return dataset_job(config, job.key[0])
    if job.rule == "split":
        return split_batch_job(config, *job.key)
    if job.rule == "train":
        found = {**batch_job(config, *job.key[:4]), "torch_threads": job_threads(config, *job.key[:2], job.key[3])}
        if job.seed is not None:  # one seed of the method's: the same job description, its seed alone
            found["seeds"] = [job.seed]
        return found
    if job.rule == "aggregate":
        fam = config["families"][job.key[0]]
        return {"family": job.key[0], "family_config": {k: v for k, v in fam.items() if k != "resources"}}
    # The report reads the whole (validated, registry-merged) config: it runs from it, not from the file,
    # so that it does not validate again (validation imports every method's module).
    return {"config": config}


# ------------------------------------------------------------------------------------------ a train job's seeds
def configured_job(config_path: str | None, job: Job) -> dict:
    """`payload` of a job from a config file, the whole config validated (``uqcal train --seed``, ``uqcal evaluate``)."""
    from uqcal.pipeline.config.load import load_config

    return payload(load_config(config_path or "config/config.yaml"), job)


@dataclass
class TrainSeed:
    """One seed of a train job, resolved: its RunContext, a fresh instance of its method, and its job's digest
    (the single-seed job's, which names the seed's resume folder: uqcal.core.resume)."""

    ctx: RunContext
    method: Method
    digest: str


def train_seeds(job: dict, results_dir: str | Path = "results", data_dir: str | Path = "data",
                seeds: list[int] | None = None) -> list[TrainSeed]:
    """A train job's payload (every seed of one method: `payload`, or a spec's ``job``) resolved into what each
    seed's run needs: the one place a train job's description becomes RunContexts.

    ``seeds`` replaces the job's seeds (one ``--seed``). Sets torch's intra-op threads (``torch_threads``).
    """
    import logging

    from uqcal.core.device import resolve_device
    from uqcal.core.numerics import configure_torch
    from uqcal.methods.api import RunContext, get_entry, register_job_family
    from uqcal.pipeline.config.payloads import job_digest, per_seed_jobs
    from uqcal.pipeline.layout import RunLayout

    register_job_family(job)

    if seeds is not None:
        job = {**{k: v for k, v in job.items() if k != "seeds"}, "seeds": list(seeds)}
    family, dataset, setting, method = job["family"], job["dataset"], job["setting"], job["method"]
    cls = get_entry(family, method).load_class()
    configure_torch(threads=int(job.get("torch_threads", 1)))  # and the numerics `uqcal` pinned at start
    layout = RunLayout(results_dir, data_dir)
    found = []
    for one in per_seed_jobs(job):
        seed = int(one["seed"])
        depends_on = one.get("depends_on")
        ctx = RunContext(
            family=family, dataset=dataset, setting=setting, method=method, seed=seed, config=one,
            dataset_spec=one["dataset_spec"], setting_params=one["setting_params"],
            family_params=one["family_params"], params=one["params"],
            run_dir=layout.run_dir(family, dataset, setting, method, seed),
            split_path=layout.split_path(family, dataset, setting, seed),
            raw_path=layout.raw_files(dataset)[0],
            depends_dir=layout.run_dir(family, dataset, setting, depends_on, seed) if depends_on else None,
            device=resolve_device(one.get("device", "auto")), log=logging.getLogger(f"uqcal.{method}"),
        )
        found.append(TrainSeed(ctx, cls(ctx.params), job_digest(one)))
    return found

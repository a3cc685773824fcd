"""The resolved slice of config each job runs from (what a step receives in its spec's ``job``)."""

from __future__ import annotations

import hashlib
import json

from uqcal.methods.api import get_entry, resolve_params
from uqcal.pipeline.config.registry import DISPLAY_KEYS, raw_dependencies
from uqcal.pipeline.config.runs import Run, seeds_for, setting_params


def job_spec(config: dict, dataset: str) -> dict:
    """A dataset's registry entry as jobs see it: without the report-only labels (DISPLAY_KEYS)."""
    return {k: v for k, v in config["datasets"][dataset].items() if k not in DISPLAY_KEYS}


def dataset_job(config: dict, dataset: str) -> dict:
    """Everything materialising one dataset depends on."""
    deps = {name: job_spec(config, name) for name in raw_dependencies(config, dataset)}
    return {"dataset": dataset, "spec": job_spec(config, dataset), "members": deps}


def job_params(family: str, method: str, params: dict | None, dataset: str) -> dict:
    """A method's resolved parameters for one dataset's jobs: a ``per_dataset`` table keeps only that
    dataset's entry, so adding or editing another dataset's entry reruns none of this dataset's jobs."""
    resolved = resolve_params(family, method, params)
    if isinstance(resolved.get("per_dataset"), dict):
        resolved["per_dataset"] = {k: v for k, v in resolved["per_dataset"].items() if k == dataset}
    return resolved


def split_job(config: dict, family: str, dataset: str, setting: str, seed: int) -> dict:
    fam = config["families"][family]
    return {
        "family": family,
        "dataset": dataset,
        "setting": setting,
        "seed": seed,
        "dataset_spec": job_spec(config, dataset),
        "split_params": {**(fam.get("split") or {}), **setting_params(config, family, setting)},
        **_family_package(fam),
    }


def _family_package(fam: dict) -> dict:
    """A plug-in family's package (and its declared folder) travels with its jobs
    (uqcal.methods.api.register_job_family); uqcal's own families add nothing, so their jobs' identities do not
    depend on where the registry looks."""
    found = {"family_package": fam["package"]} if fam.get("package") else {}
    return {**found, "family_path": fam["path"]} if fam.get("path") else found


def run_job(config: dict, run: Run) -> dict:
    """The resolved slice of config one train/evaluate job depends on (passed as JSON by the Snakefile)."""
    fam = config["families"][run.family]
    entry = get_entry(run.family, run.method)
    return {
        "family": run.family,
        "dataset": run.dataset,
        "setting": run.setting,
        "method": run.method,
        "seed": run.seed,
        "dataset_spec": job_spec(config, run.dataset),
        "family_params": {"split": fam.get("split") or {},
                          "seeds": seeds_for(config, run.family, run.dataset, run.setting)},
        "setting_params": setting_params(config, run.family, run.setting),
        "params": job_params(run.family, run.method, fam["methods"][run.method], run.dataset),
        "target": entry.target,  # the registry entry itself (its overrides are in params)
        "depends_on": entry.depends_on,
        "device": config.get("device", "auto"),
        "torch_threads": config.get("torch_threads", 1),
        **_family_package(fam),
    }


def batch_job(config: dict, family: str, dataset: str, setting: str, method: str) -> dict:
    """``run_job`` for every seed of a method at once: the same slice of config, with ``seeds`` for ``seed``."""
    job = run_job(config, Run(family, dataset, setting, method, 0))
    del job["seed"]
    job["seeds"] = list(range(seeds_for(config, family, dataset, setting, method)))
    return job


def split_batch_job(config: dict, family: str, dataset: str, setting: str) -> dict:
    job = split_job(config, family, dataset, setting, 0)
    del job["seed"]
    job["seeds"] = list(range(seeds_for(config, family, dataset, setting)))
    return job


def per_seed_jobs(job: dict) -> list[dict]:
    """Split a batch job (``seeds``) into single-seed jobs (``seed``); a single-seed job is returned as is."""
    if "seeds" not in job:
        return [job]
    base = {k: v for k, v in job.items() if k != "seeds"}
    return [{**base, "seed": int(seed)} for seed in job["seeds"]]


def job_digest(job: dict) -> str:
    return hashlib.sha256(json.dumps(job, sort_keys=True, default=str).encode()).hexdigest()[:16]

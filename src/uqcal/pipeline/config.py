"""Configuration: loading, the dataset registry, validation, and the run plan.

The same functions serve the Snakefile (which passes each job its resolved slice of the config) and the
command line (`uqcal ... --config FILE`), so both see exactly the same jobs.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from uqcal.methods.api import builtin_families, get_entry, get_family, method_table, register_family, resolve_params

SCHEMA_RELPATH = Path("workflow/schemas/config.schema.yaml")


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key path."""


def repo_root_for(config_path: str | Path | None = None) -> Path:
    """The repository root: the nearest ancestor of the config (or cwd) holding the workflow schema."""
    start = Path(config_path).resolve().parent if config_path else Path.cwd()
    for candidate in [start, *start.parents]:
        if (candidate / SCHEMA_RELPATH).exists():
            return candidate
    return Path.cwd()


def load_yaml(path: str | Path) -> Any:
    """A YAML file as plain data (``yaml.safe_load``: no templating, no Python objects); a tag such as
    ``!!python/object`` or a syntax error is a ConfigError naming the file, the line and the tag."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    try:
        with path.open() as fh:
            return yaml.safe_load(fh) or {}
    except yaml.constructor.ConstructorError as error:
        mark = error.problem_mark
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        tag = re.search(r"tag '([^']+)'", str(error.problem))
        what = f"the tag {tag.group(1)!r}" if tag else "a value"
        raise ConfigError(f"{where}: {what} is not plain YAML ({error.problem}); uqcal reads configs as plain data "
                          "(mappings, lists, strings, numbers, booleans) and never builds Python objects from "
                          "them: write the value out instead") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None


# Snakemake evaluates a config file holding this key as a YTE template: Python in it runs at load time.
YTE_KEY = "__use_yte__"


def check_raw_config(path: str | Path) -> dict:
    """The raw config file, read as plain data, before Snakemake (or anything else) evaluates it: a YTE
    template (``__use_yte__``) is refused, since Snakemake would run the Python code in it while loading."""
    config = load_yaml(path)
    if isinstance(config, dict) and YTE_KEY in config:
        raise ConfigError(
            f"{path}: `{YTE_KEY}` makes Snakemake evaluate this file as a YTE template, which runs the Python "
            "code in it before uqcal validates anything; uqcal configs are plain YAML. Remove the key and write "
            "the values out"
        )
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: a config must be a mapping of keys to values, got {type(config).__name__}")
    return config


LOCAL_EXECUTORS = (None, "local", "dryrun", "touch")


def profile_problem(argv: list[str], environ: dict[str, str] | None = None) -> str | None:
    """Why a Snakemake command line must not go on: it names a cluster profile with ``--profile`` (or
    ``SNAKEMAKE_PROFILE``). Snakemake then still loads the workflow profile ``workflow/profiles/default``,
    whose keys win: its ``cores: all`` caps every cluster job's threads at the submit host's cores (a job
    with ``cpus: 4`` gets 2 on a 2-core login node), and its ``latency-wait: 10`` and ``keep-going: false``
    replace the cluster profile's. ``--workflow-profile`` replaces the default profile instead."""
    values = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--profile"]
    values += [arg.split("=", 1)[1] for arg in argv if arg.startswith("--profile=")]
    if (environ or {}).get("SNAKEMAKE_PROFILE"):
        values.append(environ["SNAKEMAKE_PROFILE"])
    for value in values:
        path = Path(value)
        path = path / "config.yaml" if path.is_dir() else path
        try:
            executor = (yaml.safe_load(path.read_text()) or {}).get("executor") if path.is_file() else None
        except (OSError, yaml.YAMLError, AttributeError):
            continue
        if executor not in LOCAL_EXECUTORS:
            return (f"--profile {value} (executor {executor}) is not applied as written: Snakemake also loads "
                    "workflow/profiles/default, whose cores (this machine's: every cluster job's threads capped "
                    "at them, whatever its `cpus`), latency-wait 10 and keep-going false override it. Use "
                    f"`snakemake --workflow-profile {value} --configfile <config>` (README, \"SLURM\")")
    return None


def load_config(path: str | Path, root: Path | None = None, method_families: Collection[str] | None = None) -> dict:
    """Read, validate and resolve a config file (dataset registry merged in).

    ``method_families``: check the method parameters of these families only (``check_semantics``).
    """
    config = check_raw_config(path)
    return prepare_config(config, root or repo_root_for(path), method_families)


def prepare_config(config: dict, root: Path | None = None, method_families: Collection[str] | None = None) -> dict:
    """Validate ``config`` and return a copy whose ``datasets`` holds the merged registry."""
    root = root or repo_root_for()
    validate_schema(config, root)
    config = copy.deepcopy(config)
    register_families(config)
    validate_family_keys(config)
    registry: dict[str, Any] = {}
    for rel in config.get("dataset_registry", ["config/datasets.yaml"]):
        path = root / rel
        if not path.exists():
            raise ConfigError(f"dataset_registry: file {rel} not found (looked in {root})")
        entries = load_yaml(path)
        if not isinstance(entries, dict):
            raise ConfigError(f"dataset_registry: {rel} must map dataset names to entries")
        registry.update(entries)
    inline = config.get("datasets") or {}
    registry.update(inline)
    config["datasets"] = registry
    config["datasets_inline"] = sorted(inline)  # where each entry lives matters for DVC params
    config.setdefault("device", "auto")
    config.setdefault("torch_threads", 1)
    validate_schema({"families": {}, "datasets": registry}, root)
    check_semantics(config, root, method_families)
    return config


def validate_schema(config: dict, root: Path) -> None:
    import jsonschema

    schema_path = root / SCHEMA_RELPATH
    if not schema_path.exists():
        return
    _raise_first_error(jsonschema.Draft202012Validator(load_yaml(schema_path)), config, ())


def _raise_first_error(validator, instance: Any, where: tuple[str, ...]) -> None:
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        key = ".".join(str(p) for p in (*where, *err.absolute_path)) or "(top level)"
        message = err.message
        if err.validator in ("additionalProperties", "unevaluatedProperties"):
            message = _unknown_key_message(err)
        raise ConfigError(f"config key {key}: {message}")


def register_families(config: dict) -> None:
    """Every family a config names: uqcal's own (``uqcal.methods.<name>``), or a plug-in package
    (``families.<name>.package``, any importable module defining ``FAMILY``)."""
    for name, fam in config["families"].items():
        if fam.get("package"):
            register_family(name, fam["package"])
        try:
            get_family(name)
        except (KeyError, ImportError) as exc:
            raise ConfigError(f"families.{name}: {exc.args[0] if isinstance(exc, KeyError) else exc}") from None


# The run selectors a setting takes beside its split keys (SETTING_SELECTORS).
_RUN_SELECTORS = {
    "datasets": {"type": "array", "items": {"type": "string"}},
    "seeds": {"oneOf": [{"type": "integer", "minimum": 1},
                        {"type": "object", "minProperties": 1, "additionalProperties": {"type": "integer", "minimum": 1}}]},
}


def validate_family_keys(config: dict) -> None:
    """A family's ``split:`` and settings take the keys its splitter and its methods read (``Splitter.keys``,
    ``Family.setting_keys``); any other key fails, naming it and the closest known one."""
    import jsonschema

    for name, fam in config["families"].items():
        family = get_family(name)
        keys = {**family.load_splitter().keys, **family.setting_keys}
        split = jsonschema.Draft202012Validator({"type": "object", "additionalProperties": False, "properties": keys})
        _raise_first_error(split, fam.get("split") or {}, ("families", name, "split"))
        setting = jsonschema.Draft202012Validator(
            {"type": "object", "additionalProperties": False, "properties": {**keys, **_RUN_SELECTORS}})
        for setting_name, values in fam["settings"].items():
            _raise_first_error(setting, values or {}, ("families", name, "settings", setting_name))


def _unknown_key_message(err) -> str:
    """``unknown key 'test_frac'; did you mean 'test_fraction'? known: ...`` for an additionalProperties error."""
    known = sorted((err.schema.get("properties") or {}) if isinstance(err.schema, dict) else {})
    unknown = sorted(k for k in (err.instance if isinstance(err.instance, dict) else {}) if k not in known)
    if not unknown or not known:
        return f"unknown key: {err.message}"
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.5)
        parts.append(f"unknown key {name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"{'; '.join(parts)}; known keys: {', '.join(known)}"


def check_semantics(config: dict, root: Path | None = None, method_families: Collection[str] | None = None) -> None:
    """Cross-references that a schema cannot express: datasets, kinds, methods and their parameters; then
    everything about the datasets and splits the config alone decides (uqcal.data.validate), all reported
    at once. ``root`` is the repository (the dataset registry's files are relative to it).

    Checking a method's parameters imports its module (torch, gpytorch, botorch, ...: seconds per process).
    ``method_families`` limits that check to the given families, for a step that runs one job from
    ``--config`` (a DVC stage): Snakemake and ``uqcal dvc-sync`` have checked the whole config already, and
    the job's own family is checked again. None (the default) checks every family."""
    datasets = config["datasets"]
    for name, spec in datasets.items():
        if spec["source"]["type"] == "composite":
            for side in ("train", "test"):
                member = spec["source"].get(side)
                if member not in datasets:
                    raise ConfigError(f"datasets.{name}.source.{side}: unknown dataset {member!r}")
    for family, fam in config["families"].items():
        for i, ds in enumerate(fam["datasets"]):
            if ds not in datasets:
                raise ConfigError(
                    f"families.{family}.datasets[{i}]: unknown dataset {ds!r}; "
                    f"known: {', '.join(sorted(datasets))}"
                )
            kind, task = datasets[ds]["kind"], get_family(family).task
            if kind != task:
                raise ConfigError(
                    f"families.{family}.datasets[{i}]: dataset {ds!r} is {kind}, family {family} needs {task}"
                )
        for setting, params in fam["settings"].items():
            for ds in (params or {}).get("datasets", []):
                if ds not in fam["datasets"]:
                    raise ConfigError(
                        f"families.{family}.settings.{setting}.datasets: {ds!r} is not in "
                        f"families.{family}.datasets"
                    )
            _check_seed_datasets(params, fam, f"families.{family}.settings.{setting}.seeds", family)
        for ds in ((fam.get("resources") or {}).get("per_dataset") or {}):
            if ds not in fam["datasets"]:
                raise ConfigError(
                    f"families.{family}.resources.per_dataset.{ds}: {ds!r} is not in families.{family}.datasets"
                )
        table = method_table(family)
        load_classes = method_families is None or family in method_families
        for method, res in ((fam.get("resources") or {}).get("per_method") or {}).items():
            if method not in fam["methods"]:
                raise ConfigError(
                    f"families.{family}.resources.per_method.{method}: {method!r} is not in families.{family}.methods"
                )
            if load_classes and (res or {}).get("gpu") and method in table and table[method].load_class().cpu_only:
                raise ConfigError(
                    f"families.{family}.resources.per_method.{method}.gpu: method {method!r} never uses a GPU"
                )
        for method, params in fam["methods"].items():
            if method not in table:
                raise ConfigError(
                    f"families.{family}.methods.{method}: unknown method; known: {', '.join(sorted(table))}"
                )
            if load_classes:
                try:
                    resolve_params(family, method, params)
                except (KeyError, ValueError) as exc:
                    raise ConfigError(exc.args[0]) from None
            for key, allowed in (("datasets", fam["datasets"]), ("settings", list(fam["settings"]))):
                for item in (params or {}).get(key, []):
                    if item not in allowed:
                        raise ConfigError(
                            f"families.{family}.methods.{method}.{key}: {item!r} is not in "
                            f"families.{family}.{key}"
                        )
            dep = table[method].depends_on
            if dep and dep not in fam["methods"]:
                raise ConfigError(
                    f"families.{family}.methods.{method}: depends on method {dep!r}, which is not configured"
                )
            _check_seed_datasets(params, fam, f"families.{family}.methods.{method}.seeds", family)
            for ds in fam["datasets"]:
                for setting in settings_for(config, family, ds):
                    if method not in methods_for(config, family, ds, setting):
                        continue
                    count = seeds_for(config, family, ds, setting, method)  # raises past the setting's count
                    base = seeds_for(config, family, ds, setting, dep) if dep else count
                    if count > base:
                        raise ConfigError(
                            f"families.{family}.methods.{method}.seeds: {count} for {ds}/{setting}, more than the "
                            f"{base} runs of {dep!r} that it builds on"
                        )
    known = {*builtin_families(), *config["families"]}
    for section in ("budget_notes", "claim_runs"):
        for name in (config.get("report") or {}).get(section) or {}:
            if name not in known:
                raise ConfigError(f"report.{section}.{name}: unknown family; known: {', '.join(sorted(known))}")
    problems = data_problems(config, root)
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n{listed}")


def _check_seed_datasets(entry: dict | None, fam: dict, key: str, family: str) -> None:
    """A ``seeds: {dataset: n}`` selector (of a setting or a method) names only the family's datasets."""
    seeds = (entry or {}).get("seeds")
    for ds in seeds if isinstance(seeds, dict) else []:
        if ds not in fam["datasets"]:
            raise ConfigError(f"{key}: {ds!r} is not in families.{family}.datasets")


def data_problems(config: dict, root: Path | None = None) -> list[str]:
    """Dataset entries, split parameters, methods' ``per_dataset`` tables and ``paper_dataset`` names."""
    from uqcal.data.validate import config_problems

    split_problems = {name: get_family(name).load_splitter().problems for name in config["families"]}
    problems = config_problems(config, split_problems, sorted({*builtin_families(), *config["families"]}))
    for family, fam in config["families"].items():
        for method, params in fam["methods"].items():
            table = (params or {}).get("per_dataset")
            if table is None:
                continue
            key = f"families.{family}.methods.{method}.per_dataset"
            if not isinstance(table, dict):
                problems.append(f"{key}: must map dataset -> {{param: value}}, got {table!r}")
                continue
            defaults = get_entry(family, method).load_class().defaults
            for dataset, override in table.items():
                if dataset not in fam["datasets"]:
                    problems.append(f"{key}.{dataset}: {dataset!r} is not in families.{family}.datasets")
                elif not isinstance(override, dict):
                    problems.append(f"{key}.{dataset}: must map parameter -> value, got {override!r}")
                else:
                    unknown = sorted(set(override) - set(defaults) - {"per_dataset"})
                    if unknown:
                        problems.append(f"{key}.{dataset}: unknown parameter(s) {unknown}; accepted: "
                                        f"{', '.join(sorted(set(defaults) - {'per_dataset'}))}")
    from uqcal.pipeline.reference import paper_dataset_problems

    problems += paper_dataset_problems(config)
    return problems


@dataclass(frozen=True)
class Run:
    family: str
    dataset: str
    setting: str
    method: str
    seed: int

    @property
    def run_dir(self) -> str:
        return f"results/{self.family}/{self.dataset}/{self.setting}/{self.method}/seed{self.seed}"

    @property
    def split_path(self) -> str:
        return split_path(self.family, self.dataset, self.setting, self.seed)


def split_dir(family: str, dataset: str, setting: str) -> str:
    return f"data/splits/{family}/{dataset}/{setting}"


def split_path(family: str, dataset: str, setting: str, seed: int) -> str:
    return f"{split_dir(family, dataset, setting)}/seed{seed}.json"


def settings_for(config: dict, family: str, dataset: str) -> list[str]:
    fam = config["families"][family]
    return [
        name
        for name, params in fam["settings"].items()
        if "datasets" not in (params or {}) or dataset in params["datasets"]
    ]


# Keys of a setting that choose which runs exist, not how a run splits or trains: never passed to a job.
SETTING_SELECTORS = ("datasets", "seeds")


def _selected_seeds(entry: dict | None, dataset: str):
    """An entry's ``seeds`` selector for `dataset`: an integer for every dataset, ``{dataset: integer}`` for
    those named, or None."""
    value = (entry or {}).get("seeds")
    return value.get(dataset) if isinstance(value, dict) else value


def seeds_for(config: dict, family: str, dataset: str, setting: str, method: str | None = None) -> int:
    """How many seeds (splits, folds, repeats) a (dataset, setting) runs: the setting's ``seeds`` over the
    family's. With `method`, how many of them that method runs: its own ``seeds`` (the first ones, so its
    paired comparisons with the setting's other methods use the same splits), never more than the setting's."""
    fam = config["families"][family]
    override = _selected_seeds(fam["settings"][setting], dataset)
    count = int(fam["seeds"] if override is None else override)
    if method is not None:
        own = _selected_seeds(fam["methods"][method], dataset)
        if own is not None:
            if int(own) > count:
                raise ConfigError(f"families.{family}.methods.{method}.seeds: {own} for {dataset}/{setting}, "
                                  f"more than the {count} seeds the setting runs")
            count = int(own)
    return count


def setting_params(config: dict, family: str, setting: str) -> dict:
    """What a setting passes to its jobs: its parameters without the run selectors (SETTING_SELECTORS)."""
    params = config["families"][family]["settings"][setting] or {}
    return {k: v for k, v in params.items() if k not in SETTING_SELECTORS}


def methods_for(config: dict, family: str, dataset: str, setting: str) -> list[str]:
    fam = config["families"][family]
    chosen = []
    for name, params in fam["methods"].items():
        params = params or {}
        if "datasets" in params and dataset not in params["datasets"]:
            continue
        if "settings" in params and setting not in params["settings"]:
            continue
        chosen.append(name)
    return chosen


@dataclass(frozen=True)
class Batch:
    """All seeds of one (family, dataset, setting, method): the unit one train job runs in one process.

    Batching seeds pays the interpreter and torch start-up once per method instead of once per seed, and
    keeps a cluster run to hundreds of jobs instead of tens of thousands (see docs/ARCHITECTURE.md).
    """

    family: str
    dataset: str
    setting: str
    method: str
    seeds: tuple[int, ...]

    @property
    def runs(self) -> list[Run]:
        return [Run(self.family, self.dataset, self.setting, self.method, seed) for seed in self.seeds]

    @property
    def method_dir(self) -> str:
        return f"results/{self.family}/{self.dataset}/{self.setting}/{self.method}"

    @property
    def split_dir(self) -> str:
        return split_dir(self.family, self.dataset, self.setting)

    @property
    def stage_name(self) -> str:
        return f"{self.family}-{self.dataset}-{self.setting}-{self.method}"


def iter_runs(config: dict, families: list[str] | None = None) -> Iterator[Run]:
    for batch in iter_batches(config, families):
        yield from batch.runs


def iter_batches(config: dict, families: list[str] | None = None) -> Iterator[Batch]:
    for family in families or list(config["families"]):
        fam = config["families"][family]
        for dataset in fam["datasets"]:
            for setting in settings_for(config, family, dataset):
                for method in methods_for(config, family, dataset, setting):
                    yield Batch(family, dataset, setting, method,
                                tuple(range(seeds_for(config, family, dataset, setting, method))))


def raw_dependencies(config: dict, dataset: str) -> list[str]:
    """Datasets whose raw tables a dataset is built from (composite sources), itself excluded."""
    source = config["datasets"][dataset]["source"]
    if source["type"] == "composite":
        return [source["train"], source["test"]]
    return []


# Registry keys that only label a dataset in the report: editing them reruns no job.
DISPLAY_KEYS = ("stands_in_for", "paper_dataset", "note")


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
    """A plug-in family's package travels with its jobs (uqcal.methods.api.register_job_family); uqcal's own
    families add nothing, so their jobs' identities do not depend on where the registry looks."""
    return {"family_package": fam["package"]} if fam.get("package") else {}


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


def config_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


__all__ = [
    "ConfigError",
    "Batch",
    "Run",
    "batch_job",
    "dataset_job",
    "iter_batches",
    "per_seed_jobs",
    "split_batch_job",
    "iter_runs",
    "load_config",
    "prepare_config",
    "run_job",
    "split_job",
]

"""Cross-references that a schema cannot express: datasets and their kinds, methods and their parameters,
seed counts; then what uqcal.data.validate checks of the datasets and splits the config alone decides."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from uqcal.methods.api import builtin_families, get_entry, get_family, method_table, resolve_params
from uqcal.pipeline.config.runs import methods_for, seeds_for, settings_for
from uqcal.pipeline.config.source import ConfigError


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
            kind = datasets[ds]["kind"]
            task = get_family(family).task
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
    from uqcal.pipeline.paper_numbers import paper_dataset_problems

    problems += paper_dataset_problems(config)
    return problems

"""The runs a (prepared) config plans: which datasets, settings, methods and seeds, batched per train job."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from uqcal.pipeline.config.source import ConfigError
from uqcal.pipeline.layout import RunLayout


@dataclass(frozen=True)
class Run:
    family: str
    dataset: str
    setting: str
    method: str
    seed: int

    @property
    def run_dir(self) -> str:
        return RunLayout().run_dir(self.family, self.dataset, self.setting, self.method, self.seed).as_posix()

    @property
    def split_path(self) -> str:
        return RunLayout().split_path(self.family, self.dataset, self.setting, self.seed).as_posix()


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
        return RunLayout().method_dir(self.family, self.dataset, self.setting, self.method).as_posix()

    @property
    def split_dir(self) -> str:
        return RunLayout().split_dir(self.family, self.dataset, self.setting).as_posix()

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

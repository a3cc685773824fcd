"""The dataset registry: the files named by ``dataset_registry`` (config/datasets.yaml when it names none),
overlaid entry by entry by the config's own ``datasets``. Read here and nowhere else."""

from __future__ import annotations

from pathlib import Path

from uqcal.pipeline.config.names import check_name
from uqcal.pipeline.config.source import ConfigError, load_yaml

DEFAULT_REGISTRY = ("config/datasets.yaml",)

# Registry keys that only label a dataset in the report: editing them reruns no job.
DISPLAY_KEYS = ("stands_in_for", "paper_dataset", "note")


def registry_files(config: dict) -> list[str]:
    """The registry files a config reads, repository-relative, in overlay order."""
    return list(config.get("dataset_registry", DEFAULT_REGISTRY))


def dataset_registry(config: dict, root: Path) -> dict:
    """Every dataset entry the config can name: its registry files (relative to the repository ``root``), the
    later file winning, then its own ``datasets``. A missing file or one that is not a mapping is a ConfigError."""
    registry: dict = {}
    for rel in registry_files(config):
        path = Path(root) / rel
        if not path.exists():
            raise ConfigError(f"dataset_registry: file {rel} not found (looked in {root})")
        entries = load_yaml(path)
        if not isinstance(entries, dict):
            raise ConfigError(f"dataset_registry: {rel} must map dataset names to entries")
        for name in entries:
            check_name(name, f"dataset_registry: {rel}", "dataset")
        registry.update(entries)
    registry.update(config.get("datasets") or {})
    return registry


def raw_dependencies(config: dict, dataset: str) -> list[str]:
    """Datasets whose raw tables a dataset is built from (composite sources), itself excluded."""
    source = config["datasets"][dataset]["source"]
    if source["type"] == "composite":
        return [source["train"], source["test"]]
    return []

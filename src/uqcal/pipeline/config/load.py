"""A config file (or its composed data) to the validated, registry-merged config every step runs from."""

from __future__ import annotations

import copy
from collections.abc import Collection
from pathlib import Path

from uqcal.methods.api import get_family, register_family
from uqcal.pipeline.config.names import check_config_counts, check_config_names
from uqcal.pipeline.config.registry import dataset_registry
from uqcal.pipeline.config.schema import validate_family_keys, validate_schema
from uqcal.pipeline.config.semantics import check_semantics
from uqcal.pipeline.config.source import EXTENDS_KEY, ConfigError, check_raw_config, repo_root_for


def load_config(path: str | Path, root: Path | None = None, method_families: Collection[str] | None = None) -> dict:
    """Read (``extends`` composed), validate and resolve a config file (dataset registry merged in).

    ``method_families``: check the method parameters of these families only (``check_semantics``).
    """
    config = check_raw_config(path)
    return prepare_config(config, root or repo_root_for(path), method_families)


def prepare_config(config: dict, root: Path | None = None, method_families: Collection[str] | None = None) -> dict:
    """Validate ``config`` (composed: no ``extends`` left) and return a copy whose ``datasets`` holds the merged
    registry."""
    if EXTENDS_KEY in config:
        raise ConfigError(f"`{EXTENDS_KEY}: {config[EXTENDS_KEY]}` is resolved when a config is read from its file: "
                          "compose it first (uqcal.pipeline.config.source.compose(path, data).data)")
    root = root or repo_root_for()
    check_config_names(config)  # before the schema: one line naming the bad name, whatever else is wrong
    check_config_counts(config)  # before anything expands the seeds into runs
    validate_schema(config, root)
    config = copy.deepcopy(config)
    register_families(config)
    validate_family_keys(config)
    registry = dataset_registry(config, root)
    inline = config.get("datasets") or {}
    config["datasets"] = registry
    config["datasets_inline"] = sorted(inline)  # where each entry lives matters for DVC params
    config.setdefault("device", "auto")
    config.setdefault("torch_threads", 1)
    config.setdefault("numerics", "portable")
    validate_schema({"families": {}, "datasets": registry}, root)
    check_semantics(config, root, method_families)
    return config


def register_families(config: dict) -> None:
    """Every family a config names: uqcal's own (``uqcal.methods.<name>``), or a plug-in package
    (``families.<name>.package``, any module defining ``FAMILY``, imported from the repository's root or from
    the folder ``families.<name>.path``)."""
    for name, fam in config["families"].items():
        try:
            if fam.get("package"):
                register_family(name, fam["package"], fam.get("path"))
            get_family(name)
        except (KeyError, ImportError) as exc:
            raise ConfigError(f"families.{name}: {exc.args[0] if isinstance(exc, KeyError) else exc}") from None

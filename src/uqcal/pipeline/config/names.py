"""The names and counts a config gives, checked once, at validation, before anything is expanded from them.

Names: datasets, settings and methods are identifiers.
A name becomes a folder (``results/<family>/<dataset>/<setting>/<method>/``), a DVC stage, a Snakemake wildcard
and a file name in the report, so it must be safe in all four: 1 to 64 characters of ASCII letters, digits,
``_`` and ``-``, starting with a letter or a digit (no space, no dot, no ``/``, nothing outside ASCII).
Counts: a ``seeds`` value (a family's, a setting's or a method's, or one dataset's entry of it) is at most
``SEEDS_MAX``; each seed is a run, and a typo such as ``seeds: 100000000`` must fail here, not grow the run list
past the machine's memory. docs/bad-inputs.md lists the messages.
"""

from __future__ import annotations

import re

from uqcal.pipeline.config.source import ConfigError

NAME_MAX_LENGTH = 64
NAME_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{NAME_MAX_LENGTH - 1}}}")
NAME_RULE = (f"1 to {NAME_MAX_LENGTH} characters of A-Z, a-z, 0-9, '_' and '-', starting with a letter or a digit "
             "(a name becomes a folder, a DVC stage and a Snakemake wildcard)")


def check_name(name, where: str, what: str) -> None:
    """One name: ConfigError naming where it is written when it is not an identifier (``NAME_RULE``)."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        shown = repr(name) if len(repr(name)) <= 80 else f"{repr(name)[:60]}... ({len(str(name))} characters)"
        raise ConfigError(f"{where}: {what} name {shown} is not an identifier: {NAME_RULE}")


def check_config_names(config: dict) -> None:
    """The names a composed config gives itself: its own datasets, every family's settings and methods, and the
    datasets each family and setting lists (a bad name there is named before "unknown dataset")."""
    datasets = config.get("datasets")
    for name in datasets if isinstance(datasets, dict) else ():
        check_name(name, "datasets", "dataset")
    families = config.get("families")
    for family, fam in (families.items() if isinstance(families, dict) else ()):
        if not isinstance(fam, dict):
            continue
        where = f"families.{family}"
        for i, name in enumerate(fam.get("datasets") if isinstance(fam.get("datasets"), list) else ()):
            check_name(name, f"{where}.datasets[{i}]", "dataset")
        for kind in ("settings", "methods"):
            for name in (fam.get(kind) if isinstance(fam.get(kind), dict) else ()):
                check_name(name, f"{where}.{kind}", kind[:-1])



SEEDS_MAX = 1000


def check_config_counts(config: dict) -> None:
    """Every ``seeds`` of every family, setting and method within 1..SEEDS_MAX (before the runs are listed)."""
    families = config.get("families")
    for family, fam in (families.items() if isinstance(families, dict) else ()):
        if not isinstance(fam, dict):
            continue
        _check_seeds(fam.get("seeds"), f"families.{family}.seeds")
        for kind in ("settings", "methods"):
            for name, entry in (fam.get(kind) if isinstance(fam.get(kind), dict) else {}).items():
                if isinstance(entry, dict):
                    _check_seeds(entry.get("seeds"), f"families.{family}.{kind}.{name}.seeds")


def _check_seeds(value, where: str) -> None:
    for key, count in (value.items() if isinstance(value, dict) else [(None, value)]):
        if isinstance(count, int) and not isinstance(count, bool) and count > SEEDS_MAX:
            at = f"{where}.{key}" if key is not None else where
            raise ConfigError(f"{at}: {count} seeds; at most {SEEDS_MAX} (each seed is a run of every method it "
                              "applies to)")

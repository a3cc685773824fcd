"""The config files themselves: read as plain YAML, checked raw (before Snakemake evaluates anything), hashed;
the cluster-profile check of a Snakemake command line. ``ConfigError`` is every config problem."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml

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


def config_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()

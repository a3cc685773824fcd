"""The config files themselves: read as plain YAML, checked raw (before Snakemake evaluates anything), composed
(``extends:``), hashed; the cluster-profile check of a Snakemake command line. ``ConfigError`` is every config
problem.

``extends: <file>`` (or a list of files), paths relative to the extending file: the file is its parents (each
with its own parents first, then the next parent) overlaid by its own keys. A mapping merges key by key,
recursively; any other value (a list, a string, a number) replaces the inherited one whole; ``null`` removes
the inherited key (a ``null`` that overlays nothing stays a plain null). A key new to a mapping goes where the
file writes it among the inherited keys it names, else at the end. A file that extends itself, directly or
through others, is a ConfigError naming the chain.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
from dataclasses import dataclass
from functools import cache
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


class _DuplicateKey(Exception):
    def __init__(self, key, first: int, line: int):
        super().__init__(key)
        self.key, self.first, self.line = key, first, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping (plain YAML keeps the last)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise _DuplicateKey(key, seen[key], line)
                    seen[key] = line
                except TypeError:  # an unhashable key: SafeLoader names it
                    break
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | Path) -> Any:
    """A YAML file as plain data (``yaml.safe_load``: no templating, no Python objects); a tag such as
    ``!!python/object`` or a syntax error is a ConfigError naming the file, the line and the tag."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    try:
        with path.open() as fh:
            return yaml.load(fh, Loader=_UniqueKeyLoader) or {}  # noqa: S506 (a SafeLoader)
    except _DuplicateKey as dup:
        raise ConfigError(f"{path}:{dup.line}: key {dup.key!r} appears twice in one mapping (first at line "
                          f"{dup.first}); YAML would keep the last silently. Keep one of them") from None
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
    """The config as uqcal reads it, before Snakemake (or anything else) evaluates a file: each file of its
    ``extends`` chain read raw, as plain data, and a mapping; a YTE template (``__use_yte__``) is refused, since
    Snakemake would run the Python code in it while loading. Returns the composed mapping (a copy)."""
    return copy.deepcopy(compose(path).data)


def _check_raw(path: str, config: Any) -> dict:
    if isinstance(config, dict) and YTE_KEY in config:
        raise ConfigError(
            f"{path}: `{YTE_KEY}` makes Snakemake evaluate this file as a YTE template, which runs the Python "
            "code in it before uqcal validates anything; uqcal configs are plain YAML. Remove the key and write "
            "the values out"
        )
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: a config must be a mapping of keys to values, got {type(config).__name__}")
    return config


# ------------------------------------------------------------------------------------------ extends
EXTENDS_KEY = "extends"


@dataclass(frozen=True)
class ComposedConfig:
    """A config file with the files it extends applied.

    ``files``: every file applied, in order (each parent with its own parents first, the file itself last),
    named relative to where ``path`` is named from. ``data``: the composed mapping, without ``extends``; shared
    between callers, so read it only (``check_raw_config`` hands out copies). ``origins``: for every key path
    of ``data``, the files its value comes from (one for a value a file set; every file that merged into a
    mapping)."""

    path: str
    files: tuple[str, ...]
    data: dict
    origins: dict[tuple[str, ...], tuple[str, ...]]

    def defined_in(self, dotted: str) -> list[str]:
        """The files that hold the value of a dotted key (``families.<name>.seeds``; "" is the whole config); []
        when the composed config has no such key."""
        return list(self.origins.get(tuple(dotted.split(".")) if dotted else (), ()))


def compose(path: str | Path, top: dict | None = None) -> ComposedConfig:
    """``path`` composed with every file it extends (module docstring). ``top``: the file's data as a reader
    already holds it (Snakemake's ``config``), used instead of reading the file itself."""
    path = str(path)
    layers = _layers(path, top, ())
    stamp = tuple((file, when) for file, when, _ in layers)
    if top is None and stamp in _COMPOSED:
        return _COMPOSED[stamp]
    data: dict = {}
    origins: dict[tuple[str, ...], list[str]] = {(): []}
    for file, _, layer in layers:
        origins[()].append(file)
        _overlay(data, layer, file, (), origins)
    composed = ComposedConfig(path, tuple(dict.fromkeys(file for file, _, _ in layers)), data,
                              {key: tuple(dict.fromkeys(files)) for key, files in origins.items()})
    if top is None:
        if len(_COMPOSED) > 64:
            _COMPOSED.clear()
        _COMPOSED[stamp] = composed
    return composed


_COMPOSED: dict[tuple, ComposedConfig] = {}


def _layers(path: str, top: dict | None, seen: tuple[str, ...]) -> list[tuple[str, tuple, dict]]:
    """(file, its stamp, its own keys) of every file ``path`` is made of, in the order they apply."""
    real = [os.path.realpath(file) for file in seen]
    if os.path.realpath(path) in real:
        chain = " -> ".join([*seen[real.index(os.path.realpath(path)):], path])
        raise ConfigError(f"{seen[-1]}: `{EXTENDS_KEY}` makes a cycle: {chain}")
    if top is None:
        when, data = _read(path)
    else:
        when, data = None, _check_raw(path, top)
    parents = data.get(EXTENDS_KEY)
    parents = [] if parents is None else [parents] if isinstance(parents, str) else parents
    if not isinstance(parents, list) or not all(isinstance(p, str) and p for p in parents):
        raise ConfigError(f"{path}: {EXTENDS_KEY}: expected a config file (or a list of them) relative to "
                          f"{os.path.dirname(path) or '.'}, got {data.get(EXTENDS_KEY)!r}")
    layers = []
    for rel in parents:
        parent = os.path.normpath(os.path.join(os.path.dirname(path), rel))
        if not os.path.isfile(parent):
            raise ConfigError(f"{path}: {EXTENDS_KEY}: {rel!r} not found (looked for {parent})")
        layers += _layers(parent, None, (*seen, path))
    return [*layers, (path, when, {k: v for k, v in data.items() if k != EXTENDS_KEY})]


def _read(path: str) -> tuple[tuple, dict]:
    """A config file as plain data, checked raw, cached until the file changes."""
    try:
        stat = os.stat(path)
    except OSError:
        raise ConfigError(f"config file not found: {path}") from None
    when = (stat.st_mtime_ns, stat.st_size)
    return when, _read_cached(path, os.path.realpath(path), *when)


@cache
def _read_cached(path: str, _real: str, _mtime_ns: int, _size: int) -> dict:
    return _check_raw(path, load_yaml(path))


def _overlay(into: dict, layer: dict, file: str, at: tuple[str, ...], origins: dict) -> None:
    """Apply one file's keys to the composed mapping ``into`` (at key path ``at``), noting where values come from."""
    order = _merged_order(list(into), list(layer))
    for key, value in layer.items():
        here = (*at, key)
        if value is None and key in into:  # removes the inherited key
            del into[key]
            _forget(origins, here)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            origins[here].append(file)
            _overlay(into[key], value, file, here, origins)
        else:
            if key in into:
                _forget(origins, here)
            into[key] = copy.deepcopy(value)
            _note(origins, value, file, here)
    if list(into) != [key for key in order if key in into]:
        kept = {key: into.pop(key) for key in order if key in into}
        into.update(kept)


def _merged_order(inherited: list, written: list) -> list:
    """Where the keys of a merged mapping go: the inherited keys in their order, and each key new to it where the
    extending file writes it among the inherited keys it names (after the one written before it, else before
    the one written after it, else at the end), so that a config reads in its own order."""
    order, before = list(inherited), []
    anchor = None
    for key in written:
        if key in inherited:
            order[order.index(key):order.index(key)] = before
            before, anchor = [], key
        elif anchor is None:
            before.append(key)
        else:
            order.insert(order.index(anchor) + 1, key)
            anchor = key
    return order + before


def _note(origins: dict, value: Any, file: str, here: tuple[str, ...]) -> None:
    origins[here] = [file]
    for key, inner in (value.items() if isinstance(value, dict) else ()):
        _note(origins, inner, file, (*here, key))


def _forget(origins: dict, here: tuple[str, ...]) -> None:
    for key in [key for key in origins if key[:len(here)] == here]:
        del origins[key]


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
    """sha256 of a config: of its file; for one that extends others, of every file of its chain (each file's
    sha256 and name, in the order they apply), so that an edit in an inherited file changes it too."""
    files = compose(path).files
    if len(files) == 1:
        return hashlib.sha256(Path(files[0]).read_bytes()).hexdigest()
    lines = "".join(f"{hashlib.sha256(Path(file).read_bytes()).hexdigest()}  {file}\n" for file in files)
    return hashlib.sha256(lines.encode()).hexdigest()

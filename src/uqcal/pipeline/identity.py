"""What a job is made from, apart from its inputs' content: its spec (`build_spec`) and its identity.

A job's spec holds its parameters (`uqcal.pipeline.plan.param_values`), the resolved job its step receives
(`uqcal.pipeline.plan.payload`), the sha256 of every `uqcal` source file its process can import (`source_files`:
the static import closure of its step, which is also its DVC stage's code ``deps:``) and of the local files it
reads. `identity` digests the spec with the upstream jobs' output digests (docs/ARCHITECTURE.md, "Who decides
what is stale"); `uqcal.pipeline.records` compares it with a job's record.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from functools import cache
from pathlib import Path

from uqcal.pipeline.plan import RULES, Job, local_files, param_values, payload, upstream

SRC = Path(__file__).resolve().parent.parent  # .../src/uqcal
STEP_MODULE = {rule: f"uqcal.pipeline.steps.{rule}" for rule in RULES}


def code_roots(job: Job) -> list[str]:
    """Modules a job's process starts from; `source_files` follows their imports.

    A train job's code is its own method's: the module its registry entry resolves to (and, for a method built on
    another's runs, that method's), the family's evaluator and what they import; a split job's is the family's
    splitter. Neither depends on the family's method table (`registry_modules`): the entry a train job uses is in
    its spec (``job``: resolved parameters, ``target``, ``depends_on``), so adding, removing or editing one entry
    reruns that method's jobs only (and the family's aggregate and the report, which read them).
    """
    from uqcal.methods.api import get_entry, get_family

    roots = ["uqcal.cli", STEP_MODULE[job.rule]]
    if job.rule == "split":  # the family's splitter is a "module:name" string
        roots.append(get_family(job.key[0]).splitter.partition(":")[0])
    if job.rule == "train":
        family, method = job.key[0], job.key[3]  # a one-seed job's key ends in its seed
        entry = get_entry(family, method)
        roots += [get_family(family).evaluator.partition(":")[0], entry.target.partition(":")[0]]
        if entry.depends_on:  # a method built on another's runs may load that method's model
            roots.append(get_entry(family, entry.depends_on).target.partition(":")[0])
    if job.rule == "report":
        # every family it can report, uqcal's own and the plug-ins this process registered: their packages
        # (method names, titles), and the figure functions their specs name ("module:function")
        for family in reported_families():
            roots.append(family.package)
            prefixes = "|".join(sorted({"uqcal", re.escape(family.package.split(".")[0])}))
            roots += sorted(set(re.findall(rf"\b((?:{prefixes})(?:\.\w+)*):\w+", family.report_spec_path.read_text())))
    return roots


def reported_families() -> list:
    """The families a report job can cover (uqcal.methods.api.Family): uqcal's own and every plug-in family
    registered in this process (``families.<name>.package`` of the loaded config)."""
    from uqcal.methods.api import builtin_families, get_family, plugin_families

    return [get_family(name) for name in sorted({*builtin_families(), *plugin_families()})]


def registry_modules(job: Job) -> frozenset[str]:
    """Family registries (a family package's ``METHODS``/``FAMILY`` tables) that a split or train job's process
    imports but whose content is not its code: what the job takes from them, its entry and the family's
    splitter or evaluator, is in its spec or among its roots. A registry module that is itself a root (a
    method defined in the package's ``__init__``) stays code."""
    if job.rule not in ("split", "train"):
        return frozenset()
    from uqcal.methods.api import get_family

    packages = {family.package for family in reported_families()} | {get_family(job.key[0]).package}
    return frozenset(packages - set(code_roots(job)))


def source_files(job: Job) -> list[str]:
    """Repository-relative paths of every uqcal file the job's step can import (its static import closure).

    Imports inside functions count, and so do plain module names written as strings (``importlib`` tables
    such as the data sources'); ``module:Class`` registry targets do not: a job's own method is a root. The
    families' registries (`registry_modules`) do not count for split and train jobs.
    The report also reads the report specs and the papers' numbers that the families' packages hold
    (``report.yaml``, ``paper_numbers.yaml``), plug-ins' included, and any data files packaged beside its own
    modules.
    """
    files = list(_closure_paths(tuple(code_roots(job)), registry_modules(job), str(Path.cwd())))
    if job.rule == "report":
        yamls = [*(SRC / "pipeline" / "report").rglob("*.yaml")]
        for family in reported_families():
            yamls += [p for p in (family.report_spec_path, family.paper_numbers_path) if p.is_file()]
        files += sorted({_file_path(p) for p in yamls})
    return files


@cache
def _closure_paths(roots: tuple[str, ...], skip: frozenset[str], _cwd: str) -> tuple[str, ...]:
    """`_closure`'s modules as sorted paths (`_module_path`), once per roots and working directory: a paper-scale
    plan has thousands of jobs of the same few methods."""
    return tuple(sorted(_module_path(m) for m in _closure(roots, skip)))


def _file_path(path: Path) -> str:
    """A file's path as `source_files` names it: src/uqcal/... inside uqcal, else from the repository's root."""
    path = path.resolve()
    if path.is_relative_to(SRC):
        return f"src/uqcal/{path.relative_to(SRC).as_posix()}"
    if path.is_relative_to(Path.cwd().resolve()):
        return path.relative_to(Path.cwd().resolve()).as_posix()
    return path.as_posix()  # a plug-in's declared folder outside the repository


def _module_path(module: str) -> str:
    """src/uqcal/... path of a uqcal module, as the repository (and dvc.yaml) names it; a plug-in family's
    module (outside uqcal) by its path from the repository's root."""
    return _file_path(_module_file(module))


@cache
def _resolved_source(rel: str, _cwd: str) -> Path:
    """`_source_file(rel)` resolved (links followed), once per path and working directory; its content is
    stat-ed and hashed at every call (`code_hashes`)."""
    return _source_file(rel).resolve()


def _source_file(rel: str) -> Path:
    """Where a source path of `source_files` is read from: uqcal's own folder (wherever Python imports it from)
    for src/uqcal/..., the working directory (the repository) otherwise."""
    return SRC / rel.removeprefix("src/uqcal/") if rel.startswith("src/uqcal/") else Path(rel)


def _module_file(module: str) -> Path | None:
    """The source file of a uqcal module, or of a module in the repository (the working directory) or in a
    plug-in family's declared folder (``families.<name>.path``), such as a plug-in family's package
    (``families.<name>.package``); None for anything else (installed libraries)."""
    from uqcal.methods.api import plugin_paths

    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    bases = [SRC.joinpath(*parts[1:])] if parts[0] == "uqcal" else [
        folder.joinpath(*parts) for folder in (Path.cwd(), *plugin_paths())]
    for base in bases:
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


@cache
def _closure(roots: tuple[str, ...], skip: frozenset[str] = frozenset()) -> frozenset[str]:
    """The modules ``roots`` import, transitively, without following (or counting) those in ``skip``."""
    found: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            name = ".".join(parts[:i])
            if name not in found and name not in skip and _module_file(name) is not None:
                found.add(name)
                todo.extend(_imports(name))
    return frozenset(found)


_MODULE_NAME = re.compile(r"^uqcal(\.[A-Za-z_]\w*)+$")


@cache
def _imports(module: str) -> frozenset[str]:
    path = _module_file(module)
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    partial = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
        elif isinstance(node, ast.Constant) and id(node) not in partial and _MODULE_NAME.match(str(node.value)):
            names.add(node.value)  # e.g. {"csv": "uqcal.data.sources.csv"} fed to importlib
    return frozenset(n for n in names if _module_file(n) is not None)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@cache
def _source_sha256(path: Path, _mtime_ns: int, _size: int) -> str:
    return file_sha256(path)


def code_hashes(job: Job) -> dict[str, str]:
    hashes = {}
    for rel in source_files(job):
        path = _resolved_source(rel, str(Path.cwd()))
        stat = path.stat()
        hashes[rel] = _source_sha256(path, stat.st_mtime_ns, stat.st_size)
    return hashes


# ------------------------------------------------------------------------------------------ specs
def build_spec(config: dict, job: Job, config_path: str) -> dict:
    """What the job is made from, apart from its inputs' content (which the step reads when it runs)."""
    return {"rule": job.rule, "key": list(job.key), "config": config_path,
            "params": spec_params(config, job, config_path),
            "job": payload(config, job), "code": code_hashes(job), "files": file_hashes(local_files(config, job)),
            "upstream": [up.record_path for up in upstream(config, job)]}


def spec_params(config: dict, job: Job, config_path: str) -> dict:
    """The job's parameters as its spec and record hold them: its config values and its numerics."""
    return {**param_values(config, job, config_path), **numerics_param(config)}


def numerics_param(config: dict) -> dict[str, str]:
    """Every job's numerics (``numerics: portable | native``; uqcal.core.numerics), as a parameter of its identity:
    a result made under another mode, or natively on another kind of CPU, is another job's (stale here)."""
    from uqcal.core.numerics import DEFAULT_MODE, identity

    return {"numerics": identity(config.get("numerics", DEFAULT_MODE))}


def file_hashes(paths: list[str]) -> dict[str, str | None]:
    """{path: sha256} of local input files (None: missing, so that the file appearing changes the job)."""
    hashes = {}
    for rel in paths:
        try:
            stat = os.stat(rel)
        except OSError:
            hashes[rel] = None
            continue
        hashes[rel] = _source_sha256(Path(rel).resolve(), stat.st_mtime_ns, stat.st_size)
    return hashes


def identity(spec: dict, inputs: dict) -> str:
    made_of = {k: spec[k] for k in ("rule", "key", "params", "job", "code", "files")}
    return digest({**made_of, "inputs": inputs})


def digest(obj) -> str:
    """sha256 of ``obj`` as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()

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
    """Modules a job's process starts from; `source_files` follows their imports."""
    from uqcal.methods.api import get_entry, get_family

    roots = ["uqcal.cli", STEP_MODULE[job.rule]]
    if job.rule == "split":  # the family's splitter is a "module:name" string
        family = get_family(job.key[0])
        roots += [family.package, family.splitter.partition(":")[0]]
    if job.rule == "train":
        family, _, _, method = job.key
        entry, found = get_entry(family, method), get_family(family)
        roots += [found.package, found.evaluator.partition(":")[0], entry.target.partition(":")[0]]
        if entry.depends_on:  # a method built on another's runs may load that method's model
            roots.append(get_entry(family, entry.depends_on).target.partition(":")[0])
    if job.rule == "report":
        from uqcal.methods.api import builtin_families

        roots += [get_family(name).package for name in builtin_families()]  # their specs and numbers: get_family
        # figures a report spec draws with a function ("module:function")
        for spec in sorted((SRC / "methods").glob("*/report.yaml")):
            roots += sorted(set(re.findall(r"\b(uqcal(?:\.\w+)+):\w+", spec.read_text())))
    return roots


def source_files(job: Job) -> list[str]:
    """Repository-relative paths of every uqcal file the job's step can import (its static import closure).

    Imports inside functions count, and so do plain module names written as strings (``importlib`` tables
    such as the data sources'); ``module:Class`` registry targets do not: a job's own method is a root.
    The report also reads the report specs and the papers' numbers that the families' packages hold
    (``report.yaml``, ``paper_numbers.yaml``) and any data files packaged beside its own modules.
    """
    files = sorted(_module_path(m) for m in _closure(tuple(code_roots(job))))
    if job.rule == "report":
        yamls = [*(SRC / "pipeline" / "report").rglob("*.yaml"), *(SRC / "methods").glob("*/report.yaml"),
                 *(SRC / "methods").glob("*/paper_numbers.yaml")]
        files += sorted(f"src/uqcal/{p.relative_to(SRC).as_posix()}" for p in yamls)
    return files


def _module_path(module: str) -> str:
    """src/uqcal/... path of a uqcal module, as the repository (and dvc.yaml) names it; a plug-in family's
    module (in the repository, outside uqcal) by its path from the repository's root."""
    path = _module_file(module)
    if module.split(".")[0] != "uqcal":
        return path.relative_to(Path.cwd()).as_posix()
    return f"src/uqcal/{path.relative_to(SRC).as_posix()}"


def _source_file(rel: str) -> Path:
    """Where a source path of `source_files` is read from: uqcal's own folder (wherever Python imports it from)
    for src/uqcal/..., the working directory (the repository) otherwise."""
    return SRC / rel.removeprefix("src/uqcal/") if rel.startswith("src/uqcal/") else Path(rel)


def _module_file(module: str) -> Path | None:
    """The source file of a uqcal module, or of a module in the repository (the working directory) such as a
    plug-in family's package (``families.<name>.package``); None for anything else (installed libraries)."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    base = SRC.joinpath(*parts[1:]) if parts[0] == "uqcal" else Path.cwd().joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _closure(roots: tuple[str, ...]) -> frozenset[str]:
    found: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            name = ".".join(parts[:i])
            if name not in found and _module_file(name) is not None:
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
        path = _source_file(rel).resolve()
        stat = path.stat()
        hashes[rel] = _source_sha256(path, stat.st_mtime_ns, stat.st_size)
    return hashes


# ------------------------------------------------------------------------------------------ specs
def build_spec(config: dict, job: Job, config_path: str) -> dict:
    """What the job is made from, apart from its inputs' content (which the step reads when it runs)."""
    return {"rule": job.rule, "key": list(job.key), "config": config_path,
            "params": {**param_values(config, job, config_path), **numerics_param(config)},
            "job": payload(config, job), "code": code_hashes(job), "files": file_hashes(local_files(config, job)),
            "upstream": [up.record_path for up in upstream(config, job)]}


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

"""A family's report spec (``report.yaml``) and the margins of its ``paper_numbers.yaml``, checked before any job.

``uqcal validate-config`` calls `report_spec_problems` for every family a config runs, uqcal's own and plug-ins;
a problem is one line naming the file (from the family's own folder) and the key, and the command exits 2.

The language is not written down twice: the accepted claim kinds are the keys of
``uqcal.pipeline.report.claims.KINDS``, and each kind's ``check`` keys are the keys its function (and every function
of uqcal it calls) reads from the claim's ``check`` mapping, found in their source (`kind_keys`); the keys of a claim
and of a table are those the report's code reads from a ``claim`` / a table ``spec`` (`claim_keys`, `table_keys`).
A kind or a key added to that code is accepted from then on. The metrics a family produces are the names its
evaluator's code (and its methods' modules, whose training statistics reach metrics.json) writes
(`family_metrics`).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from uqcal.pipeline.config.source import ConfigError

# Claim keys other parts of the report read and render (docs/howto/write-claims.md) with the type each must have.
CLAIM_TYPES: dict[str, type | tuple[type, ...]] = {"id": str, "text": str, "source": str, "ours": bool,
                                                   "config": str, "needs": str, "decided_on": str, "scope": str}
REQUIRED_CLAIM_KEYS = ("id", "text", "check")
# a claim without ``check`` (not_run: uqcal lacks a method, a dataset or an experiment for it) names what it needs
# instead, as uqcal.pipeline.report.claims reads it
# check keys whose value names methods of the family, and those that name metrics its evaluator produces
METHOD_KEYS = ("a", "b", "method", "methods", "pairs")
METRIC_KEYS = ("metric", "metrics")
# kinds whose a / b name series of a logged curve, not methods (stats_curve_greater: the curves of ``method``)
SERIES_KINDS = {"stats_curve_greater": ("a", "b")}
# claims that compare at the margin the family's paper_numbers.yaml declares for them (verdicts.margin_for)
MARGIN_ACCEPTS = ("not_worse", "equivalent")
MARGIN_KINDS = ("best", "best_among")


class SpecError(ConfigError):
    """A report spec that the report could not build: one line naming the file and the key."""


# ------------------------------------------------------------------------------------------ reading the code
@cache
def _module_tree(module: str) -> ast.Module:
    """A module's syntax tree, read from its file without importing it (a method's module imports torch)."""
    from uqcal.pipeline.identity import _module_file

    path = _module_file(module)
    if path is None:
        path = Path(inspect.getfile(importlib.import_module(module)))
    return ast.parse(path.read_bytes(), filename=str(path))


@cache
def _functions(module: str) -> dict[str, ast.FunctionDef]:
    """Top-level functions of ``module`` by name."""
    return {node.name: node for node in _module_tree(module).body if isinstance(node, ast.FunctionDef)}


@cache
def _imported_names(module: str) -> dict[str, tuple[str, str | None]]:
    """Names bound by ``module``'s imports: alias -> (module, attribute or None for a module)."""
    found: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(_module_tree(module)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = (alias.name, None)
    return found


def _local(module: str, top: str) -> bool:
    return module.split(".")[0] in ("uqcal", top)


def function_closure(module: str, name: str) -> Iterator[tuple[str, ast.FunctionDef]]:
    """``module:name`` and every function of uqcal (or of ``module``'s own top-level package) that it calls,
    transitively: (module, function node) pairs."""
    top = module.split(".")[0]
    seen: set[tuple[str, str]] = set()
    todo = [(module, name)]
    while todo:
        mod, fn = todo.pop()
        if (mod, fn) in seen:
            continue
        seen.add((mod, fn))
        node = _functions(mod).get(fn)
        if node is None:
            imported = _imported_names(mod).get(fn)
            if imported and imported[1] and _local(imported[0], top):
                todo.append((imported[0], imported[1]))  # re-exported
            continue
        yield mod, node
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            if isinstance(func, ast.Name):
                if func.id in _functions(mod):
                    todo.append((mod, func.id))
                elif func.id in _imported_names(mod):
                    target, attr = _imported_names(mod)[func.id]
                    if attr and _local(target, top):
                        todo.append((target, attr))
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                target, attr = _imported_names(mod).get(func.value.id, (None, None))
                if target and _local(target, top):
                    # `import a.b as M; M.f()` or `from a import b; b.f()` (b a module)
                    todo.append((target if attr is None else f"{target}.{attr}", func.attr))
            # functions passed as arguments (a row builder handed to a loop) are followed too
            for arg in call.args:
                if isinstance(arg, ast.Name) and arg.id in _functions(mod):
                    todo.append((mod, arg.id))


def _keys_read(node: ast.AST, names: tuple[str, ...]) -> set[str]:
    """String keys read from a variable called one of ``names`` (``x["k"]``, ``x.get("k")``), or from
    ``claim["check"]`` when "check" is one of them."""

    def is_source(expr: ast.AST) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id in names
        return ("check" in names and isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant)
                and expr.slice.value == "check")

    keys = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and is_source(sub.value) and isinstance(sub.slice, ast.Constant):
            keys.add(sub.slice.value)
        elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in ("get", "pop")
              and is_source(sub.func.value) and sub.args and isinstance(sub.args[0], ast.Constant)):
            keys.add(sub.args[0].value)
    return {k for k in keys if isinstance(k, str)}


def claim_kinds() -> dict[str, Any]:
    """The claim kinds the report decides: ``uqcal.pipeline.report.claims.KINDS``."""
    from uqcal.pipeline.report.claims import KINDS

    return dict(KINDS)


@cache
def kind_keys(kind: str) -> frozenset[str]:
    """The ``check`` keys a claim kind reads: those its function, and the functions of uqcal it calls, read from
    the claim's ``check`` mapping; ``kind`` itself always."""
    function = claim_kinds()[kind]
    keys = {"kind"}
    for _, node in function_closure(function.__module__, function.__name__):
        keys |= _keys_read(node, ("check",))
    return frozenset(keys)


def _report_modules() -> list[str]:
    """Every module of uqcal.pipeline.report, found on disk."""
    from uqcal.pipeline.identity import SRC

    folder = SRC / "pipeline" / "report"
    return sorted("uqcal.pipeline.report." + ".".join(p.relative_to(folder).with_suffix("").parts).removesuffix(".__init__")
                  for p in folder.rglob("*.py"))


@cache
def claim_keys() -> frozenset[str]:
    """Keys of a claim (beside ``check``): what the report's code reads from a ``claim``, and `CLAIM_TYPES`."""
    keys = set(CLAIM_TYPES) | set(REQUIRED_CLAIM_KEYS)
    for module in _report_modules():
        keys |= _keys_read(_module_tree(module), ("claim",))
    return frozenset(keys)


@cache
def table_keys() -> frozenset[str]:
    """Keys of a table entry: what ``uqcal.pipeline.report.tables`` reads from a table's ``spec``."""
    return frozenset({"id"} | _keys_read(_module_tree("uqcal.pipeline.report.tables"), ("spec",)))


@dataclass(frozen=True)
class MetricNames:
    """The metric names a family's code writes: its strings, and the names its f-strings build from them
    (``f"{key}_{prefix}"`` with ``key`` and ``prefix`` strings of the same code: ``ece_ts``)."""

    names: frozenset[str]
    patterns: tuple[re.Pattern, ...]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self.names:
            return True
        for pattern in self.patterns:
            match = pattern.fullmatch(name)
            if match and all(part in self.names for part in match.groups()):
                return True
        return False

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.names))


@cache
def family_metrics(family_name: str) -> MetricNames:
    """Metric names a family's runs can have: the strings of its evaluator's code (the function and what it calls)
    and of its methods' modules and what they import within the family (their own metrics and training statistics
    are merged into metrics.json)."""
    from uqcal.methods.api import get_family
    from uqcal.pipeline.identity import _closure

    family = get_family(family_name)
    module, _, name = family.evaluator.partition(":")
    nodes: list[ast.AST] = [node for _, node in function_closure(module, name)]
    targets = {entry.target.partition(":")[0] for entry in family.methods.values()}
    family_modules = {m for m in _closure(tuple(sorted(targets))) if m.startswith(family.package) or m in targets}
    nodes += [_module_tree(m) for m in sorted(family_modules)]
    names: set[str] = set()
    patterns: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                names.add(sub.value)
            elif isinstance(sub, ast.JoinedStr) and any(isinstance(v, ast.Constant) for v in sub.values):
                patterns.add("".join(re.escape(v.value) if isinstance(v, ast.Constant) else r"(\w+?)"
                                     for v in sub.values))
    return MetricNames(frozenset(names), tuple(re.compile(p) for p in sorted(patterns)))


# ------------------------------------------------------------------------------------------ checking a spec
def where(path: Path) -> str:
    """A file's path for a message: from the repository's root (the working directory) where it lies inside."""
    path = Path(path).resolve()
    root = Path.cwd().resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()


def _unknown(key: str, known: frozenset[str] | set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "") + \
        f"; known: {', '.join(sorted(known))}"


def _names(value: Any) -> list[str]:
    """Method or metric names a check value holds: a string, a list of them, or pairs."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [name for item in value for name in _names(item)]
    return []


def report_spec_problems(family_name: str) -> list[str]:
    """Every problem of family ``family_name``'s report spec and margins, each one line naming the file and key."""
    import yaml

    from uqcal.methods.api import get_family

    family = get_family(family_name)
    spec_file, numbers_file = where(family.report_spec_path), where(family.paper_numbers_path)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the paper numbers are long
    spec = yaml.load(family.report_spec_path.read_text(), Loader=loader) or {}
    numbers = (yaml.load(family.paper_numbers_path.read_text(), Loader=loader) or {}) \
        if family.paper_numbers_path.is_file() else {}
    methods, metrics = set(family.methods), family_metrics(family_name)
    problems: list[str] = []

    def check_names(key: str, value: Any, known: Any, what: str) -> None:
        for name in _names(value):
            if name not in known:
                close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(f"{spec_file}: {key}: {name!r} is not a {what}{hint}")

    from uqcal.pipeline.report.build import SPEC_KEYS

    for key in spec:
        if key not in SPEC_KEYS:
            problems.append(f"{spec_file}: {_unknown(key, SPEC_KEYS)}")
    for i, table in enumerate(spec.get("tables") or []):
        label = f"tables.{table.get('id', i)}"
        for key in table:
            if key not in table_keys():
                problems.append(f"{spec_file}: {label}.{key}: {_unknown(key, table_keys())}")
        check_names(f"{label}.methods", table.get("methods"), methods, f"method of family {family_name}")
        for key in METRIC_KEYS:
            check_names(f"{label}.{key}", table.get(key), metrics, f"metric family {family_name}'s evaluator produces")
    margins = numbers.get("margins") or {}
    kinds = claim_kinds()
    ids = set()
    for i, claim in enumerate(spec.get("claims") or []):
        label = f"claims.{claim.get('id', i)}"
        ids.add(claim.get("id"))
        for key in REQUIRED_CLAIM_KEYS:
            if key == "check" and "check" not in claim and str(claim.get("needs") or "").strip():
                continue
            if key not in claim:
                problems.append(f"{spec_file}: {label}: lacks {key!r}"
                                + (" (or 'needs', for a claim uqcal cannot test yet)" if key == "check" else ""))
        for key, value in claim.items():
            if key not in claim_keys():
                problems.append(f"{spec_file}: {label}.{key}: {_unknown(key, claim_keys())}")
            elif key in CLAIM_TYPES and not isinstance(value, CLAIM_TYPES[key]):
                problems.append(f"{spec_file}: {label}.{key}: expected {_type_words(CLAIM_TYPES[key])}, "
                                f"got {value!r}")
        check = claim.get("check")
        if not isinstance(check, dict):
            continue
        kind = check.get("kind")
        if kind not in kinds:
            close = difflib.get_close_matches(str(kind), sorted(kinds), n=1, cutoff=0.6)
            problems.append(f"{spec_file}: {label}.check.kind: unknown claim kind {kind!r}"
                            + (f" (did you mean {close[0]!r}?)" if close else "") + f"; known: {', '.join(sorted(kinds))}")
            continue
        for key in check:
            if key not in kind_keys(kind):
                problems.append(f"{spec_file}: {label}.check.{key}: {_unknown(key, kind_keys(kind))} "
                                f"(of kind {kind})")
        for key in METHOD_KEYS:
            if key not in SERIES_KINDS.get(kind, ()):
                check_names(f"{label}.check.{key}", check.get(key), methods, f"method of family {family_name}")
        for key in METRIC_KEYS:
            check_names(f"{label}.check.{key}", check.get(key), metrics,
                        f"metric family {family_name}'s evaluator produces")
        needs_margin = check.get("accept") in MARGIN_ACCEPTS or check.get("require") in MARGIN_ACCEPTS or \
            kind in MARGIN_KINDS
        if needs_margin and claim.get("id") not in margins:
            problems.append(f"{numbers_file}: margins.{claim.get('id')}: claim {claim.get('id')!r} of {spec_file} "
                            "compares at a margin and the file declares none (margin or relative, and its reason)")
    for claim_id, margin in margins.items():
        label = f"{numbers_file}: margins.{claim_id}"
        if claim_id not in ids:
            problems.append(f"{label}: no claim of {spec_file} has this id")
        if not isinstance(margin, dict):
            problems.append(f"{label}: expected a mapping (margin or relative, and its reason)")
            continue
        if not str(margin.get("reason") or "").strip():
            problems.append(f"{label}.reason: a margin needs its reason (why this size: the paper's ± or words)")
        if ("margin" in margin) == ("relative" in margin):
            problems.append(f"{label}: give exactly one of 'margin' (absolute) and 'relative' (share of the "
                            "comparator's mean)")
    return problems


def _type_words(kind: type | tuple[type, ...]) -> str:
    return {bool: "true or false", str: "a string"}.get(kind, str(kind))  # type: ignore[call-overload]


def check_report_specs(families: list[str]) -> None:
    """Raise SpecError with the first problem of the families' report specs (`report_spec_problems`)."""
    for family in families:
        problems = report_spec_problems(family)
        if problems:
            raise SpecError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))

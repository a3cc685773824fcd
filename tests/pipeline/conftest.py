"""Fixtures of the pipeline tests: an outside family (the toy family as a package at a repository's root)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from uqcal.methods import api
from uqcal.pipeline import identity
from uqcal.pipeline.report import spec_check

PLUGIN = "toyplug_identity"  # a name of its own: the plug-in module must not be one another test imported


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    stamp = path.stat().st_mtime_ns + 10**9  # an mtime of its own, whatever the clock's grain
    os.utime(path, ns=(stamp, stamp))


def _new_process() -> None:
    """What a new Snakemake run starts from: the plug-in imported afresh, no cached closures."""
    for name in [m for m in sys.modules if m == PLUGIN or m.startswith(PLUGIN + ".")]:
        del sys.modules[name]
    for cached in (api.get_family, identity._closure, identity._imports, spec_check.family_metrics,
                   spec_check._module_tree, spec_check._functions, spec_check._imported_names):
        cached.cache_clear()


@pytest.fixture
def isolated_registry(monkeypatch):
    """Plug-in registrations, import path and cached closures of this test stay in this test."""
    monkeypatch.setattr(api, "_PLUGIN_PACKAGES", {})
    monkeypatch.setattr(api, "_PLUGIN_PATHS", [])
    monkeypatch.setattr(sys, "path", list(sys.path))
    _new_process()
    yield
    _new_process()


@pytest.fixture
def plugin_workspace(tmp_path, monkeypatch, isolated_registry) -> Path:
    """A repository with the toy family (tests/methods/toy) as an outside package at its root, named only by
    ``families.toy.package`` in its config."""
    shutil.copytree(REPO / "config", tmp_path / "config")
    shutil.copytree(REPO / "workflow/schemas", tmp_path / "workflow/schemas")
    shutil.copytree(REPO / "tests/methods/toy", tmp_path / PLUGIN, ignore=shutil.ignore_patterns("test_*", "__pycache__"))
    for path in (tmp_path / PLUGIN).iterdir():
        if path.is_file():
            path.write_text(path.read_text().replace("tests.methods.toy", PLUGIN))
    monkeypatch.chdir(tmp_path)
    return tmp_path

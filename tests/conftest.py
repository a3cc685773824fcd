"""Shared fixtures. `smoke_run` runs the smoke pipeline once per session in a temporary repo copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Generated top-level folders are skipped only at the root: `src/uqcal/data` is source code.
# `.git` too: in a git worktree it is a file pointing at the shared repository, and a copy must never commit
# there; copy_repo gives every copy a repository of its own.
ROOT_ONLY = {".venv", ".venv-lock", "site", "results", "data", "logs", ".snakemake", "dvc-remote", ".uqcal", ".git"}
ANYWHERE = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".ruff_cache", "*.egg-info")


def _ignore(directory: str, names: list[str]) -> set[str]:
    skipped = set(ANYWHERE(directory, names))
    if Path(directory).resolve() == REPO:
        skipped |= ROOT_ONLY & set(names)
    return skipped

torch.set_num_threads(1)


def method_device() -> torch.device:
    """The device the training tests run methods on: ``UQCAL_TEST_DEVICE`` (cpu, cuda, cuda:N; default cpu).

    ``UQCAL_TEST_DEVICE=cuda pytest tests/test_*_methods.py`` runs them on CUDA; an unavailable CUDA fails
    (``resolve_device``) rather than quietly testing the CPU again.
    """
    from uqcal.core.device import resolve_device

    return resolve_device(os.environ.get("UQCAL_TEST_DEVICE", "cpu"))


GIT = ["git", "-c", "user.email=ci@uqcal", "-c", "user.name=ci", "-c", "commit.gpgsign=false"]


def tool_env(src: Path | None = None) -> dict:
    """The environment the tools run in; ``src``: import uqcal from there (a copy whose code a test edits)."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{src or REPO / 'src'}{os.pathsep}{env.get('PYTHONPATH', '')}"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def copy_repo(dest: Path) -> Path:
    """A throwaway copy of the repository (source files, no generated artifacts) in a git repository of its own."""
    shutil.copytree(REPO, dest, ignore=_ignore, symlinks=True)
    reports = dest / "reports"
    for child in reports.iterdir() if reports.exists() else []:
        if child.name != ".gitkeep":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=dest, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "copy"], cwd=dest, check=True)
    return dest


def run(cmd: list[str], cwd: Path, timeout: int = 900, check: bool = True, src: Path | None = None,
        ) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=tool_env(src), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def snakemake(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    return run([str(BIN / "snakemake"), *args], cwd, **kw)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The smoke pipeline, run end to end once: returns the repo copy holding results/ and reports/."""
    root = copy_repo(tmp_path_factory.mktemp("smoke") / "repo")
    snakemake(["--cores", "2", "--configfile", "config/smoke.yaml"], root, timeout=1500)
    return root

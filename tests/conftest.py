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
# A run's own record of its artifacts, never source: after `make reproduce` it sits untracked (and not ignored)
# in the workspace, and a shared run commits it (README, "Sharing results"); a copy must start without it.
RUN_RECORDS = {"dvc.lock"}


def source_files(repo: Path) -> list[str]:
    """The repository's source: what git tracks plus untracked files it does not ignore (work in progress),
    as in the working tree. Generated artifacts (results/, data/, .dvc/cache, .uqcal/ ...) are ignored by git."""
    proc = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                          capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tests copy the repository's git-tracked files, and {repo} is not a git checkout: "
                           f"{proc.stderr.decode().strip()}")
    names = sorted({name for name in proc.stdout.decode().split("\0") if name})
    return [name for name in names if name not in RUN_RECORDS and os.path.lexists(repo / name)]


torch.set_num_threads(1)


def method_device() -> torch.device:
    """The device the training tests run methods on: ``UQCAL_TEST_DEVICE`` (cpu, cuda, cuda:N; default cpu).

    ``UQCAL_TEST_DEVICE=cuda pytest tests/methods/*/test_methods.py`` runs them on CUDA; an unavailable CUDA fails
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
    # One process per job, as on a cluster: what the crash and lock tests hold, stop and look for by command line.
    # The smoke run goes through the local job server (uqcal.cli.job_server), as a user's local run does.
    env.setdefault("UQCAL_JOB_SERVER", "0")
    return env


def copy_repo(dest: Path) -> Path:
    """A throwaway copy of the repository's source (``source_files``: nothing the workspace generated) in a git
    repository of its own (in a git worktree `.git` is a file pointing at the shared repository, and a copy
    must never commit there)."""
    for name in source_files(REPO):
        source, target = REPO / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        else:
            shutil.copy2(source, target)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=dest, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "copy"], cwd=dest, check=True)
    return dest


def run(cmd: list[str], cwd: Path, timeout: int = 900, check: bool = True, src: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``cmd`` in ``cwd`` under ``tool_env(src)`` updated with ``env``."""
    proc = subprocess.run(cmd, cwd=cwd, env={**tool_env(src), **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def snakemake(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    return run([str(BIN / "snakemake"), *args], cwd, **kw)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The smoke pipeline, run end to end once: returns the repo copy holding results/ and reports/."""
    root = copy_repo(tmp_path_factory.mktemp("smoke") / "repo")
    snakemake(["--cores", "2", "--configfile", "config/smoke.yaml"], root, timeout=1500, env={"UQCAL_JOB_SERVER": "1"})
    return root

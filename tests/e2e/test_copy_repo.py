"""The tests' copy of the repository holds its source only, whatever the workspace generated (issue 42, item 6)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests import conftest
from tests.conftest import GIT

SOURCE = ["Snakefile", "config/smoke.yaml", "src/uqcal/data/__init__.py", ".dvc/config", ".gitignore"]
# What `make reproduce` (and a run of the smoke config) leaves in a workspace; `dvc.lock` even committed.
GENERATED = ["dvc.lock", "results/rio/summary.csv", "data/raw/concrete.parquet", "reports/index.html",
             "logs/report.log", ".uqcal/records/report/report.json", ".snakemake/incomplete/x",
             ".dvc/cache/files/md5/ab/cdef", ".dvc/tmp/lock"]


def test_the_copy_holds_the_source_and_nothing_a_run_generated(tmp_path, monkeypatch):
    repo = tmp_path / "workspace"
    for name in SOURCE + GENERATED:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)
    (repo / ".gitignore").write_text("/data/\n/results/\n/reports/\n/logs/\n/.uqcal/\n.snakemake/\n"
                                     "/.dvc/cache/\n/.dvc/tmp/\n")
    os.symlink("workflow/profiles", repo / "profiles")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*GIT, "add", "Snakefile", "src", ".dvc/config", ".gitignore", "profiles", "dvc.lock"],
                   cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "a shared run"], cwd=repo, check=True)
    (repo / "config/new.yaml").write_text("work in progress, not yet added\n")

    monkeypatch.setattr(conftest, "REPO", repo)
    copy = conftest.copy_repo(tmp_path / "copy")
    found = {p.relative_to(copy).as_posix() for p in copy.rglob("*")
             if (p.is_file() or p.is_symlink()) and ".git" not in p.relative_to(copy).parts[:1]}
    assert found == {*SOURCE, "config/new.yaml", "profiles"}
    assert os.readlink(copy / "profiles") == "workflow/profiles"
    assert (copy / "config/new.yaml").read_text() == "work in progress, not yet added\n"
    assert not Path(copy / "dvc.lock").exists()

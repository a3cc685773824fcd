"""A plug-in family in a folder at the repository's root, named only by ``families.<name>.package``, runs end to end
with `snakemake --cores 2 --configfile <its config>` and no PYTHONPATH for it (issue 50): every job puts the
repository's root on its import path. The report's provenance hashes the plug-in's files and marks them untracked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pandas as pd
import pytest

from tests.conftest import BIN, REPO, copy_repo, tool_env
from tests.e2e.test_reruns import RECORD

PLUGIN = "toyplug_e2e"


@pytest.mark.slow
def test_an_outside_family_at_the_repository_root_runs_without_any_path_setting(tmp_path):
    root = copy_repo(tmp_path / "repo")
    shutil.copytree(REPO / "tests/methods/toy", root / PLUGIN, ignore=shutil.ignore_patterns("test_*", "__pycache__"))
    for path in (root / PLUGIN).iterdir():
        path.write_text(path.read_text().replace("tests.methods.toy", PLUGIN))
    env = tool_env()  # uqcal's own source only: nothing names the plug-in's folder
    assert str(root) not in env["PYTHONPATH"] and "toyplug" not in env["PYTHONPATH"]
    config = f"{PLUGIN}/config.yaml"
    check = subprocess.run([str(BIN / "uqcal"), "validate-config", "--config", config], cwd=root, env=env,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    proc = subprocess.run([str(BIN / "snakemake"), "--cores", "2", "--configfile", config], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = pd.read_csv(root / "results/toy/summary.csv")
    assert set(summary.method) == {"marginal", "ridge"} and (summary.n == 3).all()
    claims = json.loads((root / "reports/toy/claims.json").read_text())
    assert [c["id"] for c in claims] == ["ridge_beats_marginal"]
    page = (root / "reports/toy/index.html").read_text()
    assert "plug-in toy</th>" in page and f"<code>{PLUGIN}</code>" in page
    assert f"untracked: {PLUGIN}/__init__.py" in page and "dirty (uncommitted changes)" in page
    # the plug-in's report spec is part of the report job's identity: an edit replans the report, nothing else
    spec = root / PLUGIN / "report.yaml"
    spec.write_text(spec.read_text().replace("Toy family (a plug-in test)", "Toy family, renamed"))
    os.utime(spec)
    dry = subprocess.run([str(BIN / "snakemake"), "-n", "--cores", "2", "--configfile", config], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr[-2000:]
    outputs = [line for line in dry.stdout.splitlines() if line.strip().startswith("output:")]
    assert {f"{rule} {name}" for line in outputs for rule, name in RECORD.findall(line)} == {"report report"}

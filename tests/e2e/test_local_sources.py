"""A local source file (a csv or array source's ``path``) is an input of its materialise job, by content, for
Snakemake and DVC alike (issue 42, item 2)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import BIN, REPO, copy_repo, run, snakemake
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.dvc import build_dvc_yaml
from uqcal.pipeline.identity import build_spec, identity
from uqcal.pipeline.plan import Job, local_files

CONFIG = "config/table.yaml"
TARGET = "data/raw/table.parquet"


def _table_config(root: Path, source: dict) -> None:
    cfg = yaml.safe_load((root / "config/smoke.yaml").read_text())
    cfg["datasets"] = {"table": {"kind": "single_task_regression", "source": source, "target": "y",
                                 "features": "auto", "stands_in_for": "a local file"}}
    rio = cfg["families"]["rio"]
    cfg["families"] = {"rio": {**rio, "datasets": ["table"], "methods": {"marginal": {}}}}
    (root / CONFIG).write_text(yaml.safe_dump(cfg, sort_keys=False))


def _write_csv(path: Path, scale: float) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 2))
    y = scale * (x @ np.array([1.0, -2.0]) + 0.1 * rng.normal(size=80))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x1,x2,y\n" + "".join(f"{a:.6f},{b:.6f},{c:.6f}\n" for (a, b), c in zip(x, y, strict=True)))


def _planned(root: Path) -> set[str]:
    proc = snakemake(["-n", TARGET, "--configfile", CONFIG], root)
    return set(re.findall(r"\.uqcal/records/(\w+)/\S+?\.json", proc.stdout))


def _dvc_changed(root: Path) -> dict:
    return json.loads(run([str(BIN / "dvc"), "status", "materialise-table", "--json"], root).stdout or "{}")


@pytest.mark.slow
def test_editing_a_csv_source_reruns_its_dataset_in_snakemake_and_dvc(tmp_path):
    root = copy_repo(tmp_path / "repo")
    csv = root / "data/external/table.csv"
    _write_csv(csv, scale=1.0)
    _table_config(root, {"type": "csv", "path": "data/external/table.csv"})
    snakemake([TARGET, "--cores", "1", "--configfile", CONFIG], root, timeout=600)  # commits to DVC on success
    assert _planned(root) == set() and _dvc_changed(root) == {}

    _write_csv(csv, scale=100.0)  # y x 100: the dataset is another one
    assert _planned(root) == {"materialise"}
    changed = _dvc_changed(root)["materialise-table"]
    assert {"changed deps": {"data/external/table.csv": "modified"}} in changed, changed


def test_an_array_source_file_is_in_the_jobs_identity_and_its_dvc_deps(tmp_path, monkeypatch):
    shutil.copytree(REPO / "config", tmp_path / "config")
    shutil.copytree(REPO / "workflow/schemas", tmp_path / "workflow/schemas")
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "grid.npy", np.arange(60.0).reshape(20, 3))
    _table_config(tmp_path, {"type": "array", "path": "grid.npy", "layout": "table", "columns": ["x1", "x2", "y"]})
    config = load_config(CONFIG)
    job = Job("materialise", ("table",))
    assert local_files(config, job) == ["grid.npy"]
    before = build_spec(config, job, CONFIG)
    np.save(tmp_path / "grid.npy", 100 * np.arange(60.0).reshape(20, 3))
    after = build_spec(config, job, CONFIG)
    assert before["files"] != after["files"] and identity(before, {}) != identity(after, {})
    assert "grid.npy" in build_dvc_yaml(config, CONFIG)["stages"]["materialise-table"]["deps"]

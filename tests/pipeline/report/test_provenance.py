"""Provenance: config hash, git state, benchmark TSVs, dataset records; and the provenance block on pages."""

from __future__ import annotations

import copy
import hashlib
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.pipeline.report.report_tree import build_smoke_like_tree, write_run
from uqcal.core.io import write_json
from uqcal.pipeline.report.build import build_reports
from uqcal.pipeline.report.html import provenance_html
from uqcal.pipeline.report.provenance import (
    collect,
    file_sha256,
    git_state,
    lock_pins,
    lock_state,
    read_dataset_records,
    read_job_resources,
    read_run_devices,
)
from uqcal.pipeline.report.results import RunFiles


def test_file_sha256_matches_hashlib(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("seeds: 3\n")
    assert file_sha256(path) == hashlib.sha256(b"seeds: 3\n").hexdigest()
    assert file_sha256(tmp_path / "absent.yaml") == "missing"


def test_git_state_clean_then_dirty(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x")
    (tmp_path / "f.txt").write_text("a")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    git("add", "f.txt", "dvc.yaml")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "y")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_state(tmp_path) == (head, False)
    # A run of another config rewrites dvc.yaml (uqcal dvc-sync): that is the run's record, not a code change.
    (tmp_path / "dvc.yaml").write_text("stages: {other: {cmd: x}}\n")
    assert git_state(tmp_path) == (head, False)
    (tmp_path / "f.txt").write_text("b")
    assert git_state(tmp_path) == (head, True)
    outside = tmp_path / "nogit"
    outside.mkdir()
    assert git_state(outside.parent.parent / "definitely-not-a-dir-xyz")[0] == "unknown"


def test_job_resources_and_dataset_records(tmp_path):
    def record(rel, wall, cpu, rss):
        write_json(tmp_path / ".uqcal/records" / rel,
                   {"resources": {"wall_seconds": wall, "cpu_seconds": cpu, "max_rss_mb": rss}})

    record("train/rio/concrete/holdout/rio.json", 2.5, 1.2, 100.0)
    record("train/rio/concrete/holdout/nn.json", 3.5, 3.1, 612.0)
    record("materialise/concrete.json", 0.5, 0.1, 90.0)
    write_json(tmp_path / ".uqcal/records/train/broken.json", {"no": "resources"})
    bench = read_job_resources(tmp_path / ".uqcal/records")
    assert sorted(bench["rule"]) == ["materialise", "train", "train"]
    assert bench.loc[bench["rule"] == "train", "seconds"].sum() == pytest.approx(6.0)
    nn = bench.set_index("job").loc["rio/concrete/holdout/nn"]
    assert (nn["cpu_seconds"], nn["max_rss_mb"]) == (pytest.approx(3.1), pytest.approx(612.0))
    write_json(tmp_path / "data/raw/concrete.json", {"sha256": "00", "rows": 1030})
    records = read_dataset_records(tmp_path / "data")
    assert records == {"concrete": {"sha256": "00", "rows": 1030}}
    config = tmp_path / "config.yaml"
    config.write_text("a: 1\n")
    prov = collect(config, tmp_path, tmp_path / ".uqcal/records", tmp_path / "data")
    assert prov.config_sha256 == hashlib.sha256(b"a: 1\n").hexdigest()
    assert prov.packages["pandas"] == pd.__version__
    assert prov.device.startswith(("CPU:", "GPU:"))
    page = provenance_html(prov, family="rio", datasets=["concrete", "diabetes"])
    assert "train" in page and "6.0" in page and "materialise" not in page  # per-family rule times
    assert "No provenance record for: diabetes" in page and prov.config_sha256[:16] in page


def _device_rows(page: str) -> list[list[str]]:
    """Cells of the run-devices table of a page (tags stripped)."""
    table = re.search(r'<table class="run-devices">(.*?)</table>', page, re.S)
    assert table, "the provenance block has no table of the runs' devices"
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)
    cells = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)] for r in rows]
    assert cells[0] == ["device", "device name", "runs", "methods (runs)"]
    return cells[1:]


def test_run_devices_come_from_each_runs_train_stats(tmp_path):
    def stats(run: str, **fields):
        write_json(tmp_path / "rio/concrete/holdout" / run / "train_stats.json", {"fit_failures": 0, **fields})

    for seed in (0, 1):
        stats(f"nn/seed{seed}", device="cuda", device_name="NVIDIA H100 80GB HBM3")
        stats(f"rio/seed{seed}", device="cuda", device_name="NVIDIA H100 80GB HBM3")
    stats("marginal/seed0", device="cpu", device_name="x86_64")
    stats("svgp/seed0")  # written before runs recorded their device
    write_json(tmp_path / "qr/concrete/cv5/dvi/seed0/train_stats.json", {"device": "cpu"})  # another family
    devices = read_run_devices(RunFiles.on_disk(tmp_path, "rio"))
    assert devices.to_dict("records") == [
        {"device": "cpu", "device_name": "x86_64", "method": "marginal", "runs": 1},
        {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "method": "nn", "runs": 2},
        {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "method": "rio", "runs": 2},
        {"device": "not recorded", "device_name": "", "method": "svgp", "runs": 1},
    ]
    prov = collect(tmp_path / "config.yaml", tmp_path, tmp_path / "records", tmp_path / "data")
    assert _device_rows(provenance_html(prov, family="rio", devices=devices)) == [
        ["cpu", "x86_64", "1", "marginal (1)"],
        ["cuda", "NVIDIA H100 80GB HBM3", "4", "nn (2), rio (2)"],
        ["not recorded", "", "1", "svgp (1)"],
    ]
    assert "run-devices" not in provenance_html(prov)  # the index page: no family, no runs' device


def test_the_family_page_shows_the_device_of_the_configs_runs(tmp_path):
    tree = build_smoke_like_tree(tmp_path, seeds=2, rio_datasets=("concrete",))
    config = copy.deepcopy(tree["config"])
    config["families"] = {"rio": config["families"]["rio"]}
    rio = tree["results"] / "rio" / "concrete" / "holdout"
    for method in ("nn", "rio", "svgp", "marginal"):
        for seed in (0, 1):
            device = ("cpu", "x86_64") if method == "marginal" else ("cuda", "NVIDIA H100 80GB HBM3")
            write_json(rio / method / f"seed{seed}" / "train_stats.json",
                       {"device": device[0], "device_name": device[1]})
    # A run this config does not plan (seed 7) trained elsewhere: it must not reach the page.
    write_run(tree["results"], "rio", "concrete", "holdout", "rio", 7, {"rmse": 1.0, "nlpd": 1.0})
    write_json(rio / "rio" / "seed7" / "train_stats.json", {"device": "cuda:3", "device_name": "Tesla V100"})
    config["report"] = {**(config.get("report") or {}),
                        "budget_notes": {"rio": ["RIO's ablations run 1 of the 2 splits <here>."]}}
    build_reports(config, str(tree["config_path"]), tree["results"], tree["out"], tree["data"], tree["logs"])
    page = (tree["out"] / "rio" / "index.html").read_text()
    # the config's own note on where its budget falls short, escaped, on its family's page only
    assert "<li>RIO&#x27;s ablations run 1 of the 2 splits &lt;here&gt;.</li>" in page
    assert page.index("Claims checklist") < page.index('id="methodology"') < page.index('class="budget"')
    assert _device_rows(page) == [
        ["cpu", "x86_64", "2", "marginal (2)"],
        ["cuda", "NVIDIA H100 80GB HBM3", "6", "nn (2), rio (2), svgp (2)"],
    ]


REPO = Path(__file__).resolve().parents[3]


def test_provenance_records_the_lock_hash_and_the_locked_versions(tmp_path):
    # The repository's own lock: its hash is on every report page, and the test environment is that lock
    # (`make test` installs it), so nothing differs. A test run outside `make test` may differ: only the hash
    # is checked there.
    prov = collect(tmp_path / "config.yaml", REPO, tmp_path / "records", tmp_path / "data")
    lock = (REPO / "requirements.lock").read_bytes()
    assert prov.lock["requirements.lock"] == hashlib.sha256(lock).hexdigest()
    torch_lock = REPO / "requirements-torch-cpu.lock"
    assert prov.lock["requirements-torch-cpu.lock"] == hashlib.sha256(torch_lock.read_bytes()).hexdigest()
    pins = lock_pins(REPO / "requirements.lock")
    for name in ("gpytorch", "botorch", "snakemake", "dvc", "numpy", "scipy", "pandas", "scikit-learn"):
        assert name in pins, name
    assert lock_pins(torch_lock)["torch"] == "2.13.0+cpu"
    if os.environ.get("UQCAL_LOCKED_ENV") == "1":  # set by `make test`
        assert prov.lock_mismatches == [], prov.lock_mismatches
    page = provenance_html(prov)
    assert prov.lock["requirements.lock"] in page


def test_lock_state_names_every_installed_version_that_differs(tmp_path):
    (tmp_path / "requirements.lock").write_text(
        "# comment\nnumpy==2.0.0 \\\n    --hash=sha256:00\n    # via uqcal\nScikit_Learn==1.5.0 ; python_version >= '3'\n"
        "absent-pkg==1.0\n"
    )
    (tmp_path / "requirements-torch-cpu.lock").write_text("torch==2.13.0+cpu \\\n    --hash=sha256:11\nsympy==1.0\n")
    installed = {"numpy": "2.0.0", "scikit-learn": "1.5.0", "absent-pkg": "1.0", "torch": "2.13.0+cpu", "sympy": "1.0"}
    hashes, differ = lock_state(tmp_path, installed)
    assert hashes["requirements.lock"] == hashlib.sha256((tmp_path / "requirements.lock").read_bytes()).hexdigest()
    assert set(hashes) == {"requirements.lock", "requirements-torch-cpu.lock"}
    assert differ == []
    _, differ = lock_state(tmp_path, {**installed, "numpy": "2.1.0", "torch": "2.13.0+cu128"})
    assert differ == ["numpy 2.1.0 (lock: 2.0.0)", "torch 2.13.0+cu128 (lock: 2.13.0+cpu)"]
    _, differ = lock_state(tmp_path, {k: v for k, v in installed.items() if k != "absent-pkg"})
    assert differ == ["absent-pkg not installed (lock: 1.0)"]
    # A changed lock is a changed hash; no lock: recorded as missing.
    (tmp_path / "requirements.lock").write_text("numpy==2.0.1\n")
    assert lock_state(tmp_path, installed)[0]["requirements.lock"] != hashes["requirements.lock"]
    assert lock_state(tmp_path / "nowhere", installed) == ({"requirements.lock": "missing"}, [])

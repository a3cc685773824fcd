"""Provenance: config hash, git state, benchmark TSVs, dataset records; and the provenance block on pages."""

from __future__ import annotations

import hashlib
import subprocess

import pandas as pd
import pytest

from uqcal.io import write_json, write_text
from uqcal.report.html import provenance_html
from uqcal.report.provenance import collect, file_sha256, git_state, read_benchmarks, read_dataset_records


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
    git("add", "f.txt")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "y")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_state(tmp_path) == (head, False)
    (tmp_path / "f.txt").write_text("b")
    assert git_state(tmp_path) == (head, True)
    outside = tmp_path / "nogit"
    outside.mkdir()
    assert git_state(outside.parent.parent / "definitely-not-a-dir-xyz")[0] == "unknown"


def test_benchmarks_and_dataset_records(tmp_path):
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    write_text(
        tmp_path / "logs/bench/train/rio/concrete/holdout/rio/seed0.tsv",
        header + "2.5\t0:00:02\t100.0\t1\t1\t1\t0\t0\t50\t1.2\n",
    )
    write_text(
        tmp_path / "logs/bench/train/rio/concrete/holdout/rio/seed1.tsv",
        header + "3.5\t0:00:03\t110.0\t1\t1\t1\t0\t0\t50\t1.2\n",
    )
    write_text(tmp_path / "logs/bench/materialise/concrete.tsv", header + "0.5\t0:00:00\t90\t1\t1\t1\t0\t0\t5\t0.1\n")
    write_text(tmp_path / "logs/bench/broken/x.tsv", "not a benchmark\n")
    bench = read_benchmarks(tmp_path / "logs")
    assert sorted(bench["rule"]) == ["materialise", "train", "train"]
    assert bench.loc[bench["rule"] == "train", "seconds"].sum() == pytest.approx(6.0)
    assert "rio/concrete/holdout/rio/seed0" in set(bench["job"])
    # Without a job log, CPU and memory are the benchmark's ...
    seed1 = bench.set_index("job").loc["rio/concrete/holdout/rio/seed1"]
    assert (seed1["cpu_seconds"], seed1["max_rss_mb"]) == (pytest.approx(1.2), pytest.approx(110.0))
    # ... with one, the job's own last resource line wins (the preload worker's benchmark sees only the client).
    write_text(
        tmp_path / "logs/train/rio/concrete/holdout/rio/seed1.log",
        "INFO uqcal: uqcal train: 9.0 s wall, 1.0 s CPU, peak RSS 5 MB\n"
        "INFO uqcal: uqcal train: 3.4 s wall, 3.1 s CPU, peak RSS 612 MB\n",
    )
    seed1 = read_benchmarks(tmp_path / "logs").set_index("job").loc["rio/concrete/holdout/rio/seed1"]
    assert (seed1["cpu_seconds"], seed1["max_rss_mb"]) == (pytest.approx(3.1), pytest.approx(612.0))
    write_json(tmp_path / "data/raw/concrete.json", {"sha256": "00", "rows": 1030})
    records = read_dataset_records(tmp_path / "data")
    assert records == {"concrete": {"sha256": "00", "rows": 1030}}
    config = tmp_path / "config.yaml"
    config.write_text("a: 1\n")
    prov = collect(config, tmp_path, tmp_path / "logs", tmp_path / "data")
    assert prov.config_sha256 == hashlib.sha256(b"a: 1\n").hexdigest()
    assert prov.packages["pandas"] == pd.__version__
    assert prov.device.startswith(("CPU:", "GPU:"))
    page = provenance_html(prov, family="rio", datasets=["concrete", "diabetes"])
    assert "train" in page and "6.0" in page and "materialise" not in page  # per-family rule times
    assert "No provenance record for: diabetes" in page and prov.config_sha256[:16] in page

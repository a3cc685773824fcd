"""Issue 53, "job shape for a cluster": a family whose seeds run as one job each (``job_shape``) writes the same
results, and feeds the same report inputs, as its whole jobs did; the other families' jobs stay current.

The smoke run (`smoke_run`) ran BO's three methods as one job of 2 seeds each. Its copy runs again under a config
that splits every job with a declared work (``one_seed_per_job_over_hours: 0``: BO's, the smoke's one-seed fewshot
jobs stay whole): six one-seed jobs, BO's aggregate and the report run; nothing else does.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import snakemake
from uqcal.methods.api import is_timing_key

pytestmark = pytest.mark.slow  # six BO seeds, BO's aggregate and the report (~1-2 min on 2 cores)

SPLIT = "config/smoke-split.yaml"
SKIPPED = {".snakemake_timestamp", ".gitignore"}


def files(root: Path, under: str) -> set[str]:
    return {p.relative_to(root).as_posix() for p in (root / under).rglob("*") if p.is_file() and p.name not in SKIPPED}


def records(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / ".uqcal/records").rglob("*.json")}


def test_a_family_run_one_seed_per_job_gives_the_results_of_its_whole_jobs(smoke_run, tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(smoke_run, root, symlinks=True, ignore=shutil.ignore_patterns("cache", "tmp", ".snakemake"))
    (root / SPLIT).write_text("extends: smoke.yaml\njob_shape: {one_seed_per_job_over_hours: 0}\n")
    before = records(root)

    dry = snakemake(["-n", "--cores", "2", "--configfile", SPLIT], root).stdout
    planned = dict(re.findall(r"^(\w+)\s+(\d+)$", dry, re.M))  # Snakemake's job-count table
    assert planned == {"train_seed": "6", "aggregate": "1", "report": "1", "all": "1", "total": "9"}, dry[-3000:]
    proc = snakemake(["--cores", "2", "--configfile", SPLIT], root, timeout=1500)
    # the progress line counts the one-seed jobs as the uqcal jobs they are (train/.../seed<k>)
    assert re.search(r"\[progress [^]]+\] done: 8 of 8 jobs", proc.stdout + proc.stderr), proc.stderr[-3000:]

    # every seed's folder holds the files it held, with the same metrics; BO's tables read them alike
    assert files(root, "results") == files(smoke_run, "results")
    for path in sorted((smoke_run / "results/bo").rglob("metrics.json")):
        rel = path.relative_to(smoke_run)
        whole, one = json.loads(path.read_text()), json.loads((root / rel).read_text())
        assert one.keys() == whole.keys() and one["seed"] == whole["seed"]
        assert one["metrics"] == pytest.approx(whole["metrics"], rel=1e-9, abs=1e-12), rel
    for name in ("summary.csv", "runs.parquet"):  # their timings (train_stats.json's) are this run's own
        read = pd.read_csv if name.endswith(".csv") else pd.read_parquet
        one, whole = (read(base / "results/bo" / name) for base in (root, smoke_run))
        assert one[["dataset", "setting", "method", "metric"]].equals(whole[["dataset", "setting", "method", "metric"]])
        kept = ~one["metric"].map(is_timing_key)
        assert kept.sum() > 20
        pd.testing.assert_frame_equal(one[kept], whole[kept], rtol=1e-9)
    assert files(root, "reports") == files(smoke_run, "reports")

    # the one-seed jobs left their records; no other family's job ran again
    after = records(root)
    seeds = sorted(name for name in after.keys() - before.keys())
    assert seeds == sorted(f".uqcal/records/train/bo/forrester/forrester-basin-ucb/{method}/seed{k}.json"
                           for method in ("random", "uncalibrated", "calibrated") for k in (0, 1))
    changed = sorted(name for name in before if after[name] != before[name])
    assert changed == [".uqcal/records/aggregate/bo.json", ".uqcal/records/report/report.json"]
    # DVC's stages are the same jobs (the run's `uqcal dvc-sync --commit`), each seed's a stage of its own
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    seed_stage = stages["train-bo-forrester-forrester-basin-ucb-calibrated-seed1"]
    assert seed_stage["cmd"].endswith("--method calibrated --seed 1")
    assert seed_stage["outs"] == ["results/bo/forrester/forrester-basin-ucb/calibrated/seed1",
                                  ".uqcal/records/train/bo/forrester/forrester-basin-ucb/calibrated/seed1.json"]
    assert "train-bo-forrester-forrester-basin-ucb-calibrated" not in stages
    # and a second run has nothing to do
    again = snakemake(["-n", "--cores", "2", "--configfile", SPLIT], root).stdout
    assert "Nothing to be done" in again, again[-3000:]

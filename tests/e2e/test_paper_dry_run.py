"""Issue 49, item 7: the README's SLURM dry run of config/paper.yaml on a fresh clone plans the whole run and
names the files placed by hand (a csv source's `path`) as missing inputs, instead of failing on the first.
Issue 53: it plans the long methods' seeds as one job each (``job_shape``; rule train_seed), the others whole."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import BIN, REPO, copy_repo, run
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.plan import plan, resources

pytestmark = pytest.mark.slow


def test_the_slurm_dry_run_of_the_paper_config_on_a_fresh_clone_names_the_missing_inputs(tmp_path):
    root = copy_repo(tmp_path / "clone")
    assert not (root / "data/downloads/ahm.csv").exists()
    proc = run([str(BIN / "snakemake"), "-n", "--workflow-profile", "workflow/profiles/slurm",
                "--configfile", "config/paper.yaml"], root, timeout=1800, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "MissingInputException" not in out
    missing = re.findall(r"^missing input: (\S+) \(datasets\.(\w+)\.source\.path; a run needs it", out, re.M)
    # every local file config/paper.yaml's datasets read, and nothing else (its downloads are fetched by the run)
    registry = yaml.safe_load((root / "config/datasets.paper.yaml").read_text())
    expected = {(entry["source"]["path"], name) for name, entry in registry.items()
                if isinstance(entry["source"].get("path"), str)}
    assert ("data/downloads/ahm.csv", "ahm") in missing
    assert set(missing) <= expected and len(missing) == len(set(missing))
    assert "This was a dry-run" in out and not list((root / "data").rglob("*.parquet"))
    # Snakemake's job-count table: a train_seed job per seed of each method that runs one seed per job
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    config = load_config(REPO / "config/paper.yaml")
    trains = [job for job in plan(config) if job.rule == "train"]
    seed_jobs = [job for job in trains if job.seed is not None]
    assert {job.key[0] for job in seed_jobs} >= {"fewshot"}  # its 5 seeds of paper-scale training: days each
    assert int(counts["train_seed"]) == len(seed_jobs) and int(counts["train"]) == len(trains) - len(seed_jobs)
    # a seed's job asks for the whole job's resources (sbatch's --mem, --time, --gpus)
    block = re.search(r"^rule train_seed:\n(?:    .*\n)*?    wildcards: family=fewshot, dataset=cub200, setting=5w1s, "
                      r"method=md, seed=4\n    resources: (.*)$", out, re.M)
    assert block, out[-3000:]
    asked = dict(item.split("=", 1) for item in block.group(1).split(", "))
    wanted = resources(config, "fewshot", "cub200", "md")
    assert {key: int(asked[key]) for key in ("mem_mb", "runtime", "gpu")} == {
        key: wanted[key] for key in ("mem_mb", "runtime", "gpu")} and wanted["gpu"] > 0

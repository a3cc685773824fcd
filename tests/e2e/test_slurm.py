"""The SLURM profile on a real (single-node, localhost) SLURM cluster: jobs go through sbatch and give the
same metrics as a local `--cores` run.

Needs Debian's `slurm-wlm` and `munge` (installed by .ci/run). Outside CI the test skips when SLURM cannot
start; in CI (`CI` set) it fails, naming the daemon and showing its log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN, copy_repo, tool_env
from tests.e2e.slurm_cluster import SECOND_PARTITION, SlurmUnavailable, slurm_cluster

pytestmark = pytest.mark.slow  # the SLURM profile on a local cluster (.ci/run's second pass skips it)

# Two families, two methods each, and one BO method whose 2 seeds run one job each (job_shape), no report:
# enough to send training and evaluation through sbatch while keeping the test short (each cluster job also
# starts a snakemake of its own).
METHODS = {"rio": ("marginal", "nn"), "qr": ("marginal", "dvi"), "bo": ("random",)}
FAMILIES = tuple(METHODS)
TARGETS = [f"results/{family}/summary.csv" for family in FAMILIES]
CONFIG = "config/slurm_test.yaml"
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+)")


def write_config(root: Path) -> None:
    """The smoke config restricted to FAMILIES, every training job on CPU (no GPU request may reach sbatch).

    Resources that must reach sbatch: rio's jobs go to the cluster's second partition with 2 CPUs each, and
    qr's dvi gets its own memory (resources.per_method); qr keeps the default partition. BO's seeds run one job
    each (``one_seed_per_job_over_hours: 0``), each with the family's partition, CPUs and memory.
    """
    cfg = yaml.safe_load((root / "config/smoke.yaml").read_text())
    cfg["families"] = {family: cfg["families"][family] for family in FAMILIES}
    for name, family in cfg["families"].items():
        family["methods"] = {method: family["methods"][method] for method in METHODS[name]}
        family.setdefault("resources", {})["gpu"] = 0
    cfg["families"]["rio"]["resources"].update(slurm_partition=SECOND_PARTITION, cpus=2)
    cfg["families"]["qr"]["resources"].update(cpus=1, per_method={"dvi": {"mem_mb": 3000}})
    cfg["families"]["bo"]["resources"].update(slurm_partition=SECOND_PARTITION, cpus=2, mem_mb=2500)
    cfg["job_shape"] = {"one_seed_per_job_over_hours": 0}
    (root / CONFIG).write_text(yaml.safe_dump(cfg, sort_keys=False))


def metrics_by_run(root: Path) -> dict[str, dict]:
    files = sorted((root / "results").rglob("metrics.json"))
    return {str(path.relative_to(root)): json.loads(path.read_text())["metrics"] for path in files}


def assert_same_metrics(expected: dict, actual: dict, path: str) -> None:
    assert expected.keys() == actual.keys(), f"{path}: metric names differ"
    for name, value in expected.items():  # timings live in train_stats.json, so every metric is compared
        other = actual[name]
        if isinstance(value, float) and isinstance(other, float):
            # Same code, same seeds, same thread count: results are bit-identical in practice; the tolerance
            # only absorbs a different BLAS code path should a compute node pick one.
            assert other == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), f"{path}: {name}"
        else:
            assert other == value, f"{path}: {name}"


@pytest.fixture
def cluster():
    """A running SLURM cluster, stopped at teardown; skip (or, in CI, fail) when it cannot start."""
    with ExitStack() as stack:
        try:
            cluster = stack.enter_context(slurm_cluster())
        except SlurmUnavailable as exc:
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"SLURM could not start in CI: {exc}")
            pytest.skip(f"SLURM could not start here: {exc}")
        yield cluster


def test_slurm_profile_submits_through_sbatch_and_matches_a_local_run(cluster, tmp_path):
    # The local reference run goes alongside the SLURM run, which mostly waits between status checks.
    local = copy_repo(tmp_path / "local")
    write_config(local)
    local_run = subprocess.Popen([str(BIN / "snakemake"), *TARGETS, "--cores", "2", "--configfile", CONFIG],
                                 cwd=local, env=tool_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        on_slurm = copy_repo(tmp_path / "slurm")
        write_config(on_slurm)
        # The README's command: --workflow-profile, so that the SLURM profile replaces workflow/profiles/default.
        cmd = [str(BIN / "snakemake"), *TARGETS, "--configfile", CONFIG, "--workflow-profile", "workflow/profiles/slurm",
               # A test cluster has no slurmdbd (so no sacct) and no accounts; poll squeue every few seconds.
               "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
               "--slurm-no-account", "--jobs", "8", "--retries", "0", "--latency-wait", "5",
               "--verbose"]  # --verbose logs every sbatch call
        proc = subprocess.run(cmd, cwd=on_slurm, env=cluster.environ(tool_env()), capture_output=True, text=True,
                              timeout=900)
        local_log, _ = local_run.communicate(timeout=900)
    finally:
        if local_run.poll() is None:
            local_run.kill()
            local_run.wait()
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"snakemake on SLURM failed:\n{log[-6000:]}\n{cluster.log_tails()}"
    assert local_run.returncode == 0, f"the local reference run failed:\n{local_log[-6000:]}"

    # Every cluster job went through sbatch, and slurmctld saw each one complete.
    slurm_ids = SUBMITTED.findall(log)
    sbatch_calls = [line for line in log.splitlines() if "sbatch call:" in line]
    assert slurm_ids and len(sbatch_calls) == len(slurm_ids), log[-4000:]
    jobs = cluster.client("scontrol", "-o", "show", "job").stdout.splitlines()
    states = {re.search(r"JobId=(\d+)", line).group(1): re.search(r"JobState=(\S+)", line).group(1) for line in jobs}
    assert {i: states.get(i) for i in slurm_ids} == dict.fromkeys(slurm_ids, "COMPLETED"), jobs
    runs = metrics_by_run(on_slurm)
    train_calls = [c for c in sbatch_calls if "rule_train" in c]
    assert len(train_calls) == len(runs), "each run (one seed each) must be trained through sbatch"
    assert not [c for c in sbatch_calls if "--gpus" in c or "--gres" in c], "a GPU request reached sbatch"
    for local_rule in ("materialise", "split", "aggregate"):
        assert not [c for c in sbatch_calls if f"rule_{local_rule}" in c], f"{local_rule} was sent to the cluster"
    assert "Using workflow specific profile workflow/profiles/slurm" in log
    assert "profiles/default" not in log

    # The config's resources reached sbatch: partition and CPUs for rio, a per-method memory for qr's dvi.
    rio_calls = [c for c in train_calls if "_rio_" in c]
    qr_calls = [c for c in train_calls if "_qr_" in c]
    assert len(rio_calls) == len(qr_calls) == 2, train_calls
    partition = re.compile(rf"-p '?{SECOND_PARTITION}'?(\s|$)")
    # rio's nn gets the family's 2 CPUs; the reference predictor (marginal) asks for its own small resources
    # (1 CPU) on the family's partition, whatever the family trains with (issue 42, item 7).
    rio_nn = [c for c in rio_calls if "marginal" not in c]
    rio_reference = [c for c in rio_calls if "marginal" in c]
    assert len(rio_nn) == len(rio_reference) == 1, rio_calls
    assert all(partition.search(c) for c in rio_calls), rio_calls
    assert "--cpus-per-task=2" in rio_nn[0] and "--cpus-per-task=1" in rio_reference[0], rio_calls
    assert not any(partition.search(c) for c in qr_calls) and all("--cpus-per-task=1" in c for c in qr_calls), qr_calls
    dvi = [c for c in qr_calls if "dvi" in c]
    assert len(dvi) == 1 and "--mem 3000" in dvi[0] and all("--mem 4000" in c for c in qr_calls if c not in dvi)
    # BO's seeds, one job each, with the family's resources (what the whole job would ask for)
    seed_calls = [c for c in train_calls if "rule_train_seed" in c]
    assert len(seed_calls) == 2 and all("_bo_" in c for c in seed_calls), train_calls
    assert all(partition.search(c) and "--cpus-per-task=2" in c and "--mem 2500" in c for c in seed_calls), seed_calls

    # Same seeds, same metrics as the local run.
    expected = metrics_by_run(local)
    assert expected and runs.keys() == expected.keys()
    for path, metrics in expected.items():
        assert_same_metrics(metrics, runs[path], path)

"""Partial reruns (DVC and Snakemake), the DVC remote round trip, crash recovery and determinism (issue 9).

Every test works on its own copy of the finished smoke run (results, DVC cache and Snakemake metadata
included), so none of them disturbs the others.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN, copy_repo, run, snakemake, tool_env
from uqcal.api import get_entry
from uqcal.config import iter_batches, load_config

SMOKE = "config/smoke.yaml"
CHANGED_STAGE = "train-rio-concrete-holdout-nn"


def dvc(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    return run([str(BIN / "dvc"), *args], cwd, **kw)


def copy_run(smoke_run: Path, dest: Path) -> Path:
    shutil.copytree(smoke_run, dest, symlinks=True)  # copy2 keeps mtimes, so Snakemake sees the same state
    return dest


def fingerprints(root: Path, folders=("data", "results", "reports")) -> dict[str, str]:
    out = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def set_nn_epochs(root: Path, epochs: int) -> None:
    path = root / SMOKE
    cfg = yaml.safe_load(path.read_text())
    cfg["families"]["rio"]["methods"]["nn"]["max_epochs"] = epochs
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def downstream(stages: dict, start: str) -> set[str]:
    """The stage and every stage that (transitively) consumes its outputs, read off dvc.yaml."""
    producer = {o: name for name, st in stages.items() for o in st.get("outs", []) if isinstance(o, str)}
    consumers: dict[str, set[str]] = {}
    for name, st in stages.items():
        for dep in st.get("deps", []):
            if dep in producer:
                consumers.setdefault(producer[dep], set()).add(name)
    found, todo = {start}, [start]
    while todo:
        for nxt in consumers.get(todo.pop(), ()):
            if nxt not in found:
                found.add(nxt)
                todo.append(nxt)
    return found


def outs_of(stages: dict, names: set[str]) -> list[str]:
    return [o for name in names for o in stages[name].get("outs", []) if isinstance(o, str)]


def test_dvc_reruns_only_what_a_param_change_touches_and_restores_from_the_run_cache(smoke_run, tmp_path):
    root = copy_run(smoke_run, tmp_path / "repo")
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    before = fingerprints(root)

    # (a) One hyperparameter of one method: status names that stage alone ...
    set_nn_epochs(root, 6)
    status = json.loads(dvc(["status", "--json"], root).stdout)
    assert set(status) == {CHANGED_STAGE}, status
    # ... and repro runs it and exactly its downstream stages (rio's GP reuses the network, then aggregate, report).
    expected = downstream(stages, CHANGED_STAGE)
    assert {"train-rio-concrete-holdout-rio", "aggregate-rio", "report"} <= expected
    repro = dvc(["repro"], root, timeout=900)
    ran = set(re.findall(r"Running stage '([^']+)'", repro.stdout))
    assert ran == expected, repro.stdout[-3000:]
    after = fingerprints(root)
    touched = tuple(f"{o}/" for o in outs_of(stages, expected)) + tuple(outs_of(stages, expected))
    untouched = {p: h for p, h in before.items() if not p.startswith(touched)}
    assert {p: after.get(p) for p in untouched} == untouched, "a stage that does not depend on nn changed"
    nn_metrics = "results/rio/concrete/holdout/nn/seed0/metrics.json"
    assert after[nn_metrics] != before[nn_metrics]

    # (b) Revert: everything comes back from DVC's run-cache, nothing executes, bytes are the original ones.
    set_nn_epochs(root, 5)
    repro = dvc(["repro"], root, timeout=900)
    assert "Running stage" not in repro.stdout, repro.stdout[-3000:]
    assert f"Stage '{CHANGED_STAGE}' is cached" in repro.stdout
    restored = fingerprints(root)
    assert {p: restored.get(p) for p in before} == before


def test_push_then_pull_into_a_fresh_clone_leaves_snakemake_nothing_to_do(smoke_run, tmp_path):
    root = copy_run(smoke_run, tmp_path / "repo")
    remote = tmp_path / "remote"
    dvc(["remote", "modify", "--local", "local", "url", str(remote)], root)
    dvc(["push", "-q"], root, timeout=600)
    git = ["git", "-c", "user.email=ci@uqcal", "-c", "user.name=ci"]
    run([*git, "add", "-A"], root)
    run([*git, "commit", "-q", "--allow-empty", "-m", "smoke results"], root)
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(root), str(clone)], tmp_path)
    assert not (clone / "results").exists()
    dvc(["remote", "modify", "--local", "local", "url", str(remote)], clone)
    dvc(["pull", "-q"], clone, timeout=600)
    assert fingerprints(clone) == fingerprints(root)
    # DVC checks files out in no particular order; make the worst case certain: a raw table checked out last.
    (clone / "data/raw/concrete.parquet").touch()
    plan = snakemake(["-n", "--configfile", SMOKE], clone)
    assert "Nothing to be done" not in plan.stdout + plan.stderr, "negative control: mtimes were already ordered"
    run([str(BIN / "uqcal"), "restore-mtimes"], clone)
    plan = snakemake(["-n", "--configfile", SMOKE], clone)
    assert "Nothing to be done" in plan.stdout + plan.stderr, plan.stdout[-3000:]


def test_snakemake_plans_only_the_jobs_a_param_change_touches(smoke_run, tmp_path):
    root = copy_run(smoke_run, tmp_path / "repo")
    plan = snakemake(["-n", "--configfile", SMOKE], root)
    assert "Nothing to be done" in plan.stdout + plan.stderr
    set_nn_epochs(root, 6)
    plan = snakemake(["-n", "--configfile", SMOKE], root).stdout
    outputs = {o for line in re.findall(r"^\s+output: (.+)$", plan, flags=re.M) for o in line.split(", ")}
    rio_methods = load_config(root / SMOKE)["families"]["rio"]["methods"]
    dependents = {m for m in rio_methods if get_entry("rio", m).depends_on == "nn"}
    assert dependents >= {"rio", "svgp"}
    expected = {f"results/rio/concrete/holdout/{m}" for m in {"nn", *dependents}} | {"results/rio/summary.csv"}
    assert {o for o in outputs if not o.startswith("reports/")} == expected, plan[-3000:]
    assert "reports/index.html" in outputs


# ------------------------------------------------------------------------------------ crash + resume
def _metareg_config(root: Path) -> str:
    """Smoke, metareg's meta-calibrated GP only, trained long enough to be killed in the middle."""
    cfg = yaml.safe_load((root / SMOKE).read_text())
    fam = cfg["families"]["metareg"]
    fam["seeds"] = 2
    fam["methods"] = {"metacal": {"epochs": 60, "eval_every": 2, "patience": 1000}}
    cfg["families"] = {"metareg": fam}
    (root / "config/crash.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return "config/crash.yaml"


TARGET = "results/metareg/summary.csv"


def test_a_run_killed_mid_training_resumes_and_matches_an_uninterrupted_one(tmp_path):
    reference = copy_repo(tmp_path / "reference")
    snakemake([TARGET, "--cores", "1", "--configfile", _metareg_config(reference)], reference, timeout=900)

    root = copy_repo(tmp_path / "crashed")
    config = _metareg_config(root)
    cmd = [str(BIN / "snakemake"), TARGET, "--cores", "1", "--configfile", config]
    proc = subprocess.Popen(cmd, cwd=root, env=tool_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    resume = root / "results/.resume/metareg/ozone/ns10/metacal"
    deadline = time.monotonic() + 600
    try:  # kill as soon as seed 1 has a checkpoint: seed 0 finished, seed 1 in the middle of meta-training
        while not list(resume.glob("seed1/*/checkpoint.pt")):
            assert proc.poll() is None, "the pipeline ended before it could be killed"
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(resume.glob("seed0/*/COMPLETE")), "seed 0 should have finished before the kill"
    assert not list(root.rglob("*.tmp")) and not list((root / "results").rglob(".*.tmp"))
    for path in (root / "results").rglob("*.json"):  # whatever exists is whole: writes are atomic
        json.loads(path.read_text())

    # A killed Snakemake leaves its lock behind (README, "Crashes"): unlock, then the same command again.
    snakemake([TARGET, "--unlock", "--configfile", config], root)
    again = snakemake([TARGET, "--cores", "1", "--configfile", config], root, timeout=900)
    log = (root / "logs/train/metareg/ozone/ns10/metacal.log").read_text()
    assert "restored the outputs an interrupted run had finished" in log, log[-2000:]
    assert "resuming from checkpoint" in log, log[-2000:]
    assert not (root / "results/.resume").exists(), "the resume folder outlived a finished run"
    assert again.returncode == 0
    for seed in (0, 1):
        rel = f"results/metareg/ozone/ns10/metacal/seed{seed}"
        assert (root / rel / "metrics.json").read_bytes() == (reference / rel / "metrics.json").read_bytes(), rel
        assert (root / rel / "predictions.parquet").read_bytes() == (reference / rel / "predictions.parquet").read_bytes()


# ------------------------------------------------------------------------------------ determinism
DETERMINISM_METHODS = {"metareg": "metacal", "rio": "nn", "qr": "dvi_qr", "fewshot": "md", "bo": "calibrated"}


@pytest.mark.parametrize("family", list(DETERMINISM_METHODS))
def test_a_second_run_of_the_same_seeds_writes_byte_identical_metrics(smoke_run, tmp_path, family):
    config = load_config(smoke_run / SMOKE)
    batch = next(b for b in iter_batches(config, [family]) if b.method == DETERMINISM_METHODS[family])
    results = tmp_path / "results"
    run([str(BIN / "uqcal"), "--results-dir", str(results), "train", "--config", SMOKE, "--family", family,
         "--dataset", batch.dataset, "--setting", batch.setting, "--method", batch.method], smoke_run)
    for r in batch.runs:
        first = (smoke_run / r.run_dir / "metrics.json").read_bytes()
        second = (results / Path(r.run_dir).relative_to("results") / "metrics.json").read_bytes()
        assert first == second, r.run_dir

"""Partial reruns: Snakemake and DVC agree on what is stale (issue 21), crash recovery, and determinism.

One test per scenario of issue 21's table, on the smoke config. Each works on its own copy of the finished
smoke run (results, records, DVC cache and Snakemake metadata included) and asserts the exact set of jobs
Snakemake plans, the stages DVC reports as changed (their downstream stages, read off dvc.yaml, are what
`dvc repro` then runs), and that both equal the set expected from the config and the code independently
of uqcal.pipeline.identity (the registry's `depends_on`, and which modules a job's process imports when it runs).
"""

from __future__ import annotations

import contextlib
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

from tests.conftest import BIN, GIT, copy_repo, run, snakemake, tool_env
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.config.runs import iter_batches

pytestmark = pytest.mark.slow  # Snakemake and DVC on copies of the smoke run (.ci/run's second pass skips it)

SMOKE = "config/smoke.yaml"
RECORD = re.compile(r"\.uqcal/records/(\w+)/(\S+?)\.json")


# ------------------------------------------------------------------------------------------ helpers
def dvc(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    return run([str(BIN / "dvc"), *args], cwd, **kw)


def copy_run(smoke_run: Path, dest: Path) -> Path:
    shutil.copytree(smoke_run, dest, symlinks=True)
    return dest


def planned(root: Path, *targets: str, src: Path | None = None) -> set[str]:
    """The jobs `snakemake -n` plans, as "rule name" (read off each job's record output)."""
    proc = run([str(BIN / "snakemake"), "-n", *targets, "--configfile", SMOKE], root, src=src)
    outputs = [line for line in proc.stdout.splitlines() if line.strip().startswith("output:")]
    return {f"{rule} {name}" for line in outputs for rule, name in RECORD.findall(line)}


def stage_jobs(root: Path) -> dict[str, str]:
    """DVC stage name -> "rule name", through each stage's record output."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    return {name: " ".join(RECORD.search(" ".join(stage["outs"])).groups()) for name, stage in stages.items()}


def dvc_changed(root: Path, src: Path | None = None) -> set[str]:
    """The stages `dvc status` reports as changed, as "rule name"."""
    status = json.loads(dvc(["status", "--json"], root, src=src).stdout or "{}")
    jobs = stage_jobs(root)
    return {jobs[name] for name in status}


def dvc_downstream(root: Path, changed: set[str]) -> set[str]:
    """`changed` and every stage that consumes their outputs, transitively (what `dvc repro` runs)."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    jobs = stage_jobs(root)
    producer = {out: jobs[name] for name, stage in stages.items() for out in stage["outs"]}
    consumers: dict[str, set[str]] = {}
    for name, stage in stages.items():
        for dep in stage["deps"]:
            if dep in producer:
                consumers.setdefault(producer[dep], set()).add(jobs[name])
    found, todo = set(changed), list(changed)
    while todo:
        for nxt in consumers.get(todo.pop(), ()):
            if nxt not in found:
                found.add(nxt)
                todo.append(nxt)
    return found


def nothing_to_do(root: Path, src: Path | None = None) -> None:
    assert planned(root, src=src) == set()
    assert dvc_changed(root, src=src) == set()


def fingerprints(root: Path, folders=("data", "results")) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in folders for p in sorted((root / folder).rglob("*"))
            if p.is_file() and p.name != ".snakemake_timestamp"}


def edit_config(root: Path, family: str, method: str, **params) -> None:
    path = root / SMOKE
    cfg = yaml.safe_load(path.read_text())
    cfg["families"][family]["methods"][method].update(params)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def smoke_jobs(root: Path, family: str, methods: set[str]) -> set[str]:
    """The smoke config's train jobs of ``methods`` in ``family``."""
    config = load_config(root / SMOKE)
    return {f"train {b.family}/{b.dataset}/{b.setting}/{b.method}" for b in iter_batches(config, [family])
            if b.method in methods}


def with_dependants(root: Path, family: str, methods: set[str]) -> set[str]:
    """``methods`` and the methods built on their runs (the registry's depends_on), transitively."""
    from uqcal.methods.api import get_entry

    configured = load_config(root / SMOKE)["families"][family]["methods"]
    found = set(methods)
    while True:
        more = {m for m in configured if get_entry(family, m).depends_on in found} - found
        if not more:
            return found
        found |= more


def importers(root: Path, family: str, module: str) -> set[str]:
    """Methods of ``family`` whose train process imported ``module`` in the smoke run: what each job's record
    says its process had in sys.modules at the end (uqcal.pipeline.records.imported_sources), not what
    uqcal.pipeline.identity reads off the source."""
    path = "src/" + module.replace(".", "/") + ".py"
    found = set()
    for record in (root / ".uqcal/records/train" / family).rglob("*.json"):
        if path in json.loads(record.read_text())["imported"]:
            found.add(record.stem)
    return found


def downstream_of(train_jobs: set[str], families: set[str]) -> set[str]:
    return train_jobs | {f"aggregate {f}" for f in families} | {"report report"}


# ------------------------------------------------------------------------------------------ issue 21's table
def test_a_changed_hyperparameter_reruns_that_method_its_dependants_aggregate_and_report(smoke_run, tmp_path):
    root = copy_run(smoke_run, tmp_path / "repo")
    nothing_to_do(root)
    edit_config(root, "rio", "nn", max_epochs=6)
    expected = downstream_of(smoke_jobs(root, "rio", with_dependants(root, "rio", {"nn"})), {"rio"})
    assert {"train rio/concrete/holdout/rio", "train rio/concrete/holdout/svgp"} <= expected
    assert planned(root) == expected
    changed = dvc_changed(root)
    assert dvc_downstream(root, changed) == expected
    assert "train rio/concrete/holdout/nn" in changed


def test_an_override_of_an_inherited_parameter_is_stale_for_snakemake_and_dvc_alike(smoke_run, tmp_path):
    # Issue 49, item 2: the smoke config becomes a child of its own content (every value inherited), then the
    # child overrides one value its parent sets. Before, dvc.yaml still named the parent for that key: DVC saw
    # the method current while Snakemake replanned it.
    root = copy_run(smoke_run, tmp_path / "repo")
    (root / "config/smoke-parent.yaml").write_text((root / SMOKE).read_text())
    (root / SMOKE).write_text("extends: smoke-parent.yaml\n")
    run([str(BIN / "uqcal"), "dvc-sync", "--config", SMOKE, "--commit"], root, timeout=900)
    nothing_to_do(root)
    (root / SMOKE).write_text("extends: smoke-parent.yaml\nfamilies:\n  rio:\n    methods:\n      nn: {max_epochs: 6}\n")
    expected = downstream_of(smoke_jobs(root, "rio", with_dependants(root, "rio", {"nn"})), {"rio"})
    assert "train rio/concrete/holdout/rio" in expected
    assert planned(root) == expected
    changed = dvc_changed(root)
    assert "train rio/concrete/holdout/nn" in changed
    assert dvc_downstream(root, changed) == expected


def test_a_fresh_clone_after_pull_reruns_exactly_the_job_whose_parameter_changed(smoke_run, tmp_path):
    root = copy_run(smoke_run, tmp_path / "repo")
    remote = tmp_path / "remote"
    dvc(["remote", "modify", "--local", "local", "url", str(remote)], root)
    dvc(["push", "-q"], root, timeout=600)
    # What the README asks of whoever shares results: commit dvc.yaml and dvc.lock.
    run([*GIT, "add", "dvc.yaml", "dvc.lock"], root)
    run([*GIT, "commit", "-q", "-m", "smoke results"], root)
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(root), str(clone)], tmp_path)
    assert not (clone / "results").exists() and not (clone / ".snakemake").exists()
    dvc(["remote", "modify", "--local", "local", "url", str(remote)], clone)
    # The README command, with this environment instead of a .venv in the clone.
    run(["make", "--assume-old=venv", "pull", f"BIN={BIN}"], clone, timeout=600)
    assert fingerprints(clone) == fingerprints(root)
    # DVC checks files out in no particular order; make it certain that an input is newer than everything.
    os.utime(clone / "data/raw/concrete.parquet")
    nothing_to_do(clone)
    # The records travel with the results: the report rebuilt here keeps every job's time and memory.
    from uqcal.pipeline.report.provenance import read_job_resources

    rows = read_job_resources(clone / ".uqcal/records")
    assert len(rows) == len(stage_jobs(clone)) and (rows["cpu_seconds"] > 0).all()

    edit_config(clone, "qr", "dvi", epochs=3)
    expected = downstream_of(smoke_jobs(clone, "qr", with_dependants(clone, "qr", {"dvi"})), {"qr"})
    assert "train qr/concrete/cv5/dvi_iso" in expected
    assert planned(clone) == expected
    assert dvc_downstream(clone, dvc_changed(clone)) == expected


@pytest.mark.parametrize(("module", "families"), [
    ("uqcal.methods.qr.dvi", ("qr",)),             # one method's module
    ("uqcal.methods.reference_predictors", None),  # the marginal baseline of every family
    ("uqcal.metrics.regression", None),            # a metric
])
def test_a_code_change_reruns_every_job_whose_process_imports_the_module(smoke_run, tmp_path, module, families):
    root = copy_run(smoke_run, tmp_path / "repo")
    src = root / "src"  # the copy's code is what its jobs import
    # No "nothing to do" check first: the train jobs planned must equal `expected` exactly, so a train job stale
    # before the edit fails them anyway; that a finished run has nothing to do is checked by
    # test_a_changed_hyperparameter_reruns_that_method_its_dependants_aggregate_and_report.
    path = src / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + "\n# an edit\n")

    config = load_config(root / SMOKE)
    families = families or tuple(config["families"])
    expected = set()
    for family in families:
        importing = importers(root, family, module)
        expected |= smoke_jobs(root, family, with_dependants(root, family, importing)) if importing else set()
    assert expected, f"no smoke job imports {module}: the scenario tests nothing"
    touched = {job.split()[1].split("/")[0] for job in expected}
    plan = planned(root, src=src)
    changed = dvc_changed(root, src=src)
    # Train jobs: exactly those whose process imports the module (and the methods built on their runs).
    assert {job for job in plan if job.startswith("train ")} == expected
    assert {job for job in dvc_downstream(root, changed) if job.startswith("train ")} == expected
    assert downstream_of(expected, touched) <= plan
    # Both tools see the same jobs; bookkeeping steps whose step module can import it (uqcal.pipeline.identity counts every
    # import its step module or the modules it imports can make) are stale for both.
    assert plan == dvc_downstream(root, changed)


def test_a_deleted_result_file_or_folder_reruns_that_method_and_what_depends_on_it(smoke_run, tmp_path):
    for victim in ("results/rio/concrete/holdout/nn/seed0/metrics.json", "results/rio/concrete/holdout/nn"):
        root = copy_run(smoke_run, tmp_path / victim.replace("/", "_"))
        path = root / victim
        shutil.rmtree(path) if path.is_dir() else path.unlink()
        expected = downstream_of(smoke_jobs(root, "rio", with_dependants(root, "rio", {"nn"})), {"rio"})
        assert planned(root) == expected, victim
        assert dvc_downstream(root, dvc_changed(root)) == expected, victim


def test_after_dvc_repro_and_a_run_cache_checkout_snakemake_has_nothing_to_do(smoke_run, tmp_path):
    root = copy_run(smoke_run, tmp_path / "repo")
    before = fingerprints(root)
    edit_config(root, "rio", "nn", max_epochs=6)
    expected = downstream_of(smoke_jobs(root, "rio", with_dependants(root, "rio", {"nn"})), {"rio"})
    jobs = stage_jobs(root)
    repro = dvc(["repro"], root, timeout=900)
    assert {jobs[s] for s in re.findall(r"Running stage '([^']+)'", repro.stdout)} == expected, repro.stdout[-3000:]
    nothing_to_do(root)
    # Revert: DVC restores every stage from its run-cache without running anything; still nothing to do.
    edit_config(root, "rio", "nn", max_epochs=5)
    repro = dvc(["repro"], root, timeout=900)
    assert "Running stage" not in repro.stdout, repro.stdout[-3000:]
    nothing_to_do(root)
    after = fingerprints(root)
    assert {p: after.get(p) for p in before} == before
    # `dvc exp run` runs the same stages in the workspace and records an experiment: nothing to do either.
    edit_config(root, "rio", "nn", max_epochs=6)
    dvc(["exp", "run", "-q"], root, timeout=900)
    nothing_to_do(root)


def test_an_identical_split_made_again_leaves_every_job_current(smoke_run, tmp_path):
    root = copy_run(smoke_run, tmp_path / "repo")
    split = "data/splits/bo/forrester/forrester-basin-ucb"
    before = fingerprints(root)
    # Through Snakemake (the split alone, forced) and through DVC (the stage alone, forced).
    snakemake([split, "--cores", "1", "--forcerun", "split", "--configfile", SMOKE], root)
    assert (root / split / ".snakemake_timestamp").exists()  # Snakemake's date file, ignored by DVC
    nothing_to_do(root)
    stage = next(name for name, job in stage_jobs(root).items() if job == "split bo/forrester/forrester-basin-ucb")
    dvc(["repro", "--force", "--single-item", stage], root)
    nothing_to_do(root)
    assert fingerprints(root) == before


def test_every_source_file_a_job_imported_is_in_its_code(smoke_run):
    # uqcal.pipeline.identity reads each job's code off the source (its step's static import closure); the records say what
    # each job's process really imported. A file imported but not in `code` would be a dependency neither
    # Snakemake nor DVC sees. The families' registries (their package's __init__: METHODS, FAMILY) are the one
    # exception, by design (issue 50): what a split or train job takes from them, its entry and the family's
    # splitter or evaluator, is in its spec's `job` or among its code roots (uqcal.pipeline.identity.registry_modules).
    from uqcal.methods.api import builtin_families

    registries = {f"src/uqcal/methods/{name}/__init__.py" for name in builtin_families()}
    # The job server (the smoke run is served) hosts a job's process and computes nothing the job writes.
    host = {"src/uqcal/cli/job_server.py"}
    records = list((smoke_run / ".uqcal/records").rglob("*.json"))
    assert len(records) == len(stage_jobs(smoke_run))
    for path in records:
        record = json.loads(path.read_text())
        assert record["imported"], path
        exempt = registries if record["rule"] in ("split", "train") else set()
        missing = set(record["imported"]) - set(record["code"]) - exempt - host
        assert not missing, f"{path.relative_to(smoke_run)}: imported but not a dependency: {sorted(missing)}"
        if record["rule"] == "train":  # served (uqcal.cli.job_server), and its record says so
            assert record["resources"].get("job_server") is True, path
            assert host <= set(record["imported"]), path


# ------------------------------------------------------------------------------------------ crashes
# A metacal variant whose seeds train one after another, each with mid-training checkpoints (metacal's own seeds
# train as one batched model, which writes none: MetaCal.seed_batchable).
CRASH_METHOD = "w_split"


def _metareg_config(root: Path) -> str:
    """Smoke, a meta-calibrated GP (``CRASH_METHOD``) only, trained long enough to be killed in the middle."""
    cfg = yaml.safe_load((root / SMOKE).read_text())
    fam = cfg["families"]["metareg"]
    fam["seeds"] = 2
    fam["methods"] = {CRASH_METHOD: {"epochs": 60, "eval_every": 2, "patience": 1000}}
    cfg["families"] = {"metareg": fam}
    (root / "config/crash.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return "config/crash.yaml"


TARGET = "results/metareg/summary.csv"
RESUME = f"results/.resume/metareg/ozone/ns10/{CRASH_METHOD}"
TRAIN_LOG = f"logs/train/metareg/ozone/ns10/{CRASH_METHOD}.log"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    reference = copy_repo(tmp_path_factory.mktemp("reference") / "repo")
    snakemake([TARGET, "--cores", "1", "--configfile", _metareg_config(reference)], reference, timeout=900)
    return reference


def _start_and_wait_for_seed1_checkpoint(root: Path, config: str) -> subprocess.Popen:
    cmd = [str(BIN / "snakemake"), TARGET, "--cores", "1", "--configfile", config]
    proc = subprocess.Popen(cmd, cwd=root, env=tool_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 600
    while not list((root / RESUME).glob("seed1/*/checkpoint.pt")):  # seed 0 done, seed 1 mid-training
        if proc.poll() is not None:
            raise AssertionError("the pipeline ended before it could be killed")
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    return proc


def _assert_same_as_uninterrupted(root: Path, reference: Path) -> None:
    for seed in (0, 1):
        rel = f"results/metareg/ozone/ns10/{CRASH_METHOD}/seed{seed}"
        for name in ("metrics.json", "predictions.parquet"):
            assert (root / rel / name).read_bytes() == (reference / rel / name).read_bytes(), f"{rel}/{name}"
    # The summary aggregates what the final runs wrote; its timing rows (train_seconds ...) are wall clock.
    summaries = [[line for line in (base / TARGET).read_text().splitlines() if "second" not in line]
                 for base in (root, reference)]
    assert summaries[0] == summaries[1] and len(summaries[0]) > 5


def _train_processes(root: Path) -> list[int]:
    """Live `uqcal train` processes (the Python process, not its shell) working in ``root``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
            if len(args) > 2 and args[1].endswith(b"/uqcal") and b"train" in args \
                    and Path(os.readlink(proc / "cwd")) == root:
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_run_killed_with_its_jobs_resumes_and_matches_an_uninterrupted_one(uninterrupted, tmp_path):
    root = copy_repo(tmp_path / "crashed")
    config = _metareg_config(root)
    proc = _start_and_wait_for_seed1_checkpoint(root, config)
    os.killpg(proc.pid, signal.SIGKILL)  # Snakemake and its job, as the README's "stop a run" does
    proc.wait()
    assert list((root / RESUME).glob("seed0/*/COMPLETE")), "seed 0 should have finished before the kill"
    # SIGKILL runs no handler: a kill between an atomic write's temp file and its rename leaves the temp file
    # (only a checkpoint can be mid-write here). Nothing is ever half-written under its final name.
    leftovers = list(root.rglob("*.tmp"))
    assert all(p.name.startswith(".checkpoint.pt.") and p.parent.parent.parent == root / RESUME
               for p in leftovers), leftovers
    for path in (root / "results").rglob("*.json"):  # whatever exists is whole: writes are atomic
        json.loads(path.read_text())

    # The README's recovery: unlock (a killed Snakemake leaves its lock), then the same command again.
    snakemake([TARGET, "--unlock", "--configfile", config], root)
    assert planned_for(root, config) == {f"train metareg/ozone/ns10/{CRASH_METHOD}", "aggregate metareg"}
    snakemake([TARGET, "--cores", "1", "--configfile", config], root, timeout=900)
    # Both attempts in the log, each under its header (Snakemake deleted the log before the rerun).
    attempts = _attempts(root)
    assert len(attempts) == 2, (root / TRAIN_LOG).read_text()[-3000:]
    assert f"train {CRASH_METHOD} on ozone/ns10 seed 0" in attempts[0] and "seed 1" in attempts[0]
    assert "restored the outputs an interrupted run had finished" in attempts[1], attempts[1][-2000:]
    assert "resuming from checkpoint" in attempts[1], attempts[1][-2000:]
    assert not (root / "results/.resume").exists(), "the resume folder outlived a finished run"
    assert not list((root / TRAIN_LOG).parent.glob(".*.attempts")), "a finished job keeps its log's second name"
    assert not list(root.rglob("*.tmp"))
    _assert_same_as_uninterrupted(root, uninterrupted)


def test_snakemake_killed_alone_leaves_its_job_running_and_the_rerun_waits_for_it(uninterrupted, tmp_path):
    # Issue 42, item 5: the rerun waits before Snakemake touches the orphan's outputs or log, keeps the seeds the
    # orphan finished, and its job's attempt follows the orphan's in the log.
    root = copy_repo(tmp_path / "orphan")
    config = _metareg_config(root)
    proc = _start_and_wait_for_seed1_checkpoint(root, config)
    os.kill(proc.pid, signal.SIGKILL)  # Snakemake alone: its train job is orphaned and goes on
    proc.wait()
    orphans = _train_processes(root)
    assert orphans, "the train job died with Snakemake: the scenario tests nothing"
    seed0 = root / f"results/metareg/ozone/ns10/{CRASH_METHOD}/seed0/metrics.json"
    for pid in orphans:  # hold the orphan, so that the rerun certainly starts while it still writes
        os.kill(pid, signal.SIGSTOP)
    output = tmp_path / "rerun.out"
    try:
        assert seed0.exists(), "seed 0 should have finished before the kill"
        snakemake([TARGET, "--unlock", "--configfile", config], root)
        dry = run([str(BIN / "snakemake"), "-n", TARGET, "--configfile", config], root)
        assert "a run waits for it" in dry.stdout + dry.stderr  # a dry run does not wait
        assert planned_for(root, config) == {f"train metareg/ozone/ns10/{CRASH_METHOD}", "aggregate metareg"}
        log_before = _read(root / TRAIN_LOG)
        with open(output, "w") as out:
            rerun = subprocess.Popen([str(BIN / "snakemake"), TARGET, "--cores", "1", "--configfile", config],
                                     cwd=root, env=tool_env(), stdout=out, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 300
        while f"waiting for process {orphans[0]}," not in _read(output):
            assert rerun.poll() is None, f"the rerun ended without waiting for the orphan: {_read(output)[-3000:]}"
            assert time.monotonic() < deadline, _read(output)[-3000:]
            time.sleep(0.1)
        time.sleep(2)  # while the orphan holds the job, the rerun touches none of its files
        assert seed0.exists() and _read(root / TRAIN_LOG) == log_before
    finally:
        for pid in orphans:
            os.kill(pid, signal.SIGCONT)
    assert rerun.wait(timeout=900) == 0, _read(output)[-3000:]
    assert not _train_processes(root)
    assert "the earlier job has finished" in _read(output)
    attempts = _attempts(root)
    assert len(attempts) == 2, _read(root / TRAIN_LOG)[-3000:]
    assert f"train {CRASH_METHOD} on ozone/ns10 seed 1" in attempts[0]  # the orphan finished seed 1 ...
    assert f"train {CRASH_METHOD} on" not in attempts[1]  # ... and the rerun trained nothing again
    assert attempts[1].count("restored the outputs an interrupted run had finished") == 2, attempts[1][-2000:]
    assert not (root / "results/.resume").exists()
    _assert_same_as_uninterrupted(root, uninterrupted)


def test_a_second_command_during_a_run_writes_nothing_and_the_run_matches_one_alone(uninterrupted, tmp_path):
    # Issue 49, item 1: a dry run with another config, and a second real run, while a run trains. Before, the dry
    # run's start-up rewrote the running jobs' specs (the run then trained with the other config's epochs).
    root = copy_repo(tmp_path / "busy")
    config = _metareg_config(root)
    other = yaml.safe_load((root / config).read_text())
    other["families"]["metareg"]["methods"][CRASH_METHOD]["epochs"] = 3
    (root / "config/other.yaml").write_text(yaml.safe_dump(other, sort_keys=False))
    proc = _start_and_wait_for_seed1_checkpoint(root, config)
    jobs = _train_processes(root)
    assert jobs, "the run has no train job to hold: the scenario tests nothing"
    try:
        for pid in jobs:  # held, so that the run certainly goes on while the second commands start
            os.kill(pid, signal.SIGSTOP)
        specs = {p: p.read_bytes() for p in (root / ".uqcal/specs").rglob("*.json")}
        for cmd in (["-n", TARGET, "--configfile", "config/other.yaml"], [TARGET, "--cores", "1", "--configfile", config]):
            second = run([str(BIN / "snakemake"), *cmd], root, check=False)
            lines = [line for line in (second.stdout + second.stderr).strip().splitlines()
                     if not line.startswith("Using workflow specific profile")]  # Snakemake's, before the Snakefile
            assert second.returncode == 2, second.stdout + second.stderr
            assert len(lines) == 1 and lines[0].startswith("uqcal: this checkout is busy: process "), lines
            assert f"runs {config}" in lines[0]
        assert {p: p.read_bytes() for p in (root / ".uqcal/specs").rglob("*.json")} == specs
        for pid in jobs:
            os.kill(pid, signal.SIGCONT)
        assert proc.wait(timeout=900) == 0
    finally:
        for pid in jobs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    record = json.loads((root / f".uqcal/records/train/metareg/ozone/ns10/{CRASH_METHOD}.json").read_text())
    assert record["params"][f"families.metareg.methods.{CRASH_METHOD}.epochs"] == 60
    _assert_same_as_uninterrupted(root, uninterrupted)
    # The checkout is free again once the run has ended: a dry run of the other config plans its change.
    assert {f"train metareg/ozone/ns10/{CRASH_METHOD}", "aggregate metareg"} <= planned_for(root, "config/other.yaml")


def _attempts(root: Path) -> list[str]:
    """The train job's log, one item per attempt (each starts with a header)."""
    return _read(root / TRAIN_LOG).split(f"===== uqcal train metareg/ozone/ns10/{CRASH_METHOD}: attempt started")[1:]


def test_sigterm_to_snakemake_stops_its_jobs(tmp_path):
    root = copy_repo(tmp_path / "stopped")
    config = _metareg_config(root)
    proc = _start_and_wait_for_seed1_checkpoint(root, config)
    assert _train_processes(root)
    proc.send_signal(signal.SIGTERM)  # what the README says stops a run: Snakemake then ends its jobs
    proc.wait(timeout=120)
    deadline = time.monotonic() + 60
    while _train_processes(root) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _train_processes(root), "a job outlived its Snakemake after SIGTERM"


def planned_for(root: Path, config: str) -> set[str]:
    proc = run([str(BIN / "snakemake"), "-n", TARGET, "--configfile", config], root)
    lines = [line for line in proc.stdout.splitlines() if line.strip().startswith("output:")]
    return {f"{rule} {name}" for line in lines for rule, name in RECORD.findall(line)}


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------ determinism
DETERMINISM_METHODS = {"metareg": "metacal", "rio": "nn", "qr": "dvi_qr", "fewshot": "md", "bo": "calibrated"}


@pytest.mark.parametrize("family", list(DETERMINISM_METHODS))
def test_a_second_run_of_the_same_seeds_writes_byte_identical_metrics_and_models(smoke_run, tmp_path, family):
    config = load_config(smoke_run / SMOKE)
    batch = next(b for b in iter_batches(config, [family]) if b.method == DETERMINISM_METHODS[family])
    results = tmp_path / "results"
    run([str(BIN / "uqcal"), "--results-dir", str(results), "train", "--config", SMOKE, "--family", family,
         "--dataset", batch.dataset, "--setting", batch.setting, "--method", batch.method], smoke_run)
    for r in batch.runs:
        for name in ("metrics.json", "model.pt"):  # model.pt: the same save of the same tensors (issue 42, item 4)
            first = (smoke_run / r.run_dir / name).read_bytes()
            second = (results / Path(r.run_dir).relative_to("results") / name).read_bytes()
            assert first == second, f"{r.run_dir}/{name}"

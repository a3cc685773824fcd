"""A job's identity is what it computes (issue 42, item 1): its config keys and values, its code and its inputs'
content, never the name of the config file that holds them.

A run is simulated without training: each job of the plan, upstream first, writes outputs whose content is a
function of its identity (as a real job's outputs are of what it is made from) and leaves its record
(uqcal.pipeline.records.write_record). The Snakefile's start-up check (refresh_specs) on another config then says
which of those jobs it would rerun.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from uqcal.pipeline import plan as P
from uqcal.pipeline import records as R
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.identity import build_spec, identity


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    shutil.copytree(REPO / "config", tmp_path / "config")
    shutil.copytree(REPO / "workflow/schemas", tmp_path / "workflow/schemas")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def simulate_run(config_path: str) -> list[P.Job]:
    config = load_config(config_path)
    plan = P.plan(config)
    for job in plan:
        spec = build_spec(config, job, config_path)
        inputs = R.input_digests(spec["upstream"])
        made_of = identity(spec, inputs)
        for out in P.outputs(job):
            path = Path(out) / "made.json" if job.rule in ("split", "train", "report") else Path(out)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(made_of)
        R.write_record(job, spec, inputs, time.perf_counter())
    return plan


def test_the_extended_config_reruns_none_of_the_default_runs_jobs(workspace):
    # README and extended.yaml's header: "after `make reproduce` it trains only what is new".
    default = simulate_run("config/config.yaml")
    extended = load_config("config/extended.yaml")
    stale = R.refresh_specs(extended, "config/extended.yaml")
    shared = set(default) & set(P.plan(extended))
    trained = {job for job in default if job.rule == "train"}
    assert len(trained) > 50 and trained <= shared  # extended.yaml holds every train job of the default
    rerun = {f"{job.rule} {job.name}: {why}" for job, why in stale.items() if job.rule in ("materialise", "split", "train")}
    assert not rerun, sorted(rerun)[:10]
    assert {job.rule for job in stale} <= {"aggregate", "report"}  # they read new runs: rightly stale


def test_an_identical_config_under_another_name_reruns_nothing(workspace):
    plan = simulate_run("config/smoke.yaml")
    shutil.copy("config/smoke.yaml", "config/smoke-copy.yaml")
    copy = load_config("config/smoke-copy.yaml")
    assert P.plan(copy) == plan
    assert R.refresh_specs(copy, "config/smoke-copy.yaml") == {}
    assert all(R.why_stale(job, build_spec(copy, job, "config/smoke-copy.yaml")) is None for job in plan)


def _edit(path: str, old: str, new: str) -> None:
    text = Path(path).read_text()
    assert text.count(old) == 1, old
    Path(path).write_text(text.replace(old, new))
    stamp = Path(path).stat().st_mtime_ns + 10**9  # an mtime of its own, whatever the clock's grain
    os.utime(path, ns=(stamp, stamp))


def _stale(config_path: str) -> set[str]:
    return {f"{job.rule} {job.name}" for job in R.refresh_specs(load_config(config_path), config_path)}


def test_an_edit_in_the_parent_reruns_the_extending_configs_jobs_that_read_the_value_and_nothing_else(workspace):
    # config/extended.yaml extends config/config.yaml (which extends config/base.yaml): its jobs read inherited
    # values, and an edit there is an edit of their parameters.
    simulate_run("config/extended.yaml")
    assert _stale("config/extended.yaml") == set()
    _edit("config/config.yaml", "nn: {per_dataset: {diamonds: {batch_size: 256, max_epochs: 100}}}",
          "nn: {per_dataset: {diamonds: {batch_size: 256, max_epochs: 90}}}")
    # the diamonds network (its dependants rerun once it has: their inputs), the rio summary, the report
    assert _stale("config/extended.yaml") == {"train rio/diamonds/holdout/nn", "aggregate rio", "report report"}


def test_an_edit_in_the_shared_header_reruns_what_reads_it(workspace):
    plan = simulate_run("config/extended.yaml")
    _edit("config/base.yaml", "torch_threads: 1 ", "torch_threads: 2 ")
    trained = {f"train {job.name}" for job in plan if job.rule == "train"}
    assert _stale("config/extended.yaml") == trained | {"report report"}


def test_a_parent_value_that_the_extending_config_replaces_reruns_none_of_its_jobs(workspace):
    simulate_run("config/extended.yaml")
    # extended.yaml removes cv5_shuffled's `datasets` and writes its own claim_runs_reason: the default's edits
    # of them are the default's alone
    _edit("config/config.yaml", "shuffle: true, seeds: 10, datasets: [concrete]}",
          "shuffle: true, seeds: 10, datasets: [boston]}")
    _edit("config/config.yaml", 'claim_runs_reason: "the budget of this 30-minute default',
          'claim_runs_reason: "the budget of the 30-minute default')
    assert _stale("config/extended.yaml") == set()


def test_a_dvc_stage_names_each_parameter_in_the_file_that_sets_it(workspace):
    config = load_config("config/extended.yaml")
    keys = P.param_keys(config, P.Job("train", ("rio", "diabetes", "holdout", "rio")), "config/extended.yaml")
    assert ("config/base.yaml", "device") in keys and ("config/base.yaml", "torch_threads") in keys
    assert ("config/config.yaml", "families.rio.seeds") in keys
    assert ("config/extended.yaml", "families.rio.methods.rio.per_dataset.diabetes") in keys
    assert not any(file == "config/extended.yaml" and key == "device" for file, key in keys)
    aggregate = P.param_keys(config, P.Job("aggregate", ("rio",)), "config/extended.yaml")
    # a mapping both files write: named in both, so that DVC sees an edit of either
    assert {f for f, k in aggregate if k == "families.rio.methods"} == {"config/config.yaml", "config/extended.yaml"}
    report = P.param_keys(config, P.Job("report"), "config/extended.yaml")
    assert [f for f, k in report if k == "" and f.startswith("config/") and "datasets" not in f] == [
        "config/base.yaml", "config/config.yaml", "config/extended.yaml"]


def test_a_record_lists_every_uqcal_source_the_process_imported():
    # Brute force: resolve every module's file; the record's list takes only the paths that name the package.
    src = (REPO / "src/uqcal").resolve()
    every = {f"src/uqcal/{Path(m.__file__).resolve().relative_to(src).as_posix()}" for m in list(sys.modules.values())
             if getattr(m, "__file__", None) and Path(m.__file__).resolve().is_relative_to(src)}
    assert "src/uqcal/pipeline/records.py" in every
    assert R.imported_sources() == sorted(every)

"""A job's identity is what it computes (issue 42, item 1): its config keys and values, its code and its inputs'
content, never the name of the config file that holds them.

A run is simulated without training: each job of the plan, upstream first, writes outputs whose content is a
function of its identity (as a real job's outputs are of what it is made from) and leaves its record
(uqcal.pipeline.jobs.write_record). The Snakefile's start-up check (refresh_specs) on another config then says
which of those jobs it would rerun.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from uqcal.pipeline import jobs as J
from uqcal.pipeline.config.load import load_config


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    shutil.copytree(REPO / "config", tmp_path / "config")
    shutil.copytree(REPO / "workflow/schemas", tmp_path / "workflow/schemas")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def simulate_run(config_path: str) -> list[J.Job]:
    config = load_config(config_path)
    plan = J.plan(config)
    for job in plan:
        spec = J.build_spec(config, job, config_path)
        inputs = J.input_digests(spec["upstream"])
        made_of = J.identity(spec, inputs)
        for out in J.outputs(job):
            path = Path(out) / "made.json" if job.rule in ("split", "train", "report") else Path(out)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(made_of)
        J.write_record(job, spec, inputs, time.perf_counter())
    return plan


def test_the_extended_config_reruns_none_of_the_default_runs_jobs(workspace):
    # README and extended.yaml's header: "after `make reproduce` it trains only what is new".
    default = simulate_run("config/config.yaml")
    extended = load_config("config/extended.yaml")
    stale = J.refresh_specs(extended, "config/extended.yaml")
    shared = set(default) & set(J.plan(extended))
    trained = {job for job in default if job.rule == "train"}
    assert len(trained) > 50 and trained <= shared  # extended.yaml holds every train job of the default
    rerun = {f"{job.rule} {job.name}: {why}" for job, why in stale.items() if job.rule in ("materialise", "split", "train")}
    assert not rerun, sorted(rerun)[:10]
    assert {job.rule for job in stale} <= {"aggregate", "report"}  # they read new runs: rightly stale


def test_an_identical_config_under_another_name_reruns_nothing(workspace):
    plan = simulate_run("config/smoke.yaml")
    shutil.copy("config/smoke.yaml", "config/smoke-copy.yaml")
    copy = load_config("config/smoke-copy.yaml")
    assert J.plan(copy) == plan
    assert J.refresh_specs(copy, "config/smoke-copy.yaml") == {}
    assert all(J.why_stale(job, J.build_spec(copy, job, "config/smoke-copy.yaml")) is None for job in plan)

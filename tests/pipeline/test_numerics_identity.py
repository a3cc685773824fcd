"""The numerics mode is part of every job's identity (issue 48): results made under another mode, or natively on
another kind of CPU, are stale for Snakemake (the records) and for DVC (every stage's params)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.pipeline.test_identity import _edit, simulate_run
from uqcal.core import numerics
from uqcal.pipeline import plan as P
from uqcal.pipeline import records as R
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.dvc import build_dvc_yaml
from uqcal.pipeline.identity import build_spec

SMOKE = "config/smoke.yaml"


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    shutil.copytree(REPO / "config", tmp_path / "config")
    shutil.copytree(REPO / "workflow/schemas", tmp_path / "workflow/schemas")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _stale(config_path: str) -> dict[str, str]:
    return {f"{job.rule} {job.name}": why for job, why in R.refresh_specs(load_config(config_path), config_path).items()}


def test_the_default_is_portable_and_every_spec_says_so(workspace):
    config = load_config(SMOKE)
    assert config["numerics"] == "portable"
    assert {build_spec(config, job, SMOKE)["params"]["numerics"] for job in P.plan(config)} == {"portable"}


def test_changing_the_mode_makes_every_job_stale(workspace):
    plan = simulate_run(SMOKE)
    assert _stale(SMOKE) == {}
    _edit("config/base.yaml", "numerics: portable ", "numerics: native ")
    stale = _stale(SMOKE)
    assert set(stale) == {f"{job.rule} {job.name}" for job in plan}  # materialise, split, train, aggregate, report
    assert all(why == "params changed: numerics" for job, why in stale.items() if not job.startswith("report")), stale


@pytest.fixture
def native_cpu(monkeypatch):
    def on(vendor: str, flags: set[str]):
        monkeypatch.setattr(numerics, "cpu_vendor", lambda: vendor)
        monkeypatch.setattr(numerics, "cpu_flags", lambda: flags)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    return on


def test_native_results_from_another_kind_of_cpu_are_stale_and_portable_ones_are_not(workspace, native_cpu):
    avx512 = {"sse2", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
    _edit("config/base.yaml", "numerics: portable ", "numerics: native ")
    native_cpu("AuthenticAMD", avx512)
    plan = simulate_run(SMOKE)
    assert _stale(SMOKE) == {}
    native_cpu("AuthenticAMD", {"sse2", "avx2", "fma"})  # the same config on an AVX2 machine
    assert set(_stale(SMOKE)) == {f"{job.rule} {job.name}" for job in plan}
    native_cpu("GenuineIntel", avx512)  # MKL takes other paths on Intel CPUs
    assert set(_stale(SMOKE)) == {f"{job.rule} {job.name}" for job in plan}
    # portable results are the same on either machine
    _edit("config/base.yaml", "numerics: native ", "numerics: portable ")
    simulate_run(SMOKE)
    native_cpu("AuthenticAMD", {"sse2", "avx2", "fma"})
    assert _stale(SMOKE) == {}


def test_every_dvc_stage_reads_the_mode(workspace):
    stages = build_dvc_yaml(load_config(SMOKE), SMOKE)["stages"]
    for name, stage in stages.items():
        params = {file: keys for entry in stage["params"] for file, keys in entry.items()}
        # the report's params are its config files whole (None: every key)
        assert params.get("config/base.yaml", ["?"]) is None or "numerics" in params["config/base.yaml"], name

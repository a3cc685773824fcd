"""The same numbers on another CPU (issue 48), with the other CPU emulated on this one.

A CPU kind is the environment a job starts in: the variables by which torch (ATen), MKL, oneDNN, numpy and
OpenBLAS choose their kernels. The smoke run (`smoke_run`) trained under this machine's own kind; here one train
job of every family trains again from the same data and splits under an emulated CPU without AVX2 (every
library at its scalar / SSE level, as docs/experiments/numerics_dispatch.py's "scalar" kind). Under the default
``numerics: portable`` the `uqcal` command's pins win over that environment: the job's metrics.json and model.pt
are byte for byte the smoke run's. Under ``numerics: native`` the two kinds give different numbers: the check
can fail, and does where the pins are missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import BIN, run
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.config.runs import iter_batches

pytestmark = pytest.mark.slow  # one smoke run (shared) and three train jobs per family: ~2-4 min on 2 cores

SMOKE = "config/smoke.yaml"
# One job per family, the one with the most numerics in it (networks, GP solves, convolutions, L-BFGS).
METHODS = {"metareg": "metacal", "rio": "nn", "qr": "dvi_qr", "fewshot": "md", "bo": "calibrated"}
NO_AVX2 = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
           "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR", "OPENBLAS_CORETYPE": "Nehalem"}
COMPARED = ("metrics.json", "model.pt")


def train(root: Path, family: str, config: str, results: Path, cpu: dict) -> list[str]:
    """Train the family's job of METHODS under the emulated CPU ``cpu`` into ``results``; its run folders."""
    batch = next(b for b in iter_batches(load_config(root / config), [family]) if b.method == METHODS[family])
    saved = {key: os.environ.get(key) for key in cpu}
    os.environ.update(cpu)  # the outer environment `run` passes on (tool_env)
    try:
        run([str(BIN / "uqcal"), "--results-dir", str(results), "train", "--config", config, "--family", family,
             "--dataset", batch.dataset, "--setting", batch.setting, "--method", batch.method], root)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return [Path(r.run_dir).relative_to("results").as_posix() for r in batch.runs]


def outputs(results: Path, run_dirs: list[str]) -> dict[str, bytes]:
    return {f"{d}/{name}": (results / d / name).read_bytes() for d in run_dirs for name in COMPARED}


def check_family(smoke_run: Path, family: str, tmp_path: Path) -> None:
    # a copy: `uqcal train` leaves its record in the run's .uqcal/records, and a native one is another job's
    smoke_root = tmp_path / "repo"
    shutil.copytree(smoke_run, smoke_root, symlinks=True, ignore=shutil.ignore_patterns(".dvc", ".snakemake"))
    # portable (the default): the smoke run's numbers under a CPU kind without AVX2
    run_dirs = train(smoke_root, family, SMOKE, tmp_path / "portable", NO_AVX2)
    here, there = outputs(smoke_root / "results", run_dirs), outputs(tmp_path / "portable", run_dirs)
    assert [k for k in here if here[k] != there[k]] == []
    # native: the same two kinds differ (the smoke config with `numerics: native`)
    native = "config/smoke-native.yaml"
    (smoke_root / native).write_text(f"extends: {Path(SMOKE).name}\nnumerics: native\n")
    own = outputs(tmp_path / "native-own", train(smoke_root, family, native, tmp_path / "native-own", {}))
    low = outputs(tmp_path / "native-low", train(smoke_root, family, native, tmp_path / "native-low", NO_AVX2))
    metrics = [k for k in own if k.endswith("metrics.json")]
    assert any(own[k] != low[k] for k in metrics), f"{family}: native numerics gave the same metrics on both kinds"


@pytest.mark.parametrize("family", list(METHODS))
def test_portable_numerics_give_the_same_results_on_an_emulated_cpu_and_native_ones_do_not(smoke_run, tmp_path,
                                                                                           family):
    check_family(smoke_run, family, tmp_path)


if __name__ == "__main__":  # against a finished smoke run elsewhere: python tests/e2e/test_numerics.py ROOT [FAMILY]
    import sys
    import tempfile

    for name in sys.argv[2:] or list(METHODS):
        with tempfile.TemporaryDirectory() as tmp:
            check_family(Path(sys.argv[1]).resolve(), name, Path(tmp))
            print(f"{name}: ok")

"""Device handling: resolve_device's contract and the device every run records."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
import torch

from tests.conftest import method_device
from uqcal.core.device import resolve_device
from uqcal.core.io import read_json
from uqcal.methods.api import RunContext


def test_resolve_device_contract():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device must be one of"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            resolve_device("cuda")


def test_save_outputs_records_the_device(tmp_path):
    ctx = RunContext(
        family="rio", dataset="d", setting="s", method="m", seed=0, config={}, dataset_spec={}, setting_params={},
        family_params={}, params={}, run_dir=tmp_path / "run", split_path=tmp_path / "split.json",
        raw_path=tmp_path / "raw.parquet", depends_dir=None, device=method_device(), log=logging.getLogger("t"),
    )
    ctx.save_outputs(pd.DataFrame({"y": [1.0], "mean": [1.0]}), {"w": torch.zeros(1)}, {"loss": 0.5})
    stats = read_json(tmp_path / "run" / "train_stats.json")
    assert stats["device"] == str(ctx.device) and stats["loss"] == 0.5
    assert stats["device_name"] and isinstance(stats["device_name"], str)


def test_a_cuda_device_switches_on_deterministic_kernels(monkeypatch):
    # resolve_device("cuda") makes CUDA runs reproducible given their seed (cuDNN autotuner off, deterministic
    # algorithms, a fixed cuBLAS workspace). On a machine without CUDA the switch is checked by pretending.
    import uqcal.core.device as device_module

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
              torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = True, False
        torch.use_deterministic_algorithms(False)
        assert device_module.resolve_device("auto") == torch.device("cuda")
        assert not torch.backends.cudnn.benchmark and torch.backends.cudnn.deterministic
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        import os

        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = before[:2]
        torch.use_deterministic_algorithms(before[2], warn_only=before[3])

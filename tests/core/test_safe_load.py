"""Loading what others share: model.pt files and checkpoints are read with torch.load(weights_only=True)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from uqcal.core.io import UnsafeArtifactError, load_torch, torch_save
from uqcal.core.resume import TrainingCheckpoint
from uqcal.pipeline.report.figures.base import FigureContext
from uqcal.pipeline.report.figures.calibration import build_calibration_map
from uqcal.pipeline.report.results import RunFiles


class Payload:
    """Unpickling this calls open(marker, "w"): a stand-in for any code a crafted file could run."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def crafted(path: Path, marker: Path) -> Path:
    torch.save({"state_dict": {"w": torch.zeros(2)}, "extra": Payload(marker)}, path)
    return path


def test_plain_artifacts_round_trip(tmp_path):
    # Everything uqcal's methods save: tensors, state dicts, numpy arrays (incl. empty ones and strings),
    # numpy scalars, numbers, strings, nested containers.
    obj = {
        "state": torch.nn.Linear(3, 2).state_dict(),
        "arrays": [np.arange(4.0), np.array([], dtype=np.int64), np.array([True, False]), np.array(["a", "bc"]),
                   np.zeros((2, 3), dtype=np.float32)],
        "scalars": (np.float64(1.5), np.int64(3), 2.0, 7, None, "text"),
        "nested": {"a": [1, {"b": torch.ones(2, dtype=torch.float64)}]},
    }
    torch_save(tmp_path / "model.pt", obj)
    back = load_torch(tmp_path / "model.pt")
    for key, value in obj["state"].items():
        assert torch.equal(back["state"][key], value)
    for ours, theirs in zip(obj["arrays"], back["arrays"], strict=True):
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    assert back["scalars"] == obj["scalars"]
    assert torch.equal(back["nested"]["a"][1]["b"], obj["nested"]["a"][1]["b"])


def test_reduce_payload_in_model_pt_is_refused_before_it_runs(tmp_path):
    marker = tmp_path / "ran"
    path = crafted(tmp_path / "model.pt", marker)
    with pytest.raises(UnsafeArtifactError, match=r"refusing to load .*model\.pt: it holds a `(builtins|io)\.open`"):
        load_torch(path)
    assert not marker.exists()
    # Negative control: the unrestricted unpickler runs the payload, so the check above can fail.
    torch.load(path, weights_only=False)
    assert marker.exists()


def test_checkpoint_with_a_payload_is_refused(tmp_path):
    marker = tmp_path / "ran"
    path = crafted(tmp_path / "checkpoint.pt", marker)
    with pytest.raises(UnsafeArtifactError, match="checkpoint.pt"):
        TrainingCheckpoint(path, logging.getLogger("test")).load()
    assert not marker.exists()
    # A real checkpoint (tensors, Adam state, RNG state, floats) still loads.
    model = torch.nn.Linear(2, 1)
    optimiser = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    optimiser.step()
    state = {"epoch": 3, "model": model.state_dict(), "optimiser": optimiser.state_dict(),
             "torch_rng": torch.get_rng_state(), "best": float("inf"), "stopped": False}
    TrainingCheckpoint(tmp_path / "ok.pt").save(state)
    loaded = TrainingCheckpoint(tmp_path / "ok.pt").load()
    assert loaded["epoch"] == 3 and torch.equal(loaded["torch_rng"], state["torch_rng"])
    assert loaded["optimiser"]["state"][0]["step"] == optimiser.state_dict()["state"][0]["step"]


def test_report_figure_refuses_a_crafted_model(tmp_path):
    marker = tmp_path / "ran"
    run = tmp_path / "results" / "qr" / "d" / "cv" / "iso" / "seed0"
    run.mkdir(parents=True)
    crafted(run / "model.pt", marker)
    ctx = FigureContext("qr", {}, pd.DataFrame(), RunFiles.on_disk(tmp_path / "results", "qr"), tmp_path / "fig", {})
    with pytest.raises(UnsafeArtifactError, match="seed0/model.pt"):
        build_calibration_map({"id": "map", "x": "knots_u", "y": "knots_r"}, ctx)
    assert not marker.exists()


def test_rio_network_loads_the_nn_run_through_the_safe_loader(tmp_path):
    from uqcal.methods.rio.network import load_network

    marker = tmp_path / "ran"
    crafted(tmp_path / "model.pt", marker)
    with pytest.raises(UnsafeArtifactError, match=r"refusing to load .*model\.pt") as caught:
        load_network(tmp_path)
    assert "weights_only=False" not in str(caught.value)
    assert not marker.exists()

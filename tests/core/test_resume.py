"""Crash recovery at the library level: checkpointed meta-training and the finished-seed store."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from uqcal.core.resume import RUN_OUTPUTS, ResumeStore, TrainingCheckpoint
from uqcal.methods.metareg.episodes import EpisodeData, meta_train
from uqcal.methods.metareg.metacal import MetaCal
from uqcal.methods.metareg.synthetic import episode_split, sine_tasks

torch.set_num_threads(1)
PARAMS = {**MetaCal.defaults, "epochs": 12, "eval_every": 2, "patience": 100}


class Killed(Exception):
    """Stands in for SIGKILL: training stops dead in the middle of an epoch."""


def _ctx(checkpoint_path: Path | None):
    log = logging.getLogger("test.resume")
    return SimpleNamespace(
        progress=lambda it, total=None, desc="": it,
        checkpoint=lambda: TrainingCheckpoint(checkpoint_path, log),
    )


def _train(data, ctx, kill_after_steps: int | None = None):
    method = MetaCal(PARAMS)
    torch.manual_seed(0)
    model = method.build(data).to(dtype=data.dtype)
    steps = 0

    def loss(model, episodes):
        nonlocal steps
        if model.training:
            steps += 1
            if kill_after_steps is not None and steps > kill_after_steps:
                raise Killed
        return method.loss(model, episodes)

    generator = torch.Generator().manual_seed(123)
    stats = meta_train(model, loss, data, PARAMS, ctx, generator)
    return model, stats


@pytest.fixture(scope="module")
def data():
    X, y, task = sine_tasks(12, 50, 1, seed=3)
    return EpisodeData(X, y, task, episode_split(task, n_support=10, n_query=30, seed=0))


def test_a_resumed_meta_training_ends_with_the_same_model(data, tmp_path):
    reference, ref_stats = _train(data, None)
    path = tmp_path / "checkpoint.pt"
    # Epoch 5 of 12 dies half-way (batch size 32 > 7 training tasks -> one step per epoch): the last
    # checkpoint is the one after epoch 4.
    with pytest.raises(Killed):
        _train(data, _ctx(path), kill_after_steps=4)
    assert torch.load(path, weights_only=False)["epoch"] == 4
    resumed, stats = _train(data, _ctx(path))
    assert stats["epochs_run"] == ref_stats["epochs_run"] == 12
    for name, value in reference.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name
    assert stats["best_val_loss"] == ref_stats["best_val_loss"]


def test_without_a_checkpoint_an_interrupted_run_starts_over(data, tmp_path):
    # Negative control: the same kill with checkpointing off leaves nothing to resume from.
    with pytest.raises(Killed):
        _train(data, _ctx(None), kill_after_steps=4)
    assert not any(tmp_path.iterdir())


def test_finished_seeds_are_restored_only_under_the_same_digest(tmp_path):
    results = tmp_path / "results"
    run_dir = results / "rio/concrete/holdout/nn/seed0"
    run_dir.mkdir(parents=True)
    for name in RUN_OUTPUTS:
        (run_dir / name).write_text(f"content of {name}")
    store = ResumeStore(results, run_dir, "digest-a")
    store.prepare()
    store.keep(run_dir)
    for name in RUN_OUTPUTS:  # Snakemake deletes the outputs of an incomplete job before rerunning it
        (run_dir / name).unlink()

    assert not ResumeStore(results, run_dir, "digest-b").restore(run_dir)  # other config: nothing
    assert store.restore(run_dir)
    assert {p.name: p.read_text() for p in run_dir.iterdir()} == {n: f"content of {n}" for n in RUN_OUTPUTS}

    ResumeStore(results, run_dir, "digest-b").prepare()  # a different config drops the stale folder
    assert not store.path.exists()
    store.clear()
    assert not (results / ".resume").exists()


def test_an_incomplete_store_restores_nothing(tmp_path):
    results = tmp_path / "results"
    run_dir = results / "qr/concrete/cv5/dvi/seed1"
    run_dir.mkdir(parents=True)
    store = ResumeStore(results, run_dir, "d")
    store.prepare()
    (store.path / "model.pt").write_text("half")  # no COMPLETE marker: the seed never finished
    assert not store.restore(run_dir)
    assert not any(run_dir.iterdir())


def test_prepare_drops_the_temp_files_a_killed_write_left_but_keeps_the_checkpoint(tmp_path):
    results = tmp_path / "results"
    run_dir = results / "metareg/ozone/ns10/metacal/seed1"
    store = ResumeStore(results, run_dir, "d")
    store.prepare()
    TrainingCheckpoint(store.checkpoint_path).save({"epoch": 4})
    # What SIGKILL during the next save leaves: atomic_path's temp file, never renamed onto checkpoint.pt.
    stale = store.path / ".checkpoint.pt.k1ll3d.tmp"
    stale.write_bytes(b"half a checkpoint")
    store.prepare()
    assert sorted(p.name for p in store.path.iterdir()) == ["checkpoint.pt"]
    assert TrainingCheckpoint(store.checkpoint_path).load() == {"epoch": 4}


def test_torch_save_writes_the_same_bytes_for_the_same_content(tmp_path):
    # model.pt and checkpoints go through a temporary file; its random name must not reach the bytes (issue 42,
    # item 4), or DVC never finds a rerun's model.pt identical.
    from uqcal.core.io import torch_save

    state = {"weight": torch.arange(12.0).reshape(3, 4), "epoch": 3, "name": "nn"}
    torch_save(tmp_path / "a/model.pt", state)
    torch_save(tmp_path / "b/model.pt", {k: v.clone() if torch.is_tensor(v) else v for k, v in state.items()})
    torch_save(tmp_path / "checkpoint.pt", state)
    first = (tmp_path / "a/model.pt").read_bytes()
    assert first == (tmp_path / "b/model.pt").read_bytes() == (tmp_path / "checkpoint.pt").read_bytes()
    assert not list(tmp_path.rglob("*.tmp"))

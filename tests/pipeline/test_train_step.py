"""The train step's seed loop (uqcal.pipeline.steps.train): a method's ``train_batch`` trains a job's seeds as one
model, or declines them (returns False, saves nothing) and the step trains each with ``train``, keeping each
finished seed for a resumed run."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from uqcal.methods.api import RunContext
from uqcal.pipeline.plan import TrainSeed
from uqcal.pipeline.steps.train import _train_seeds


class _Recorder:
    """A method whose outputs name who trained them: ``train`` (seed by seed) or ``train_batch``."""

    def __init__(self, calls: list, batch: bool | None):
        self.calls, self.batch = calls, batch
        if batch is None:
            self.train_batch = None

    def _save(self, ctx: RunContext, how: str) -> None:
        predictions = pd.DataFrame({"row": [0, 1], "y": [0.0, 1.0], "mean": [float(ctx.seed)] * 2, "std": [1.0] * 2})
        ctx.save_outputs(predictions, {"how": how}, {"how": how})

    def train(self, ctx: RunContext) -> None:
        self.calls.append(("train", ctx.seed, torch.initial_seed()))
        self._save(ctx, "train")

    def train_batch(self, ctxs: list[RunContext]) -> bool:
        self.calls.append(("train_batch", [ctx.seed for ctx in ctxs]))
        if not self.batch:
            return False
        for ctx in ctxs:
            self._save(ctx, "batch")
        return True

    def evaluate(self, ctx: RunContext, predictions=None) -> dict[str, float]:
        frame = predictions if predictions is not None else pd.read_parquet(ctx.run_dir / "predictions.parquet")
        return {"mean": float(frame["mean"].mean())}


def _seeds(tmp_path, calls, batch, seeds=(0, 1, 2)) -> list[TrainSeed]:
    found = []
    for seed in seeds:
        ctx = RunContext(family="toy", dataset="d", setting="s", method="m", seed=seed, config={}, dataset_spec={},
                         setting_params={}, family_params={}, params={},
                         run_dir=tmp_path / "results" / "toy" / "d" / "s" / "m" / f"seed{seed}",
                         split_path=tmp_path / "split.json", raw_path=tmp_path / "raw.parquet", depends_dir=None,
                         device=torch.device("cpu"), log=logging.getLogger("test"))
        found.append(TrainSeed(ctx, _Recorder(calls, batch), f"digest{seed}"))
    return found


@pytest.mark.parametrize("batch", [True, False, None])
def test_seeds_train_as_one_batch_or_one_by_one(tmp_path, batch):
    calls = []
    seeds = _seeds(tmp_path, calls, batch)
    _train_seeds(SimpleNamespace(results_dir=str(tmp_path / "results"), no_evaluate=False), seeds)
    offered = [("train_batch", [0, 1, 2])] if batch is not None else []
    assert calls[: len(offered)] == offered
    one_by_one = calls[len(offered):]
    if batch:
        assert one_by_one == []
    else:  # each seed seeded as its own run (ctx.seed_everything), as the per-seed path always is
        assert [c[:2] for c in one_by_one] == [("train", 0), ("train", 1), ("train", 2)]
        assert [c[2] for c in one_by_one] == [one.ctx.runtime.rng().integers(0, 2**31 - 1) for one in seeds]
    for one in seeds:
        stats = json.loads((one.ctx.run_dir / "train_stats.json").read_text())
        assert stats["how"] == ("batch" if batch else "train")
        metrics = json.loads((one.ctx.run_dir / "metrics.json").read_text())["metrics"]
        assert metrics == {"mean": float(one.ctx.seed)}
    assert not (tmp_path / "results" / ".resume").exists() or not any((tmp_path / "results" / ".resume").iterdir())

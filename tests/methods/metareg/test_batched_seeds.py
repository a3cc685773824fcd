"""Issue 53: a metareg job's seeds trained as one batched model (``train_batch``) give each seed the numbers of
its own run (``train``, the per-seed path), within the tolerance the methods state (rel 1e-6), on a real
dataset's task splits (exam, N_S = 10, 3 seeds, a shortened schedule with early stopping), and on toy tasks
where seeds stop at different steps (``meta_train_batch`` against ``meta_train``; the K * B episode folds too,
which the GP baseline and MAML's MNG use)."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from uqcal.cli import main
from uqcal.methods.metareg import EpisodeData, MamlNet, MetaCal, NeuralProcess, SingleTaskNet
from uqcal.methods.metareg.batched import meta_train_batch
from uqcal.methods.metareg.episodes import meta_train
from uqcal.pipeline.plan import Job, configured_job, train_seeds
from uqcal.pipeline.steps.train import evaluate_one, train_one

RTOL = 1e-6  # the stated tolerance (NeuralProcess, MetaCal.seed_batchable, MamlNet): rounding amplified by training
SEEDS = [0, 1, 2]
# Short runs that still stop early at different steps (the batch then drops a finished seed and goes on); MAML's
# second-order steps cost ~20x an NP step, so its run is shorter.
SCHEDULES = {"gp": {"epochs": 80, "eval_every": 5, "patience": 20},
             "np": {"epochs": 80, "eval_every": 5, "patience": 20},
             "mng": {"epochs": 16, "eval_every": 2, "patience": 6},
             "mbd": {"epochs": 16, "eval_every": 2, "patience": 6},
             "metacal": {"epochs": 80, "eval_every": 5, "patience": 20},
             "mdkl": {"epochs": 80, "eval_every": 5, "patience": 20}}


@pytest.fixture(scope="module")
def exam_splits(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    assert main(["--data-dir", str(data), "materialise", "exam"]) == 0
    assert main(["--data-dir", str(data), "split", "--family", "metareg", "--dataset", "exam",
                 "--setting", "ns10"]) == 0
    return data


def _job(method: str) -> dict:
    job = configured_job("config/config.yaml", Job("train", ("metareg", "exam", "ns10", method)))
    return {**job, "params": {**job["params"], **SCHEDULES[method]}}


def _outputs(ctx):
    run = ctx.run_dir
    return (pd.read_parquet(run / "predictions.parquet"), json.loads((run / "train_stats.json").read_text()),
            json.loads((run / "metrics.json").read_text())["metrics"])


@pytest.mark.parametrize("method", ["gp", "np", "mng", "mbd", "metacal", "mdkl"])
def test_batched_seeds_equal_their_own_runs(method, exam_splits, tmp_path):
    job = _job(method)
    alone = train_seeds(job, tmp_path / "alone", exam_splits, SEEDS)
    for one in alone:
        evaluate_one(one.ctx, one.method, train_one(one.ctx, one.method))
    batch = train_seeds(job, tmp_path / "batch", exam_splits, SEEDS)
    assert batch[0].method.train_batch([one.ctx for one in batch]) is True
    for one in batch:
        evaluate_one(one.ctx, one.method)

    steps = set()
    for a, b in zip(alone, batch, strict=True):
        (pred_a, stats_a, metrics_a), (pred_b, stats_b, metrics_b) = _outputs(a.ctx), _outputs(b.ctx)
        assert list(pred_a.columns) == list(pred_b.columns) and len(pred_a) == len(pred_b)
        for column in pred_a.columns:
            if pred_a[column].dtype.kind == "f":
                values = pred_a[column].to_numpy()
                np.testing.assert_allclose(pred_b[column].to_numpy(), values, rtol=RTOL,
                                           atol=RTOL * max(1.0, float(np.abs(values).max())), err_msg=column)
            else:
                assert pred_a[column].tolist() == pred_b[column].tolist(), column
        assert stats_a.keys() == stats_b.keys()
        for key in ("steps_run", "epochs_run", "best_step", "fit_failures", "n_train_tasks"):
            assert stats_a[key] == stats_b[key], key
        assert math.isclose(stats_a["best_val_loss"], stats_b["best_val_loss"], rel_tol=RTOL)
        assert metrics_a.keys() == metrics_b.keys()
        for key, value in metrics_a.items():
            assert math.isclose(metrics_b[key], value, rel_tol=RTOL, abs_tol=1e-9), key
        steps.add(stats_a["steps_run"])
    assert max(steps) <= SCHEDULES[method]["epochs"]


def test_the_variants_whose_training_amplifies_rounding_train_their_seeds_one_by_one():
    assert MetaCal(objective="nll", calibration="none", kernel_net=False, mean_net=False,
                   learn_outputscale=True).seed_batchable()  # gp
    # metacal and mdkl: the stacked deep-kernel GP (bit for bit each seed's own steps)
    assert MetaCal().seed_batchable() and MetaCal(objective="nll", calibration="none").seed_batchable()
    # and the ablations of the same structure (w/o-R, w/o-LC, the lambda sweep); the others keep the per-seed path
    assert MetaCal(calibration="none").seed_batchable() and MetaCal(lam=1.0).seed_batchable()
    assert not MetaCal(split_support=True).seed_batchable() and not MetaCal(mix=0.0).seed_batchable()
    assert not MetaCal(kernel_net=False).seed_batchable() and not MetaCal(calibration="emp").seed_batchable()
    # the stacked deep-kernel GP batches on the CPU only (bit-identity shown there); the GP baseline anywhere
    assert MetaCal().batches_on(torch.device("cpu")) and not MetaCal().batches_on(torch.device("cuda"))
    assert MetaCal(objective="nll", calibration="none", kernel_net=False, mean_net=False).batches_on(
        torch.device("cuda"))
    assert NeuralProcess().seed_batchable()
    # the train step's hook (uqcal.pipeline.steps.train) batches only where train_batch is callable
    assert callable(NeuralProcess().train_batch) and MetaCal(split_support=True).train_batch is None
    # MAML: MNG and MBD (each seed's dropout from its own stream) batch; MSQR is matmul-bound (no gain)
    assert callable(MamlNet(head="ng").train_batch) and callable(MamlNet(head="bd").train_batch)
    assert MamlNet(head="sqr").train_batch is None
    # the single-task nets train inside predict (their inference time is a claim's metric): no train_batch
    assert getattr(SingleTaskNet(head="sqr"), "train_batch", None) is None


def _toy_data(seed: int):
    rng = np.random.default_rng(seed)
    tasks = [(x, np.sin(2 * x[:, 0] + rng.uniform(0, 3)) + 0.1 * rng.normal(size=len(x)))
             for x in rng.uniform(-3, 3, (12, 30, 1))]
    validation = [(x[:5], np.sin(2 * x[:5, 0] + phase), x[5:], np.sin(2 * x[5:, 0] + phase))
                  for x, phase in zip(rng.uniform(-3, 3, (4, 20, 1)), rng.uniform(0, 3, 4), strict=True)]
    return EpisodeData.from_tasks(tasks, validation, n_support=5, n_query=10)


@pytest.mark.parametrize("estimator", [
    NeuralProcess(epochs=60, eval_every=3, patience=24, batch_tasks=4, lr=3e-3),
    MetaCal(epochs=60, eval_every=3, patience=15, batch_tasks=4, lr=3e-3),
    MetaCal(epochs=60, eval_every=3, patience=15, batch_tasks=4, lr=3e-3, objective="nll", calibration="none"),
    MetaCal(epochs=60, eval_every=3, patience=15, batch_tasks=4, lr=3e-3, calibration="none", lam=0.2),
    MetaCal(epochs=60, eval_every=3, patience=15, batch_tasks=4, lr=3e-2, objective="nll", calibration="none",
            kernel_net=False, mean_net=False, learn_outputscale=True),
    MamlNet(epochs=8, eval_every=2, patience=4, batch_tasks=4, lr=3e-2, head="ng"),
    MamlNet(epochs=8, eval_every=2, patience=4, batch_tasks=4, lr=3e-2, head="ng", first_order=True),
    MamlNet(epochs=10, eval_every=1, patience=3, batch_tasks=4, lr=3e-3, head="bd"),
], ids=["np", "metacal", "mdkl", "wo_r", "gp", "mng", "mng_first_order", "mbd"])
def test_a_seed_that_stops_leaves_the_batch_and_the_others_go_on_as_alone(estimator):
    """Several Adam steps an epoch (12 tasks, batches of 4) and seeds stopping at different steps: the batch
    drops a stopped seed's slices (parameters and Adam moments); every seed ends as ``meta_train`` alone."""
    _assert_batch_equals_alone(estimator, [_toy_data(seed) for seed in range(3)], different_steps=True)


@pytest.mark.parametrize("estimator", [NeuralProcess(epochs=20, eval_every=3, patience=24, batch_tasks=4, lr=3e-3),
                                       MetaCal(epochs=20, eval_every=3, patience=15, batch_tasks=4, lr=3e-3)],
                         ids=["np", "metacal"])
def test_a_seed_with_a_non_finite_loss_stops_alone_in_the_batch(estimator):
    """One seed's loss turns NaN in its first epoch (a task of NaN targets): it steps no more and keeps its best
    state, as alone; the other seeds are untouched."""
    datas = [_toy_data(seed) for seed in range(3)]
    datas[1].train_y[3] = float("nan")
    stats = _assert_batch_equals_alone(estimator, datas, different_steps=True)
    assert [s["fit_failures"] for s in stats] == [0, 1, 0]


def _assert_batch_equals_alone(estimator, datas, different_steps: bool) -> list[dict]:
    models, streams = [], []  # streams: each seed's torch global generator after its initialisation (dropout)
    for seed, data in enumerate(datas):
        torch.manual_seed(seed)
        models.append(estimator.build(data).to(dtype=data.dtype))
        streams.append(torch.Generator().set_state(torch.get_rng_state()))
    alone, ends_alone = [copy.deepcopy(m) for m in models], []
    stats_alone = []
    for s, (m, d) in enumerate(zip(alone, datas, strict=True)):
        torch.set_rng_state(streams[s].get_state())
        stats_alone.append(meta_train(m, estimator.loss, d, estimator.params, None, torch.Generator().manual_seed(s)))
        ends_alone.append(torch.get_rng_state())
    global_stream = getattr(estimator, "global_stream", False)
    stats_batch = meta_train_batch(models, estimator.loss, datas, estimator.params,
                                   [torch.Generator().manual_seed(s) for s in range(3)],
                                   seed_losses=getattr(estimator, "seed_losses", None),
                                   global_streams=streams if global_stream else None)
    if global_stream:  # every draw of each seed's stream, in its order: the streams end where alone ended
        assert all(torch.equal(stream.get_state(), end) for stream, end in zip(streams, ends_alone, strict=True))
    assert not different_steps or len({s["steps_run"] for s in stats_alone}) > 1  # the case this test is for
    for a, b, model_a, model_b in zip(stats_alone, stats_batch, alone, models, strict=True):
        assert {k: a[k] for k in ("steps_run", "epochs_run", "best_step")} == \
            {k: b[k] for k in ("steps_run", "epochs_run", "best_step")}
        assert math.isclose(a["best_val_loss"], b["best_val_loss"], rel_tol=RTOL)
        for name, value in model_a.state_dict().items():
            torch.testing.assert_close(model_b.state_dict()[name], value, rtol=RTOL, atol=RTOL)
    return stats_batch

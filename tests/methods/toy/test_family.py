"""The family plug-in contract: a family that lives outside uqcal (this folder) runs through the whole workflow.

The toy family declares its splitter, split-parameter checks, evaluator, methods, report page and "paper" numbers
in this folder; its config names the package. No file outside the folder names it (checked below), so adding a
paper is one package plus its config.
"""

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import BIN, REPO, copy_repo, tool_env
from uqcal.methods.api import builtin_families, get_family
from uqcal.pipeline.config.load import load_config, prepare_config
from uqcal.pipeline.config.source import ConfigError, check_raw_config

HERE = Path(__file__).resolve().parent
CONFIG = HERE.relative_to(REPO) / "config.yaml"


def raw() -> dict:
    return check_raw_config(REPO / CONFIG)


def test_the_config_names_the_package_and_the_registry_finds_its_family():
    config = load_config(REPO / CONFIG, root=REPO)
    family = get_family("toy")
    assert family.package == "tests.methods.toy" and family.name == "toy"
    assert set(family.methods) == {"marginal", "ridge"}
    assert family.report_spec_path == HERE / "report.yaml"
    assert "toy" not in builtin_families() and config["families"]["toy"]["package"] == "tests.methods.toy"


def test_its_splitter_and_evaluator_are_the_ones_the_package_declares():
    from uqcal.data import Table

    table = Table("t", {"kind": "single_task_regression", "target": "y"},
                  pd.DataFrame({"x": range(8), "y": [0.0, 1, 2, 3, 4, 5, 6, 9]}))
    split = get_family("toy").load_splitter()(table, {"every": 4}, 1)
    assert split == {"train": [0, 1, 2, 4, 5, 6], "test": [3, 7]}  # (row + seed) % 4 == 0
    pred = pd.DataFrame({"y": [3.0, 9.0], "mean": [3.5, 6.0], "std": [1.0, 1.0]})
    metrics = get_family("toy").evaluate(pred)
    assert metrics["max_abs_error"] == pytest.approx(3.0)
    assert metrics["rmse"] == pytest.approx(((0.5**2 + 3.0**2) / 2) ** 0.5)


def test_its_split_keys_are_checked_by_its_splitter():
    config = raw()
    config["families"]["toy"]["split"] = {"evry": 4}
    with pytest.raises(ConfigError, match=r"families\.toy\.split: unknown key 'evry' \(did you mean 'every'\?\)"):
        prepare_config(config, REPO)
    config["families"]["toy"]["split"] = {"every": 1}
    with pytest.raises(ConfigError, match=r"families\.toy\.settings\.every4 \(with split\)\.every: must be an integer >= 2"):
        prepare_config(config, REPO)


def test_an_unknown_family_or_package_is_refused_by_name():
    config = raw()
    config["families"]["toyy"] = config["families"].pop("toy")
    config["report"]["claim_runs"] = {"toyy": {"default": 3}}
    del config["families"]["toyy"]["package"]
    with pytest.raises(ConfigError, match=r"families\.toyy: unknown family 'toyy'; known: arena, bo"):
        prepare_config(config, REPO)
    config["families"]["toyy"]["package"] = "tests.no_such_package"
    with pytest.raises(ConfigError, match=r"families\.toyy: No module named 'tests\.no_such_package'"):
        prepare_config(config, REPO)


def test_its_own_source_files_are_part_of_its_jobs_identity(monkeypatch):
    """An edit of the plug-in's method (or splitter, or evaluator) reruns its jobs, as for uqcal's own families; an
    edit of its report spec, paper numbers or method table reruns the report."""
    from uqcal.pipeline.identity import source_files
    from uqcal.pipeline.plan import Job

    monkeypatch.chdir(REPO)
    load_config(REPO / CONFIG, root=REPO)
    ridge = source_files(Job("train", ("toy", "toy_diabetes", "every4", "ridge")))
    assert {"tests/methods/toy/ridge.py", "tests/methods/toy/split.py"} <= set(ridge)
    assert "src/uqcal/methods/api.py" in ridge
    # its method table is not the method's code: the entry is in the job's spec (issue 50)
    assert "tests/methods/toy/__init__.py" not in ridge
    assert "tests/methods/toy/__init__.py" in source_files(Job("report"))
    split = source_files(Job("split", ("toy", "toy_diabetes", "every4")))
    assert "tests/methods/toy/split.py" in split and "tests/methods/toy/ridge.py" not in split


def test_nothing_outside_its_folder_names_it():
    """The plug-in needs no edit anywhere else: uqcal's code, workflow and configs never mention it."""
    pattern = r"tests[./]methods[./]toy|families\.toy\b"
    hits = subprocess.run(["git", "grep", "-l", "-i", "-E", pattern, "--", "src", "workflow", "config", "Snakefile",
                           "dvc.yaml"], cwd=REPO, capture_output=True, text=True).stdout
    assert hits.strip() == ""


@pytest.mark.slow
def test_the_toy_family_runs_through_the_workflow_and_gets_its_report_page(tmp_path):
    root = copy_repo(tmp_path / "repo")
    env = tool_env()  # the repository's root is on every job's import path: the plug-in needs no PYTHONPATH
    proc = subprocess.run([str(BIN / "snakemake"), "--cores", "2", "--configfile", str(CONFIG)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = pd.read_csv(root / "results" / "toy" / "summary.csv")
    rmse = summary[summary.metric == "rmse"].set_index("method")["mean"]
    assert set(rmse.index) == {"marginal", "ridge"} and (summary.n == 3).all()
    assert rmse["ridge"] < rmse["marginal"]  # diabetes: a linear model explains about half the variance
    assert "max_abs_error" in set(summary.metric)  # the family's own evaluator scored the runs
    claims = json.loads((root / "reports" / "toy" / "claims.json").read_text())
    assert [(c["id"], c["runs_declared"]) for c in claims] == [("ridge_beats_marginal", 3)]
    assert claims[0]["evidence"][0]["test"] == "paired t"  # decided by the claim engine, on the stand-in's rows
    page = (root / "reports" / "toy" / "index.html").read_text()
    assert "Toy family (a plug-in test)" in page and "Bayesian ridge" in page and "55" in page  # the fixture's table

"""A job's code is its own method's code (issue 50): adding a method to a family's registry plans that method's
train jobs, the family's aggregate and the report, nothing else; the report job covers every family it reports,
plug-ins included.

A run is simulated without training (tests.pipeline.test_identity.simulate_run): each job of the plan leaves
outputs and a record; the Snakefile's start-up check (uqcal.pipeline.records.refresh_specs) then says which jobs
the next run plans.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import REPO
from tests.pipeline.conftest import PLUGIN, _edit, _new_process
from tests.pipeline.test_identity import simulate_run
from uqcal.methods.api import MethodEntry
from uqcal.pipeline import identity
from uqcal.pipeline import records as R
from uqcal.pipeline.config.load import load_config


def _planned(config_path: str) -> set[str]:
    """The jobs a run of ``config_path`` would run now: stale ones and new ones (no record yet)."""
    from uqcal.pipeline.identity import build_spec
    from uqcal.pipeline.plan import plan

    _new_process()
    config = load_config(config_path)
    return {f"{job.rule} {job.name}" for job in plan(config)
            if R.why_stale(job, build_spec(config, job, config_path)) is not None}


def _add_toy_method(root: Path) -> None:
    """A third method in the toy family: its registry line and its config entry."""
    _edit(root / PLUGIN / "__init__.py", '    "ridge": MethodEntry(',
          f'    "ridge_short": MethodEntry("{PLUGIN}.ridge:BayesianRidgeRegression"),\n    "ridge": MethodEntry(')
    _edit(root / PLUGIN / "config.yaml", "      ridge: {max_iter: 200}", "      ridge: {max_iter: 200}\n      ridge_short:")


def test_a_new_method_in_a_plugin_registry_plans_its_train_jobs_its_aggregate_and_the_report(plugin_workspace):
    config = f"{PLUGIN}/config.yaml"
    simulate_run(config)
    assert _planned(config) == set()
    _add_toy_method(plugin_workspace)
    assert _planned(config) == {"train toy/toy_diabetes/every4/ridge_short", "aggregate toy", "report report"}


def test_a_changed_registry_entry_reruns_that_method_only(plugin_workspace):
    config = f"{PLUGIN}/config.yaml"
    simulate_run(config)
    # the same method, another class: its entry (the job's `target`) changes, its parameters do not
    _edit(plugin_workspace / PLUGIN / "__init__.py", f'"ridge": MethodEntry("{PLUGIN}.ridge:BayesianRidgeRegression")',
          f'"ridge": MethodEntry("{PLUGIN}.ridge:RidgeAlias")')
    _edit(plugin_workspace / PLUGIN / "ridge.py", "class BayesianRidgeRegression", "class RidgeAlias")
    # its train job reruns, and the report (which names the family's methods); the aggregate once the train
    # job's outputs are new (its inputs); nothing else of the family
    assert _planned(config) == {"train toy/toy_diabetes/every4/ridge", "report report"}


def test_an_edit_of_a_plugin_report_spec_or_paper_numbers_replans_the_report(plugin_workspace):
    config = f"{PLUGIN}/config.yaml"
    simulate_run(config)
    _edit(plugin_workspace / PLUGIN / "report.yaml", 'title: "Toy family (a plug-in test)"',
          'title: "Toy family (a plug-in test, renamed)"')
    assert _planned(config) == {"report report"}
    simulate_run(config)
    _edit(plugin_workspace / PLUGIN / "paper_numbers.yaml", "mean: 55.0", "mean: 56.0")
    assert _planned(config) == {"report report"}


def test_the_report_job_hashes_every_family_it_reports(plugin_workspace):
    from uqcal.pipeline.plan import Job

    load_config(f"{PLUGIN}/config.yaml")
    files = set(identity.source_files(Job("report")))
    assert {f"{PLUGIN}/report.yaml", f"{PLUGIN}/paper_numbers.yaml", f"{PLUGIN}/__init__.py"} <= files
    assert {"src/uqcal/methods/rio/report.yaml", "src/uqcal/methods/qr/paper_numbers.yaml"} <= files
    train = set(identity.source_files(Job("train", ("toy", "toy_diabetes", "every4", "ridge"))))
    assert f"{PLUGIN}/ridge.py" in train and f"{PLUGIN}/split.py" in train  # its method and its evaluator
    assert f"{PLUGIN}/__init__.py" not in train  # the method table is not the method's code


def test_a_new_arena_recalibrator_plans_only_its_own_train_jobs(tmp_path, monkeypatch, isolated_registry):
    """The arena, registry file and all: its METHODS table in a copy of uqcal's source that the jobs' code
    identity reads (identity.SRC), the new entry in the table the registry returns."""
    import uqcal.methods.arena as arena

    src = tmp_path / "src" / "uqcal"
    shutil.copytree(identity.SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(identity, "SRC", src)
    shutil.copytree(REPO / "config", tmp_path / "config")
    shutil.copytree(REPO / "workflow/schemas", tmp_path / "workflow/schemas")
    monkeypatch.chdir(tmp_path)
    small = Path("config/arena-small.yaml")  # the arena on one dataset, two seeds: the same jobs per dataset
    small.write_text(Path("config/arena.yaml").read_text().replace("datasets: [concrete, boston, diabetes]",
                                                                   "datasets: [diabetes]")
                     .replace("seeds: 10", "seeds: 2"))
    plan = simulate_run(str(small))
    assert len([job for job in plan if job.rule == "train"]) == 22
    assert _planned(str(small)) == set()

    # One new recalibration of the marginal reference: its registry line, the in-memory table, its config entry.
    _edit(src / "methods/arena/__init__.py", "\n\nFAMILY = Family(",
          '\nMETHODS["marginal_vs"] = MethodEntry(_VARIANCE_SCALING, depends_on="marginal")\n\nFAMILY = Family(')
    monkeypatch.setitem(arena.METHODS, "marginal_vs", MethodEntry(arena._VARIANCE_SCALING, depends_on="marginal"))
    _edit(small, "      de_qr_vs: {}", "      de_qr_vs: {}\n      marginal_vs: {}")
    assert _planned(str(small)) == {"train arena/diabetes/split70-10-20/marginal_vs", "aggregate arena",
                                    "report report"}

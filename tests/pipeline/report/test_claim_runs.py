"""Runs per claim are declared in the run config before any result exists (report.claim_runs): the rows that
cannot reach them are known from the config alone (uqcal.pipeline.report.claim_runs)."""

from __future__ import annotations

import copy

import pytest

from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.report.build import load_spec
from uqcal.pipeline.report.claim_runs import claim_rows, claim_runs_problems


def _specs(config):
    return {family: load_spec(family) for family in config["families"]}


@pytest.mark.parametrize("path", ["config/config.yaml", "config/extended.yaml", "config/smoke.yaml",
                                  "config/bo-power.yaml", "config/fewshot-extended.yaml", "config/fewshot-seeds.yaml"])
def test_every_row_of_the_shipped_configs_reaches_its_declared_runs(path):
    config = load_config(path)
    assert (config.get("report") or {}).get("claim_runs"), f"{path} declares no runs per claim"
    assert claim_runs_problems(config, _specs(config)) == []


def test_paper_config_names_only_the_msd_rows_run_at_the_papers_own_ten():
    config = load_config("config/paper.yaml")
    problems = claim_runs_problems(config, _specs(config))
    assert problems and all("year_msd / holdout" in p and "declares 100 runs" in p for p in problems)


def test_a_declared_n_above_a_methods_seeds_is_named_with_the_row_and_method():
    config = copy.deepcopy(load_config("config/config.yaml"))
    config["report"]["claim_runs"]["rio"]["residual_beats_direct"] = 10  # the ablations run 5 of concrete's 10
    problems = claim_runs_problems(config, _specs(config))
    assert len(problems) == 1
    assert "rio.residual_beats_direct declares 10 runs" in problems[0] and "concrete / holdout" in problems[0]
    assert "r_i 5" in problems[0] and "rio 10" not in problems[0]
    config["report"]["claim_runs"]["rio"]["no_such_claim"] = 3
    assert any("no_such_claim" in p for p in claim_runs_problems(config, _specs(config)))


def test_claim_rows_follow_the_checks_filters_and_methods():
    config = load_config("config/config.yaml")
    spec = {c["id"]: c["check"] for c in load_spec("rio")["claims"] if "check" in c}
    # the ablations run on concrete only; the agreement with Table 1 only on the paper's own data
    assert [(d, s) for d, s, _ in claim_rows(config, "rio", spec["residual_beats_direct"])] == [("concrete", "holdout")]
    assert [d for d, _, _ in claim_rows(config, "rio", spec["rio_beats_nn_rmse"])] == ["concrete", "diamonds"]
    assert [d for d, _, _ in claim_rows(config, "rio", spec["ccs_within_spread"])] == ["concrete"]
    qr = {c["id"]: c["check"] for c in load_spec("qr")["claims"] if "check" in c}
    assert [(d, s) for d, s, _ in claim_rows(config, "qr", qr["qr_lowers_ce_dvi_shuffled"])] == [
        ("concrete", "cv5_shuffled")]

"""Minimum n (REPLICATION-STATISTICS Sec. 10; issue 47): a test that cannot reach alpha = .05 at its n decides
nothing. Every shipped run config (config/*.yaml) declares, for every claim it decides, at least the runs its
test needs: a t test 3 (df 2), the fold-blocked t its folds + 2, a paired t over trained few-shot models 3 models
per method (training seeds are the unit; episodes are pseudo-replicates of one model), the inner-loop curves of
md_elbo_faster 3 curves. A config that declares fewer does not decide the claim: the report lists it as not run
(checked here on the code's own guards)."""

from __future__ import annotations

from pathlib import Path

import pytest

from uqcal.methods.api import get_family
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.report.build import load_spec
from uqcal.pipeline.report.episode_claims import MIN_MODELS
from uqcal.pipeline.report.verdicts import MIN_RUNS_T, declared_seeds

ROOT = Path(__file__).resolve().parents[2]
NOT_RUN_CONFIGS = ("base.yaml", "reference_costs.yaml", "gpu_speedups.yaml")  # shared keys, uqcal cost's tables
RUN_CONFIGS = sorted(p for p in (ROOT / "config").glob("*.yaml")
                     if p.name not in NOT_RUN_CONFIGS and not p.name.startswith("datasets"))


def minimum_runs(claim: dict) -> int:
    """The fewest declared runs at which the claim's test can reach alpha = .05."""
    kind = claim["check"]["kind"]
    if kind == "episode_paired":
        return MIN_MODELS
    if kind == "fold_blocked_compare":
        return int(claim["check"].get("folds", 5)) + 2
    return MIN_RUNS_T


def test_the_codes_guards_leave_a_short_row_undecided():
    assert declared_seeds([{0, 1, 2}], 2) == (None, "2 declared runs (the test needs 3)")
    assert declared_seeds([{0, 1, 2}], 3)[0] == [0, 1, 2]
    assert declared_seeds([{0, 1}], None)[0] is None


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=lambda p: p.name)
def test_every_claim_a_shipped_config_decides_can_reach_alpha(path):
    config = load_config(path, ROOT)
    claim_runs = (config.get("report") or {}).get("claim_runs") or {}
    short = []
    if path.name == "smoke.yaml":
        pytest.skip("the smoke run checks the plumbing on 1 run; the code's guards leave every claim undecided")
    for family in config.get("families") or {}:
        if not get_family(family).report_spec_path.exists():
            continue
        declared_family = claim_runs.get(family) or {}
        for claim in load_spec(family).get("claims") or []:
            if "check" not in claim:
                continue  # not_run by construction: its `needs` names what uqcal lacks to test it
            kind = claim["check"]["kind"]
            if kind == "stats_curve_greater":  # its n: the md convergence curves the config logs
                md = (config["families"][family].get("methods") or {}).get("md") or {}
                curves = int(md.get("n_convergence_episodes", 3))
                if 0 < curves < MIN_RUNS_T:
                    short.append(f"{family}.{claim['id']}: {curves} curves")
                continue
            declared = declared_family.get(claim["id"], declared_family.get("default"))
            if declared is None or int(declared) >= minimum_runs(claim):
                continue
            if kind == "episode_paired":
                continue  # not decided by construction: not_run naming config/fewshot-seeds.yaml
            short.append(f"{family}.{claim['id']}: {declared} declared, its test needs {minimum_runs(claim)}")
    assert not short, f"{path.name} declares too few runs to decide: {short}"


def test_the_seeds_config_decides_the_fewshot_claims():
    config = load_config(ROOT / "config" / "fewshot-seeds.yaml", ROOT)
    assert config["families"]["fewshot"]["seeds"] >= MIN_MODELS
    assert config["report"]["claim_runs"]["fewshot"]["default"] >= MIN_MODELS
    default = load_config(ROOT / "config" / "config.yaml", ROOT)
    # the default trains one model per method: its fewshot claims are not decided (the lead's cost decision)
    assert default["report"]["claim_runs"]["fewshot"]["default"] < MIN_MODELS
    assert default["families"]["fewshot"]["methods"]["md"]["n_convergence_episodes"] >= MIN_RUNS_T

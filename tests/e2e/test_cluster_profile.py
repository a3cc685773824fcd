"""One SLURM command everywhere, threads from the config, small reference jobs (issue 42, item 7)."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from tests.conftest import BIN, REPO, tool_env
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.config.source import profile_problem

COMMAND = "snakemake --workflow-profile workflow/profiles/slurm --configfile config/paper.yaml"
WRONG = re.compile(r"snakemake\b[^`\n]*--profile[ =]\S*profiles/slurm")  # a command that uses it


def test_one_slurm_command_in_the_readme_the_profile_and_the_paper_config():
    for path in ("README.md", "workflow/profiles/slurm/config.yaml", "config/paper.yaml"):
        assert COMMAND in (REPO / path).read_text(), f"{path} does not give the SLURM command {COMMAND!r}"
    documents = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "config").glob("*.yaml")),
                 *sorted((REPO / "workflow/profiles").glob("*/config.yaml"))]
    wrong = [f"{path.relative_to(REPO)}: {line.strip()}" for path in documents
             for line in path.read_text().splitlines() if WRONG.search(line)]
    assert not wrong, wrong


def test_the_slurm_profile_leaves_each_jobs_threads_to_its_config():
    # Snakemake caps a job's threads at --cores: the cluster profile must not set it (nor max-threads).
    profile = yaml.safe_load((REPO / "workflow/profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm"
    assert not {"cores", "max-threads", "set-threads"} & set(profile), profile
    assert profile["latency-wait"] == 60 and profile["keep-going"] is True


def test_a_cluster_profile_given_as_profile_is_refused_naming_the_right_command(tmp_path):
    slurm = str(REPO / "workflow/profiles/slurm")
    assert profile_problem(["snakemake", "--workflow-profile", slurm], {}) is None
    assert profile_problem(["snakemake", "--profile", str(REPO / "workflow/profiles/default")], {}) is None
    for argv, env in ((["snakemake", "--profile", slurm], {}), ([f"--profile={slurm}"], {}),
                      (["snakemake"], {"SNAKEMAKE_PROFILE": slurm})):
        problem = profile_problem(argv, env)
        assert problem and f"Use `snakemake --workflow-profile {slurm} --configfile <config>`" in problem, argv
    # The real command line: Snakemake stops at the Snakefile's first lines, before planning or submitting.
    proc = subprocess.run([str(BIN / "snakemake"), "-n", "--snakefile", str(REPO / "Snakefile"), "--profile", slurm],
                          cwd=tmp_path, env=tool_env(), capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"--profile {slurm} (executor slurm) is not applied as written" in log, log


@pytest.mark.parametrize("family", ["metareg", "rio", "qr"])  # paper.yaml runs no fewshot `uniform`
def test_reference_predictors_ask_for_small_resources_on_the_paper_config(family):
    from uqcal.methods.api import REFERENCE_RESOURCES
    from uqcal.pipeline.plan import plan, resources

    config = load_config(REPO / "config/paper.yaml")
    reference = "marginal"
    asked = [resources(config, *job.key[:2], job.key[3]) for job in plan(config)
             if job.rule == "train" and job.key[0] == family and job.key[3] == reference]
    assert asked, f"paper.yaml runs no {reference} in {family}"
    for got in asked:
        assert {k: got[k] for k in REFERENCE_RESOURCES} == REFERENCE_RESOURCES, got
    # The family's own request is large (the issue: marginal asked for 16 GB and 720 minutes).
    from uqcal.methods.api import get_entry

    assert get_entry("fewshot", "uniform").load_class().job_resources == REFERENCE_RESOURCES
    family_request = config["families"][family]["resources"]
    assert family_request["mem_mb"] > REFERENCE_RESOURCES["mem_mb"] and family_request["runtime"] > 60


def test_a_per_method_override_still_wins_over_the_reference_resources():
    from uqcal.pipeline.plan import resources

    config = load_config(REPO / "config/paper.yaml")
    config["families"]["rio"]["resources"]["per_method"] = {"marginal": {"mem_mb": 12345}}
    got = resources(config, "rio", config["families"]["rio"]["datasets"][0], "marginal")
    assert got["mem_mb"] == 12345 and got["runtime"] == 60 and got["cpus"] == 1 and got["gpu"] == 0

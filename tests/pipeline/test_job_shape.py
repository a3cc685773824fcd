"""Issue 53, "job shape for a cluster": a method's seeds run as one train job each where together they are expected
to exceed ``job_shape.one_seed_per_job_over_hours`` (uqcal.pipeline.plan.one_seed_per_job), and nothing else about
the jobs changes: the same seed folders, the same per-seed job description, the same other jobs."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import REPO
from uqcal.methods.bo.work import step_seconds
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.config.payloads import job_digest, per_seed_jobs
from uqcal.pipeline.dvc import command
from uqcal.pipeline.identity import build_spec
from uqcal.pipeline.plan import Job, outputs, payload, plan, train_jobs, upstream

SMOKE = "config/smoke.yaml"
BO_KEYS = [("bo", "forrester", "forrester-basin-ucb", method) for method in ("random", "uncalibrated", "calibrated")]
# The smoke config's BO jobs by hand: a synthetic objective's evaluations are free (uqcal.methods.bo.work), so a seed
# is budget (3) surrogate steps of its method's BO_STEP CPU seconds, and a job is its 2 seeds.
BO_JOB_HOURS = {key: 2 * 3 * step_seconds(key[3]) / 3600 for key in BO_KEYS}


@pytest.fixture(scope="module")
def smoke():
    return load_config(REPO / SMOKE)


def shaped(config: dict, hours) -> dict:
    found = copy.deepcopy(config)
    found["job_shape"] = {"one_seed_per_job_over_hours": hours}
    return found


def test_the_default_and_smoke_configs_split_nothing(smoke):
    # their longest jobs with a declared work are minutes: under base.yaml's one hour
    for config in (smoke, load_config(REPO / "config/config.yaml")):
        assert config["job_shape"] == {"one_seed_per_job_over_hours": 1.0}
        assert [job for job in plan(config) if len(job.key) > 4] == []


def test_a_job_splits_where_its_seeds_work_exceeds_the_threshold_and_nowhere_else(smoke):
    unsplit = plan(smoke)
    below, above = min(BO_JOB_HOURS.values()) * 0.99, max(BO_JOB_HOURS.values()) * 1.01
    split = plan(shaped(smoke, below))
    # BO's three jobs (2 seeds each) are now six one-seed jobs, in their place; every other job is as it was
    expected = []
    for job in unsplit:
        if job.rule == "train" and job.key in BO_KEYS:
            expected += [Job("train", (*job.key, "seed0")), Job("train", (*job.key, "seed1"))]
        else:
            expected.append(job)
    assert split == expected
    assert [job.name for job in split if job.seed is not None][:2] == [
        "bo/forrester/forrester-basin-ucb/random/seed0", "bo/forrester/forrester-basin-ucb/random/seed1"]
    # just above the jobs' hours, and without a threshold: one job per method, as without the key
    assert plan(shaped(smoke, above)) == unsplit
    # between two methods' hours: only the costlier method's job splits (calibrated refits most a step)
    between = shaped(smoke, BO_JOB_HOURS[BO_KEYS[2]] * 0.99)
    assert {job.key[:4] for job in plan(between) if job.seed is not None} == {BO_KEYS[2]}
    assert plan(shaped(smoke, None)) == unsplit
    no_key = copy.deepcopy(smoke)
    del no_key["job_shape"]
    assert plan(no_key) == unsplit


def test_families_without_a_declared_work_and_one_seed_jobs_never_split(smoke):
    jobs = plan(shaped(smoke, 0))
    split = {job.key[0] for job in jobs if job.seed is not None}
    assert split == {"bo"}  # metareg, rio, qr state no work; the smoke's fewshot runs one seed
    assert any(job.rule == "train" and job.key[0] == "fewshot" for job in jobs)


def test_a_one_seed_job_is_its_seed_of_the_whole_job(smoke):
    config = shaped(smoke, 0)
    whole = Job("train", BO_KEYS[2])
    seeds = train_jobs(config, *BO_KEYS[2])
    assert [job.seed for job in seeds] == [0, 1]
    one = seeds[1]
    assert one.record_path == ".uqcal/records/train/bo/forrester/forrester-basin-ucb/calibrated/seed1.json"
    assert outputs(one) == ["results/bo/forrester/forrester-basin-ucb/calibrated/seed1"]
    assert outputs(whole) == ["results/bo/forrester/forrester-basin-ucb/calibrated"]
    # the same job description with its seed alone, so each seed's run (and its resume folder) is the whole job's
    whole_payload, one_payload = payload(smoke, whole), payload(config, one)
    assert one_payload == {**whole_payload, "seeds": [1]}
    assert [job_digest(j) for j in per_seed_jobs(one_payload)] == [job_digest(per_seed_jobs(whole_payload)[1])]
    assert upstream(config, one) == upstream(smoke, whole)
    # the family's aggregate waits for every seed's job
    assert upstream(config, Job("aggregate", ("bo",))) == [
        job for key in BO_KEYS for job in train_jobs(config, *key)]
    assert command(one, SMOKE) == ("uqcal train --config config/smoke.yaml --family bo --dataset forrester "
                                   "--setting forrester-basin-ucb --method calibrated --seed 1")


def test_splitting_one_family_changes_no_other_job(smoke, monkeypatch):
    monkeypatch.chdir(REPO)  # the config's path, as the Snakefile names it
    config = shaped(smoke, 0)
    for job in plan(smoke):
        if job.rule in ("materialise", "split") or (job.key and job.key[0] != "bo" and job.rule != "report"):
            assert build_spec(config, job, SMOKE) == build_spec(smoke, job, SMOKE), job


@pytest.mark.parametrize("split_methods", [{"nn", "rio"}, {"nn"}, {"rio"}])
def test_a_method_built_on_another_reads_its_seed_or_its_whole_job(smoke, monkeypatch, split_methods):
    # No family with a declared work has a method built on another's runs today (RIO's and QR's state none), so
    # the decision is forced: RIO's rio (built on nn's runs) and/or nn run one seed per job, 2 seeds each.
    from uqcal.pipeline import plan as plan_module

    monkeypatch.setattr(plan_module, "one_seed_per_job", lambda config, family, dataset, setting, method:
                        family == "rio" and method in split_methods)
    config = copy.deepcopy(smoke)
    config["families"]["rio"]["seeds"] = 2
    key = ("rio", "concrete", next(iter(config["families"]["rio"]["settings"])))
    nn_jobs = train_jobs(config, *key, "nn")
    assert len(nn_jobs) == (2 if "nn" in split_methods else 1)
    for job in train_jobs(config, *key, "rio"):
        trains = [up for up in upstream(config, job) if up.rule == "train"]
        if job.seed is not None and "nn" in split_methods:  # its own seed's run of nn only
            assert trains == [Job("train", (*key, "nn", f"seed{job.seed}"))]
        else:  # all of nn's runs, whichever jobs wrote them
            assert trains == nn_jobs
    jobs = plan(config)
    assert all(jobs.index(up) < jobs.index(job) for job in jobs for up in upstream(config, job))

"""`uqcal cost`: the estimator's work scaling, the per-family sums and the schedule, against hand-computed plans."""

from __future__ import annotations

import json

import pytest

from uqcal.methods.bo.work import BO_STEP, CNN_TRAIN_IMAGE, step_seconds
from uqcal.methods.bo.work import work_per_seed as bo_work
from uqcal.methods.fewshot import work as fewshot_work
from uqcal.pipeline.plan import Job
from uqcal.pipeline.progress.cost import makespan, run_cost, with_work
from uqcal.pipeline.progress.estimate import Cost, PlannedJob, estimate

MD = Job("train", ("fewshot", "big", "5w1s", "md"))
PROTONET = Job("train", ("fewshot", "big", "5w1s", "protonet"))


@pytest.mark.parametrize("seconds, workers, expected", [
    ([5, 4, 3, 3], 2, 8),        # longest first: 5 | 4, then 3 on the 4 (7), 3 on the 5 (8)
    ([5, 4, 3, 3], 8, 5),        # more workers than jobs: the longest job
    ([2, 2, 2, 2, 2, 2], 3, 4),
    ([], 4, 0),
])
def test_makespan_is_a_longest_first_schedule(seconds, workers, expected):
    assert makespan(seconds, workers) == expected


def test_a_stand_in_is_scaled_by_the_ratio_of_work():
    # the same method measured twice, one seed each: 10 s at work 100 and 30 s at work 200, each with a start-up
    # of STARTUP_SECONDS = 3 s -> (7 + 27) s per 300 work; a job of 2 seeds at work 1,500: 3 + 2 x 1,500 x 34 / 300
    # = 343 s
    book = {Job("train", ("fewshot", "a", "5w1s", "md")): [Cost(10.0, "p1", 100.0)],
            Job("train", ("fewshot", "b", "5w1s", "md")): [Cost(30.0, "p2", 200.0)]}
    found = estimate(PlannedJob(MD, units=2, params="p3", work=1500.0), book)
    assert found.seconds == pytest.approx(343.0)
    assert found.source == "same method, scaled by work"
    # without a stated work it is the median per seed, unscaled
    assert estimate(PlannedJob(MD, units=2, params="p3"), book).seconds == pytest.approx(2 * 20.0)
    # its own record (same parameters) is never scaled
    assert estimate(PlannedJob(Job("train", ("fewshot", "a", "5w1s", "md")), 1, params="p1", work=9e9),
                    book).seconds == pytest.approx(10.0)


def test_reference_costs_take_their_work_by_job_and_parameters_digest():
    book = {MD: [Cost(5.0, "known"), Cost(6.0, "unknown"), Cost(7.0, "stated", 3.0)], PROTONET: [Cost(1.0, "known")]}
    found = with_work(book, {(MD, "known"): 42.0, (MD, "stated"): 99.0, (PROTONET, "known"): 7.0})
    assert [cost.work for cost in found[MD]] == [42.0, None, 3.0]
    assert [cost.work for cost in found[PROTONET]] == [7.0]  # the same digest, another job: its own work


def test_methods_configured_alike_keep_their_own_reference_work():
    from uqcal.pipeline.progress.cost import reference_work

    work = reference_work(["config/config.yaml"])
    de = {digest: w for (job, digest), w in work.items() if job.key == ("qr", "concrete", "cv5", "de")}
    de_iso = {digest: w for (job, digest), w in work.items() if job.key == ("qr", "concrete", "cv5", "de_iso")}
    assert de.keys() == de_iso.keys()  # both `{}` in the config: one digest
    assert list(de.values())[0] > 10 * list(de_iso.values())[0]  # a network's training against an isotonic fit


def _fewshot_payload(**params):
    return {"family": "fewshot", "dataset": "big", "setting": "5w1s", "params": params,
            "dataset_spec": {"image_shape": [56, 56, 3]}, "setting_params": {"n_way": 5, "k_shot": 1},
            "family_params": {"split": {"n_query_train": 15, "n_query_test": 15, "n_val_episodes": 60,
                                        "n_test_episodes": 40}}}


def test_fewshot_work_by_hand():
    fw = fewshot_work
    # 56 x 56 at width 64: 4 x the pixels, 4 x the width^2 -> 16 x the reference backbone a image; an episode of
    # 5 x (1 + 15) = 80 images against 100; 1,000 episodes with a check of 30 episodes every 100 (10 checks)
    conv = 16 * 80 / 100
    evaluated = 10 * 30 + 60 + 40
    marginal = _fewshot_payload(train_episodes=1000, width=64, val_every=100, n_val_check=30, n_mc_samples=512)
    expected = 1000 * fw.TRAIN_EPISODE * conv + evaluated * (fw.EVAL_FORWARD * conv + fw.MARGINAL_256 * 2)
    assert fw.work_per_seed(marginal) == pytest.approx(expected)
    # the authors' full-covariance draws: 5,000 joint draws, half the measured 10,000
    full = _fewshot_payload(train_episodes={"5w1s": 1000}, width=64, val_every=100, n_val_check=30,
                            n_mc_samples=512, sampling="full_covariance", n_mc_samples_full=5000)
    expected_full = 1000 * fw.TRAIN_EPISODE * conv + evaluated * (fw.EVAL_FORWARD * conv + fw.FULL_COVARIANCE_10000 / 2)
    assert fw.work_per_seed(full) == pytest.approx(expected_full)
    # no sampling (ProtoNet), no validation checks
    plain = _fewshot_payload(train_episodes=1000, width=64)
    assert fw.work_per_seed(plain) == pytest.approx(1000 * fw.TRAIN_EPISODE * conv + 100 * fw.EVAL_FORWARD * conv)


def test_bo_work_by_hand():
    synthetic = {"method": "calibrated", "setting_params": {"n_init": 5, "budget": 20},
                 "dataset_spec": {"source": {"type": "synthetic"}}}
    assert bo_work(synthetic) == pytest.approx(20 * BO_STEP["calibrated"])
    cnn = {"method": "random", "setting_params": {"n_init": 5, "budget": 20},
           "dataset_spec": {"source": {"type": "hpo", "model": "cnn", "data": "cifar10",
                                       "options": {"epochs": 2, "train_size": 1000, "test_size": 300}}}}
    # random search's steps are nearly free; its 25 CNN trainings are what it costs
    assert bo_work(cnn) == pytest.approx(20 * BO_STEP["random"] + 25 * CNN_TRAIN_IMAGE * (2 * 1000 + 100))
    assert step_seconds("calibrated_fastloo") == BO_STEP["calibrated"]


def test_run_cost_sums_per_family_and_names_the_longest_job():
    # hand-computed plan: two fewshot trains (one asks for a GPU), a bo train, a dataset, the report
    book = {MD: [Cost(100.0, "md")], PROTONET: [Cost(10.0, "pn")],
            Job("train", ("bo", "f", "s", "random")): [Cost(36.0, "r")],
            Job("materialise", ("big",)): [Cost(72.0, "m")], Job("report"): [Cost(360.0, "rep")]}
    jobs = [(PlannedJob(MD, 3, params="md"), True), (PlannedJob(PROTONET, 2, params="pn"), False),
            (PlannedJob(Job("train", ("bo", "f", "s", "random")), 10, params="r"), False),
            (PlannedJob(Job("materialise", ("big",)), params="m"), False), (PlannedJob(Job("report"), params="rep"), False)]
    on_cpus = run_cost(jobs, book, cores=2)
    assert on_cpus.per_family["fewshot"].cpu_hours == pytest.approx((300 + 20) / 3600)
    assert on_cpus.per_family["fewshot"].seed_runs == 5
    assert on_cpus.per_family["bo"].cpu_hours == pytest.approx(360 / 3600)
    assert on_cpus.per_family["data"].cpu_hours == pytest.approx(72 / 3600)
    assert on_cpus.cpu_hours == pytest.approx((300 + 20 + 360 + 72 + 360) / 3600)
    assert on_cpus.gpu_hours == 0
    # 2 cores, longest first: 360 | 360, 300 -> 660, 72 -> 432, 20 -> 452: 660 s
    assert on_cpus.wall_hours == pytest.approx(660 / 3600)
    report = on_cpus.as_dict()
    assert report["longest_job"] in ("train/bo/f/s/random", "report")
    assert report["longest_job_hours"] == pytest.approx(0.1)
    # per seed: md 100 s, protonet 10, bo 36; the report (360 s) is one unit: the longest
    assert report["longest_seed_hours"] == pytest.approx(360 / 3600, abs=1e-3)
    # one GPU: md's job goes there, 4x faster than on a CPU thread (a family's speed-up; a dataset's wins)
    with_gpu = run_cost(jobs, book, cores=2, gpus=1, speedups={"fewshot": 4.0, "fewshot/other": 100.0}).as_dict()
    assert with_gpu["gpu_hours"] == pytest.approx(75 / 3600, abs=1e-3)
    assert with_gpu["per_family"]["fewshot"]["cpu_hours"] == pytest.approx(20 / 3600, abs=1e-3)
    # the CPU jobs on 2 cores: 360 | 360, 72 -> 432, 20 -> 380: 432 s (the GPU: 75 s)
    assert json.loads(json.dumps(with_gpu))["wall_hours"] == pytest.approx(432 / 3600, abs=1e-3)
    on_gpu = run_cost(jobs, book, cores=2, gpus=1, speedups={"fewshot/big": 0.5})
    assert on_gpu.gpu_hours == pytest.approx(600 / 3600)  # slower on a GPU (launch-bound): 300 / 0.5
    assert on_gpu.as_dict()["longest_job"] == "train/fewshot/big/5w1s/md"


def test_the_shipped_gpu_speedups_name_families():
    from uqcal.methods.api import builtin_families
    from uqcal.pipeline.progress.cost import gpu_speedups

    speedups = gpu_speedups()
    assert speedups["fewshot"] > 1 and speedups["metareg"] < 1
    assert {name.split("/")[0] for name in speedups} <= set(builtin_families())


def test_paper_config_puts_conv_bound_jobs_on_gpus_and_launch_bound_ones_on_cpus():
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.plan import plan, resources

    config = load_config("config/paper.yaml")
    gpu = {job.key: resources(config, job.key[0], job.key[1], job.key[3])["gpu"] for job in plan(config)
           if job.rule == "train" and job.key[3] not in ("marginal", "uniform")}
    assert all(gpu[key] > 0 for key in gpu if key[0] == "fewshot")  # Conv4 at 84 x 84 (28 x 28 for Omniglot)
    assert all(gpu[key] > 0 for key in gpu if key[0] == "bo" and key[1].startswith("cnn_"))  # a CNN per evaluation
    assert all(gpu[key] == 0 for key in gpu if key[0] == "bo" and not key[1].startswith("cnn_"))  # small GPs
    assert all(gpu[key] == 0 for key in gpu if key[0] == "metareg")  # launch-bound: 0.59x on a GPU


def test_the_command_costs_the_smoke_config(capsys, monkeypatch):
    import uqcal.cli as cli
    from tests.conftest import REPO

    monkeypatch.chdir(REPO)
    assert cli.main(["cost", "--config", "config/smoke.yaml", "--cores", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    families = report["per_family"]
    assert {"fewshot", "bo", "rio", "qr", "metareg"} <= set(families)
    assert report["cpu_hours"] == pytest.approx(sum(f["cpu_hours"] for f in families.values()), abs=0.01)
    assert report["gpu_hours"] == 0  # no --gpus: every job on the CPUs
    assert report["longest_job_hours"] == pytest.approx(max(f["longest_job_hours"] for f in families.values()))
    # two cores: never below the longest job nor below half the work
    assert report["wall_hours"] >= max(report["longest_job_hours"], report["cpu_hours"] / 2) - 1e-3
    assert report["longest_job"] == "report" or report["longest_job"].startswith(("train/", "materialise/", "split/"))


def test_conv_bound_jobs_take_their_cpus_as_torch_threads():
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.plan import payload

    config = load_config("config/paper.yaml")
    assert config["families"]["fewshot"]["resources"]["cpus"] == 4
    assert payload(config, Job("train", ("fewshot", "cub200", "5w1s", "md")))["torch_threads"] == 4  # cpus
    assert payload(config, Job("train", ("bo", "cnn_svhn", "paper-hpo-ei", "calibrated")))["torch_threads"] == 4
    assert payload(config, Job("train", ("bo", "forrester", "forrester-basin-ucb", "calibrated")))["torch_threads"] == 1
    assert payload(config, Job("train", ("rio", "yacht", "holdout", "rio")))["torch_threads"] == config["torch_threads"]
    config["families"]["rio"]["resources"]["torch_threads"] = 3  # a number is taken as it is
    assert payload(config, Job("train", ("rio", "yacht", "holdout", "rio")))["torch_threads"] == 3


def test_a_record_states_its_seeds_work(tmp_path):
    from uqcal.pipeline.progress.estimate import record_costs

    job = {**_fewshot_payload(train_episodes=1000, width=64), "setting": "5w1s", "seeds": [0, 1]}
    record = {"rule": "train", "key": ["fewshot", "big", "5w1s", "protonet"], "params": {"a": 1},
              "resources": {"wall_seconds": 50.0}, "job": job}
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "one.json").write_text(json.dumps(record))
    (cost,) = record_costs(tmp_path).values()
    assert cost.seconds_per_unit == pytest.approx(25.0)  # per seed
    assert cost.work == pytest.approx(fewshot_work.work_per_seed(job))


def test_a_local_run_through_the_job_server_pays_one_start_up():
    # two train jobs of 10 s and 50 s (their own records) and a split of 2 s; through the job server each train job
    # is STARTUP_SECONDS = 3 s cheaper and the server pays 3 s once: 7 + 47 + 2 + 3 = 59 s, against 62 s
    book = {MD: [Cost(10.0, "p")], PROTONET: [Cost(50.0, "p")], Job("split", ("fewshot", "big", "5w1s")): [Cost(2.0, "p")]}
    jobs = [(PlannedJob(MD, params="p"), False), (PlannedJob(PROTONET, params="p"), False),
            (PlannedJob(Job("split", ("fewshot", "big", "5w1s")), params="p"), False)]
    own = run_cost(jobs, book, cores=1)
    served = run_cost(jobs, book, cores=1, job_server=True)
    assert own.cpu_hours * 3600 == pytest.approx(62.0)
    assert served.cpu_hours * 3600 == pytest.approx(59.0)
    assert served.per_family["job-server"].jobs == 1
    assert sorted(round(served.seconds(c), 6) for c in served.jobs) == [2.0, 3.0, 7.0, 47.0]


def test_a_served_record_is_booked_at_its_own_process_cost():
    from uqcal.pipeline.progress.estimate import STARTUP_SECONDS, cost_of_record

    record = {"rule": "train", "key": list(MD.key), "params": {"a": 1}, "job": {"seeds": [0, 1]},
              "resources": {"cpu_seconds": 20.0, "wall_seconds": 21.0}}
    _, own = cost_of_record(record)
    _, served = cost_of_record({**record, "resources": {**record["resources"], "job_server": True}})
    assert own.seconds_per_unit == pytest.approx(10.0)
    assert served.seconds_per_unit == pytest.approx((20.0 + STARTUP_SECONDS) / 2)


def _table_payload(family, method, dataset, spec, setting_params, **params):
    from uqcal.methods.api import get_entry, resolve_params

    cls = get_entry(family, method).load_class()
    return {"family": family, "dataset": dataset, "method": method, "dataset_spec": spec,
            "setting_params": setting_params, "params": {**resolve_params(family, method, {}), **params},
            "target": cls.__module__}


DECLARED = {"kind": "single_task_regression", "source": {"type": "url", "url": "https://example.org/t.csv"},
            "target": "y", "shape": [10_000, 9]}


def test_rio_work_by_hand():
    from uqcal.methods.rio import work as rw

    holdout = {"test_fraction": 0.2}
    # 10,000 rows, 2,000 test -> 8,000 training rows; the network fits 6,400 (val_fraction 0.2) in batches of 32:
    # 200 steps an epoch, weights (9 + 1) x 64 + 65 x 64 + 65 = 4,865
    nn = _table_payload("rio", "nn", "t", DECLARED, holdout, max_epochs=50)
    assert rw.work_per_seed(nn) == pytest.approx(50 * 200 * (rw.NN_STEP + 32 * 4865 * rw.NN_WEIGHT_ROW))
    # a per-dataset override (the paper's wider nets) is the job's network
    wide = _table_payload("rio", "nn", "t", DECLARED, holdout, max_epochs=50, per_dataset={"t": {"hidden": 128}})
    assert rw.work_per_seed(wide) > rw.work_per_seed(nn)
    # L-BFGS-B: max_iter full-batch evaluations of 8,000 rows, 50 inducing points, I/O kernel on 9 + 1 inputs
    gp = _table_payload("rio", "rio", "t", DECLARED, holdout, max_iter=1000)
    assert rw.work_per_seed(gp) == pytest.approx(1000 * (rw.GP_EVAL + 8000 * rw.GP_ROW * (2500 + 50 * 10)))
    # minibatch Adam: 20 epochs of 8 batches (1,024 rows; the last one smaller)
    adam = _table_payload("rio", "svgp", "t", DECLARED, holdout, optimizer="adam", epochs=20, batch_size=1024)
    assert rw.work_per_seed(adam) == pytest.approx(20 * 8 * (rw.GP_STEP + 1024 * rw.GP_ROW * (2500 + 50 * 9)))
    # the dataset's own split (YearPredictionMSD's): its n_train rows train
    fixed = _table_payload("rio", "rio", "t", {**DECLARED, "fixed_split": {"n_train": 9_000}}, holdout, max_iter=10)
    assert rw.work_per_seed(fixed) == pytest.approx(10 * (rw.GP_EVAL + 9000 * rw.GP_ROW * (2500 + 50 * 10)))
    assert rw.work_per_seed(_table_payload("rio", "marginal", "t", DECLARED, holdout)) == rw.MARGINAL
    # a download that declares no size: no work, the job is costed per seed
    unknown = {k: v for k, v in DECLARED.items() if k != "shape"}
    assert rw.work_per_seed(_table_payload("rio", "rio", "t", unknown, holdout)) is None


def test_qr_work_by_hand():
    from uqcal.methods.qr import work as qw

    cv5 = {"folds": 5}
    # 10,000 rows, folds of 2,000 -> 8,000 training rows in batches of 512: 16 steps an epoch; 2 x 128 units on
    # 9 features: (9 + 1) x 128 + 129 x 128 + 2 x 129 = 18,050 weights
    de = _table_payload("qr", "de", "t", DECLARED, cv5, n_members=5, epochs=64)
    step = qw.QR_STEP + 512 * 18_050 * qw.QR_WEIGHT_ROW
    assert qw.work_per_seed(de) == pytest.approx(5 * 64 * 16 * step)
    # the quantile regulariser's NeuralSort: a minibatch's pairs
    de_qr = _table_payload("qr", "de_qr", "t", DECLARED, cv5, n_members=5, epochs=64)
    sort = qw.QR_SORT_STEP + 512 * 512 * qw.QR_SORT_PAIR
    assert qw.work_per_seed(de_qr) == pytest.approx(5 * 64 * 16 * (step + sort))
    # the paper's real FGSM: a second pass
    paper = _table_payload("qr", "de_paper", "t", DECLARED, cv5, n_members=5, epochs=64)
    assert qw.work_per_seed(paper) == pytest.approx(5 * 64 * 16 * step * qw.FGSM_FACTOR)
    # a held-out calibration part trains on the rest: 8,000 x 0.75 = 6,000 rows, 12 steps an epoch
    cal = _table_payload("qr", "de_cal", "t", DECLARED, cv5, n_members=5, epochs=64, calibration_fraction=0.25)
    assert qw.work_per_seed(cal) == pytest.approx(5 * 64 * 12 * step)
    assert qw.work_per_seed(_table_payload("qr", "de_iso", "t", DECLARED, cv5)) == qw.ISOTONIC
    assert qw.work_per_seed(_table_payload("qr", "marginal", "t", DECLARED, cv5)) == qw.MARGINAL


def test_a_packaged_datasets_size_is_read_from_its_package():
    from sklearn.datasets import load_diabetes

    from uqcal.data.datasets import table_shape

    spec = {"kind": "single_task_regression", "source": {"type": "sklearn", "loader": "load_diabetes"},
            "target": "target", "features": "auto"}
    assert table_shape("diabetes", spec) == load_diabetes(return_X_y=True)[0].shape
    assert table_shape("t", DECLARED) == (10_000, 9)
    assert table_shape("glyphs", {"kind": "fewshot_classification", "source": {"type": "glyphs"}}) is None


def test_every_table_of_the_paper_config_has_a_size_and_a_declared_one_is_its_notes():
    # A table of unknown size is costed per default seed, unscaled: every RIO and qr dataset of paper.yaml needs one.
    import re

    from tests.conftest import REPO
    from uqcal.data.datasets import TABLE_KINDS, table_shape
    from uqcal.pipeline.config.load import load_config

    config = load_config(str(REPO / "config/paper.yaml"))
    used = {name for family in ("rio", "qr") for name in config["families"][family]["datasets"]}
    registry = config["datasets"]
    assert used and all(table_shape(name, registry[name]) is not None for name in used), sorted(
        name for name in used if table_shape(name, registry[name]) is None)
    for name, spec in registry.items():
        published = re.search(r"(\d+) x (\d+)", spec.get("note", ""))
        if spec.get("kind") in TABLE_KINDS and "shape" in spec and published:
            assert spec["shape"][0] == int(published[1]), name  # the rows the note publishes

"""Config validation fails early with a message naming the offending key."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from tests.conftest import REPO, copy_repo, snakemake
from uqcal.pipeline.config.load import load_config, prepare_config
from uqcal.pipeline.config.runs import iter_runs
from uqcal.pipeline.config.source import ConfigError, check_raw_config


@pytest.fixture(scope="module")
def smoke_raw() -> dict:
    return check_raw_config(REPO / "config/smoke.yaml")  # composed: base.yaml's keys in


def _prepare(cfg):
    return prepare_config(cfg, REPO)


@pytest.mark.parametrize("name", ["config.yaml", "extended.yaml", "smoke.yaml", "arena.yaml"])
def test_shipped_configs_are_valid(name):
    config = load_config(REPO / "config" / name)
    assert list(iter_runs(config)), f"{name} plans no runs"


def test_extended_config_repeats_every_default_run_exactly():
    """config/extended.yaml adds runs to the default; every default run is the same job there, so a
    results/ tree of the default run is reused rather than retrained."""
    from uqcal.pipeline.config.payloads import run_job

    default, extended = load_config(REPO / "config/config.yaml"), load_config(REPO / "config/extended.yaml")
    runs = list(iter_runs(default))
    extended_runs = set(iter_runs(extended))
    assert runs and set(runs) < extended_runs
    for run in runs:
        assert run_job(default, run) == run_job(extended, run), run


def test_method_typo_names_the_key(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["methods"]["marginl"] = {}
    with pytest.raises(ConfigError, match=r"families\.rio\.methods\.marginl"):
        _prepare(cfg)


def test_unknown_top_level_key_is_named(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["devise"] = "cpu"
    with pytest.raises(ConfigError, match="devise"):
        _prepare(cfg)


def test_wrong_type_names_the_key(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["qr"]["seeds"] = "three"
    with pytest.raises(ConfigError, match=r"families\.qr\.seeds"):
        _prepare(cfg)


def test_unknown_dataset_is_named(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["datasets"] = ["concrete", "concret"]
    with pytest.raises(ConfigError, match=r"families\.rio\.datasets\[1\].*concret"):
        _prepare(cfg)


def test_dataset_of_wrong_kind_is_rejected(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["datasets"] = ["ozone"]
    with pytest.raises(ConfigError, match="multitask_regression"):
        _prepare(cfg)


def test_unknown_method_parameter_is_named(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["methods"]["marginal"] = {"min_sd": 0.1}
    with pytest.raises(ConfigError, match=r"families\.rio\.methods\.marginal\.min_sd"):
        _prepare(cfg)


def test_a_one_family_check_still_checks_that_familys_parameters_and_every_cross_reference(smoke_raw):
    # `method_families` is what a DVC stage of one job uses: its own family's method parameters are
    # checked, another family's are left to dvc-sync / Snakemake (which check them all), and the
    # cross-references (unknown methods, datasets) are checked everywhere.
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["methods"]["marginal"] = {"min_sd": 0.1}
    with pytest.raises(ConfigError, match=r"families\.rio\.methods\.marginal\.min_sd"):
        prepare_config(cfg, REPO, method_families=("rio",))
    prepared = prepare_config(cfg, REPO, method_families=("qr",))
    assert prepared["families"]["rio"]["methods"]["marginal"] == {"min_sd": 0.1}
    cfg["families"]["rio"]["methods"]["margnal"] = {}
    with pytest.raises(ConfigError, match=r"families\.rio\.methods\.margnal: unknown method"):
        prepare_config(cfg, REPO, method_families=("qr",))


def test_method_restrictions_filter_runs(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["metareg"]["settings"]["ns20"] = {"n_support": 20}
    cfg["families"]["metareg"]["methods"]["marginal"] = {"settings": ["ns20"]}
    runs = [r for r in iter_runs(_prepare(cfg)) if r.family == "metareg"]
    assert {r.setting for r in runs if r.method == "marginal"} == {"ns20"}
    # Methods without a restriction still run in every setting.
    assert {r.setting for r in runs if r.method == "metacal"} == {"ns10", "ns20"}


def test_a_setting_sets_its_own_seed_count_for_all_or_named_datasets(smoke_raw):
    from uqcal.pipeline.config.payloads import batch_job, run_job, split_batch_job

    cfg = copy.deepcopy(smoke_raw)
    rio = cfg["families"]["rio"]
    rio["datasets"], rio["seeds"] = ["concrete", "boston"], 4
    rio["settings"]["holdout"] = {"test_fraction": 0.2, "seeds": {"boston": 2}}
    qr = cfg["families"]["qr"]
    qr["settings"]["cv5_shuffled"] = {"folds": 5, "shuffle": True, "seeds": 3}
    config = _prepare(cfg)
    seeds = {}
    for run in iter_runs(config, ["rio", "qr"]):
        seeds.setdefault((run.family, run.dataset, run.setting, run.method), set()).add(run.seed)
    assert seeds["rio", "concrete", "holdout", "rio"] == {0, 1, 2, 3}  # not named: the family's 4
    assert seeds["rio", "boston", "holdout", "rio"] == {0, 1}
    assert seeds["qr", "concrete", "cv5", "dvi"] == {0}
    assert seeds["qr", "concrete", "cv5_shuffled", "dvi"] == {0, 1, 2}
    assert batch_job(config, "rio", "boston", "holdout", "nn")["seeds"] == [0, 1]
    assert split_batch_job(config, "qr", "concrete", "cv5_shuffled")["seeds"] == [0, 1, 2]
    # The count selects runs; it is not a split or training parameter, so a run's job (and its digest)
    # does not change with it beyond the count itself.
    job = run_job(config, next(r for r in iter_runs(config, ["qr"]) if r.setting == "cv5_shuffled"))
    assert job["setting_params"] == {"folds": 5, "shuffle": True}


def test_a_method_runs_the_first_of_its_settings_seeds(smoke_raw):
    from uqcal.pipeline.config.payloads import batch_job, run_job

    cfg = copy.deepcopy(smoke_raw)
    rio = cfg["families"]["rio"]
    rio["datasets"], rio["seeds"] = ["concrete", "boston"], 4
    rio["methods"]["r_i"] = {"seeds": 2}
    rio["methods"]["y_o"] = {"seeds": {"boston": 3}}
    config = _prepare(cfg)
    seeds = {}
    for run in iter_runs(config, ["rio"]):
        seeds.setdefault((run.dataset, run.method), []).append(run.seed)
    assert seeds["concrete", "r_i"] == seeds["boston", "r_i"] == [0, 1]  # the first two: paired with rio's
    assert seeds["boston", "y_o"] == [0, 1, 2]
    assert seeds["concrete", "y_o"] == seeds["concrete", "rio"] == [0, 1, 2, 3]
    job = batch_job(config, "rio", "concrete", "holdout", "r_i")
    assert job["seeds"] == [0, 1]
    # a selector, not a training parameter; the split layout the job sees is the setting's
    assert "seeds" not in job["params"] and job["family_params"]["seeds"] == 4
    assert run_job(config, next(r for r in iter_runs(config, ["rio"]) if r.method == "r_i"))["family_params"]["seeds"] == 4


@pytest.mark.parametrize("method, seeds, message", [
    ("r_i", 5, r"methods\.r_i\.seeds: 5 for concrete/holdout, more than the 4 seeds the setting runs"),
    ("r_i", {"diamonds": 2}, r"methods\.r_i\.seeds: 'diamonds' is not in families\.rio\.datasets"),
    ("r_i", 0, r"methods\.r_i\.seeds"),
])
def test_a_bad_method_seed_count_is_named(smoke_raw, method, seeds, message):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["datasets"], cfg["families"]["rio"]["seeds"] = ["concrete"], 4
    cfg["families"]["rio"]["methods"][method] = {"seeds": seeds}
    with pytest.raises(ConfigError, match=message):
        _prepare(cfg)


def test_a_method_cannot_run_more_seeds_than_the_method_it_builds_on(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    qr = cfg["families"]["qr"]
    base = next(m for m in qr["methods"] if m.endswith("_iso"))
    dep = base[: -len("_iso")]
    qr["methods"][dep] = {**(qr["methods"].get(dep) or {}), "seeds": 1}
    qr["seeds"] = 2
    with pytest.raises(ConfigError, match=rf"methods\.{base}\.seeds: 2 for .*, more than the 1 runs of '{dep}'"):
        _prepare(cfg)


@pytest.mark.parametrize("seeds, message", [({"diamonds": 2}, r"settings\.holdout\.seeds: 'diamonds'"),
                                            (0, r"settings\.holdout\.seeds"),
                                            ({"concrete": "two"}, r"settings\.holdout\.seeds")])
def test_a_bad_setting_seed_count_is_named(smoke_raw, seeds, message):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["settings"]["holdout"]["seeds"] = seeds
    with pytest.raises(ConfigError, match=message):
        _prepare(cfg)


@pytest.mark.slow
def test_snakemake_fails_before_any_job_on_a_typo(tmp_path):
    root = copy_repo(tmp_path / "repo")
    cfg = yaml.safe_load((root / "config/smoke.yaml").read_text())
    cfg["families"]["qr"]["methods"]["margnal"] = {}
    (root / "config/bad.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(["-n", "--configfile", "config/bad.yaml"], root, check=False)
    assert proc.returncode != 0
    assert "families.qr.methods.margnal" in proc.stdout + proc.stderr
    assert not (root / "results").exists() and not (root / "data").exists()


def test_config_value_conflicting_with_a_registered_variant_is_named(smoke_raw):
    # qr's dvi_qr is defined by lambda = 1 (Sec. 5.2); a config lambda would otherwise be silently dropped
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["qr"]["methods"]["dvi_qr"] = {"lam": 2.0}
    with pytest.raises(ConfigError, match=r"families\.qr\.methods\.dvi_qr\.lam.*conflicts"):
        _prepare(cfg)
    cfg["families"]["qr"]["methods"]["dvi_qr"] = {"lam": 1.0}  # restating the defining value is fine
    assert any(r.method == "dvi_qr" for r in iter_runs(_prepare(cfg)))


def test_per_dataset_resources_name_an_unknown_dataset(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["resources"]["per_dataset"] = {"diamnds": {"gpu": 1}}
    with pytest.raises(ConfigError, match=r"families\.rio\.resources\.per_dataset\.diamnds"):
        _prepare(cfg)


@pytest.mark.slow
def test_per_dataset_and_per_method_resources_reach_only_their_train_jobs(tmp_path):
    # paper.yaml gives the CNN objectives a GPU; the other BO jobs of the family must not ask for one. A
    # per-method override comes last, and the reference predictor (cpu_only) never asks for a GPU.
    root = copy_repo(tmp_path / "repo")
    cfg = yaml.safe_load((root / "config/smoke.yaml").read_text())
    rio = cfg["families"]["rio"]
    rio["datasets"] = ["concrete", "diabetes"]
    rio["resources"] = {"mem_mb": 1000, "gpu": 0, "per_dataset": {"diabetes": {"gpu": 1, "mem_mb": 2345}},
                        "per_method": {"svgp": {"mem_mb": 777}}}
    (root / "config/res.yaml").write_text(yaml.safe_dump(cfg))
    proc = snakemake(["-n", "results/rio/summary.csv", "--configfile", "config/res.yaml"], root)
    jobs = proc.stdout.split("\n\n")
    train = {}
    for block in jobs:
        if "rule train:" not in block or "results/rio/" not in block:
            continue
        output = next(line for line in block.splitlines() if "output:" in line)
        resources = next(line for line in block.splitlines() if "resources:" in line)
        train[output.split("results/rio/")[1]] = resources
    assert len(train) == 8, proc.stdout[-2000:]
    for output, resources in train.items():
        dataset, _, method = output.split(",")[0].split("/")
        gpu = 1 if dataset == "diabetes" and method != "marginal" else 0
        # the reference predictor asks for its own small resources (REFERENCE_RESOURCES), not the family's
        mem = 777 if method == "svgp" else 4000 if method == "marginal" else 2345 if dataset == "diabetes" else 1000
        assert f"gpu={gpu}" in resources and f"mem_mb={mem}," in resources, (output, resources)


def test_per_method_resources_name_an_unknown_method_or_a_gpu_for_a_cpu_only_one(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["resources"]["per_method"] = {"nnn": {"gpu": 1}}
    with pytest.raises(ConfigError, match=r"families\.rio\.resources\.per_method\.nnn"):
        _prepare(cfg)
    cfg["families"]["rio"]["resources"]["per_method"] = {"marginal": {"gpu": 1}}
    with pytest.raises(ConfigError, match=r"families\.rio\.resources\.per_method\.marginal\.gpu"):
        _prepare(cfg)
    cfg["families"]["rio"]["resources"]["per_method"] = {"marginal": {"mem_mb": 100}, "nn": {"gpu": 1}}
    _prepare(cfg)


@pytest.mark.parametrize("where", ["family", "per_dataset"])
def test_resource_key_typo_is_named(smoke_raw, where):
    cfg = copy.deepcopy(smoke_raw)
    resources = cfg["families"]["rio"]["resources"]
    target = resources if where == "family" else resources.setdefault("per_dataset", {}).setdefault("concrete", {})
    target["gpus"] = 1
    path = "families.rio.resources" + ("" if where == "family" else ".per_dataset.concrete")
    with pytest.raises(ConfigError, match=rf"{path.replace('.', chr(92) + '.')}: unknown key.*'gpus'"):
        _prepare(cfg)


def test_paper_config_requests_gpus_for_the_learners_only():
    # config/paper.yaml asks a GPU for every train job of metareg, rio, qr and fewshot, and for the BO jobs
    # on the CNN objectives; the cpu_only methods (the references, qr's isotonic recalibration of a saved
    # run) never ask, whatever their family says. gpu > 0 is what the SLURM profile turns into --gpus.
    from uqcal.methods.api import get_entry
    from uqcal.pipeline.plan import plan, resources

    config = load_config(REPO / "config" / "paper.yaml")
    asked: dict[tuple[str, bool], set[str]] = {}
    for job in plan(config):
        if job.rule != "train":
            continue
        family, dataset, _, method = job.key[:4]  # a one-seed job (job_shape) ends in its seed
        gpu = resources(config, family, dataset, method)["gpu"]
        cpu_only = get_entry(family, method).load_class().cpu_only
        assert not (cpu_only and gpu), f"{job.key}: a cpu_only method requests gpu={gpu}"
        if not cpu_only:
            # metareg's small networks run on CPU nodes (0.59x on a GPU: config/gpu_speedups.yaml, issue 53)
            expected = dataset.startswith("cnn_") if family == "bo" else family != "metareg"
            assert bool(gpu) == expected, f"{job.key}: gpu={gpu}"
        asked.setdefault((family, bool(gpu)), set()).add(method)
    assert {"marginal", "dvi_iso", "de_qr_isocal"} <= asked[("qr", False)]
    assert "marginal" in asked[("metareg", False)] and "marginal" in asked[("rio", False)]
    assert ("metareg", True) not in asked  # the launch-bound family on CPU nodes
    assert {"calibrated", "random"} <= asked[("bo", True)]  # the CNN objectives train on the GPU


def test_dvc_reads_the_configs_with_ruamels_c_parser_and_gets_the_same_data():
    # DVC reads dvc.yaml, dvc.lock and each stage's params files with ruamel.yaml (typ="safe"); without
    # ruamel.yaml.clib (not a dependency of ruamel.yaml since 0.19.1) that parser is pure Python and most of
    # `dvc commit`'s and `dvc status`'s CPU (pyproject.toml). The C parser must read our configs as the pure one.
    from ruamel.yaml import YAML
    from ruamel.yaml.main import CParser

    assert CParser is not None, "ruamel.yaml.clib is not installed (pyproject.toml dependencies)"
    assert YAML(typ="safe").Parser is CParser
    for name in ("base.yaml", "config.yaml", "extended.yaml", "smoke.yaml", "datasets.yaml"):
        text = (REPO / "config" / name).read_text()
        assert YAML(typ="safe").load(text) == YAML(typ="safe", pure=True).load(text) == yaml.safe_load(text), name


# ------------------------------------------------------------------- split / setting keys (issue 42, item 8)
@pytest.mark.parametrize("family, where, key, suggestion", [
    ("rio", "split", "test_frac", "test_fraction"),
    ("rio", "settings.holdout", "tst_fraction", "test_fraction"),
    ("metareg", "settings.ns10", "n_suport", "n_support"),
    ("metareg", "split", "task_fraction", "task_fractions"),
    ("fewshot", "split", "n_query", "n_query_test"),
    ("qr", "split", "fold", "folds"),
])
def test_unknown_split_or_setting_key_fails_naming_it_and_the_closest_known(smoke_raw, family, where, key, suggestion):
    cfg = copy.deepcopy(smoke_raw)
    node = cfg["families"][family]
    for part in where.split("."):
        node = node.setdefault(part, {}) if part == "split" else node[part]
    node[key] = 0.1
    with pytest.raises(ConfigError) as raised:
        _prepare(cfg)
    message = str(raised.value)
    assert f"families.{family}.{where}" in message, message
    assert f"unknown key {key!r} (did you mean {suggestion!r}?)" in message, message


def test_split_key_types_are_checked(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["qr"].setdefault("split", {})["shuffle"] = "yes"
    with pytest.raises(ConfigError, match=r"families\.qr\.split\.shuffle"):
        _prepare(cfg)


# ------------------------------------------------------------------- method parameter values (issue 42, item 9)
@pytest.mark.parametrize("key, value, expected", [
    ("max_epochs", "5", "expected an integer, got '5' (str)"),
    ("max_epochs", 5.5, "expected an integer, got 5.5 (float)"),
    ("max_epochs", -3, "expected an integer > 0, got -3"),
    ("max_epochs", True, "expected an integer, got True (bool)"),
    ("lr", "fast", "expected a number, got 'fast' (str)"),
    ("lr", 0.0, "expected a number > 0, got 0.0"),
    ("restore_best", "no", "expected true or false"),
])
def test_method_parameter_values_are_checked_before_any_job(smoke_raw, key, value, expected):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["methods"]["nn"][key] = value
    with pytest.raises(ConfigError) as raised:
        _prepare(cfg)
    assert f"families.rio.methods.nn.{key}: {expected}" in str(raised.value)


def test_method_parameter_values_in_per_dataset_tables_are_checked(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["methods"]["nn"]["per_dataset"] = {"concrete": {"max_epochs": 2.5}}
    with pytest.raises(ConfigError, match=re.escape("families.rio.methods.nn.per_dataset.concrete.max_epochs: "
                                                    "expected an integer, got 2.5")):
        _prepare(cfg)


def test_method_built_in_python_checks_its_parameters():
    from uqcal.methods.api import ParameterError, get_entry

    cls = get_entry("rio", "nn").load_class()
    assert cls({"max_epochs": 3, "lr": 1e-3}).params["max_epochs"] == 3
    with pytest.raises(ParameterError, match=re.escape("RioNetwork.max_epochs: expected an integer > 0, got -3")):
        cls({"max_epochs": -3})
    with pytest.raises(ParameterError, match=re.escape("RioNetwork.lr: expected a number, got 'fast'")):
        cls(lr="fast")  # keyword arguments are parameters too
    # A typo is an error naming it and the closest accepted key, never a silent default.
    with pytest.raises(ParameterError, match=re.escape("RioNetwork.max_epoch: unknown parameter (did you mean "
                                                       "'max_epochs'?)")):
        cls({"max_epoch": 5})


def test_declared_bounds_and_value_words():
    from uqcal.methods.api import get_entry, resolve_params

    # metareg's `mix`: "learned" or a number in [0, 1]; fewshot takes {dataset or setting: value} mappings.
    assert resolve_params("metareg", "metacal", {"mix": 0.25})["mix"] == 0.25
    with pytest.raises(ValueError, match=r"families\.metareg\.methods\.metacal\.mix: expected one of \['learned'\]"):
        resolve_params("metareg", "metacal", {"mix": 1.5})
    md = get_entry("fewshot", "md").load_class()
    md({"train_episodes": {"5w1s": 10, "5w5s": 20}})
    with pytest.raises(ValueError, match=r"train_episodes\.5w5s: expected an integer > 0, got 0"):
        md({"train_episodes": {"5w1s": 10, "5w5s": 0}})


def test_report_claim_runs_is_accepted_and_checked(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg.setdefault("report", {})["claim_runs"] = {"metareg": {"default": 10, "lowest_te": 20}}
    cfg["report"]["claim_runs_reason"] = "power"
    _prepare(cfg)
    cfg["report"]["claim_runs"]["metareg"]["default"] = 0
    with pytest.raises(ConfigError, match=r"report\.claim_runs\.metareg\.default"):
        _prepare(cfg)


@pytest.mark.parametrize("path, value, message", [
    ("split.test_frac", 0.3, "config key families.rio.split: unknown key 'test_frac' (did you mean 'test_fraction'?); "
                             "known keys: test_fraction"),
    ("methods.nn.max_epochs", "5", "families.rio.methods.nn.max_epochs: expected an integer, got '5' (str)"),
    ("methods.nn.max_epochs", 5.5, "families.rio.methods.nn.max_epochs: expected an integer, got 5.5 (float)"),
    ("methods.nn.max_epochs", -3, "families.rio.methods.nn.max_epochs: expected an integer > 0, got -3"),
    ("methods.nn.lr", "fast", "families.rio.methods.nn.lr: expected a number, got 'fast' (str)"),
])
def test_the_bad_inputs_page_quotes_the_errors_as_they_are(smoke_raw, path, value, message):
    cfg = copy.deepcopy(smoke_raw)
    node = cfg["families"]["rio"]
    *parents, key = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[key] = value
    with pytest.raises(ConfigError) as raised:
        _prepare(cfg)
    assert str(raised.value) == message
    assert f"``{message}``" in (REPO / "docs/bad-inputs.md").read_text()

"""Configs that compose (issue 38): ``extends:`` merges a config onto the files it names, and the shipped run
configs say only how they differ from the default (config/config.yaml) or from the shared header
(config/base.yaml).

The composition rules are checked on small files against the mapping each case must give; the shipped configs by
the jobs they plan (what the default runs, plus exactly the runs the extension adds)."""

from __future__ import annotations

import copy
import hashlib
import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from uqcal.pipeline.config.load import load_config, prepare_config
from uqcal.pipeline.config.source import ConfigError, check_raw_config, compose, config_hash


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------------------ the rules
def test_mappings_merge_key_by_key_lists_and_scalars_replace_and_null_removes(tmp_path):
    write(tmp_path / "base.yaml", """
device: auto
torch_threads: 1
families:
  rio:
    seeds: 10
    split: {a: 1, b: {c: 2, d: 3}}
    datasets: [concrete, diamonds]
    settings: {holdout: {test_fraction: 0.2, datasets: [concrete]}}
    methods: {marginal: {}, nn: {max_epochs: 5}}
""")
    path = write(tmp_path / "run.yaml", """
extends: base.yaml
torch_threads: 2
families:
  rio:
    split: {b: {c: 20}, e: 5}
    datasets: [boston]
    settings: {holdout: {datasets: null}}
    methods: {nn: null, svgp: {max_iter: 3}, rio: null}
""")
    assert compose(path).data == {
        "device": "auto",
        "torch_threads": 2,
        "families": {"rio": {
            "seeds": 10,
            "split": {"a": 1, "b": {"c": 20, "d": 3}, "e": 5},
            "datasets": ["boston"],                                  # a list replaces the inherited one
            "settings": {"holdout": {"test_fraction": 0.2}},         # null removes an inherited key
            "methods": {"marginal": {}, "svgp": {"max_iter": 3}, "rio": None},  # a null over nothing stays
        }},
    }


def test_a_chain_applies_the_furthest_file_first_and_a_list_of_parents_in_order(tmp_path):
    write(tmp_path / "shared/c.yaml", "a: 1\nb: 1\nc: 1\nd: 1\n")
    write(tmp_path / "shared/b.yaml", "extends: c.yaml\nb: 2\nd: 2\n")
    write(tmp_path / "other.yaml", "d: 3\ne: 3\n")
    path = write(tmp_path / "runs/a.yaml", "extends: [../shared/b.yaml, ../other.yaml]\nc: 4\n")
    composed = compose(path)
    assert composed.data == {"a": 1, "b": 2, "c": 4, "d": 3, "e": 3}
    assert [Path(f).resolve() for f in composed.files] == [
        (tmp_path / name).resolve() for name in ("shared/c.yaml", "shared/b.yaml", "other.yaml", "runs/a.yaml")]
    # each key resolves to the file that sets its value
    where = {key: [Path(f).name for f in composed.defined_in(key)] for key in "abcde"}
    assert where == {"a": ["c.yaml"], "b": ["b.yaml"], "c": ["a.yaml"], "d": ["other.yaml"], "e": ["other.yaml"]}


def test_a_merged_mapping_names_every_file_it_comes_from_and_a_replaced_value_only_the_last(tmp_path):
    write(tmp_path / "base.yaml", "split: {a: 1, b: 2}\nlist: [1]\nbox: {x: 1}\n")
    path = write(tmp_path / "run.yaml", "extends: base.yaml\nsplit: {b: 3}\nlist: [2]\nbox: 7\n")
    composed = compose(path)
    names = {key: [Path(f).name for f in composed.defined_in(key)]
             for key in ("split", "split.a", "split.b", "list", "box", "box.x", "", "nothing")}
    assert names == {"split": ["base.yaml", "run.yaml"], "split.a": ["base.yaml"], "split.b": ["run.yaml"],
                     "list": ["run.yaml"], "box": ["run.yaml"], "box.x": [], "": ["base.yaml", "run.yaml"],
                     "nothing": []}


def test_new_keys_go_where_the_extending_file_writes_them(tmp_path):
    write(tmp_path / "base.yaml", "m: {a: 1, b: 1, c: 1}\n")
    path = write(tmp_path / "run.yaml", "extends: base.yaml\nm: {x: 0, b: 2, y: 0, z: 0}\nn: 0\n")
    assert list(compose(path).data) == ["m", "n"]
    assert list(compose(path).data["m"].items()) == [("a", 1), ("x", 0), ("b", 2), ("y", 0), ("z", 0), ("c", 1)]
    write(tmp_path / "append.yaml", "extends: base.yaml\nm: {p: 0, q: 0}\n")
    assert list(compose(tmp_path / "append.yaml").data["m"]) == ["a", "b", "c", "p", "q"]


def test_a_cycle_is_an_error_naming_the_files(tmp_path):
    write(tmp_path / "a.yaml", "extends: b.yaml\nx: 1\n")
    write(tmp_path / "b.yaml", "extends: sub/c.yaml\n")
    write(tmp_path / "sub/c.yaml", "extends: ../a.yaml\n")
    with pytest.raises(ConfigError) as raised:
        compose(tmp_path / "a.yaml")
    message = str(raised.value)
    assert "`extends` makes a cycle" in message
    a, b, c = (str(tmp_path / name) for name in ("a.yaml", "b.yaml", "sub/c.yaml"))
    assert f"{a} -> {b} -> {c} -> {tmp_path / 'a.yaml'}" in message
    write(tmp_path / "self.yaml", "extends: self.yaml\n")
    with pytest.raises(ConfigError, match=r"self\.yaml -> .*self\.yaml"):
        load_config(tmp_path / "self.yaml", root=REPO)


@pytest.mark.parametrize("value, match", [
    ("missing.yaml", r"extends: 'missing.yaml' not found"),
    ("[]", r"extends: expected a config file"),
    ("{a: 1}", r"extends: expected a config file"),
    ("['']", r"extends: expected a config file"),
])
def test_a_bad_extends_is_named(tmp_path, value, match):
    path = write(tmp_path / "run.yaml", f"extends: {value}\nfamilies: {{}}\n")
    if value == "[]":  # an empty list extends nothing, which is allowed
        assert compose(path).data == {"families": {}}
        return
    with pytest.raises(ConfigError, match=match):
        check_raw_config(path)


def test_every_file_of_the_chain_is_read_raw(tmp_path):
    # A YTE template in a parent is refused like one in the file itself (the Snakefile's first check).
    write(tmp_path / "base.yaml", "__use_yte__: true\ndevice: cpu\n")
    path = write(tmp_path / "run.yaml", "extends: base.yaml\nfamilies: {}\n")
    with pytest.raises(ConfigError, match=r"base\.yaml: `__use_yte__`"):
        check_raw_config(path)
    write(tmp_path / "base.yaml", "device: !!python/object:collections.OrderedDict {}\n")
    with pytest.raises(ConfigError, match=r"base\.yaml:1: the tag"):
        check_raw_config(path)


def test_the_composition_follows_an_edit_of_a_parent_and_so_does_the_hash(tmp_path):
    base = write(tmp_path / "base.yaml", "a: 1\n")
    path = write(tmp_path / "run.yaml", "extends: base.yaml\nb: 2\n")
    before, hash_before = compose(path).data, config_hash(path)
    base.write_text("a: 10\n")
    os.utime(base, ns=(base.stat().st_mtime_ns + 10**9,) * 2)  # an mtime of its own, whatever the clock's grain
    assert (before, compose(path).data) == ({"a": 1, "b": 2}, {"a": 10, "b": 2})
    assert config_hash(path) != hash_before
    single = write(tmp_path / "single.yaml", "a: 1\n")
    assert config_hash(single) == hashlib.sha256(single.read_bytes()).hexdigest()  # as before extends existed


def test_the_composed_data_is_shared_but_check_raw_config_hands_out_copies(tmp_path):
    write(tmp_path / "base.yaml", "m: {a: [1]}\n")
    path = write(tmp_path / "run.yaml", "extends: base.yaml\n")
    copy_ = check_raw_config(path)
    copy_["m"]["a"].append(2)
    assert compose(path).data == {"m": {"a": [1]}} == check_raw_config(path)


def test_prepare_config_refuses_a_config_that_was_not_composed():
    raw = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    assert raw["extends"] == "base.yaml"
    with pytest.raises(ConfigError, match="compose it first"):
        prepare_config(copy.deepcopy(raw), REPO)
    assert prepare_config(compose(REPO / "config/smoke.yaml", raw).data, REPO)["device"] == "auto"


# ------------------------------------------------------------------------------------------ the shipped configs
RUN_CONFIGS = ["config.yaml", "extended.yaml", "fewshot-extended.yaml", "fewshot-seeds.yaml", "paper.yaml", "bo-power.yaml",
               "arena.yaml",
               "smoke.yaml"]


@pytest.mark.parametrize("name", RUN_CONFIGS)
def test_every_run_config_takes_the_shared_header_from_base_yaml(name):
    composed = compose(REPO / "config" / name)
    assert Path(composed.files[0]).name == "base.yaml"
    for key in ("device", "torch_threads"):  # set once, in base.yaml
        assert [Path(f).name for f in composed.defined_in(key)] == ["base.yaml"], key
    assert (composed.data["device"], composed.data["torch_threads"]) == ("auto", 1)
    assert "extends" not in composed.data


def test_extended_yaml_says_only_how_it_differs():
    assert len((REPO / "config/extended.yaml").read_text().splitlines()) <= 56
    assert [Path(f).name for f in compose(REPO / "config/extended.yaml").files] == [
        "base.yaml", "config.yaml", "extended.yaml"]


def _train_jobs(config: dict) -> set[tuple[str, str, str, str]]:
    from uqcal.pipeline.plan import plan

    return {job.key for job in plan(config) if job.rule == "train"}


def test_extended_yaml_plans_the_default_plus_exactly_its_additions():
    """What config/extended.yaml adds to the default, run by run: its header's list, spelled out."""
    from uqcal.pipeline import plan as J

    default, extended = load_config(REPO / "config/config.yaml"), load_config(REPO / "config/extended.yaml")
    metareg = ["wo_net", "wo_r", "wo_lc", "wo_mix", "w_split", "w_remp", "asqr", "ang", "abd", "agp", "metacal_l001",
               "metacal_l01", "metacal_l09", "metacal_l10", "metacal_t5", "metacal_t10", "metacal_t20"]
    added = {("metareg", "ozone", "ns20", m) for m in metareg}
    added |= {("rio", d, "holdout", m) for d in ("boston", "diabetes") for m in ("marginal", "nn", "rio", "svgp")}
    added |= {("rio", "diamonds", "holdout", "rio_ys")}
    added |= {("qr", "boston", "cv5_shuffled", m) for m in default["families"]["qr"]["methods"]}
    added |= {("fewshot", "glyphs2digits", "5w5s", m) for m in default["families"]["fewshot"]["methods"]}
    bo = [*default["families"]["bo"]["methods"], "calibrated_fastloo", "calibrated_isoslope"]
    added |= {("bo", "sixhump", "sixhump-ei", m) for m in bo}
    added |= {("bo", "forrester", "forrester-basin-ucb", m) for m in ("calibrated_fastloo", "calibrated_isoslope")}
    assert _train_jobs(extended) == _train_jobs(default) | added
    assert not _train_jobs(default) & added
    # the parameters of the extension's own runs, as the old standalone file wrote them
    params = {key: J.payload(extended, J.Job("train", key))["params"] for key in added}
    assert params[("metareg", "ozone", "ns20", "asqr")]["epochs"] == 10
    assert params[("metareg", "ozone", "ns20", "agp")]["iterations"] == 100
    assert params[("rio", "diabetes", "holdout", "rio")]["per_dataset"] == {
        "diabetes": {"scale_targets": True, "centre_targets": True}}
    assert params[("rio", "diamonds", "holdout", "rio_ys")]["optimizer"] == "adam"
    assert J.payload(extended, J.Job("split", ("qr", "boston", "cv5_shuffled")))["split_params"] == {
        "folds": 5, "shuffle": True}
    assert list(extended["families"]["rio"]["methods"])[:4] == ["marginal", "nn", "rio", "rio_ys"]  # its own order


def test_fewshot_extended_yaml_keeps_the_default_fewshot_runs_and_drops_the_other_families():
    from uqcal.pipeline import plan as J

    default, extended = load_config(REPO / "config/config.yaml"), load_config(REPO / "config/fewshot-extended.yaml")
    assert list(extended["families"]) == ["fewshot"]
    assert list(extended["families"]["fewshot"]["settings"]) == ["5w1s", "5w5s"]
    assert "priority" not in extended["families"]["fewshot"]["resources"]
    assert extended["dataset_registry"] == ["config/datasets.yaml"]
    assert "title" not in extended["report"] and "budget_notes" not in extended["report"]
    shared = {key for key in _train_jobs(default) if key[0] == "fewshot"}
    assert shared and shared < _train_jobs(extended)
    for key in shared:
        assert J.payload(default, J.Job("train", key)) == J.payload(extended, J.Job("train", key)), key


def test_the_bad_inputs_page_quotes_the_extends_errors_as_they_are(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "config/x.yaml", "extends: y.yaml\n")
    write(tmp_path / "config/y.yaml", "extends: x.yaml\n")
    write(tmp_path / "config/z.yaml", "extends: base.yml\nfamilies: {}\n")
    page = (REPO / "docs/bad-inputs.md").read_text()
    for path in ("config/x.yaml", "config/z.yaml"):
        with pytest.raises(ConfigError) as raised:
            check_raw_config(path)
        assert f"``{raised.value}``" in page, str(raised.value)

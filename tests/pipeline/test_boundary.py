"""Issue 49: names, sizes and values checked once, at the boundary, each refused with one line that
docs/bad-inputs.md quotes as it is."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import REPO
from uqcal.pipeline.config.load import prepare_config
from uqcal.pipeline.config.source import ConfigError, check_raw_config

PAGE = (REPO / "docs/bad-inputs.md").read_text()


@pytest.fixture(scope="module")
def smoke_raw() -> dict:
    return check_raw_config(REPO / "config/smoke.yaml")


def _refused(cfg: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        prepare_config(cfg, REPO)
    message = str(raised.value)
    assert "\n" not in message
    return message


def _with_dataset_named(raw: dict, name: str) -> dict:
    """The smoke config with rio's dataset (concrete) renamed ``name`` in the config's own registry."""
    cfg = copy.deepcopy(raw)
    from uqcal.pipeline.config.registry import dataset_registry

    cfg["datasets"] = {**(cfg.get("datasets") or {}), name: dataset_registry(cfg, REPO)["concrete"]}
    cfg["families"]["rio"]["datasets"] = [name]
    return cfg


NAME_RULE = ("is not an identifier: 1 to 64 characters of A-Z, a-z, 0-9, '_' and '-', starting with a letter or a "
             "digit (a name becomes a folder, a DVC stage and a Snakemake wildcard)")


@pytest.mark.parametrize("name", ["my data", "données", "../escape", "a" * 255, ".hidden", "a.b", ""])
def test_a_dataset_name_that_is_not_an_identifier_is_refused_at_validation(smoke_raw, name):
    message = _refused(_with_dataset_named(smoke_raw, name))
    assert message.startswith("datasets: dataset name ") and message.endswith(NAME_RULE)
    assert len(message) < 300  # a 255-character name is shortened, not printed whole


@pytest.mark.parametrize("kind", ["settings", "methods"])
def test_a_setting_or_method_name_that_is_not_an_identifier_is_refused_at_validation(smoke_raw, kind):
    cfg = copy.deepcopy(smoke_raw)
    entries = cfg["families"]["rio"][kind]
    entries["bad name"] = entries.pop(next(iter(entries)))
    assert _refused(cfg) == f"families.rio.{kind}: {kind[:-1]} name 'bad name' {NAME_RULE}"


def test_64_characters_is_a_name_65_is_not(smoke_raw):
    prepare_config(_with_dataset_named(smoke_raw, "d" * 64), REPO)
    assert "characters" in _refused(_with_dataset_named(smoke_raw, "d" * 65))


def test_the_bad_inputs_page_quotes_the_name_message(smoke_raw):
    assert f"``{_refused(_with_dataset_named(smoke_raw, 'my data'))}``" in PAGE


# ------------------------------------------------------------------------------------------ counts
@pytest.mark.parametrize("where", ["family", "setting", "method", "per dataset"])
def test_a_seed_count_past_the_bound_is_refused_before_any_run_is_listed(smoke_raw, where, monkeypatch):
    import uqcal.pipeline.config.runs as runs

    monkeypatch.setattr(runs, "iter_runs", lambda *a, **k: pytest.fail("runs listed before the bound was checked"))
    cfg = copy.deepcopy(smoke_raw)
    fam = cfg["families"]["rio"]
    setting, method = next(iter(fam["settings"])), "nn"
    key = {"family": "families.rio.seeds", "setting": f"families.rio.settings.{setting}.seeds",
           "method": "families.rio.methods.nn.seeds", "per dataset": "families.rio.methods.nn.seeds.concrete"}[where]
    value = {"concrete": 100_000_000} if where == "per dataset" else 100_000_000
    entry = {"family": fam, "setting": fam["settings"][setting], "method": fam["methods"][method],
             "per dataset": fam["methods"][method]}[where]
    entry["seeds"] = value
    assert _refused(cfg) == f"{key}: 100000000 seeds; at most 1000 (each seed is a run of every method it applies to)"


def test_1000_seeds_is_accepted(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["seeds"] = 1000
    prepare_config(cfg, REPO)


def test_a_huge_seed_count_fails_validate_config_fast(tmp_path):
    import resource
    import subprocess
    import sys

    (tmp_path / "huge.yaml").write_text(f"extends: {REPO}/config/smoke.yaml\nfamilies:\n  rio:\n    seeds: 100000000\n")
    proc = subprocess.run([sys.executable, "-m", "uqcal", "validate-config", "--config", str(tmp_path / "huge.yaml")],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "uqcal validate-config: error: families.rio.seeds: 100000000 seeds; at most 1000 (each seed is a run of every "
        "method it applies to)"]
    assert peak_kib < 2_000_000  # KiB: nowhere near the 4.5 GB the expanded run list took


# ------------------------------------------------------------------------------------------ YAML
def test_a_key_written_twice_in_one_mapping_is_refused_naming_both_lines(tmp_path):
    from uqcal.pipeline.config.source import load_yaml

    path = tmp_path / "dup.yaml"
    path.write_text("families:\n  rio:\n    seeds: 1\n    split: {}\n    seeds: 2\n")
    with pytest.raises(ConfigError) as raised:
        load_yaml(path)
    assert str(raised.value) == (f"{path}:5: key 'seeds' appears twice in one mapping (first at line 3); YAML would "
                                 "keep the last silently. Keep one of them")
    # the same key in two different mappings is fine, and so is a YAML merge key
    path.write_text("a: {seeds: 1}\nb: {seeds: 2}\nbase: &b {x: 1}\nc: {<<: *b, y: 2}\n")
    assert load_yaml(path)["c"] == {"x": 1, "y": 2}


def test_the_bad_inputs_page_quotes_the_duplicate_key_and_seed_messages():
    assert ("``config/x.yaml:5: key 'seeds' appears twice in one mapping (first at line 3); YAML would keep the last "
            "silently. Keep one of them``") in PAGE
    assert ("``families.rio.seeds: 100000000 seeds; at most 1000 (each seed is a run of every method it applies "
            "to)``") in PAGE


# ------------------------------------------------------------------------------------------ the machine
def test_device_cuda_on_a_machine_without_cuda_is_refused_by_validate_config(tmp_path, capsys):
    import torch

    from uqcal.cli import main

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    (tmp_path / "gpu.yaml").write_text(f"extends: {REPO}/config/smoke.yaml\ndevice: cuda\n")
    assert main(["validate-config", "--config", str(tmp_path / "gpu.yaml")]) == 2
    message = capsys.readouterr().err.strip()
    expected = ("uqcal validate-config: error: device: 'cuda', but this machine has no CUDA device "
                "(torch.cuda.is_available() is False); use `device: auto` (CUDA when present, else the CPU) or "
                "`device: cpu`, or run it where the GPU is")
    assert message == expected
    assert f"``{expected.removeprefix('uqcal validate-config: error: ')}``" in PAGE


def test_a_refused_model_file_is_one_line_and_exit_status_2(capsys):
    from types import SimpleNamespace

    from uqcal.cli import _report_user_error
    from uqcal.core.io import UnsafeArtifactError

    error = UnsafeArtifactError("refusing to load results/x/model.pt: it holds a `builtins.open` object.")
    assert _report_user_error(error, SimpleNamespace(command="train", config=None, spec=None)) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"uqcal train: error: {error}"]


# ------------------------------------------------------------------------------------------ dataset size
def _tiny_config(root, rows: int) -> str:
    import shutil

    import numpy as np
    import yaml

    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(REPO / "workflow/schemas", root / "workflow/schemas")
    rng = np.random.default_rng(0)
    lines = "".join(f"{a:.4f},{a + rng.normal():.4f}\n" for a in rng.normal(size=rows))
    (root / "data").mkdir()
    (root / "data/tiny.csv").write_text("x,y\n" + lines)
    cfg = yaml.safe_load((root / "config/smoke.yaml").read_text())
    cfg["datasets"] = {"tiny": {"kind": "single_task_regression", "source": {"type": "csv", "path": "data/tiny.csv"},
                                "target": "y", "features": "auto", "stands_in_for": "a tiny table"}}
    cfg["families"] = {"rio": {**cfg["families"]["rio"], "datasets": ["tiny"], "methods": {"marginal": {}}}}
    (root / "config/tiny.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return "config/tiny.yaml"


def test_a_dataset_smaller_than_its_family_needs_is_refused_at_the_split_with_the_reason(tmp_path, monkeypatch,
                                                                                         capsys):
    from uqcal.cli import main
    from uqcal.methods.api import get_family

    monkeypatch.chdir(tmp_path)
    config = _tiny_config(tmp_path, rows=3)
    assert main(["materialise", "tiny", "--config", config]) == 0  # three rows, a varying target: a valid table
    split = ["split", "--config", config, "--family", "rio", "--dataset", "tiny", "--setting", "holdout",
             "--seed", "0", "--out", str(tmp_path / "split.json")]
    capsys.readouterr()
    assert main(split) == 2
    message = capsys.readouterr().err.strip()
    rio = get_family("rio")
    assert message == (f"uqcal split: error: dataset 'tiny' has 3 rows; family rio needs at least {rio.min_rows}: "
                       f"{rio.min_rows_reason}")
    assert not (tmp_path / "split.json").exists()
    assert f"``{message.removeprefix('uqcal split: error: ')}``" in PAGE


def test_every_single_task_regression_family_states_its_minimum_and_why():
    from uqcal.methods.api import get_family

    for name in ("rio", "qr", "arena"):
        family = get_family(name)
        assert family.min_rows == 20 and len(family.min_rows_reason) > 40, name

"""A config file is read raw, as plain YAML, before anything evaluates it (issue 42, items 10 and 12)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.conftest import BIN, REPO, tool_env
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.config.source import ConfigError

# A YTE template: Snakemake evaluates the `?` expression while loading the file, so the file's Python runs.
YTE_CONFIG = """\
__use_yte__: true
families:
  marker: ?__import__('pathlib').Path('yte-ran').write_text('ran')
"""


def test_a_yte_template_is_refused_by_validate_config_without_running_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yte.yaml").write_text(YTE_CONFIG)
    with pytest.raises(ConfigError, match=r"yte\.yaml: `__use_yte__` makes Snakemake evaluate this file as a YTE "
                                          r"template, which runs the Python code in it"):
        load_config(tmp_path / "yte.yaml", root=REPO)
    assert not (tmp_path / "yte-ran").exists()
    # Negative control: YTE itself runs the expression, so the refusal above is what keeps it from running.
    import yte

    with open(tmp_path / "yte.yaml") as handle:
        yte.process_yaml(handle, require_use_yte=True)
    assert (tmp_path / "yte-ran").read_text() == "ran"


def test_the_snakefile_refuses_a_yte_config_before_snakemake_evaluates_it(tmp_path):
    # The Snakefile's own default (`configfile: config/config.yaml`) in a working directory whose config is a
    # template: the Snakefile's first check refuses it, before its `configfile:` directive would evaluate it.
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(YTE_CONFIG)
    proc = subprocess.run([str(BIN / "snakemake"), "-n", "--cores", "1", "--snakefile", str(REPO / "Snakefile"),
                           "--directory", str(tmp_path)], cwd=tmp_path, env=tool_env(), capture_output=True,
                          text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert "invalid configuration: config/config.yaml: `__use_yte__`" in log, log
    assert not (tmp_path / "yte-ran").exists()


@pytest.mark.parametrize("target, config", [("reproduce", "config/config.yaml"), ("smoke", "config/smoke.yaml"),
                                            ("arena", "config/arena.yaml")])
def test_make_validates_the_raw_config_before_snakemake(target, config):
    proc = subprocess.run(["make", "-n", target, "BIN=.venv/bin"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**tool_env(), "MAKEFLAGS": ""})
    lines = [line for line in proc.stdout.splitlines() if "snakemake --cores" in line]
    assert len(lines) == 1, proc.stdout + proc.stderr
    validate, _, run = lines[0].partition(" && ")
    assert validate.endswith(f"uqcal validate-config --config {config}") and "snakemake" in run, lines[0]


def test_a_python_tag_in_a_config_is_a_clear_error_naming_file_line_and_tag(tmp_path):
    path = tmp_path / "tagged.yaml"
    path.write_text("device: cpu\nfamilies: !!python/object:collections.OrderedDict {}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path, root=REPO)
    message = str(raised.value)
    assert f"{path}:2: the tag 'tag:yaml.org,2002:python/object:collections.OrderedDict' is not plain YAML" in message
    # Without the check, safe_load's own error is a ConstructorError, not a ConfigError.
    with pytest.raises(yaml.constructor.ConstructorError):
        yaml.safe_load(path.read_text())

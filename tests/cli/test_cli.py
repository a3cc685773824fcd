"""The `uqcal` command line as a user meets it: its version, help on every option, and one line (exit status 2,
no traceback) for a user's mistake, while a bug keeps its traceback."""

from __future__ import annotations

import argparse

import pytest

import uqcal
import uqcal.cli as cli
from tests.conftest import REPO


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"uqcal {uqcal.__version__}"


def test_every_option_of_every_subcommand_has_help():
    parser = cli.build_parser()
    parsers = {"uqcal": parser, **{f"uqcal {name}": sub for name, sub in _subparsers(parser).items()}}
    assert set(_subparsers(parser)) == set(cli.COMMANDS)
    missing = [f"{where} {action.option_strings or action.dest}" for where, p in parsers.items()
               for action in p._actions
               if not isinstance(action, argparse._SubParsersAction) and not (action.help or "").strip()]
    assert not missing, missing


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the default config, config/config.yaml, is relative to the repository


def _one_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"uqcal {command}: error: "), err
    return lines[0]


@pytest.mark.parametrize("argv,bad,known", [
    (["runs", "--family", "nope"], "family 'nope'", "metareg, rio, qr, fewshot, bo"),
    (["materialise", "nope"], "dataset 'nope'", "concrete"),
    (["split", "--family", "qr", "--dataset", "nope", "--setting", "cv5"], "dataset 'nope'", "concrete, boston"),
    (["train", "--family", "qr", "--dataset", "concrete", "--setting", "nope", "--method", "de"], "setting 'nope'",
     "cv5, cv5_shuffled"),
    (["evaluate", "--family", "qr", "--dataset", "concrete", "--setting", "cv5", "--method", "nope"], "method 'nope'",
     "de_qr"),
    (["aggregate", "--family", "nope"], "family 'nope'", "qr"),
])
def test_an_unknown_name_is_one_line_naming_it_and_the_known_ones(argv, bad, known, in_repo, capsys):
    config = ["--config", "config/config.yaml"]
    assert cli.main(argv + config) == 2
    line = _one_error_line(capsys, argv[0])
    assert f"unknown {bad}" in line and "known: " in line
    # every name the config declares is listed (checked against one of them)
    assert known in line.split("known: ", 1)[1]


def test_missing_names_are_one_line(in_repo, capsys):
    assert cli.main(["split", "--family", "qr"]) == 2
    assert "missing --dataset --setting" in _one_error_line(capsys, "split")


def test_a_missing_config_file_is_one_line_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert cli.main(["runs", "--config", str(missing)]) == 2
    assert str(missing) in _one_error_line(capsys, "runs")


def test_a_missing_spec_file_is_one_line_naming_it(tmp_path, capsys):
    missing = tmp_path / "missing.json"
    assert cli.main(["train", "--spec", str(missing)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    # the step started, so its resource line follows the error
    assert lines[0] == f"uqcal train: error: No such file or directory: {missing}"


def test_bad_yaml_is_an_error_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("families: [\n")
    assert cli.main(["validate-config", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"uqcal validate-config: error: {bad}: not valid YAML") and "Traceback" not in err


def test_a_config_validation_error_names_the_key(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("families: {qr: {bogus: 1}}\n")
    assert cli.main(["validate-config", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("uqcal validate-config: error: ") and "families.qr" in err and "bogus" in err


def test_a_bad_option_value_is_argparse_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["report", "--jobs", "0"])
    assert stop.value.code == 2
    assert "--jobs: 0 is not a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("bug", [KeyError("a key the code got wrong"), TypeError("a bug"),
                                 FileNotFoundError(2, "No such file or directory", "not/on/the/command/line")])
def test_a_bug_keeps_its_traceback(bug, tmp_path, monkeypatch):
    def broken(args):
        raise bug

    monkeypatch.setattr(cli, "_run", broken)
    with pytest.raises(type(bug)):
        cli.main(["runs", "--config", str(tmp_path / "named.yaml")])


def test_a_parameter_error_of_a_method_is_a_user_error(monkeypatch, capsys):
    from uqcal.methods.api import ParameterError

    def bad_parameter(args):
        raise ParameterError("families.qr.methods.de.epochs: -1, expected >= 1")

    monkeypatch.setattr(cli, "_run", bad_parameter)
    assert cli.main(["validate-config"]) == 2
    assert "epochs: -1" in _one_error_line(capsys, "validate-config")


def test_a_step_without_its_extra_names_the_extra_to_install(monkeypatch, capsys):
    # The base install (numpy, scipy, pandas, scikit-learn) has no yaml: a pipeline step says what to install.
    def needs_yaml(args):
        raise ModuleNotFoundError("No module named 'yaml'", name="yaml")

    monkeypatch.setattr(cli, "_run", needs_yaml)
    assert cli.main(["validate-config"]) == 2
    assert "pip install 'uqcal[pipeline]'" in _one_error_line(capsys, "validate-config")
    # A module no extra provides is a bug: its traceback stays.
    monkeypatch.setattr(cli, "_run", lambda args: (_ for _ in ()).throw(ModuleNotFoundError("x", name="nope_mod")))
    with pytest.raises(ModuleNotFoundError):
        cli.main(["validate-config"])

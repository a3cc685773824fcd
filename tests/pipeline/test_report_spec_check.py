"""`uqcal validate-config` checks a family's report spec before any job (issue 50): an outside family's report.yaml
with an unknown claim kind, key, metric or method, or a margin without its reason, is one line naming that file
and the key, exit status 2."""

from __future__ import annotations

import re

import pytest

from tests.pipeline.conftest import PLUGIN, _edit
from uqcal.cli import main
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.report import spec_check

CONFIG = f"{PLUGIN}/config.yaml"
SPEC = f"{PLUGIN}/report.yaml"
CLAIM = "check: {kind: less_than, metric: rmse, a: ridge, b: marginal, test: ttest, alpha: 0.05, scope: every_row}"


def _validate(capsys) -> tuple[int, str]:
    status = main(["validate-config", "--config", CONFIG])
    err = capsys.readouterr().err.strip()
    return status, err


def test_the_plugins_spec_as_written_is_valid(plugin_workspace, capsys):
    assert _validate(capsys) == (0, "")


@pytest.mark.parametrize(("old", "new", "message"), [
    ("kind: less_than", "kind: less_thn",
     r"claims\.ridge_beats_marginal\.check\.kind: unknown claim kind 'less_thn' \(did you mean 'less_than'\?\)"),
    ("alpha: 0.05", "alpah: 0.05",
     r"claims\.ridge_beats_marginal\.check\.alpah: unknown key 'alpah' \(did you mean 'alpha'\?\)"),
    ("metric: rmse", "metric: cov9",
     r"claims\.ridge_beats_marginal\.check\.metric: 'cov9' is not a metric family toy's evaluator produces"),
    ("a: ridge", "a: ridgee",
     r"claims\.ridge_beats_marginal\.check\.a: 'ridgee' is not a method of family toy \(did you mean 'ridge'\?\)"),
])
def test_a_bad_claim_is_one_line_naming_the_file_and_the_key(plugin_workspace, capsys, old, new, message):
    _edit(plugin_workspace / SPEC, CLAIM, CLAIM.replace(old, new))
    status, err = _validate(capsys)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"uqcal validate-config: error: {SPEC}: ")
    assert re.search(message, err), err


def test_an_unknown_claim_key_and_a_wrongly_typed_known_one(plugin_workspace):
    _edit(plugin_workspace / SPEC, '    source: "the fixture"', '    source: "the fixture"\n    sorce: x\n    ours: "yes"')
    load_config(CONFIG)
    problems = spec_check.report_spec_problems("toy")
    assert any("claims.ridge_beats_marginal.sorce: unknown key 'sorce' (did you mean 'source'?)" in p for p in problems)
    assert any("claims.ridge_beats_marginal.ours: expected true or false, got 'yes'" in p for p in problems)


def test_a_table_metric_the_evaluator_does_not_produce(plugin_workspace, capsys):
    _edit(plugin_workspace / SPEC, "metrics: [rmse, nlpd, max_abs_error],", "metrics: [rmse, nlpd, max_abs_eror],")
    status, err = _validate(capsys)
    assert status == 2
    assert (f"{SPEC}: tables.errors.metrics: 'max_abs_eror' is not a metric family toy's evaluator produces "
            "(did you mean 'max_abs_error'?)") in err


def test_a_margin_without_its_reason_names_the_plugins_paper_numbers(plugin_workspace, capsys):
    _edit(plugin_workspace / SPEC, "scope: every_row}", "scope: every_row, accept: not_worse}")
    status, err = _validate(capsys)  # a not-worse claim needs the margin its paper numbers declare
    assert status == 2 and f"{PLUGIN}/paper_numbers.yaml: margins.ridge_beats_marginal: claim" in err, err
    numbers = plugin_workspace / PLUGIN / "paper_numbers.yaml"
    numbers.write_text(numbers.read_text() + "margins:\n  ridge_beats_marginal: {metric: rmse, margin: 1.0}\n")
    status, err = _validate(capsys)
    assert status == 2 and err.endswith(
        f"{PLUGIN}/paper_numbers.yaml: margins.ridge_beats_marginal.reason: a margin needs its reason (why this size: "
        "the paper's ± or words)"), err
    numbers.write_text(numbers.read_text().replace("margin: 1.0}", "margin: 1.0, reason: \"the fixture's 2.0 std\"}"))
    assert _validate(capsys) == (0, "")


def _check_with_a_new_key(claim, ctx):
    check = claim["check"]
    return check["metric"], check.get("threshold")


def test_a_new_kind_is_accepted_with_the_keys_its_code_reads(plugin_workspace, monkeypatch):
    """Kinds and keys come from the code that decides the claims: a kind added to KINDS is accepted at once."""
    from uqcal.pipeline.report import claims

    monkeypatch.setitem(claims.KINDS, "above_threshold", _check_with_a_new_key)
    spec_check.kind_keys.cache_clear()
    assert spec_check.kind_keys("above_threshold") == {"kind", "metric", "threshold"}
    _edit(plugin_workspace / SPEC, CLAIM, "check: {kind: above_threshold, metric: rmse, threshold: 3}")
    load_config(CONFIG)
    assert spec_check.report_spec_problems("toy") == []
    spec_check.kind_keys.cache_clear()


def test_every_shipped_spec_is_valid():
    from uqcal.methods.api import builtin_families

    assert {family: spec_check.report_spec_problems(family) for family in builtin_families()} == {
        family: [] for family in builtin_families()}


def test_the_howto_documents_every_claim_kind_and_key():
    """docs/howto/write-claims.md is the language as the code defines it: a heading per kind, every key named."""
    from tests.conftest import REPO

    text = (REPO / "docs/howto/write-claims.md").read_text()
    headings = {line[4:].strip() for line in text.splitlines() if line.startswith("### ")}
    assert set(spec_check.claim_kinds()) <= headings
    keys = set().union(*(spec_check.kind_keys(kind) for kind in spec_check.claim_kinds()))
    keys |= spec_check.claim_keys() | spec_check.table_keys()
    assert not {key for key in keys if not re.search(rf"[`{{ \n]{key}[`:]", text)}

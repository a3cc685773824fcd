"""The reference files' uncertainty data: every table says what its ± is, its marks, and the claims' margins exist.

Data checks only (src/uqcal/methods/<family>/paper_numbers.yaml); the code that reads these blocks is tested with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
METHODS = REPO / "src" / "uqcal" / "methods"
FAMILIES = ["rio", "qr", "metareg", "fewshot", "bo"]
TEXT_KEYS = ("runs", "quote", "where", "basis")
MARK_KEYS = {"dagger", "double_dagger", "bold"}

# The claims whose wording ("not worse", "comparable", "best or tied", "negligible") needs a declared margin.
MARGIN_CLAIMS = {
    "rio": {"rio_best_rmse": "rmse", "rio_best_nlpd": "nlpd"},
    "qr": {"qr_rmse_cost_dvi": "rmse", "qr_rmse_cost_de": "rmse", "qr_nll_cost_dvi": "nlpd", "qr_nll_cost_de": "nlpd"},
    "metareg": {"lowest_te": "te", "mse_close_to_mdkl": "mse", "lambda_middle_insensitive": "te"},
    "bo": {"svhn_not_worse": "final_best"},
    "fewshot": {
        "md_acc_not_worse": "acc",
        "md_beats_gd_acc": "acc",
        "md_low_ece": "ece",
        "md_low_ece_nllts": "ece",
        "md_low_mce_cross": "mce",
    },
}


def _load(family: str) -> dict:
    return yaml.safe_load((METHODS / family / "paper_numbers.yaml").read_text())


def _claim_ids(family: str) -> set[str]:
    spec = yaml.safe_load((METHODS / family / "report.yaml").read_text())
    return {claim["id"] for claim in spec.get("claims") or []}


def _check_uncertainty(block: dict, where: str) -> None:
    assert block["kind"] in {"std", "se", "ci95", "none"}, where
    assert block["ddof"] in {0, 1, None}, where
    if block["kind"] == "none":
        assert block["ddof"] is None, where
    assert block["n"] is None or (isinstance(block["n"], int) and block["n"] >= 1), where
    for key in TEXT_KEYS:
        assert isinstance(block.get(key), str) and block[key].strip(), f"{where}: {key}"


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "bo"])
def test_every_table_says_what_its_spread_is(family):
    data = _load(family)
    assert data["tables"], family
    for table in data["tables"]:
        where = f"{family}/{table['id']}"
        _check_uncertainty(table["uncertainty"], where)
        block = table["uncertainty"]
        datasets = {record["dataset"] for record in table["records"]}
        for dataset, n in (block.get("n_by_dataset") or {}).items():
            assert dataset in datasets, f"{where}: n_by_dataset names {dataset}, not in the records"
            assert isinstance(n, int) and n >= 1, where
        has_spread = any(record.get("std") is not None for record in table["records"])
        if block["kind"] == "none":
            assert not has_spread, f"{where}: kind none but records carry a std"
        else:
            assert has_spread, f"{where}: kind {block['kind']} but no record has a std"


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "bo"])
def test_marks_are_quoted_and_only_used_where_defined(family):
    data = _load(family)
    for table in data["tables"]:
        where = f"{family}/{table['id']}"
        marks = table.get("marks") or {}
        defined = {key for key in MARK_KEYS if isinstance(marks.get(key), str) and marks[key].strip()}
        if "bold" in defined:
            assert marks.get("bold_transcribed") in {True, False}, where
        for record in table["records"]:
            used = MARK_KEYS & set(record)
            assert used <= defined, f"{where}: {record} uses a mark the table does not define"
            for key in used:
                assert record[key] is True, f"{where}: marks are written only as true ({record})"
        if marks.get("bold_transcribed") is False:
            assert not any("bold" in record for record in table["records"]), where


@pytest.mark.parametrize("family", list(MARGIN_CLAIMS))
def test_margins_exist_for_the_equivalence_claims(family):
    data = _load(family)
    margins = data["margins"]
    ids = _claim_ids(family)
    for claim, metric in MARGIN_CLAIMS[family].items():
        entry = margins[claim]
        assert claim in ids, f"{family}: {claim} is not a claim of {family}/report.yaml"
        assert entry["metric"] == metric, claim
        given = [key for key in ("margin", "relative") if key in entry]
        assert len(given) == 1, f"{claim}: exactly one of margin / relative"
        value = entry[given[0]]
        assert isinstance(value, (int, float)) and value > 0, claim
        if given[0] == "relative":
            assert value < 1, claim
        for key in ("reason", "quote"):
            assert isinstance(entry.get(key), str) and entry[key].strip(), f"{claim}: {key}"
    for claim in margins:
        assert claim in ids, f"{family}: margin for unknown claim {claim}"


@pytest.mark.parametrize("family", FAMILIES)
def test_paper_se_notes(family):
    notes = _load(family)["paper_se_notes"]
    assert isinstance(notes, str) and "SE" in notes


def test_bo_figures_and_forrester():
    data = _load("bo")
    block = data["figures_uncertainty"]
    _check_uncertainty(block, "bo/figures_uncertainty")
    assert block["kind"] == "se" and block["n"] == 5
    for name, figure in block["by_figure"].items():
        assert figure["kind"] in {"std", "se", "ci95", "none"}, name
        assert figure["n"] == 5, name
    assert "forrester" in data["dataset_aliases"]["Forrester"]


def test_rio_table1_marks_and_rows():
    data = _load("rio")
    tables = {table["id"]: table for table in data["tables"]}
    assert {"table1", "table6", "table2"} <= set(tables)
    table1 = tables["table1"]
    assert table1["uncertainty"]["n"] == 100 and table1["uncertainty"]["n_by_dataset"] == {"MSD": 10}
    # The marks compare against RIO: RIO's cells never carry them, most others carry both.
    cells = {(r["dataset"], r["method"], r["metric"]): r for r in table1["records"]}
    for record in table1["records"]:
        if record["method"] == "rio" or record["std"] is None:
            assert not ({"dagger", "double_dagger"} & set(record)), record
    assert cells[("CCS", "r_i", "rmse")].get("dagger") and cells[("CCS", "r_i", "rmse")].get("double_dagger")
    assert cells[("yacht", "nn", "rmse")].get("dagger") and cells[("yacht", "nn", "rmse")].get("double_dagger")
    for unmarked in [("wine/r", "y_o", "nlpd"), ("protein", "y_io", "rmse"), ("MSD", "r_o", "rmse")]:
        assert not ({"dagger", "double_dagger"} & set(cells[unmarked])), unmarked
    # All twelve datasets, seven rows each (NN without NLPD).
    assert {r["dataset"] for r in table1["records"]} == {
        "yacht", "ENB/h", "ENB/c", "airfoil", "CCS", "wine/r", "wine/w", "CCPP", "protein", "SC", "CT", "MSD"}
    assert len(table1["records"]) == 12 * (2 + 6 * 4)
    # yacht and ENB/h: Y+O is the extraction's "×" row, Y+IO its sixth row (printed "Y+O").
    assert cells[("yacht", "y_o", "rmse")]["mean"] == 1.86 and cells[("yacht", "y_io", "rmse")]["mean"] == 1.58
    assert cells[("ENB/h", "y_o", "rmse")]["mean"] == 0.88 and cells[("ENB/h", "y_io", "rmse")]["mean"] == 0.76
    # Table 6 (10,000 iterations): CCS as printed; R+I's NLPD is its one unmarked cell.
    table6 = {(r["method"], r["metric"]): r for r in tables["table6"]["records"] if r["dataset"] == "CCS"}
    assert table6[("svgp", "rmse")]["mean"] == 6.62 and table6[("svgp", "nlpd")]["mean"] == 3.297
    assert "dagger" not in table6[("r_i", "nlpd")]
    assert tables["table6"]["uncertainty"]["kind"] == "std"


def test_reference_loader_still_reads_every_file():
    from uqcal.pipeline.paper_numbers import load_reference

    for family in FAMILIES:
        reference = load_reference(family)
        assert reference.path is not None, family


def test_a_dagger_against_rio_bounds_the_papers_se_of_a_difference():
    """Table 1's † is a paired t-test against RIO over 100 runs at 5 %: the se of that difference is below
    |diff| / t(.975, 99), far below the sqrt formula that ignores the shared splits (CCS, RMSE)."""
    from scipy import stats

    from uqcal.pipeline.paper_numbers import load_reference

    ref = load_reference("rio")
    diff = ref.paper_difference("table1", "CCS", "holdout", "r_i", "rio", "rmse")
    assert diff.mean == pytest.approx(0.04)
    assert diff.se == pytest.approx(0.04 / stats.t.ppf(0.975, 99))
    assert "paired t-test" in diff.se_basis
    sqrt_formula = ref.paper_difference("table1", "CCS", "holdout", "r_i", "svgp", "rmse")
    se_a = 0.50 * (100 / 99) ** 0.5 / 10
    se_b = 0.39 * (100 / 99) ** 0.5 / 10
    assert sqrt_formula.se == pytest.approx((se_a**2 + se_b**2) ** 0.5)
    assert "overstatement" in sqrt_formula.se_basis

"""The report is the config's own (issue 19): only its families, datasets, settings, methods and seeds,
provenance for its datasets and jobs only; and a failed fit is marked on its table cell."""

from __future__ import annotations

import copy
import html
import json
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.report.report_tree import build_smoke_like_tree, write_run, write_tables
from uqcal.core.io import write_json, write_text
from uqcal.pipeline.report.build import build_reports, planned_jobs


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("scope")
    tree = build_smoke_like_tree(root, seeds=3, rio_datasets=("concrete", "diabetes"))
    config = copy.deepcopy(tree["config"])
    del config["families"]["bo"]  # a family this config does not run
    config["families"]["rio"]["datasets"] = ["concrete"]  # diabetes's runs belong to another config
    del config["families"]["rio"]["methods"]["svgp"]  # and so do svgp's
    results = tree["results"]
    # Leftovers of other configs: a seed beyond this config's 3, another dataset, another method, and a
    # summary.csv written by a config that ran all of them.
    for method in ("rio", "nn"):
        write_run(results, "rio", "concrete", "holdout", method, 7, {"rmse": 1000.0, "nlpd": 1000.0})
    write_run(results, "rio", "boston", "holdout", "rio", 0, {"rmse": 3.0, "nlpd": 2.0})
    write_tables(results, "rio")
    # A failed fit in one of the planned runs (seed 1 of rio on concrete), and none in another cell.
    write_json(results / "rio" / "concrete" / "holdout" / "rio" / "seed1" / "train_stats.json", {"fit_failures": 2})
    for seed in range(3):
        write_json(results / "rio" / "concrete" / "holdout" / "nn" / f"seed{seed}" / "train_stats.json",
                   {"fit_failures": 0})
    write_json(results / "rio" / "concrete" / "holdout" / "rio" / "seed7" / "train_stats.json", {"fit_failures": 1})
    # Provenance left by other runs: a dataset record and a benchmark of a job outside the plan.
    write_json(tree["data"] / "raw" / "boston.json", {"name": "boston", "rows": 506})
    bench = tree["logs"] / "bench" / "train" / "rio" / "boston" / "holdout" / "rio.tsv"
    write_text(bench, "s\th:m:s\tmax_rss\tmax_vms\n99.5\t0:01:39\t120.0\t300.0\n")
    out = root / "reports"
    build_reports(config, str(tree["config_path"]), results, out, tree["data"], tree["logs"])
    return {"out": out, "config": config, "results": results}


def test_only_the_configs_families_have_pages(site):
    out = site["out"]
    assert not (out / "bo").exists()
    index = (out / "index.html").read_text()
    assert 'href="bo/index.html"' not in index and ">bo<" not in index and "was not run" not in index
    assert 'href="rio/index.html"' in index


def test_tables_and_metrics_hold_only_planned_runs(site):
    out = site["out"]
    metrics = json.loads((out / "rio" / "metrics.json").read_text())
    assert set(metrics) == {"concrete"}
    assert set(metrics["concrete"]["holdout"]) == {"nn", "rio", "marginal"}
    # The mean over seeds 0-2 only: seed 7 (rmse 1000) is another config's.
    from uqcal.pipeline.report.results import load_tables

    runs = load_tables(site["results"], "rio")[1]  # the other config's aggregate: every run on disk
    planned = runs[(runs.dataset == "concrete") & (runs.method == "rio") & (runs.metric == "rmse") & (runs.seed < 3)]
    assert metrics["concrete"]["holdout"]["rio"]["rmse"] == pytest.approx(planned["value"].mean(), abs=1e-6)
    page = (out / "rio" / "index.html").read_text()
    assert "diabetes" not in page and "boston" not in page and "1000.000" not in page
    assert "9 runs in all" in page  # 3 methods x 3 seeds
    assert "Data: the paper&#x27;s own data: concrete (= paper&#x27;s CCS)" in page


def test_provenance_lists_only_the_configs_datasets_and_jobs(site):
    index = (site["out"] / "index.html").read_text()
    assert "<summary>concrete</summary>" in index and "<summary>boston</summary>" not in index
    assert "99.5" not in index  # the benchmark of a job outside the plan
    jobs = planned_jobs(site["config"], ["rio"])
    assert "train/rio/concrete/holdout/rio" in jobs and "materialise/concrete" in jobs
    assert not any("boston" in j or "diabetes" in j for j in jobs)


def test_failed_fit_marks_its_cell_with_the_run_count(site):
    md = (site["out"] / "rio" / "tables" / "rmse_nlpd.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| concrete"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    header = [c.strip() for c in md.splitlines()[4].strip("|").split("|")]
    rio, nn = cells[header.index("rmse (target units) ↓ RIO")], cells[header.index("rmse (target units) ↓ NN")]
    assert rio.endswith("⚠ 1/3")  # seed 1 of 3 planned runs; seed 7 (another config's) is not counted
    assert "⚠" not in nn and "⚠" not in cells[header.index("rmse (target units) ↓ marginal Gaussian (reference)")]
    assert "k of the n runs behind the cell had a failed fit" in md
    page = (site["out"] / "rio" / "index.html").read_text()
    assert 'class="fitfail"' in page and "1 of 3 runs had a failed fit" in page
    assert "Failed fits</b> in 1 runs" in page and "concrete/holdout/rio: 1 of 3" in page


def test_no_failure_no_mark(tmp_path):
    tree = build_smoke_like_tree(tmp_path, seeds=2, rio_datasets=("concrete",))
    build_reports(tree["config"], str(tree["config_path"]), tree["results"], tree["out"], tree["data"],
                  tree["logs"])
    for family in ("metareg", "rio", "qr", "fewshot", "bo"):
        page = (tree["out"] / family / "index.html").read_text()
        assert "⚠" not in page and "Failed fits" not in page


def test_asking_for_a_family_the_config_does_not_run_is_an_error(tmp_path):
    tree = build_smoke_like_tree(tmp_path, seeds=2, rio_datasets=("concrete",))
    config = copy.deepcopy(tree["config"])
    del config["families"]["qr"]
    with pytest.raises(ValueError, match=r"report families \['qr'\] are not in the config"):
        build_reports(config, str(tree["config_path"]), tree["results"], tree["out"], tree["data"], tree["logs"],
                      families=["qr"])
    assert np.all([not (tree["out"] / "qr").exists()])


def test_every_claim_in_claims_json_has_a_verdict_and_every_row_its_numbers(site):
    from uqcal.metrics.replication import DIRECTION_VERDICTS, VERDICTS
    from uqcal.pipeline.report.verdicts import PAPER_DATA

    out = site["out"]
    families = [p.parent.name for p in sorted(out.glob("*/claims.json"))]
    assert families and "bo" not in families
    tested = 0
    for family in families:
        for claim in json.loads((out / family / "claims.json").read_text()):
            assert claim["verdict"] in VERDICTS, (family, claim["id"], claim["verdict"])
            assert (claim["verdict"] == "not_run") == (not claim["evidence"]), (family, claim["id"])
            for row in claim["evidence"]:
                tested += 1
                for key in ("estimate", "se", "p"):
                    assert isinstance(row[key], float), (family, claim["id"], key, row)
                assert isinstance(row["n"], int) and row["n"] >= 1
                if row["data"] == PAPER_DATA:
                    for key in ("paper_estimate", "paper_se", "pi_low", "pi_high"):
                        assert isinstance(row[key], float), (family, claim["id"], key, row)
                else:
                    assert row["pi_low"] is None and row["verdict"] in DIRECTION_VERDICTS
                # no support from a row whose (adjusted) p is not significant
                if row["verdict"] in ("reproduced", "reproduced_smaller", "generalises"):
                    assert row["p_adjusted"] < 0.05, (family, claim["id"], row)
    assert tested > 0


def test_family_pages_are_reproduction_reports(site):
    """Every family page opens as a reproduction report (sections in MLRC order), with the family's deviations and
    their reasons, the config's hyperparameters and the compute; REPORT.md beside it in the same order; no absolute
    local path (the tree lives in a tmp folder, so one would show), each page under 1 MB."""
    import re

    from uqcal.pipeline.report.narrative import load_family_notes

    out = site["out"]
    local = re.compile(re.escape(str(Path(site["results"]).resolve().parents[0])))
    for family in [p.parent.name for p in sorted(out.glob("*/claims.json"))]:
        page = (out / family / "index.html").read_text()
        markers = ['id="scope"', 'id="summary"', 'id="claims"', 'id="methodology"', 'id="compute"',
                   'id="easy-hard"', 'id="results"', "<h2>Tables", "<h2>Figures", "<h2>Provenance"]
        found = [page.find(m) for m in markers]
        assert -1 not in found and found == sorted(found), (family, found)
        for deviation in load_family_notes(family)["deviations"]:
            assert html.escape(deviation["reason"]) in page
        assert "Hyperparameters (the resolved config)" in page and "CPU time" in page
        assert page.count("<table") == page.count("<caption") and len(page.encode()) < 1_000_000
        report = (out / family / "REPORT.md").read_text()
        heads = ["## Reproducibility summary", "## 2 Scope of reproducibility", "## 3 Methodology",
                 "### 3.3 Deviations", "### 3.4 Computational requirements", "## 4 Results", "## 5 Discussion"]
        assert [report.index(h) for h in heads] == sorted(report.index(h) for h in heads)
        assert not local.search(page) and not local.search(report)
    index = (out / "index.html").read_text()
    assert "Overall:" in index and 'href="rio/index.html#claim-' in index and not local.search(index)

"""Table builder: bold marking against a brute-force paired t-test, paper columns, stand-in
notes, Markdown."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tests.pipeline.report.report_tree import REGISTRY, write_run, write_tables
from uqcal.pipeline.paper_numbers import Reference, load_reference, relate_dataset
from uqcal.pipeline.report.results import load_tables
from uqcal.pipeline.report.tables import (
    build_table,
    not_worse_than_best,
    paired_pvalue,
    spread_verdict,
    to_html,
    to_markdown,
)


def brute_force_paired_p(a, b) -> float:
    """Paired t-test from its definition: t = mean(d) / (sd(d)/sqrt(n)), two-sided, n-1 dof."""
    d = np.asarray(a, float) - np.asarray(b, float)
    n = len(d)
    t = d.mean() / (d.std(ddof=1) / np.sqrt(n))
    return float(2 * stats.t.sf(abs(t), n - 1))


def test_paired_pvalue_matches_definition():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=7), rng.normal(0.4, size=7)
    assert paired_pvalue(a, b, "ttest") == pytest.approx(brute_force_paired_p(a, b), rel=1e-10)
    assert paired_pvalue(a, a, "ttest") == 1.0
    with pytest.raises(ValueError, match="test must be one of"):
        paired_pvalue(a, b, "anova")


def test_wilcoxon_with_zeros_and_ties_matches_scipy():
    # Our vectorised sign-flip test must give scipy's exact (permutation) p-values bit for bit.
    rng = np.random.default_rng(7)
    cases = 0
    while cases < 6:
        n = int(rng.integers(4, 14))
        a = rng.normal(size=n)
        b = a - rng.integers(-2, 3, size=n) * 0.25  # zeros and tied |differences|
        diff = a - b
        if np.allclose(diff, 0.0) or np.allclose(diff, diff[0]):
            continue
        assert paired_pvalue(a, b, "wilcoxon") == stats.wilcoxon(a, b).pvalue
        cases += 1


def test_bold_marking_matches_brute_force(tmp_path):
    rng = np.random.default_rng(3)
    seeds = 6
    base = rng.normal(size=seeds)
    # best, a near-tie (noisy, same mean), a clear loser, and one that is consistently a little worse
    values = {
        "metacal": 1.0 + 0.05 * base,
        "mdkl": 1.0 + 0.05 * base + rng.normal(0.01, 0.08, seeds),
        "np": 2.0 + 0.05 * rng.normal(size=seeds),
        "gp": 1.0 + 0.05 * base + 0.03 + 0.002 * rng.normal(size=seeds),
    }
    results = tmp_path / "results"
    for method, vals in values.items():
        for seed, v in enumerate(vals):
            write_run(results, "metareg", "ozone", "ns10", method, seed, {"te": float(v)})
    write_tables(results, "metareg")
    summary, runs = load_tables(results, "metareg")
    reference = load_reference("metareg")
    relations = {"ozone": relate_dataset("ozone", REGISTRY, reference)}
    table = build_table(
        {"id": "te", "metric": "te", "paper_table": "table1", "methods": ["metacal", "mdkl", "np", "gp"]},
        summary,
        runs,
        reference,
        relations,
    )
    means = {m: v.mean() for m, v in values.items()}
    best = min(means, key=means.get)
    expected = {best} | {m for m, v in values.items() if m != best and brute_force_paired_p(v, values[best]) >= 0.05}
    got = {m for (metric, m), cell in table.rows[0].cells.items() if cell.bold}
    assert got == expected
    assert "np" not in got and "gp" not in got  # the test can tell these apart from the best
    cell = table.rows[0].cells[("te", "metacal")]
    assert cell.mean == pytest.approx(values["metacal"].mean())
    assert cell.std == pytest.approx(values["metacal"].std(ddof=1))
    # stand-in: the paper's AHM value sits beside ours, labelled not comparable, and the table
    # names both datasets
    assert cell.paper["mean"] == 0.167 and cell.verdict == "stand-in"
    md, page = to_markdown(table), to_html(table)
    for text in (md, page):
        assert "ozone (stand-in for paper&#x27;s AHM)" in text or "ozone (stand-in for paper's AHM)" in text
        assert "stands in for the paper" in text
    assert f"**{values[best].mean():.3f} ± {values[best].std(ddof=1):.3f}**" in md
    assert f"{values['np'].mean():.3f} ± " in md and f"**{values['np'].mean():.3f}" not in md


def test_wilcoxon_and_higher_is_better():
    per_seed = {"a": {s: 0.9 + 0.01 * s for s in range(8)}, "b": {s: 0.5 + 0.01 * s for s in range(8)}}
    best, marked = not_worse_than_best(per_seed, lower_is_better=False, test="wilcoxon")
    assert best == "a" and marked == {"a"}
    best, marked = not_worse_than_best(per_seed, lower_is_better=True, test="wilcoxon")
    assert best == "b" and marked == {"b"}


def test_same_dataset_spread_verdict_and_markdown(tmp_path):
    results = tmp_path / "results"
    for seed in range(3):  # paper CCS: RIO 5.97 ± 0.48, SVGP 6.87 ± 0.39
        write_run(results, "rio", "concrete", "holdout", "rio", seed, {"rmse": 6.2 + 0.01 * seed})
        write_run(results, "rio", "concrete", "holdout", "svgp", seed, {"rmse": 8.0 + 0.01 * seed})
    write_tables(results, "rio")
    reference = load_reference("rio")
    relations = {"concrete": relate_dataset("concrete", REGISTRY, reference)}
    assert relations["concrete"].kind == "same" and relations["concrete"].paper == "CCS"
    table = build_table(
        {"id": "rmse", "metric": "rmse", "paper_table": "table1", "methods": ["nn", "rio", "svgp"]},
        *load_tables(results, "rio"),
        reference,
        relations,
    )
    cells = table.rows[0].cells
    assert cells[("rmse", "rio")].verdict == "within"  # |6.21 − 5.97| = 0.24 ≤ 0.48
    assert cells[("rmse", "svgp")].verdict == "worse"  # |8.01 − 6.87| = 1.14 > 0.39, higher RMSE
    better = spread_verdict(5.0, {"mean": 5.97, "std": 0.48}, relations["concrete"], lower_is_better=True)
    assert better == "better"  # 0.97 below the paper's RMSE: beyond its spread on the good side, not a failure
    assert spread_verdict(5.0, {"mean": 5.97, "std": 0.48}, relations["concrete"]) == "outside"  # no direction
    assert table.not_run == ["nn"]
    md = to_markdown(table, reference.method_names)
    lines = [line for line in md.splitlines() if line.startswith("| concrete")]
    assert len(lines) == 1
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    header = [c.strip() for c in md.splitlines()[4].strip("|").split("|")]
    assert len(cols) == len(header)
    assert cols[header.index("rmse (target units) ↓ RIO (paper)")] == "5.97 ± 0.48 (within its spread)"
    assert "Not run: nn." in md


def test_relate_dataset_rules():
    ref = Reference(
        family="x",
        tables={
            "t": {
                "id": "t",
                "records": [
                    {"dataset": "SC", "setting": "s", "method": "m", "metric": "r", "mean": 1.0},
                    {"dataset": "School", "setting": "s", "method": "m", "metric": "r", "mean": 1.0},
                ],
            }
        },
        dataset_aliases={"SC": ["superconduct"]},
    )
    registry = {
        # Free text that mentions a paper dataset by name is a label, never a match (issue 19: two unrelated
        # school data sets got the paper's School numbers).
        "a": {"stands_in_for": "a large set (protein / SC scale)"},
        "schools": {"stands_in_for": "Texas school district test scores"},
        "b": {"stands_in_for": "a large set", "paper_dataset": "sc"},  # explicit: stand-in for SC
        "c": {"paper_dataset": {"x": "superconduct", "y": "other"}},  # explicit per family, via an alias
        "d": {"paper_dataset": {"y": "SC"}},  # named for another family only
        "e": {"paper_dataset": "a paper task without published tables"},
    }
    for name in ("a", "schools"):
        rel = relate_dataset(name, registry, ref)
        assert rel.kind == "stand_in" and rel.paper is None
    assert (relate_dataset("b", registry, ref).kind, relate_dataset("b", registry, ref).paper) == ("stand_in", "SC")
    assert (relate_dataset("c", registry, ref).kind, relate_dataset("c", registry, ref).paper) == ("same", "SC")
    assert relate_dataset("d", registry, ref).kind == "none"
    assert relate_dataset("e", registry, ref).paper == "a paper task without published tables"
    # A dataset merely named like a paper dataset (or its alias) gets nothing without the key.
    assert relate_dataset("superconduct", {}, ref).kind == "none"
    assert relate_dataset("school", {"school": {}}, ref).kind == "none"


def test_paper_dataset_names_are_checked_against_the_reference():
    from uqcal.pipeline.paper_numbers import paper_dataset_problems

    config = {
        "families": {"rio": {"datasets": ["concrete", "mine"]}, "qr": {"datasets": ["concrete"]}},
        "datasets": {"concrete": {"paper_dataset": {"rio": "CCS", "qr": "Concrete Strength"}},
                     "mine": {"paper_dataset": "CSS"}},
    }
    problems = paper_dataset_problems(config)
    assert len(problems) == 1
    assert "datasets.mine.paper_dataset: 'CSS' is not a dataset of the rio paper" in problems[0]
    assert "'CCS'" in problems[0]  # the names it could be
    config["datasets"]["mine"]["paper_dataset"] = "ccs"  # case-insensitive
    assert paper_dataset_problems(config) == []


def test_reference_files_have_all_five_papers_with_table_numbers():
    for family in ("metareg", "rio", "qr", "fewshot", "bo"):
        ref = load_reference(family)
        assert ref.paper and ref.source
        for table in ref.tables.values():
            assert table["table"].startswith("Table ") and table["caption"]
    # spot checks against IMPLEMENTATION-NOTES.md's quoted values
    assert load_reference("rio").value("table1", "CCS", "holdout", "rio", "nlpd")["mean"] == 3.241
    qr = load_reference("qr")
    assert qr.value("table2", "Boston Housing", "cv5", "de_qr", "ce")["mean"] == 25.25
    fewshot = load_reference("fewshot")
    assert fewshot.value("table2", "Omniglot->EMNIST", "5w5s", "md", "mce_ts")["mean"] == 0.025
    assert (
        load_reference("metareg").value("table6", "AHM", "ns20", "metacal", "train_seconds")["mean"]
        == 588.745
    )


def test_target_metric_bolds_closest_to_nominal(tmp_path):
    results = tmp_path / "results"
    # a over-covers, b is near nominal, c under-covers; Wilcoxon needs >= 6 pairs to reach p < 0.05
    for seed in range(8):
        for method, value in (("a", 0.99), ("b", 0.951), ("c", 0.80)):
            cov = value + 0.002 * (seed % 2)
            write_run(results, "rio", "concrete", "holdout", method, seed, {"cov95": cov})
    write_tables(results, "rio")
    table = build_table(
        {"id": "cov", "metrics": ["cov95"], "target": {"cov95": 0.95}, "test": "wilcoxon"},
        *load_tables(results, "rio"),
        Reference("rio"),
        {},
    )
    bold = {m for (_, m), cell in table.rows[0].cells.items() if cell.bold}
    assert bold == {"b"}
    assert "cov95 (share) → 0.95" in to_markdown(table)


def test_paper_units_rescale_published_values(tmp_path):
    results = tmp_path / "results"
    for seed in range(2):  # paper (Table 1, Omniglot->EMNIST 5-shot): MD-BFSC 87.05 ± 0.23 %
        write_run(results, "fewshot", "omni2emnist", "5w5s", "md", seed, {"acc": 0.8704 + 0.0001 * seed})
    write_tables(results, "fewshot")
    reference = load_reference("fewshot")
    relations = {"omni2emnist": relate_dataset("omni2emnist", {}, reference)}
    relations["omni2emnist"] = relations["omni2emnist"].__class__("omni2emnist", "Omniglot->EMNIST", "same")
    spec = {"id": "acc", "metric": "acc", "paper_table": "table1", "lower_is_better": False}
    summary, runs = load_tables(results, "fewshot")
    cell = build_table({**spec, "paper_units": {"acc": 0.01}}, summary, runs, reference, relations).rows[0].cells
    assert cell[("acc", "md")].paper["mean"] == pytest.approx(0.8705)
    assert cell[("acc", "md")].verdict == "within"
    unscaled = build_table(spec, summary, runs, reference, relations).rows[0].cells
    assert unscaled[("acc", "md")].verdict == "worse"  # 0.87 read against 87.05: far below, accuracy higher-better


def test_significance_marks_follow_scipy_paired_tests():
    from scipy import stats

    from uqcal.pipeline.report.tables import significance_marks

    rng = np.random.default_rng(3)
    reference = {s: float(v) for s, v in enumerate(rng.normal(size=12))}
    shifted = {s: v + 1.0 + 0.1 * rng.normal() for s, v in reference.items()}  # clearly different
    noisy = {s: v + rng.normal() for s, v in reference.items()}
    a, b = list(noisy.values()), list(reference.values())
    expected = ("†" if stats.ttest_rel(a, b).pvalue < 0.05 else "") + (
        "‡" if stats.wilcoxon(a, b).pvalue < 0.05 else ""
    )
    assert significance_marks(shifted, reference) == "†‡"
    assert significance_marks(noisy, reference) == expected
    assert significance_marks(reference, reference) == ""
    assert significance_marks({0: 1.0}, {0: 2.0}) == ""  # one shared seed: untestable, no mark


def test_ece_floor_column_from_the_rows_query_sizes():
    # The pseudo-method 'floor' gets, per row, the expected ECE of a calibrated predictive at that row's
    # count (n_query for ece, n_query_pooled for ece_pooled), checked against the exact binomial expectation.
    import pandas as pd

    from uqcal.metrics import ECE_LEVELS
    from uqcal.pipeline.report.results import SUMMARY_COLUMNS, with_ece_floors

    def exact(n):
        k = np.arange(n + 1)
        return np.mean([(stats.binom.pmf(k, n, p) * np.abs(k / n - p)).sum() for p in ECE_LEVELS])

    rows = []
    for dataset, pooled in (("ozone", 900), ("exam", 360)):
        for method in ("metacal", "mdkl"):
            rows += [(dataset, "ns10", method, "n_query", 30.0, 0.0, 5), (dataset, "ns10", method, "ece", 0.1, 0.01, 5),
                     (dataset, "ns10", method, "n_query_pooled", float(pooled), 0.0, 5)]
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    assert with_ece_floors(summary, None) is summary
    out = with_ece_floors(summary, {"ece": "n_query", "ece_pooled": "n_query_pooled"})
    floor = out[out["method"] == "floor"].set_index(["dataset", "metric"])["mean"]
    assert len(out) == len(summary) + 4
    for dataset, pooled in (("ozone", 900), ("exam", 360)):
        assert floor[(dataset, "ece")] == pytest.approx(exact(30), abs=2e-3)
        assert floor[(dataset, "ece_pooled")] == pytest.approx(exact(pooled), abs=5e-4)
    assert floor[("exam", "ece_pooled")] > floor[("ozone", "ece_pooled")]


def test_a_method_on_fewer_seeds_is_compared_on_the_shared_ones_and_the_table_says_so(tmp_path):
    rng = np.random.default_rng(11)
    rio = 6.0 + rng.normal(0, 0.3, 10)
    r_i = rio[:5] + 0.5 + rng.normal(0, 0.05, 5)  # worse than rio on every shared split
    results = tmp_path / "results"
    for seed, value in enumerate(rio):
        write_run(results, "rio", "concrete", "holdout", "rio", seed, {"rmse": float(value)})
    for seed, value in enumerate(r_i):
        write_run(results, "rio", "concrete", "holdout", "r_i", seed, {"rmse": float(value)})
    write_tables(results, "rio")
    reference = load_reference("rio")
    relations = {"concrete": relate_dataset("concrete", REGISTRY, reference)}
    table = build_table({"id": "rmse", "metric": "rmse", "methods": ["rio", "r_i"]}, *load_tables(results, "rio"),
                        reference, relations)
    cells = table.rows[0].cells
    assert (cells[("rmse", "rio")].n, cells[("rmse", "r_i")].n) == (10, 5)
    assert cells[("rmse", "rio")].mean == pytest.approx(rio.mean())  # each mean over its own runs
    assert cells[("rmse", "r_i")].mean == pytest.approx(r_i.mean())
    assert brute_force_paired_p(r_i, rio[:5]) < 0.05  # so r_i is not bold: tested on the 5 shared splits
    assert not cells[("rmse", "r_i")].bold
    note = [n for n in table.notes if "runs per method differ" in n]
    assert note == ["concrete / holdout: runs per method differ (rio 10, r_i 5). Each mean is over its method's own "
                    "runs; bold and the paired tests use the seeds both methods share."]
    assert note[0] in to_markdown(table)

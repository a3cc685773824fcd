"""The paper's own tables as a test of the verdict rules (REPLICATION-STATISTICS Sec. 10; docs/verdicts.md).

Each claim with published numbers is fed the paper's own numbers as if they were ours: on every row of the
paper's table the claim names, our estimate is the paper's (a difference of two printed means, or one mean), our
standard error the paper's (its ± read as the table's ``uncertainty`` block says) and our df the paper's. The rows
then go through the claim's own decision path: ``verdicts.paired_row`` (the claim's hypothesis at its margin),
``verdicts.finish`` (row verdicts, Holm within counting scopes, the claim's scope), with the claim kinds' own
row selection (``paper_rows: bold``, the best other method by the paper's means). Only where our numbers come from
differs: the paper's table instead of runs.

"Supported" (what :func:`supported` checks, per kind):

- **at the paper's n**: the claim is not ruled out by the paper's own numbers: not contradicted,
  smaller_than_paper or does_not_generalise (reproduced, reproduced_smaller, consistent (underpowered),
  generalises or undecided all pass: the paper's own table is often underpowered at its n);
- **direction only** where the paper prints no ± (the meta-regression tables, QR's one-run Year MSD rows; Sec. 10, "no ±
  invented"): the row is fed without the paper's se, so it is judged as the pipeline judges such a row
  (generalises / does_not_generalise / undecided). At the paper's n no se exists, so nothing is significant
  (our se ten times the paper's effect: undecided); at many runs our se is a tenth of the paper's own effect
  (z = 10), so the row is significant exactly when the paper's effect is non-zero, and in the direction the
  paper's numbers show: the claim must generalise;
- **at many runs** (our se a tenth of the paper's, normal quantiles): a comparison, margin or correlation claim is
  reproduced (or generalises, where the paper prints no ±); a value check ("our mean agrees with the paper's") is
  consistent. This is "reproducible at some n": a claim that fails here cannot be reproduced at any n even by an
  exact replication, so its wording, margin or scope is mis-stated.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from uqcal.metrics import replication as R
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference, paper_dataset_for
from uqcal.pipeline.report.comparison_claims import _accept, _comparisons, _not_claimed_by_paper, _paper_best_other
from uqcal.pipeline.report.verdicts import ClaimContext, ClaimResult, Evidence, finish, paired_row

COMPARISON_KINDS = ("less_than", "greater_than", "fold_blocked_compare")
BEST_KINDS = ("best", "best_among")
MATCH_KINDS = ("within_paper_spread", "within_paper_repeat_spread")
KINDS = (*COMPARISON_KINDS, *BEST_KINDS, *MATCH_KINDS, "spearman")
MANY_RUNS_SE = 0.1  # "at many runs": our se a tenth of the paper's (100 times its runs)
NOT_SUPPORTED_AT_PAPER_N = (R.CONTRADICTED, R.SMALLER_THAN_PAPER, R.DOES_NOT_GENERALISE, R.NOT_RUN)


def has_paper_numbers(claim: dict) -> bool:
    check = claim.get("check") or {}
    return check.get("kind") in KINDS and bool(check.get("paper_table"))


def _tables(check: dict) -> list[str]:
    tables = check.get("paper_table") or []
    return [tables] if isinstance(tables, str) else list(tables)


def _paper_rows(reference: Reference, check: dict, registry: dict, family: str) -> list[tuple[str, str]]:
    """(paper dataset, setting) of the rows the claim names in the paper's tables: the check's ``datasets`` (our
    names) mapped to the paper's through the registry's ``paper_dataset``, its ``settings`` kept."""
    wanted = None
    if check.get("datasets"):
        wanted = {paper_dataset_for(registry.get(d) or {}, family) for d in check["datasets"]}
    settings = {str(s) for s in check["settings"]} if check.get("settings") else None
    rows: dict[tuple[str, str], None] = {}
    for table in _tables(check):
        for record in reference.tables[table]["records"]:
            key = (record["dataset"], str(record["setting"]))
            if (wanted is None or key[0] in wanted) and (settings is None or key[1] in settings):
                rows.setdefault(key, None)
    return list(rows)


def _ours(paper, many_runs: bool) -> tuple[float, float | None, float]:
    """Our (se, df, p) when our estimate is the paper's: the paper's se and df, or at many runs a tenth of its se
    with normal quantiles."""
    if many_runs:
        se, df = paper.se * MANY_RUNS_SE, None
    else:
        se, df = paper.se, paper.df
    return se, df, R.two_sided_pvalue(paper.mean, se, df)


def _ours_direction_only(paper, many_runs: bool) -> tuple[float, float | None, float]:
    """Our (se, df, p) for a row whose paper prints no ±: at many runs a tenth of the paper's own effect (z = 10),
    so that only its sign decides; at the paper's n ten times the effect (z = 0.1): with no spread printed, nothing
    is significant. Finite, so that the stability draws stay defined. A zero effect is a tie at any n (p = 1)."""
    if paper.mean == 0:
        return 1.0, None, 1.0
    se = abs(paper.mean) * (MANY_RUNS_SE if many_runs else 1 / MANY_RUNS_SE)
    return se, None, R.two_sided_pvalue(paper.mean, se, None)


def claim_on_paper_numbers(claim: dict, family: str, reference: Reference, registry: dict,
                           many_runs: bool = False) -> ClaimResult | None:
    """The claim decided on the paper's own numbers as ours (at the paper's n, or ``many_runs``); None for a
    claim without published numbers."""
    if not has_paper_numbers(claim):
        return None
    check = claim["check"]
    kind = check["kind"]
    relations = {name: DatasetRelation(name, name, "same") for name in reference.paper_datasets()}
    ctx = ClaimContext(family, pd.DataFrame(), pd.DataFrame(), reference, relations,
                       claim_runs_source="the paper's own table")
    tables = _tables(check)
    evidence: list[Evidence] = []
    skipped: list[str] = []
    rows = _paper_rows(reference, check, registry, family)
    if kind in COMPARISON_KINDS:
        metrics, pairs = _comparisons(check)
        accept = _accept(check)
        if kind == "fold_blocked_compare":
            direction = {"less": -1, "greater": 1}[check.get("direction", "less")]
        else:
            direction = 1 if kind == "greater_than" else -1
        for metric in metrics:
            for a, b in pairs:
                for dataset, setting in rows:
                    label = f"{dataset} / {setting}: {a} vs {b}, {metric}"
                    paper = reference.paper_difference(tables, dataset, setting, a, b, metric)
                    if paper is None:
                        continue
                    if _not_claimed_by_paper(ctx, check, dataset, setting, metric, a, b):
                        skipped.append(f"{label}: the paper does not mark this difference")
                        continue
                    se, df, p = (_ours(paper, many_runs) if paper.se is not None
                                  else _ours_direction_only(paper, many_runs))
                    comparator = paper.cells[1].mean
                    evidence.append(paired_row(claim, ctx, label, dataset, setting, None, "ttest", direction, accept,
                                               comparator, paper, "the paper's own numbers",
                                               numbers=(paper.mean, se, df, p, ""), n_runs=paper.n))
    elif kind in BEST_KINDS:
        method, lower = check["method"], check.get("lower_is_better", True)
        keep = list(check.get("methods") or [])
        for dataset, setting in rows:
            label = f"{dataset} / {setting}"
            present = [m for m in keep if reference.paper_number(tables, dataset, setting, m, check["metric"])]
            if method not in present or len(present) < 2:
                continue
            best = _paper_best_other(ctx, check, dataset, setting, check["metric"], method, present, lower)
            paper = None if best is None else reference.paper_difference(tables, dataset, setting, method, best,
                                                                         check["metric"])
            if paper is None:
                skipped.append(f"{label}: the paper has no best other method here")
                continue
            se, df, p = _ours(paper, many_runs) if paper.se is not None else _ours_direction_only(paper, many_runs)
            evidence.append(paired_row(claim, ctx, label, dataset, setting, None, "ttest", -1 if lower else 1,
                                       "not_worse", paper.cells[1].mean, paper, "the paper's own numbers",
                                       numbers=(paper.mean, se, df, p, ""), n_runs=paper.n))
    elif kind in MATCH_KINDS:
        lower = check.get("lower_is_better", True)
        for dataset, setting in rows:
            for method in check.get("methods") or []:
                for table in tables:
                    paper = reference.paper_number(table, dataset, setting, method, check["metric"])
                    if paper is None or paper.se is None:
                        continue
                    se, df, p = _ours(paper, many_runs)
                    p = R.two_sided_pvalue(0.0, math.hypot(se, paper.se), None)
                    test = R.RowTest("match", paper.mean, se, df, p, -1 if lower else 1, paper_estimate=paper.mean,
                                     paper_se=paper.se, paper_df=paper.df)
                    evidence.append(Evidence(f"{dataset} / {setting} / {method}", "the paper's own mean", dataset,
                                             setting, test, "prediction interval", paper.n, paper.n))
    else:  # spearman: the paper's rho (no printed spread: direction only), tested as ours on Fisher's z
        k = len(check.get("methods") or [])
        for dataset, setting in rows:
            record = reference.value(tables[0], dataset, setting, "rio_variants",
                                     check.get("paper_metric", "spearman_rmse_noise"))
            if record is None or k < 4:
                continue
            z = math.atanh(float(np.clip(record["mean"], -0.9999, 0.9999)))
            se_z = math.sqrt(1.06 / (k - 3)) * (MANY_RUNS_SE if many_runs else 1.0)
            test = R.RowTest("superiority", z, se_z, None, R.two_sided_pvalue(z, se_z, None), 1, paper_estimate=z)
            evidence.append(Evidence(f"{dataset} / {setting}", "the paper's own rho", dataset, setting, test,
                                     "Spearman (Fisher z)", k, None))
    return finish(claim, ctx, evidence, "no row of the paper's table", float(check.get("alpha", R.ALPHA)), skipped)


def supported(claim: dict, at_paper_n: ClaimResult, at_many_runs: ClaimResult) -> tuple[bool, str]:
    """Whether the paper's own numbers support the claim (the module's definition), and why not."""
    kind = claim["check"]["kind"]
    if at_paper_n.verdict in NOT_SUPPORTED_AT_PAPER_N:
        return False, f"at the paper's n: {at_paper_n.verdict} ({at_paper_n.summary})"
    wanted = (R.CONSISTENT,) if kind in MATCH_KINDS else (R.REPRODUCED, R.REPRODUCED_SMALLER, R.GENERALISES)
    if at_many_runs.verdict not in wanted:
        return False, f"at many runs: {at_many_runs.verdict} ({at_many_runs.summary})"
    return True, ""

"""Claims on our value against the paper's, on the paper's own data: ``within_paper_spread`` (our mean and its
standard error over the runs) and ``within_paper_repeat_spread`` (K-fold protocols whose folds repeat: the spread of
the per-repeat means), judged by the replication prediction interval alone (consistent inside it, contradicted
outside, saying on which side)."""

from __future__ import annotations

import math

import numpy as np

from uqcal.metrics import replication as R
from uqcal.pipeline.report.tables import fmt
from uqcal.pipeline.report.verdicts import ClaimContext, ClaimResult, Evidence, _per_seed, declared_seeds, finish


def _match_rows(claim: dict, ctx: ClaimContext, our_numbers, note: str = "") -> ClaimResult:
    """Our mean against the paper's on the paper's own data, by the prediction interval (``match`` rows).
    ``our_numbers(dataset, setting, method, values)`` gives (mean, se, df, runs, text)."""
    check = claim["check"]
    metric, methods = check["metric"], check.get("methods")
    tables = check["paper_table"]
    tables = [tables] if isinstance(tables, str) else list(tables)
    lower = check.get("lower_is_better", True)
    declared = ctx.declared_runs(claim["id"])
    per_seed = _per_seed(ctx, check, metric)
    evidence, skipped = [], []
    for (dataset, setting, method), values in per_seed.items():
        relation = ctx.paper_relation(dataset)
        if (methods and method not in methods) or relation is None:
            continue
        for table in tables:
            paper = ctx.reference.paper_number(table, relation.paper, str(setting), method, metric)
            if paper is None:
                continue
            label = f"{dataset} / {setting} / {method}" + (f" ({ctx.reference.tables[table]['table']})"
                                                          if len(tables) > 1 else "")
            if paper.se is None:
                skipped.append(f"{label}: the paper prints no ± for this cell")
                continue
            seeds, why = declared_seeds([values], declared)
            if seeds is None:
                skipped.append(f"{label}: {why}")
                continue
            try:
                mean, se, df, runs, text = our_numbers(dataset, setting, method, {s: values[s] for s in seeds})
            except ValueError as err:  # e.g. fewer than 2 complete repeats of the folds: the row cannot be tested
                skipped.append(f"{label}: {err}")
                continue
            p = R.two_sided_pvalue(mean - paper.mean, math.hypot(se, paper.se), None)
            row_test = R.RowTest("match", mean, se, df, p, -1 if lower else 1, paper_estimate=paper.mean,
                                 paper_se=paper.se, paper_df=paper.df)
            outcome = R.row_verdict(row_test)
            better = (mean < paper.mean) == lower
            where = ("inside the interval" if outcome["side"] == "inside"
                     else f"outside the interval, {'better' if better else 'worse'} than the paper's")
            detail = (f"ours {text} vs {ctx.reference.tables[table]['table']} {fmt(paper.mean)} ± "
                      f"{fmt(paper.std)} ({ctx.reference.tables[table]['uncertainty']['kind']} over {paper.n} runs: "
                      f"se {fmt(paper.se)}); {where}{note}")
            evidence.append(Evidence(label, detail, dataset, str(setting), row_test, "prediction interval", runs,
                                     runs))
    what = f"no run of {methods or 'any method'} on a paper dataset with a published spread for {metric}"
    return finish(claim, ctx, evidence, what, float(check.get("alpha", R.ALPHA)), skipped)


def check_within_paper_spread(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Our mean against the paper's (its ± read as its table's uncertainty block says): consistent inside the
    replication prediction interval, contradicted outside it."""

    def ours(dataset, setting, method, values):
        v = np.array(list(values.values()), float)
        se = float(v.std(ddof=1) / math.sqrt(v.size))
        return float(v.mean()), se, v.size - 1, v.size, f"{fmt(v.mean())} ± {fmt(se)} (se, {v.size} runs)"

    return _match_rows(claim, ctx, ours)


def check_within_paper_repeat_spread(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """As ``within_paper_spread`` for K-fold protocols whose folds are the same in every repeat (QR): our se is the
    std of the per-repeat means over the repeats (seed k = fold k % folds of repeat k // folds), as the paper's ±."""
    folds = int(claim["check"].get("folds", 5))

    def ours(dataset, setting, method, values):
        repeats: dict[int, list[float]] = {}
        for seed, value in values.items():
            repeats.setdefault(int(seed) // folds, []).append(float(value))
        means = np.array([np.mean(v) for v in repeats.values() if len(v) == folds])
        if means.size < 2:
            raise ValueError(f"{means.size} complete repeats of the {folds} folds (the test needs 2)")
        se = float(means.std(ddof=1) / math.sqrt(means.size))
        return (float(means.mean()), se, means.size - 1, int(means.size * folds),
                f"{fmt(means.mean())} ± {fmt(se)} (se over {means.size} repeats of the {folds}-fold mean)")

    return _match_rows(claim, ctx, ours)

"""Headline claims as checkable statements, decided on our results as replication science (docs/verdicts.md).

A claim's ``check`` is a small declarative expression (see ``KINDS``). Every kind turns each (dataset, setting)
row into one test with numbers (``verdicts.Evidence``): our estimate, its standard error, df, runs and p-value,
and on the paper's own data the paper's estimate and standard error (the family's ``paper_numbers.yaml``: the
table's ``uncertainty`` block says what its ± is). ``verdicts.finish`` then decides each row and the claim.

Runs are fixed in advance: every row of a claim uses the first n seeds that all its methods ran, n declared in the
run config (``report.claim_runs``); a row with fewer runs is not tested and is listed as such.

Hypotheses:
- ``less_than`` / ``greater_than`` / ``fold_blocked_compare`` / ``censored_steps`` / ``episode_paired`` (require
  better): superiority of a over b, paired over runs (``test: ttest | wilcoxon``; fold-blocked t for fixed folds);
- ``accept: not_worse`` (``require: not_worse``), ``best`` / ``best_among``: non-inferiority at the margin the
  reference declares for the claim (``margins.<claim id>``, with its reason); "best or tied with the best" is
  non-inferiority to the best of the other methods, on the seeds all of them ran;
- ``within_paper_spread`` / ``within_paper_repeat_spread``: our mean against the paper's, judged by the prediction
  interval alone (consistent inside it, contradicted outside, saying on which side);
- ``monotone`` (Welch t per step), ``spearman`` (Fisher z), ``effect_contrast`` (Welch), ``stats_curve_greater``
  (paired over curves).

``paper_rows: bold`` keeps, on the paper's data, only the rows the paper marks as a difference by its own rule
(QR: the two mean ± std intervals do not overlap); the others are listed as not claimed by the paper.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from uqcal.metrics import replication as R
from uqcal.metrics.stats import fold_blocked_test, logrank_pvalue, paired_pvalue, runs_for_power
from uqcal.pipeline.report.episode_claims import check_episode_paired
from uqcal.pipeline.report.tables import fmt
from uqcal.pipeline.report.verdicts import (
    NOT_RUN,
    VERDICTS,
    ClaimContext,
    ClaimResult,
    Evidence,
    _filter,
    _means,
    _per_seed,
    declared_seeds,
    finish,
    margin_for,
)

__all__ = ["KINDS", "NOT_RUN", "VERDICTS", "ClaimContext", "ClaimResult", "evaluate_claim", "evaluate_claims"]
_TEST_NAMES = {"ttest": "paired t", "wilcoxon": "Wilcoxon signed-rank"}


def _comparisons(check: dict) -> tuple[list[str], list[tuple[str, str]]]:
    """The metrics (``metric``/``metrics``) and method pairs (``a``, ``b``/``pairs``) of a comparison claim: a
    sentence such as "better in both point-prediction error and uncertainty estimation" names several pairs and
    metrics, and each (row, pair, metric) is one test that the scope counts."""
    metrics = check.get("metrics") or [check["metric"]]
    pairs = check.get("pairs") or [[check["a"], check["b"]]]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"pairs: expected [a, b] pairs, got {pairs!r}")
    return list(metrics), [(a, b) for a, b in pairs]


def _accept(check: dict) -> str:
    accept = check.get("accept", "better")
    if accept not in ("better", "not_worse", "equivalent"):
        raise ValueError(f"accept: expected 'better', 'not_worse' or 'equivalent', got {accept!r}")
    return accept


def paired_numbers(d: np.ndarray, test: str) -> tuple[float, float, float, float, str]:
    """(estimate, se, df, two-sided p, note) of paired differences ``d``: t (or Wilcoxon) p; a difference without
    spread is reported as identical or constant, with the sign test's p."""
    n = d.size
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0 or np.allclose(d, d[0], rtol=1e-12, atol=0.0):
        note = "identical in every run" if d[0] == 0 else "the same difference in every run (sign test)"
        return mean, 0.0, n - 1, R.sign_test_pvalues(d)[0], note
    se = sd / math.sqrt(n)
    # the t-test's p from the row's own numbers (stats.paired_pvalue calls differences below 1e-8 in absolute value
    # identical, p = 1, whatever the metric's scale)
    p = R.two_sided_pvalue(mean, se, n - 1) if test == "ttest" else paired_pvalue(d, np.zeros_like(d), test)
    return mean, se, n - 1, p, ""


def _paper_test(ctx: ClaimContext, check: dict, dataset: str, setting, metric: str, a: str, b: str):
    """The paper's a - b on this row (its own data only) from the claim's ``paper_table``."""
    tables = check.get("paper_table") or []
    tables = [tables] if isinstance(tables, str) else list(tables)
    unknown = [t for t in tables if t not in ctx.reference.tables]
    if unknown:
        raise ValueError(f"paper_table: {unknown[0]!r} is not a table of the reference (it has "
                         f"{sorted(ctx.reference.tables)})")
    relation = ctx.paper_relation(dataset)
    if not tables or relation is None:
        return None
    return ctx.reference.paper_difference(tables, relation.paper, str(setting), a, b, metric)


def _not_claimed_by_paper(ctx: ClaimContext, check: dict, dataset: str, setting, metric: str, a: str,
                          b: str) -> bool:
    """``paper_rows: bold``: a row of the paper's data that the paper does not mark as a difference."""
    if check.get("paper_rows") != "bold":
        return False
    relation = ctx.paper_relation(dataset)
    if relation is None:
        return False
    tables = check.get("paper_table") or []
    marked = ctx.reference.bold_rule_holds(tables, relation.paper, str(setting), a, b, metric)
    return marked is False


def _row(claim, ctx, label, dataset, setting, d, test, direction, accept, comparator_mean, paper, test_name,
         blocks: int = 1, numbers=None, n_runs=None, describe="") -> Evidence:
    """One comparison row from its paired differences ``d`` (or ready ``numbers``: estimate, se, df, p, note). A
    run without a finite value (a failed fit's NaN or inf) leaves the row untested: its numbers would be NaN, which
    no test can read."""
    if d is not None and not np.all(np.isfinite(d)):
        bad = int((~np.isfinite(np.asarray(d, float))).sum())
        return Evidence(label, f"{bad} of {len(d)} paired runs have no finite value, so the row is not tested",
                        dataset, str(setting))
    estimate, se, df, p, note = numbers if numbers is not None else paired_numbers(d, test)
    margin, margin_text, p_against = None, "", None
    hypothesis = "superiority"
    if accept == "not_worse":
        hypothesis = "noninferiority"
        margin, margin_text = margin_for(claim, ctx, comparator_mean)
        p, p_against = R.noninferiority_pvalues(direction * estimate, se, df, margin)
    elif accept == "equivalent":
        hypothesis = "equivalence"
        margin, margin_text = margin_for(claim, ctx, comparator_mean)
        p, p_against = R.equivalence_pvalues(estimate, se, df, margin)
    if hypothesis != "superiority" and not se > 0 and d is not None and len(d):
        # No spread: the t-based tests would give p = 0 at any n; the exact one-sided sign tests of the
        # differences shifted by the margin give 1 / 2^n where every run is inside it.
        if hypothesis == "noninferiority":
            p, p_against = R.sign_test_pvalues(direction * np.asarray(d, float) + margin)[1:]
        else:
            (p_low, beyond_low), (p_high, beyond_high) = (R.sign_test_pvalues(np.asarray(d, float) + margin)[1:],
                                                          R.sign_test_pvalues(margin - np.asarray(d, float))[1:])
            p, p_against = max(p_low, p_high), min(beyond_low, beyond_high)
        note = note or "no spread (sign test)"
    paper_est = None if paper is None else paper.mean
    paper_se = None if paper is None else paper.se
    row_test = R.RowTest(hypothesis, estimate, se, df, p, direction, margin, p_against, paper_est, paper_se,
                         None if paper is None else paper.df)
    sd = se * math.sqrt(len(d)) if d is not None else None
    n80 = None  # runs for 80 % power at the paper's effect: a superiority row's question only
    if paper_est is not None and hypothesis == "superiority":
        n80 = runs_for_power(paper_est, sd, test=test, blocks=blocks)
    parts = [describe, f"diff {fmt(estimate)} ± {fmt(se)} (se), {test_name} p = {fmt(p)}"
             + (f" ({margin_text}: {hypothesis})" if margin_text else "") + (f"; {note}" if note else "")]
    if paper is not None:
        parts.append(f"paper {fmt(paper.mean)}" + (f" ± {fmt(paper.se)} (se: {paper.se_basis})" if paper.se is not None
                                                   else " (no ± printed)"))
    runs = n_runs if n_runs is not None else (None if d is None else len(d))
    return Evidence(label, "; ".join(p for p in parts if p), dataset, str(setting), row_test, test_name,
                    None if d is None else len(d), runs, n80)


def _paired_runs(ctx: ClaimContext, check: dict, per_seed: dict, label: str, dataset: str, setting, metric: str,
                 a: str, b: str, declared: int | None, skipped: list[str]):
    """a's and b's values on the row's declared seeds, (va, vb, seeds); None where the row is not run, where the
    paper does not claim it (``paper_rows``) or where it lacks the declared runs (both listed in ``skipped``)."""
    runs_a, runs_b = per_seed.get((dataset, str(setting), a), {}), per_seed.get((dataset, str(setting), b), {})
    if not runs_a or not runs_b:
        return None
    if _not_claimed_by_paper(ctx, check, dataset, setting, metric, a, b):
        skipped.append(f"{label}: the paper does not mark this difference (its 1-std intervals overlap)")
        return None
    seeds, why = declared_seeds([runs_a, runs_b], declared)
    if seeds is None:
        skipped.append(f"{label}: {why}")
        return None
    return np.array([runs_a[s] for s in seeds]), np.array([runs_b[s] for s in seeds]), seeds


def _compare(claim: dict, ctx: ClaimContext, greater: bool) -> ClaimResult:
    check = claim["check"]
    test, alpha = check.get("test", "ttest"), float(check.get("alpha", R.ALPHA))
    if test not in _TEST_NAMES:
        raise ValueError(f"test: expected one of {sorted(_TEST_NAMES)}, got {test!r}")
    accept, direction = _accept(check), 1 if greater else -1
    declared = ctx.declared_runs(claim["id"])
    metrics, pairs = _comparisons(check)
    named = len(metrics) * len(pairs) > 1
    evidence, skipped = [], []
    for metric in metrics:
        wide = _means(ctx, check, metric)
        per_seed = _per_seed(ctx, check, metric)
        for a, b in pairs:
            for dataset, setting in wide.index:
                label = f"{dataset} / {setting}" + (f": {a} vs {b}, {metric}" if named else "")
                paired = _paired_runs(ctx, check, per_seed, label, dataset, setting, metric, a, b, declared, skipped)
                if paired is None:
                    continue
                va, vb, seeds = paired
                paper = _paper_test(ctx, check, dataset, setting, metric, a, b)
                describe = f"{metric}({a}) {fmt(va.mean())} vs {metric}({b}) {fmt(vb.mean())}, n = {len(seeds)}"
                evidence.append(_row(claim, ctx, label, dataset, setting, va - vb, test, direction, accept,
                                     float(vb.mean()), paper, _TEST_NAMES[test], describe=describe))
    what = " or ".join(f"{a} and {b} for {metric}" for metric in metrics for a, b in pairs)
    return finish(claim, ctx, evidence, f"no row has both {what}", alpha, skipped)


def check_less_than(claim: dict, ctx: ClaimContext) -> ClaimResult:
    return _compare(claim, ctx, greater=False)


def check_greater_than(claim: dict, ctx: ClaimContext) -> ClaimResult:
    return _compare(claim, ctx, greater=True)


def check_fold_blocked_compare(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """``less_than`` / ``greater_than`` (``direction: less | greater``) for K-fold protocols whose folds are the
    same in every repeat (QR's cv5): the paired differences are tested by ``fold_blocked_test`` (fold = block,
    df = n - folds)."""
    check = claim["check"]
    metric, a, b = check["metric"], check["a"], check["b"]
    direction = {"less": -1, "greater": 1}[check.get("direction", "less")]
    alpha, folds, accept = float(check.get("alpha", R.ALPHA)), int(check.get("folds", 5)), _accept(check)
    declared = ctx.declared_runs(claim["id"])
    wide, per_seed = _means(ctx, check, metric), _per_seed(ctx, check, metric)
    evidence, skipped = [], []
    for dataset, setting in wide.index:
        label = f"{dataset} / {setting}"
        paired = _paired_runs(ctx, check, per_seed, label, dataset, setting, metric, a, b, declared, skipped)
        if paired is None:
            continue
        va, vb, seeds = paired
        if len(seeds) <= folds:
            skipped.append(f"{label}: {len(seeds)} runs over {folds} folds (the test needs repeats)")
            continue
        d = va - vb
        res = fold_blocked_test(dict(zip(seeds, d, strict=True)), folds, alpha)
        p = res["p_two"] if res["se"] > 0 else R.sign_test_pvalues(d)[0]
        note = "" if res["se"] > 0 else "no spread within folds (sign test)"
        paper = _paper_test(ctx, check, dataset, setting, metric, a, b)
        describe = f"{metric}({a}) {fmt(va.mean())} vs {metric}({b}) {fmt(vb.mean())}, n = {len(seeds)}"
        evidence.append(_row(claim, ctx, label, dataset, setting, d, "ttest", direction, accept, float(vb.mean()),
                             paper, f"fold-blocked paired t (df {res['df']})", blocks=folds,
                             numbers=(res["mean"], res["se"], res["df"], p, note), describe=describe))
    return finish(claim, ctx, evidence, f"no row has both {a} and {b} for {metric} with repeated folds", alpha,
                  skipped)


def check_best(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """"Best or tied with the best": the method is non-inferior, at the reference's margin, to the best of the
    other methods (by mean over the seeds every method of the row ran)."""
    check = claim["check"]
    metric, method = check["metric"], check["method"]
    lower = check.get("lower_is_better", True)
    test, alpha = check.get("test", "ttest"), float(check.get("alpha", R.ALPHA))
    keep = set(check.get("methods") or [])
    declared = ctx.declared_runs(claim["id"])
    per_seed = _per_seed(ctx, check, metric)
    rows = list(dict.fromkeys((d, s) for d, s, _ in per_seed))
    evidence, skipped = [], []
    for dataset, setting in rows:
        runs = {m: v for (d, s, m), v in per_seed.items() if (d, s) == (dataset, setting) and (not keep or m in keep)}
        if method not in runs or len(runs) < 2:
            continue
        label = f"{dataset} / {setting}"
        seeds, why = declared_seeds(list(runs.values()), declared)
        if seeds is None:
            skipped.append(f"{label}: {why} (every method of the row)")
            continue
        values = {m: np.array([v[s] for s in seeds]) for m, v in runs.items()}
        others = {m: float(v.mean()) for m, v in values.items() if m != method}
        best = min(others, key=others.get) if lower else max(others, key=others.get)
        direction = -1 if lower else 1
        paper = None
        relation = ctx.paper_relation(dataset)
        if relation is not None and check.get("paper_table"):
            paper_best = _paper_best_other(ctx, check, relation.paper, setting, metric, method, list(runs), lower)
            paper = None if paper_best is None else _paper_test(ctx, check, dataset, setting, metric, method,
                                                                paper_best)
        describe = (f"{method} {fmt(values[method].mean())} vs the best other, {best} {fmt(others[best])} "
                    f"({len(values)} methods on the same {len(seeds)} runs)")
        evidence.append(_row(claim, ctx, label, dataset, setting, values[method] - values[best], test, direction,
                             "not_worse", others[best], paper, _TEST_NAMES[test], describe=describe))
    return finish(claim, ctx, evidence, f"{method} has no {metric} results beside another method", alpha, skipped)


def _paper_best_other(ctx, check, paper_dataset, setting, metric, method, methods, lower) -> str | None:
    tables = check["paper_table"]
    numbers = {m: ctx.reference.paper_number(tables, paper_dataset, str(setting), m, metric) for m in methods
               if m != method}
    numbers = {m: n.mean for m, n in numbers.items() if n is not None}
    if not numbers:
        return None
    return min(numbers, key=numbers.get) if lower else max(numbers, key=numbers.get)


def check_best_among(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """``best`` among the listed ``methods`` only (RIO ranks its own methods: our NN NLPD, the marginal reference
    and our extra variants decide nothing)."""
    return check_best(claim, ctx)


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


def check_monotone(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """The method's metric moves one way along an ordered list of settings: per dataset and step, Welch's t-test of
    the later setting against the earlier one (different task sizes: no pairing)."""
    check = claim["check"]
    metric, method, order = check["metric"], check["method"], [str(s) for s in check["settings"]]
    direction = -1 if check.get("direction", "decreasing") == "decreasing" else 1
    declared = ctx.declared_runs(claim["id"])
    per_seed = _per_seed(ctx, {k: v for k, v in check.items() if k != "settings"}, metric)
    evidence, skipped = [], []
    for dataset in dict.fromkeys(d for d, _, m in per_seed if m == method):
        present = [s for s in order if (dataset, s, method) in per_seed]
        for before, after in zip(present, present[1:], strict=False):
            label = f"{dataset}: {before} → {after}"
            chosen = [declared_seeds([per_seed[(dataset, s, method)]], declared) for s in (before, after)]
            if any(seeds is None for seeds, _ in chosen):
                skipped.append(f"{label}: {next(why for seeds, why in chosen if seeds is None)}")
                continue
            x = np.array([per_seed[(dataset, after, method)][s] for s in chosen[1][0]])
            y = np.array([per_seed[(dataset, before, method)][s] for s in chosen[0][0]])
            vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
            se = math.sqrt(vx + vy)
            df = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1)) if se > 0 else x.size + y.size - 2
            p = float(stats.ttest_ind(x, y, equal_var=False).pvalue) if se > 0 else R.sign_test_pvalues(x - y)[0]
            row_test = R.RowTest("superiority", float(x.mean() - y.mean()), se, df, p, direction)
            detail = (f"{metric}({method}) {fmt(y.mean())} at {before} → {fmt(x.mean())} at {after}; diff "
                      f"{fmt(x.mean() - y.mean())} ± {fmt(se)} (se), Welch t p = {fmt(p)}")
            evidence.append(Evidence(label, detail, dataset, after, row_test, "Welch t", x.size + y.size, x.size))
    return finish(claim, ctx, evidence, f"{method} has < 2 of the settings {order}",
                  float(check.get("alpha", R.ALPHA)), skipped)


def check_spearman(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Spearman rank correlation across methods between two metrics' means, per row (RIO Table 2): tested on
    Fisher's z = atanh(rho) with se sqrt(1.06 / (k - 3)) (Fieller, Hartley & Pearson 1957), k methods; on the
    paper's data beside the paper's rho (Table 2), whose k is the same six variants."""
    check = claim["check"]
    x_metric, y_metric = check["x"], check["y"]
    declared = ctx.declared_runs(claim["id"])
    px, py = _per_seed(ctx, check, x_metric), _per_seed(ctx, check, y_metric)
    rows = list(dict.fromkeys((d, s) for d, s, _ in px))
    evidence, skipped = [], []
    for dataset, setting in rows:
        methods = [m for m in (check.get("methods") or []) if (dataset, setting, m) in px and (dataset, setting, m) in py]
        if len(methods) < 4:
            continue
        label = f"{dataset} / {setting}"
        seeds, why = declared_seeds([px[(dataset, setting, m)] for m in methods]
                                    + [py[(dataset, setting, m)] for m in methods], declared)
        if seeds is None:
            skipped.append(f"{label}: {why}")
            continue
        xs = [np.mean([px[(dataset, setting, m)][s] for s in seeds]) for m in methods]
        ys = [np.mean([py[(dataset, setting, m)][s] for s in seeds]) for m in methods]
        rho = stats.spearmanr(xs, ys).statistic
        if not np.isfinite(rho):
            skipped.append(f"{label}: no rank correlation (a metric is constant across the methods)")
            continue
        rho = float(np.clip(rho, -0.9999, 0.9999))
        se_z = math.sqrt(1.06 / (len(methods) - 3))
        p = R.two_sided_pvalue(math.atanh(rho), se_z, None)  # the test the interval and d33 use: Fisher's z
        paper = None
        relation = ctx.paper_relation(dataset)
        if relation is not None and check.get("paper_table"):
            record = ctx.reference.value(check["paper_table"], relation.paper, str(setting), "rio_variants",
                                         check.get("paper_metric", "spearman_rmse_noise"))
            if record is not None:
                paper = float(np.clip(record["mean"], -0.9999, 0.9999))
        row_test = R.RowTest("superiority", math.atanh(rho), se_z, None, float(p), 1,
                             paper_estimate=None if paper is None else math.atanh(paper),
                             paper_se=None if paper is None else se_z)
        detail = (f"rho = {fmt(rho)} (Fisher z {fmt(math.atanh(rho))} ± {fmt(se_z)}), p = {fmt(float(p))} over "
                  f"{len(methods)} methods, each a mean over {len(seeds)} runs"
                  + (f"; paper rho {fmt(paper)}" if paper is not None else ""))
        evidence.append(Evidence(label, detail, dataset, str(setting), row_test, "Spearman (Fisher z)", len(methods),
                                 len(seeds)))
    return finish(claim, ctx, evidence, f"fewer than 4 methods with both {x_metric} and {y_metric}",
                  float(check.get("alpha", R.ALPHA)), skipped)


def check_stats_curve_greater(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Curves logged in train_stats.json (``key``: {name: [[...], ...]}): curve a ends higher than curve b after the
    same number of steps, paired t over the curves (each inner loop is run by both). A b curve that ends early (an
    inner loop that broke down) has no value there: it is left out of the pairs and counted in the evidence."""
    from uqcal.pipeline.report.figures import load_stats_curves

    check = claim["check"]
    a, b, key, method = check["a"], check["b"], check["key"], check.get("method", check["a"])
    keys = _filter(ctx.summary, check)[["dataset", "setting"]].drop_duplicates()
    evidence, skipped = [], []
    for dataset, setting in keys.itertuples(index=False):
        if ctx.results_dir is None:
            break
        curves = load_stats_curves(ctx.results_dir, ctx.family, dataset, str(setting), method, key, truncate=False)
        if not curves.get(a) or not curves.get(b) or len(curves[a]) != len(curves[b]):
            continue
        label = f"{dataset} / {setting}"
        steps = min(len(c) for c in curves[a])
        end_a = np.array([c[steps - 1] for c in curves[a]], float)
        end_b = np.array([c[steps - 1] if len(c) >= steps else np.nan for c in curves[b]], float)
        ran = np.isfinite(end_a) & np.isfinite(end_b)
        broke = int((~np.isfinite(end_b)).sum())
        if ran.sum() < 2:
            skipped.append(f"{label}: {int(ran.sum())} pairs of curves (the test needs 2)"
                           + (f"; {b} broke down before step {steps - 1} in {broke} of {len(end_b)}" if broke else ""))
            continue
        d = end_a[ran] - end_b[ran]
        note = f"; {b} broke down before the end in {broke} of {len(end_b)} curves (left out)" if broke else ""
        describe = f"after {steps - 1} steps: {a} {fmt(end_a[ran].mean())} vs {b} {fmt(end_b[ran].mean())}{note}"
        evidence.append(_row(claim, ctx, label, dataset, setting, d, "ttest", 1, "better", 0.0, None,
                             f"paired t over {int(ran.sum())} curves", describe=describe))
    return finish(claim, ctx, evidence, f"no train_stats.json of {method} with '{key}' curves {a}, {b}",
                  float(check.get("alpha", R.ALPHA)), skipped)


def check_effect_contrast(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Per dataset: the paired effect of ``a`` against ``b`` (b - a, or a - b with ``greater: true``) is larger
    under ``settings[0]`` than under ``settings[1]``: Welch's t on the two effects. A setting in ``fixed_folds``
    takes its se and df from ``fold_blocked_test`` (``folds``)."""
    check = claim["check"]
    metric, a, b = check["metric"], check["a"], check["b"]
    first, second = (str(s) for s in check["settings"])
    sign = 1.0 if check.get("greater", False) else -1.0
    fixed, folds = {str(s) for s in check.get("fixed_folds") or []}, int(check.get("folds", 5))
    declared = ctx.declared_runs(claim["id"])
    per_seed = _per_seed(ctx, {**check, "settings": [first, second]}, metric)
    evidence, skipped = [], []
    for dataset in dict.fromkeys(d for d, _, _ in per_seed):
        moments, texts, runs = [], [], []
        for setting in (first, second):
            runs_a, runs_b = per_seed.get((dataset, setting, a), {}), per_seed.get((dataset, setting, b), {})
            seeds, why = declared_seeds([runs_a, runs_b], declared) if runs_a and runs_b else (None, "not run")
            if seeds is not None and setting in fixed and len(seeds) <= folds:
                seeds, why = None, f"{len(seeds)} runs over {folds} folds (the fold-blocked test needs repeats)"
            if seeds is None:
                skipped.append(f"{dataset} / {setting}: {why}")
                break
            va, vb = np.array([runs_a[s] for s in seeds]), np.array([runs_b[s] for s in seeds])
            effect = sign * (va - vb)
            if setting in fixed:
                res = fold_blocked_test(dict(zip(seeds, effect, strict=True)), folds)
                moments.append((res["mean"], res["se"] ** 2, res["df"]))
            else:
                moments.append((float(effect.mean()), float(effect.var(ddof=1)) / effect.size, effect.size - 1))
            runs.append(len(seeds))
            change = va.mean() - vb.mean()
            relative = f", {change / abs(vb.mean()):+.0%}" if vb.mean() != 0 else ""
            texts.append(f"{setting}: {metric} {fmt(vb.mean())} ({b}) → {fmt(va.mean())} ({a}) [{change:+.3g}{relative}]")
        if len(moments) < 2:
            continue
        (m1, v1, df1), (m2, v2, df2) = moments
        se = math.sqrt(v1 + v2)
        df = (v1 + v2) ** 2 / (v1**2 / df1 + v2**2 / df2) if se > 0 else df1 + df2
        p = R.two_sided_pvalue(m1 - m2, se, df)
        row_test = R.RowTest("superiority", m1 - m2, se, df, p, 1)
        detail = "; ".join(texts) + f"; effect larger on {first} by {fmt(m1 - m2)} ± {fmt(se)} (se), Welch p = {fmt(p)}"
        evidence.append(Evidence(dataset, detail, dataset, first, row_test, "Welch t on the two effects", sum(runs),
                                 min(runs)))
    return finish(claim, ctx, evidence, f"no dataset has {a} and {b} under both {first} and {second}",
                  float(check.get("alpha", R.ALPHA)), skipped)


def check_censored_steps(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """BO "fewer steps": per-run steps to a target, censored at the budget (a run that never reaches it counts
    budget + 1, the restricted mean time with tau = T + 1), method a against b paired by seed (``test``: wilcoxon
    | ttest). The detail gives the relative reduction, the counts that reached the target and the log-rank test
    (unpaired) as a check that ignores the pairing."""
    check = claim["check"]
    a, b = check["a"], check["b"]
    steps_metric, reached_metric = check.get("steps", "steps_to_target"), check.get("reached", "reached_target")
    test, alpha = check.get("test", "wilcoxon"), float(check.get("alpha", R.ALPHA))
    declared = ctx.declared_runs(claim["id"])
    steps, reached = _per_seed(ctx, check, steps_metric), _per_seed(ctx, check, reached_metric)
    evidence, skipped = [], []
    for dataset, setting in sorted({(d, s) for d, s, _ in steps}):
        runs_a, runs_b = steps.get((dataset, setting, a), {}), steps.get((dataset, setting, b), {})
        if not runs_a or not runs_b:
            continue
        label = f"{dataset} / {setting}"
        seeds, why = declared_seeds([runs_a, runs_b], declared)
        if seeds is None:
            skipped.append(f"{label}: {why}")
            continue
        xa, xb = np.array([runs_a[s] for s in seeds], float), np.array([runs_b[s] for s in seeds], float)
        ra = np.array([reached.get((dataset, setting, a), {}).get(s, np.nan) for s in seeds], float)
        rb = np.array([reached.get((dataset, setting, b), {}).get(s, np.nan) for s in seeds], float)
        reduction = (xb.mean() - xa.mean()) / xb.mean() if xb.mean() > 0 else float("nan")
        describe = (f"restricted mean steps {a} {fmt(xa.mean())} vs {b} {fmt(xb.mean())} ({100 * reduction:.0f} % "
                    f"fewer); reached the target {int(np.nansum(ra))}/{len(seeds)} vs {int(np.nansum(rb))}/"
                    f"{len(seeds)}; log-rank (unpaired) p = {fmt(logrank_pvalue(xa, ra, xb, rb))}")
        evidence.append(_row(claim, ctx, label, dataset, setting, xa - xb, test, -1, "better", float(xb.mean()), None,
                             _TEST_NAMES[test], describe=describe))
    return finish(claim, ctx, evidence, f"no paired per-run {steps_metric} for both {a} and {b}", alpha, skipped)


KINDS = {
    "best_among": check_best_among,
    "stats_curve_greater": check_stats_curve_greater,
    "episode_paired": check_episode_paired,
    "less_than": check_less_than,
    "greater_than": check_greater_than,
    "best": check_best,
    "within_paper_spread": check_within_paper_spread,
    "monotone": check_monotone,
    "spearman": check_spearman,
    "within_paper_repeat_spread": check_within_paper_repeat_spread,
    "effect_contrast": check_effect_contrast,
    "fold_blocked_compare": check_fold_blocked_compare,
    "censored_steps": check_censored_steps,
}


def evaluate_claim(claim: dict, ctx: ClaimContext) -> ClaimResult:
    for key in ("id", "text", "check"):
        if key not in claim:
            raise ValueError(f"claim {claim.get('id', '?')!r} in spec '{ctx.family}' lacks '{key}'")
    kind = claim["check"].get("kind")
    if kind not in KINDS:
        raise ValueError(f"claims.{claim['id']}.check.kind: unknown kind {kind!r}; known: {sorted(KINDS)}")
    try:
        return KINDS[kind](claim, ctx)
    except KeyError as err:
        raise ValueError(f"claims.{claim['id']}.check: missing key {err}") from err
    except ValueError as err:
        raise ValueError(f"claims.{claim['id']}.check: {err}") from err


def evaluate_claims(claims: list[dict], ctx: ClaimContext) -> list[ClaimResult]:
    return [evaluate_claim(claim, ctx) for claim in claims]


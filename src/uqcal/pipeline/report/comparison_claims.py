"""Claims that compare methods on paired runs: superiority of a over b (``less_than`` / ``greater_than``, over several
pairs and metrics; ``fold_blocked_compare`` for K-fold protocols whose folds repeat; ``censored_steps`` for BO's steps
to a target), non-inferiority at the reference's margin (``accept: not_worse``, ``best`` / ``best_among``: best or
tied with the best), and the contrast of one paired effect between two settings (``effect_contrast``).

Each row's test is ``verdicts.paired_row``; ``claims`` lists every kind.
"""

from __future__ import annotations

import math

import numpy as np

from uqcal.metrics import replication as R
from uqcal.metrics.stats import fold_blocked_test, logrank_pvalue
from uqcal.pipeline.report.tables import fmt
from uqcal.pipeline.report.verdicts import (
    ClaimContext,
    ClaimResult,
    Evidence,
    _means,
    _per_seed,
    declared_seeds,
    finish,
    main_verdict,
    paired_row,
)

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
                evidence.append(paired_row(claim, ctx, label, dataset, setting, va - vb, test, direction, accept,
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
    evidence, skipped, as_random = [], [], []
    for dataset, setting in wide.index:
        label = f"{dataset} / {setting}"
        paired = _paired_runs(ctx, check, per_seed, label, dataset, setting, metric, a, b, declared, skipped)
        if paired is None:
            continue
        va, vb, seeds = paired
        if len(seeds) < folds + 2:  # df = n - folds >= 2: the fewest at which the t can reach alpha
            skipped.append(f"{label}: {len(seeds)} runs over {folds} folds (the test needs {folds + 2})")
            continue
        d = va - vb
        res = fold_blocked_test(dict(zip(seeds, d, strict=True)), folds, alpha)
        p = res["p_two"] if res["se"] > 0 else R.sign_test_pvalues(d)[0]
        note = "" if res["se"] > 0 else "no spread within folds (sign test)"
        paper = _paper_test(ctx, check, dataset, setting, metric, a, b)
        describe = f"{metric}({a}) {fmt(va.mean())} vs {metric}({b}) {fmt(vb.mean())}, n = {len(seeds)}"
        evidence.append(paired_row(claim, ctx, label, dataset, setting, d, "ttest", direction, accept, float(vb.mean()),
                             paper, f"fold-blocked paired t (df {res['df']})", blocks=folds,
                             numbers=(res["mean"], res["se"], res["df"], p, note), describe=describe))
        # the same differences with the folds as random (the fold, not the fit, is then the unit that generalises)
        as_random.append(paired_row(claim, ctx, label, dataset, setting, d, "ttest", direction, accept,
                                    float(vb.mean()), paper, "paired t, folds as random"))
    note = (f"on the paper's fixed contiguous folds (the same {folds} folds in every repeat; fold-blocked t); with "
            f"folds as random (paired t over the runs): {main_verdict(ctx, as_random, check.get('scope'), alpha)}"
            if as_random else "")
    return finish(claim, ctx, evidence, f"no row has both {a} and {b} for {metric} with repeated folds", alpha,
                  skipped, scope_note=note)


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
        evidence.append(paired_row(claim, ctx, label, dataset, setting, values[method] - values[best], test, direction,
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
            if seeds is not None and setting in fixed and len(seeds) < folds + 2:
                seeds, why = None, f"{len(seeds)} runs over {folds} folds (the fold-blocked test needs {folds + 2})"
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
        evidence.append(paired_row(claim, ctx, label, dataset, setting, xa - xb, test, -1, "better", float(xb.mean()), None,
                             _TEST_NAMES[test], describe=describe))
    return finish(claim, ctx, evidence, f"no paired per-run {steps_metric} for both {a} and {b}", alpha, skipped)

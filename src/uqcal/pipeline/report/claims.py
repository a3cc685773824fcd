"""Headline claims as checkable statements, evaluated on our results: held / not held / inconclusive / not run.

A claim's ``check`` is a small declarative expression (see ``KINDS``); every kind works on the summary
(means over seeds), per-run metrics (paired tests) or per-run curves and returns the numbers behind the
verdict, one line per (dataset, setting) row.

Comparisons (``less_than``, ``greater_than``) are paired tests per row over the seeds both methods share
(``test: ttest | wilcoxon``, default ttest; ``alpha``, default 0.05; ``test: none`` compares means only).
Each row is ``better`` (significant in the claimed direction), ``tie`` (not significant) or ``worse``
(significant against it), with the confidence interval of the mean difference and the test's power (the
smallest difference detectable with 80 % power, and the pairs the observed difference would need).
``accept: not_worse`` makes a tie support the claim (for "at least as good as" claims). ``paper_table`` (a
reference table id, or a list searched in order) adds, on rows of the paper's own data, the paper's difference
between the two methods and the runs that would detect it with 80 % power at our scatter: whether a tie could
have found the effect the paper reports.

Scopes say how rows combine, as the paper words the claim: ``every_row`` (default: "on every dataset"),
``majority`` ("generally", "in most cases": more than half), ``{at_least: f}``, ``any_row``, or ``pooled``
(Stouffer's combination of the rows' one-sided p-values, decided at ``alpha``). ``pooled: true`` adds the
pooled p-value to any scope's summary. A scope is ``held`` when enough rows support the claim, ``not held``
when too few could even if every tie went its way, and ``inconclusive`` in between (ties: the test cannot
tell). Every verdict is also given separately for the paper's own data (dataset relation ``same``) and for
stand-ins, since a claim can hold on the paper's data and fail on a stand-in or vice versa.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from uqcal.metrics.stats import fold_blocked_test, logrank_pvalue, paired_comparison, runs_for_power, spearman
from uqcal.pipeline.report.episode_claims import check_episode_paired as _episode_paired
from uqcal.pipeline.report.results import load_predictions
from uqcal.pipeline.report.tables import fmt, not_worse_than_best, spread_verdict
from uqcal.pipeline.report.verdicts import (  # noqa: F401  (re-exported: the check kinds and their callers use them)
    HELD,
    INCONCLUSIVE,
    NOT_HELD,
    NOT_RUN,
    PAPER_DATA,
    STAND_INS,
    VERDICTS,
    ClaimContext,
    ClaimResult,
    Evidence,
    _as_evidence,
    _combine,
    _filter,
    _finish,
    _group_of,
    _means,
    _per_seed,
    _required,
    _split_by_data,
)


def _comparisons(check: dict) -> tuple[list[str], list[tuple[str, str]]]:
    """The metrics (``metric``/``metrics``) and method pairs (``a``, ``b``/``pairs``) of a comparison claim.

    A sentence such as "the residual variants generally perform better than their counterparts in both
    point-prediction error and uncertainty estimation" names several pairs and metrics; each (row, pair, metric)
    is then one comparison, and the scope counts those."""
    metrics = check.get("metrics") or [check["metric"]]
    pairs = check.get("pairs") or [[check["a"], check["b"]]]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"pairs: expected [a, b] pairs, got {pairs!r}")
    return list(metrics), [(a, b) for a, b in pairs]


def _compare(claim: dict, ctx: ClaimContext, greater: bool) -> ClaimResult:
    check = claim["check"]
    test, alpha = check.get("test", "ttest"), float(check.get("alpha", 0.05))
    accept = check.get("accept", "better")
    if accept not in ("better", "not_worse"):
        raise ValueError(f"accept: expected 'better' or 'not_worse', got {accept!r}")
    direction = 1 if greater else -1
    metrics, pairs = _comparisons(check)
    named = len(metrics) * len(pairs) > 1
    evidence, total = [], 0
    for metric in metrics:  # each metric's table is read once for all its pairs
        wide = _means(ctx, check, metric)
        per_seed = _per_seed(ctx, check, metric) if test != "none" else {}
        for a, b in pairs:
            total += len(wide)
            paper = {row: _paper_difference(ctx, check, *row, metric, a, b) for row in wide.index}
            evidence += _compare_cell(wide, per_seed, metric, a, b, test, alpha, accept, direction, greater, named,
                                      paper)
    what = " or ".join(f"{a} and {b} for {metric}" for metric in metrics for a, b in pairs)
    return _finish(claim, evidence, total, f"no row has both {what}")


def _compare_cell(wide, per_seed, metric, a, b, test, alpha, accept, direction, greater, named,
                  paper_differences: dict | None = None) -> list[Evidence]:
    """One (metric, a, b) comparison on every row that has both methods; ``paper_differences[(dataset, setting)]``
    is the paper's a - b on that row (absent or None when the paper has no such row)."""
    evidence = []
    for (dataset, setting), values in wide.iterrows():
        va, vb = values.get(a, np.nan), values.get(b, np.nan)
        if pd.isna(va) or pd.isna(vb):
            continue
        label = f"{dataset} / {setting}" + (f": {a} vs {b}, {metric}" if named else "")
        runs_a, runs_b = per_seed.get((dataset, str(setting), a), {}), per_seed.get((dataset, str(setting), b), {})
        shared = sorted(set(runs_a) & set(runs_b))
        if test != "none" and len(shared) >= 2:
            result = paired_comparison(
                [runs_a[s] for s in shared], [runs_b[s] for s in shared], test, alpha, direction
            )
            ok = result.outcome == "better" or (accept == "not_worse" and result.outcome == "tie")
            detail = f"{result.outcome}: {result.describe(metric, a, b)}" + _paper_power(
                (paper_differences or {}).get((dataset, setting)), result.sd_diff, alpha, direction, test)
            evidence.append(Evidence(label, detail, ok, result.outcome, dataset, result.pvalue_one_sided))
            continue
        ok = bool(va > vb) if greater else bool(va < vb)
        sign = ">" if greater else "<"
        note = "" if test == "none" else " (means only: fewer than 2 paired runs)"
        evidence.append(Evidence(label, f"{metric}({a}) = {fmt(va)} {sign} {metric}({b}) = {fmt(vb)}?{note}", ok,
                                 dataset=dataset))
    return evidence


def _paper_difference(ctx: ClaimContext, check: dict, dataset: str, setting, metric: str, a: str,
                      b: str) -> float | None:
    """The paper's mean of ``a`` minus its mean of ``b`` for this row, from the claim's ``paper_table`` (one table
    of the family's reference, or a list: each method's value comes from the first that has it): only on the
    paper's own data (relation ``same``), None otherwise."""
    tables, relation = check.get("paper_table") or [], ctx.relations.get(dataset)
    tables = [tables] if isinstance(tables, str) else list(tables)
    unknown = [t for t in tables if t not in ctx.reference.tables]
    if unknown:
        raise ValueError(f"paper_table: {unknown[0]!r} is not a table of the reference "
                         f"(it has {sorted(ctx.reference.tables)})")
    if not tables or relation is None or relation.kind != "same":
        return None
    return ctx.reference.difference(tables, relation.paper, str(setting), a, b, metric)


def _paper_power(paper_diff: float | None, sd: float, alpha: float, direction: int, test: str = "ttest",
                 blocks: int = 1) -> str:
    """The evidence's closing clause on the paper's own effect: its size (flagged when the paper's own means go
    against the claim), and the runs that would detect it with 80 % power given the scatter of our paired
    differences, so that a tie says whether our runs could have seen the paper's effect."""
    if paper_diff is None:
        return ""
    against = " (against the claim)" if np.sign(paper_diff) == -direction else ""
    needed = runs_for_power(paper_diff, sd, alpha, test, blocks)
    runs = "" if needed is None else (f", which {needed:.0f} runs would detect with 80 % power" if np.isfinite(needed)
                                      else ", which no feasible number of runs detects")
    return f"; the paper's difference {fmt(paper_diff)}{against}{runs}"


def check_less_than(claim: dict, ctx: ClaimContext) -> ClaimResult:
    return _compare(claim, ctx, greater=False)


def check_greater_than(claim: dict, ctx: ClaimContext) -> ClaimResult:
    return _compare(claim, ctx, greater=True)


def check_best(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """The method is the row's best by mean, or (ties: significance) not significantly worse than it."""
    check = claim["check"]
    metric, method = check["metric"], check["method"]
    lower = check.get("lower_is_better", True)
    ties = check.get("ties", "significance")
    runs = _filter(ctx.runs[ctx.runs["metric"] == metric], check) if not ctx.runs.empty else ctx.runs
    wide = _means(ctx, check, metric)
    evidence = []
    for (dataset, setting), values in wide.iterrows():
        values = values.dropna()
        if method not in values or len(values) < 2:
            continue
        best = values.idxmin() if lower else values.idxmax()
        ok = best == method
        detail = f"{method}: {fmt(values[method])}; best {best}: {fmt(values[best])}"
        if not ok and ties == "significance" and not runs.empty:
            sel = runs[(runs["dataset"] == dataset) & (runs["setting"] == setting)]
            per_seed = {m: dict(zip(g["seed"].astype(int), g["value"], strict=False)) for m, g in sel.groupby("method")}
            _, marked = not_worse_than_best(per_seed, lower, check.get("test", "ttest"))
            ok = method in marked
            test_name = {"ttest": "paired t-test", "wilcoxon": "Wilcoxon test"}[check.get("test", "ttest")]
            detail += f" (tied by {test_name}, 5 %)" if ok else f" (significantly worse, {test_name}, 5 %)"
        evidence.append((f"{dataset} / {setting}", detail, bool(ok)))
    return _finish(claim, evidence, len(wide), f"{method} has no {metric} results beside another method")


def _spread_check(claim: dict, ctx: ClaimContext, describe_ours, note: str = "") -> ClaimResult:
    """Our mean within the paper's mean ± std, on datasets that are the paper's own; ``describe_ours(rec)``
    writes our side of each evidence line and ``note`` ends it."""
    check = claim["check"]
    metric, table_id = check["metric"], check["paper_table"]
    methods = check.get("methods")
    frame = _filter(ctx.summary[ctx.summary["metric"] == metric], check)
    evidence, total = [], 0
    for rec in frame.itertuples(index=False):
        if methods and rec.method not in methods:
            continue
        relation = ctx.relations.get(rec.dataset)
        if relation is None or relation.kind != "same":
            continue
        paper = ctx.reference.value(table_id, relation.paper, str(rec.setting), rec.method, metric)
        if paper is None or paper.get("std") is None:
            continue
        total += 1
        verdict = spread_verdict(float(rec.mean), paper, relation)
        evidence.append(
            (
                f"{rec.dataset} / {rec.setting} / {rec.method}",
                f"{describe_ours(rec)} vs paper {fmt(paper['mean'])} ± {fmt(paper['std'])} ({verdict}){note}",
                verdict == "within",
            )
        )
    return _finish(
        claim,
        evidence,
        total,
        f"no run of {methods or 'any method'} on a paper dataset with a published spread for {metric}",
    )


def check_within_paper_spread(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Our mean lies within the paper's mean ± std, on datasets that are the paper's own."""
    return _spread_check(claim, ctx, lambda rec: f"ours {fmt(rec.mean)}")


def check_monotone(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """The method's metric moves in one direction along an ordered list of settings, per dataset."""
    check = claim["check"]
    metric, method, order = check["metric"], check["method"], [str(s) for s in check["settings"]]
    decreasing = check.get("direction", "decreasing") == "decreasing"
    frame = ctx.summary[(ctx.summary["metric"] == metric) & (ctx.summary["method"] == method)]
    if check.get("datasets"):
        frame = frame[frame["dataset"].isin(check["datasets"])]
    evidence = []
    for dataset, group in frame.groupby("dataset", sort=False):
        by_setting = dict(zip(group["setting"].astype(str), group["mean"], strict=False))
        seq = [by_setting[s] for s in order if s in by_setting]
        if len(seq) < 2:
            continue
        steps = np.diff(seq)
        ok = bool(np.all(steps <= 0)) if decreasing else bool(np.all(steps >= 0))
        shown = ", ".join(f"{s}: {fmt(by_setting[s])}" for s in order if s in by_setting)
        evidence.append((dataset, shown, ok))
    return _finish(claim, evidence, frame["dataset"].nunique(), f"{method} has < 2 of the settings {order}")


def check_spearman(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Spearman rank correlation across methods between two metrics' means, per row (RIO Table 2)."""
    check = claim["check"]
    x_metric, y_metric = check["x"], check["y"]
    min_rho, max_p = float(check.get("min_rho", 0.8)), float(check.get("max_p", 0.05))
    wx, wy = _means(ctx, check, x_metric), _means(ctx, check, y_metric)
    evidence = []
    for key in wx.index.intersection(wy.index):
        methods = [
            m
            for m in (check.get("methods") or wx.columns)
            if m in wx.columns and m in wy.columns and not pd.isna(wx.loc[key, m]) and not pd.isna(wy.loc[key, m])
        ]
        if len(methods) < 3:
            continue
        rho, p = spearman([wx.loc[key, m] for m in methods], [wy.loc[key, m] for m in methods])
        ok = bool(rho > min_rho and p < max_p)
        evidence.append((f"{key[0]} / {key[1]}", f"rho = {fmt(rho)}, p = {fmt(p)} over {len(methods)} methods", ok))
    return _finish(claim, evidence, len(wx.index), f"fewer than 3 methods with both {x_metric} and {y_metric}")


def check_fewer_steps(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Curve claim (BO): method a reaches b's final mean best-so-far in fewer iterations than b does."""
    check = claim["check"]
    a, b = check["a"], check["b"]
    column, x_col = check.get("column", "best_so_far"), check.get("x", "iteration")
    filename = check.get("file", "predictions.parquet")
    keys = _filter(ctx.summary, check)[["dataset", "setting"]].drop_duplicates()
    if keys.empty and ctx.results_dir is not None:
        root = Path(ctx.results_dir) / ctx.family
        keys = pd.DataFrame(
            [(p.parent.name, p.name) for p in root.glob("*/*") if p.is_dir()], columns=["dataset", "setting"]
        )
    evidence = []
    for dataset, setting in keys.itertuples(index=False):
        curves = {}
        for method in (a, b):
            frame = (
                load_predictions(ctx.results_dir, ctx.family, dataset, str(setting), method, filename)
                if ctx.results_dir is not None
                else None
            )
            if frame is None or column not in frame or x_col not in frame:
                break
            last = frame.groupby(["seed", x_col], sort=True)[column].last().reset_index()
            curves[method] = last.groupby(x_col)[column].mean().sort_index()
        if len(curves) < 2:
            continue
        target = curves[b].iloc[-1]
        reach = {m: next((int(x) for x, v in c.items() if v <= target + 1e-12), None) for m, c in curves.items()}
        ok = reach[a] is not None and reach[b] is not None and reach[a] < reach[b]
        evidence.append(
            (
                f"{dataset} / {setting}",
                f"target = {b}'s final mean {column} {fmt(target)}; reached at {x_col} {reach[a]} by {a}, {reach[b]} by {b}",
                bool(ok),
            )
        )
    return _finish(claim, evidence, len(keys), f"no per-run {filename} curves for both {a} and {b}")


def check_stats_curve_greater(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Curves logged in train_stats.json (``key``: {name: [[...], ...]}): curve a ends higher than curve b
    after the same number of steps (mean over logged curves), per (dataset, setting).

    A b curve that ends before a's length is an inner loop that broke down (MD-BFSC's vanilla GD once its
    Sigma stops being positive definite): its ELBO at the compared step is undefined, i.e. -inf, so a ends
    higher; the evidence says in how many curves that happened and compares the others' values."""
    from uqcal.pipeline.report.figures import load_stats_curves

    check = claim["check"]
    a, b, key, method = check["a"], check["b"], check["key"], check.get("method", check["a"])
    keys = _filter(ctx.summary, check)[["dataset", "setting"]].drop_duplicates()
    evidence = []
    for dataset, setting in keys.itertuples(index=False):
        if ctx.results_dir is None:
            break
        curves = load_stats_curves(ctx.results_dir, ctx.family, dataset, str(setting), method, key, truncate=False)
        if not curves.get(a) or not curves.get(b) or len(curves[a]) != len(curves[b]):
            continue
        steps = min(len(c) for c in curves[a])
        # value of each curve at the compared step; NaN where a b curve ended before it (broke down)
        ends = {n: np.array([c[steps - 1] if len(c) >= steps else np.nan for c in curves[n]]) for n in (a, b)}
        broke = np.isnan(ends[b])
        end_a = float(ends[a].mean())
        end_b = -np.inf if broke.any() else float(ends[b].mean())
        pairs = "" if broke.all() else " vs ".join(f"{n} {fmt(float(ends[n][~broke].mean()))}" for n in (a, b))
        if broke.any():
            stops = sorted({len(curves[b][i]) - 1 for i in np.flatnonzero(broke)})
            detail = (f"after {steps - 1} steps: {b} broke down before the end in {int(broke.sum())} of {len(broke)} "
                      f"curves (last defined step {', '.join(map(str, stops))}), so its ELBO there is -inf; "
                      f"{a} {fmt(end_a)}" + (f"; where {b} ran all steps: {pairs}" if pairs else ""))
        else:
            detail = f"after {steps - 1} steps: {pairs} (mean of {len(broke)} curves)"
        evidence.append((f"{dataset} / {setting}", detail, bool(end_a > end_b)))
    return _finish(claim, evidence, len(keys), f"no train_stats.json of {method} with '{key}' curves {a}, {b}")


def check_best_among(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """``best`` restricted to the listed ``methods`` (RIO: the paper ranks its own methods only; our NN NLPD,
    the marginal reference and our extra variants must not decide the paper's "best" claims)."""
    import dataclasses

    keep = set(claim["check"]["methods"])
    summary = ctx.summary[ctx.summary["method"].isin(keep)]
    runs = ctx.runs[ctx.runs["method"].isin(keep)] if not ctx.runs.empty else ctx.runs
    return check_best(claim, dataclasses.replace(ctx, summary=summary, runs=runs))


def _repeat_spread(values: dict[int, float], folds: int) -> tuple[float | None, int]:
    """Std (ddof 0, as numpy's default in the QR authors' save_stats) over repeats of the per-repeat mean over
    folds; seed k is fold k % folds of repeat k // folds. Only complete repeats count."""
    repeats: dict[int, list[float]] = {}
    for seed, value in values.items():
        repeats.setdefault(int(seed) // folds, []).append(float(value))
    means = [float(np.mean(v)) for v in repeats.values() if len(v) == folds]
    return (float(np.std(means)) if len(means) >= 2 else None), len(means)


def check_within_paper_repeat_spread(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """As ``within_paper_spread`` (our mean within the paper's mean ± std, paper's own data only), for papers
    whose ± is the std over repeats of a K-fold mean (``folds``, default 5): the evidence also gives our
    spread computed the same way, so the two spreads are read alike."""
    check = claim["check"]
    folds = int(check.get("folds", 5))
    per_seed = _per_seed(ctx, check, check["metric"])

    def describe_ours(rec) -> str:
        spread, n_repeats = _repeat_spread(per_seed.get((rec.dataset, str(rec.setting), rec.method), {}), folds)
        return f"ours {fmt(rec.mean)}" + (f" ± {fmt(spread)} ({n_repeats} repeats)" if spread is not None else "")

    return _spread_check(claim, ctx, describe_ours, f"; ± = std over repeats of the {folds}-fold mean")


def check_effect_contrast(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Per dataset: the paired effect of ``a`` against ``b`` (mean over seeds of b - a, or a - b with
    ``greater: true``) is larger under setting ``settings[0]`` than under ``settings[1]``: one-sided Welch
    test, t = (e1 - e2) / sqrt(se1^2 + se2^2) with Welch-Satterthwaite df, at ``alpha``. A setting listed in
    ``fixed_folds`` (folds the same in every repeat) takes se and df from ``fold_blocked_test`` (``folds``);
    otherwise se = sd / sqrt(n), df = n - 1 (then this is scipy's Welch t-test). The evidence gives both
    effects, absolute and relative."""
    check = claim["check"]
    metric, a, b = check["metric"], check["a"], check["b"]
    first, second = (str(s) for s in check["settings"])
    sign = 1.0 if check.get("greater", False) else -1.0  # effect = sign * (a - b): positive supports a
    alpha = float(check.get("alpha", 0.05))
    fixed, folds = {str(s) for s in check.get("fixed_folds") or []}, int(check.get("folds", 5))
    per_seed = _per_seed(ctx, {**check, "settings": [first, second]}, metric)
    datasets = list(dict.fromkeys(d for d, _, _ in per_seed))
    evidence = []
    for dataset in datasets:
        effects, texts, seeds_of = {}, [], {}
        for setting in (first, second):
            runs_a, runs_b = per_seed.get((dataset, setting, a), {}), per_seed.get((dataset, setting, b), {})
            shared = sorted(set(runs_a) & set(runs_b))
            if len(shared) < 2:
                break
            va, vb = np.array([runs_a[s] for s in shared]), np.array([runs_b[s] for s in shared])
            effects[setting], seeds_of[setting] = sign * (va - vb), shared
            change = va.mean() - vb.mean()
            relative = f", {change / abs(vb.mean()):+.0%}" if vb.mean() != 0 else ""
            texts.append(f"{setting}: {metric} {fmt(vb.mean())} ({b}) → {fmt(va.mean())} ({a}) "
                         f"[{change:+.3g}{relative}]")
        if len(effects) < 2:
            continue
        moments = []
        for setting in (first, second):
            e = effects[setting]
            if setting in fixed:
                res = fold_blocked_test(dict(zip(seeds_of[setting], e, strict=True)), folds)
                moments.append((res["mean"], res["se"] ** 2, res["df"]))
            else:
                moments.append((float(e.mean()), float(e.var(ddof=1)) / e.size, e.size - 1))
        (m1, v1, df1), (m2, v2, df2) = moments
        t_stat = (m1 - m2) / math.sqrt(v1 + v2)
        df = (v1 + v2) ** 2 / (v1**2 / df1 + v2**2 / df2)
        p_greater = float(stats.t.sf(t_stat, df))
        outcome = "better" if p_greater < alpha else ("worse" if 1 - p_greater < alpha else "tie")
        evidence.append(Evidence(
            dataset, "; ".join(texts) + f"; effect larger on {first}: Welch one-sided p = {fmt(p_greater)}"
            + (f" ({', '.join(sorted(fixed & {first, second}))}: fold-blocked se)" if fixed & {first, second} else ""),
            outcome == "better", outcome, dataset, p_greater))
    return _finish(claim, evidence, len(datasets), f"no dataset has {a} and {b} under both {first} and {second}")


def check_fold_blocked_compare(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """``less_than`` / ``greater_than`` (``direction: less | greater``) for K-fold protocols whose folds are
    the same in every repeat (QR's cv5): per row, the paired differences a - b over shared seeds are tested by
    ``fold_blocked_test`` (``folds``, default 5). ``accept``, ``alpha``, ``scope`` and ``pooled`` as for
    ``less_than``; the evidence names the test, its CI and the difference detectable at 80 % power."""
    check = claim["check"]
    metric, a, b = check["metric"], check["a"], check["b"]
    direction = {"less": -1, "greater": 1}[check.get("direction", "less")]
    alpha, folds = float(check.get("alpha", 0.05)), int(check.get("folds", 5))
    accept = check.get("accept", "better")
    if accept not in ("better", "not_worse"):
        raise ValueError(f"accept: expected 'better' or 'not_worse', got {accept!r}")
    wide = _means(ctx, check, metric)
    per_seed = _per_seed(ctx, check, metric)
    evidence = []
    for (dataset, setting), values in wide.iterrows():
        runs_a, runs_b = per_seed.get((dataset, str(setting), a), {}), per_seed.get((dataset, str(setting), b), {})
        shared = sorted(set(runs_a) & set(runs_b))
        if pd.isna(values.get(a, np.nan)) or pd.isna(values.get(b, np.nan)) or len(shared) <= folds:
            continue
        res = fold_blocked_test({s: runs_a[s] - runs_b[s] for s in shared}, folds, alpha)
        along = np.sign(res["mean"]) == direction
        p_one = res["p_two"] / 2 if along else 1 - res["p_two"] / 2
        outcome = "tie" if res["p_two"] >= alpha or res["mean"] == 0 else ("better" if along else "worse")
        ok = outcome == "better" or (accept == "not_worse" and outcome == "tie")
        mean_a, mean_b = np.mean([runs_a[s] for s in shared]), np.mean([runs_b[s] for s in shared])
        sign = "<" if mean_a < mean_b else ">"
        detail = (f"{outcome}: {metric}({a}) {fmt(mean_a)} {sign} {metric}({b}) {fmt(mean_b)}; diff {fmt(res['mean'])} "
                  f"[{fmt(res['ci'][0])}, {fmt(res['ci'][1])}], fold-blocked paired t (fixed folds, df {res['df']}) "
                  f"p = {fmt(res['p_two'])}, n = {len(shared)}; detectable at 80 % power: |diff| >= {fmt(res['mde'])}"
                  + _paper_power(_paper_difference(ctx, check, dataset, setting, metric, a, b),
                                 res["se"] * math.sqrt(len(shared)), alpha, direction, blocks=folds))
        evidence.append(Evidence(f"{dataset} / {setting}", detail, ok, outcome, dataset, float(p_one)))
    return _finish(claim, evidence, len(wide), f"no row has both {a} and {b} for {metric} with repeated folds")


def check_episode_paired(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Paired tests over test episodes (fewshot); see uqcal.pipeline.report.episode_claims."""
    return _episode_paired(claim, ctx)


def check_censored_steps(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """BO "fewer steps": per-run steps to a target with censoring, method a against b on shared seeds.

    Runs that never reach the target are censored at the budget (``steps`` metric = T + 1, ``reached``
    metric = 0). Every run has the same censoring time, so the restricted mean time to the target with
    tau = T + 1 is the mean of the censored values; the paired test (``test``: wilcoxon | ttest) compares
    them seed by seed (a pair censored in both runs has difference 0 and carries no information). The
    detail gives the restricted means, the relative reduction (the paper's "5 %-50 % fewer steps"), the
    counts that reached the target and, as a check that ignores the pairing, the log-rank test
    (scipy.stats.logrank) of the two sets of censored times.
    """
    from uqcal.metrics.stats import paired_comparison

    check = claim["check"]
    a, b = check["a"], check["b"]
    steps_metric, reached_metric = check.get("steps", "steps_to_target"), check.get("reached", "reached_target")
    test, alpha = check.get("test", "wilcoxon"), float(check.get("alpha", 0.05))
    steps = _per_seed(ctx, check, steps_metric)
    reached = _per_seed(ctx, check, reached_metric)
    rows = sorted({(d, s) for d, s, _ in steps})
    evidence = []
    for dataset, setting in rows:
        runs_a, runs_b = steps.get((dataset, setting, a), {}), steps.get((dataset, setting, b), {})
        shared = sorted(set(runs_a) & set(runs_b))
        if len(shared) < 2:
            continue
        xa = np.array([runs_a[s] for s in shared], dtype=float)
        xb = np.array([runs_b[s] for s in shared], dtype=float)
        ra = np.array([reached.get((dataset, setting, a), {}).get(s, np.nan) for s in shared], dtype=float)
        rb = np.array([reached.get((dataset, setting, b), {}).get(s, np.nan) for s in shared], dtype=float)
        result = paired_comparison(xa, xb, test, alpha, direction=-1)
        reduction = (xb.mean() - xa.mean()) / xb.mean() if xb.mean() > 0 else float("nan")
        logrank = logrank_pvalue(xa, ra, xb, rb)
        detail = (
            f"{result.outcome}: restricted mean steps (a run that never reached the target counts budget + 1) "
            f"{a} {fmt(xa.mean())} vs {b} {fmt(xb.mean())} ({100 * reduction:.0f} % fewer); reached the target "
            f"{int(np.nansum(ra))}/{len(shared)} vs {int(np.nansum(rb))}/{len(shared)}; "
            f"{result.describe(steps_metric, a, b).split('; ', 1)[1]}; log-rank (unpaired) p = {fmt(logrank)}"
        )
        ok = result.outcome == "better"
        evidence.append(Evidence(f"{dataset} / {setting}", detail, ok, result.outcome, dataset,
                                 result.pvalue_one_sided))
    return _finish(claim, evidence, len(rows), f"no paired per-run {steps_metric} for both {a} and {b}")


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
    "fewer_steps": check_fewer_steps,
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
        result = KINDS[kind](claim, ctx)
    except KeyError as err:
        raise ValueError(f"claims.{claim['id']}.check: missing key {err}") from err
    except ValueError as err:
        raise ValueError(f"claims.{claim['id']}.check: {err}") from err
    _split_by_data(result, claim, ctx.relations)
    return result


def evaluate_claims(claims: list[dict], ctx: ClaimContext) -> list[ClaimResult]:
    return [evaluate_claim(claim, ctx) for claim in claims]

"""Claims on how a result moves: along an ordered list of settings (``monotone``, Welch t per step), across
methods between two metrics (``spearman``, Fisher z), and along the curves a method logs in train_stats.json
(``stats_curve_greater``, paired over the curves)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from uqcal.metrics import replication as R
from uqcal.pipeline.report.tables import fmt
from uqcal.pipeline.report.verdicts import (
    MIN_RUNS_T,
    ClaimContext,
    ClaimResult,
    Evidence,
    _filter,
    _per_seed,
    declared_seeds,
    finish,
    paired_row,
)


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
    paper's data beside the paper's rho (Table 2), which has no printed spread: direction verdicts only."""
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
        # the paper prints its rho without a spread (Table 2): no paper se is invented, so the row is decided by
        # direction alone, with the paper's rho shown beside ours
        row_test = R.RowTest("superiority", math.atanh(rho), se_z, None, float(p), 1,
                             paper_estimate=None if paper is None else math.atanh(paper))
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
    check = claim["check"]
    a, b, key, method = check["a"], check["b"], check["key"], check.get("method", check["a"])
    keys = _filter(ctx.summary, check)[["dataset", "setting"]].drop_duplicates()
    evidence, skipped = [], []
    for dataset, setting in keys.itertuples(index=False):
        if ctx.files is None:
            break
        curves = ctx.files.stats_curves(dataset, str(setting), method, key, truncate=False)
        if not curves.get(a) or not curves.get(b) or len(curves[a]) != len(curves[b]):
            continue
        label = f"{dataset} / {setting}"
        steps = min(len(c) for c in curves[a])
        end_a = np.array([c[steps - 1] for c in curves[a]], float)
        end_b = np.array([c[steps - 1] if len(c) >= steps else np.nan for c in curves[b]], float)
        ran = np.isfinite(end_a) & np.isfinite(end_b)
        broke = int((~np.isfinite(end_b)).sum())
        if ran.sum() < MIN_RUNS_T:
            skipped.append(f"{label}: {int(ran.sum())} pairs of curves (the test needs {MIN_RUNS_T})"
                           + (f"; {b} broke down before step {steps - 1} in {broke} of {len(end_b)}" if broke else ""))
            continue
        d = end_a[ran] - end_b[ran]
        note = f"; {b} broke down before the end in {broke} of {len(end_b)} curves (left out)" if broke else ""
        describe = f"after {steps - 1} steps: {a} {fmt(end_a[ran].mean())} vs {b} {fmt(end_b[ran].mean())}{note}"
        evidence.append(paired_row(claim, ctx, label, dataset, setting, d, "ttest", 1, "better", 0.0, None,
                             f"paired t over {int(ran.sum())} curves", describe=describe))
    return finish(claim, ctx, evidence, f"no train_stats.json of {method} with '{key}' curves {a}, {b}",
                  float(check.get("alpha", R.ALPHA)), skipped)

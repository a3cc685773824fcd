"""Headline claims as checkable statements, evaluated on our results: held / not held / not run.

A claim's ``check`` is a small declarative expression (see ``KINDS``); every kind works on the summary
(means over seeds), per-run metrics (paired tests) or per-run curves and returns the numbers behind the
verdict, one line per (dataset, setting) row.

Scopes: ``every_row`` (default; all rows must hold), ``{at_least: f}`` (a fraction f of rows) or ``any_row``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from uqcal.report.reference import DatasetRelation, Reference
from uqcal.report.results import load_predictions
from uqcal.report.tables import fmt, not_worse_than_best, spread_verdict

HELD, NOT_HELD, NOT_RUN = "held", "not held", "not run"


@dataclass
class ClaimResult:
    id: str
    text: str
    verdict: str
    summary: str
    evidence: list[tuple[str, str, bool]] = field(default_factory=list)  # (row label, numbers, row ok)
    source: str = ""


@dataclass
class ClaimContext:
    family: str
    summary: pd.DataFrame
    runs: pd.DataFrame
    reference: Reference
    relations: dict[str, DatasetRelation]
    results_dir: Path | None = None


def _filter(frame: pd.DataFrame, check: dict) -> pd.DataFrame:
    if frame.empty:
        return frame
    if check.get("datasets"):
        frame = frame[frame["dataset"].isin(check["datasets"])]
    if check.get("settings"):
        frame = frame[frame["setting"].astype(str).isin([str(s) for s in check["settings"]])]
    return frame


def _means(ctx: ClaimContext, check: dict, metric: str) -> pd.DataFrame:
    """Wide table of means: index (dataset, setting), columns methods."""
    frame = _filter(ctx.summary[ctx.summary["metric"] == metric], check)
    if frame.empty:
        return pd.DataFrame()
    return frame.pivot_table(index=["dataset", "setting"], columns="method", values="mean", aggfunc="first", sort=False)


def _scope_verdict(oks: list[bool], scope) -> bool:
    if scope in (None, "every_row"):
        return all(oks)
    if scope == "any_row":
        return any(oks)
    if isinstance(scope, dict) and "at_least" in scope:
        return float(np.mean(oks)) >= float(scope["at_least"])
    raise ValueError(f"unknown claim scope {scope!r}; use every_row, any_row or {{at_least: f}}")


def _finish(claim: dict, evidence: list[tuple[str, str, bool]], total_rows: int, what: str) -> ClaimResult:
    check = claim["check"]
    if not evidence:
        return ClaimResult(claim["id"], claim["text"], NOT_RUN, f"not run: {what}", [], claim.get("source", ""))
    oks = [ok for _, _, ok in evidence]
    verdict = HELD if _scope_verdict(oks, check.get("scope")) else NOT_HELD
    summary = f"{sum(oks)} of {len(oks)} rows hold"
    if total_rows > len(evidence):
        summary += f" ({total_rows - len(evidence)} rows lack a needed method)"
    return ClaimResult(claim["id"], claim["text"], verdict, summary, evidence, claim.get("source", ""))


def _compare(claim: dict, ctx: ClaimContext, greater: bool) -> ClaimResult:
    check = claim["check"]
    metric, a, b = check["metric"], check["a"], check["b"]
    wide = _means(ctx, check, metric)
    evidence = []
    for (dataset, setting), values in wide.iterrows():
        va, vb = values.get(a, np.nan), values.get(b, np.nan)
        if pd.isna(va) or pd.isna(vb):
            continue
        ok = bool(va > vb) if greater else bool(va < vb)
        sign = ">" if greater else "<"
        evidence.append((f"{dataset} / {setting}", f"{metric}({a}) = {fmt(va)} {sign} {metric}({b}) = {fmt(vb)}?", ok))
    return _finish(claim, evidence, len(wide), f"no row has both {a} and {b} for {metric}")


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
            detail += " (tied by paired test)" if ok else " (significantly worse)"
        evidence.append((f"{dataset} / {setting}", detail, bool(ok)))
    return _finish(claim, evidence, len(wide), f"{method} has no {metric} results beside another method")


def check_within_paper_spread(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Our mean lies within the paper's mean ± std, on datasets that are the paper's own."""
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
                f"ours {fmt(rec.mean)} vs paper {fmt(paper['mean'])} ± {fmt(paper['std'])} ({verdict})",
                verdict == "within",
            )
        )
    return _finish(
        claim,
        evidence,
        total,
        f"no run of {methods or 'any method'} on a paper dataset with a published spread for {metric}",
    )


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
        rho, p = stats.spearmanr([wx.loc[key, m] for m in methods], [wy.loc[key, m] for m in methods])
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
    after the same number of steps (mean over logged curves), per (dataset, setting)."""
    from uqcal.report.figures import load_stats_curves

    check = claim["check"]
    a, b, key, method = check["a"], check["b"], check["key"], check.get("method", check["a"])
    keys = _filter(ctx.summary, check)[["dataset", "setting"]].drop_duplicates()
    evidence = []
    for dataset, setting in keys.itertuples(index=False):
        if ctx.results_dir is None:
            break
        curves = load_stats_curves(ctx.results_dir, ctx.family, dataset, str(setting), method, key)
        if a not in curves or b not in curves:
            continue
        steps = min(curves[a].shape[1], curves[b].shape[1])
        end_a, end_b = curves[a][:, steps - 1].mean(), curves[b][:, steps - 1].mean()
        evidence.append(
            (
                f"{dataset} / {setting}",
                f"after {steps - 1} steps: {a} {fmt(end_a)} vs {b} {fmt(end_b)} (mean of {len(curves[a])} curves)",
                bool(end_a > end_b),
            )
        )
    return _finish(claim, evidence, len(keys), f"no train_stats.json of {method} with '{key}' curves {a}, {b}")


def check_episode_paired(claim: dict, ctx: ClaimContext) -> ClaimResult:
    """Paired tests over test episodes (fewshot); see uqcal.report.episode_claims."""
    from uqcal.report.episode_claims import check_episode_paired as check

    return check(claim, ctx)


KINDS = {
    "stats_curve_greater": check_stats_curve_greater,
    "episode_paired": check_episode_paired,
    "less_than": check_less_than,
    "greater_than": check_greater_than,
    "best": check_best,
    "within_paper_spread": check_within_paper_spread,
    "monotone": check_monotone,
    "spearman": check_spearman,
    "fewer_steps": check_fewer_steps,
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


def evaluate_claims(claims: list[dict], ctx: ClaimContext) -> list[ClaimResult]:
    return [evaluate_claim(claim, ctx) for claim in claims]

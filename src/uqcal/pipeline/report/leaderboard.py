"""A family's leaderboard (its spec's ``leaderboard:``): every method on every dataset, one set of metrics, paired tests.

Per dataset: rows = methods, columns = the spec's metrics, each cell mean ± std over the seeds (the shared
splits). Bold: the best mean, and every method whose paired two-sided Wilcoxon signed-rank test against the
best (over the seeds) is not significant after Holm's correction over the comparisons with the best
(uqcal.metrics.stats). A metric with a ``target`` (coverage) is judged by |value - target|.
Across datasets: each method's mean rank (Demsar 2006) per ranked metric, Friedman's test and the Nemenyi
critical difference, drawn as a critical-difference figure. A method x recalibration table shows what the
post-hoc recalibrations add to each base model. "train s" is the seconds of fitting a method and every run it
builds on (RIO: its network; a recalibration: its base run), from train_stats.json.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.core.io import write_text
from uqcal.metrics.stats import average_ranks, friedman_pvalue, holm_adjust, nemenyi_critical_difference, paired_pvalue
from uqcal.pipeline.report.results import RunFiles

TRAIN_SECONDS = "train_seconds_total"
LABELS = {"rmse": "RMSE", "nlpd": "NLPD", "crps": "CRPS", "ece": "ECE", "ce": "CE", "cov90": "90 % cov.",
          "sharpness": "sharpness", TRAIN_SECONDS: "train s"}


@dataclass
class Leaderboard:
    """What the page shows; ``html`` is the section, ``files`` what was written under reports/<family>/."""

    per_dataset: dict[str, pd.DataFrame]  # dataset -> rows method, columns (metric, mean|std|tied|p_holm)
    ranks: pd.DataFrame  # methods x ranked metrics (mean rank over datasets)
    critical_difference: float
    friedman: dict[str, float]
    html: str
    files: list[Path] = field(default_factory=list)


# ------------------------------------------------------------------------------------------ values
def train_seconds(files: RunFiles, dataset: str, setting: str, method: str, seed: int,
                  depends_on: dict[str, str | None]) -> float:
    """Seconds spent fitting ``method`` and the runs it builds on: every timing key of their train_stats.json."""
    from uqcal.methods.api import is_timing_key

    total, current = 0.0, method
    while current is not None:
        stats = files.train_stats(dataset, setting, current, seed)
        total += sum(float(v) for k, v in stats.items()
                     if is_timing_key(k) and isinstance(v, (int, float)) and not isinstance(v, bool))
        current = depends_on.get(current)
    return total


def per_seed_values(runs: pd.DataFrame, files: RunFiles, metrics: list[str],
                    depends_on: dict[str, str | None]) -> pd.DataFrame:
    """Wide table indexed by (dataset, setting, method, seed), one column per metric (train time included)."""
    wanted = [m for m in metrics if m != TRAIN_SECONDS]
    long = runs[runs["metric"].isin(wanted)]
    wide = long.pivot_table(index=["dataset", "setting", "method", "seed"], columns="metric", values="value",
                            aggfunc="first")
    wide = wide.reindex(columns=wanted)
    if TRAIN_SECONDS in metrics:
        wide[TRAIN_SECONDS] = [train_seconds(files, *key, depends_on) for key in wide.index]
    return wide


def loss_values(values: pd.Series, metric: str, targets: dict[str, float]) -> pd.Series:
    """What 'better' means for a metric: the value itself (lower is better), or |value - target|."""
    return (values - targets[metric]).abs() if metric in targets else values


# ------------------------------------------------------------------------------------------ one dataset
def dataset_table(values: pd.DataFrame, metrics: list[str], targets: dict[str, float], test: str = "wilcoxon",
                  alpha: float = 0.05) -> pd.DataFrame:
    """For one dataset (``values``: index (method, seed), columns metrics): per method and metric the mean, the
    std, the Holm-adjusted p-value of the paired test against the best method and whether it ties with it."""
    methods = list(dict.fromkeys(values.index.get_level_values("method")))
    columns = {}
    for metric in metrics:
        loss = loss_values(values[metric], metric, targets)
        per_method = {m: loss.xs(m, level="method").dropna() for m in methods}
        mean_loss = pd.Series({m: s.mean() if len(s) else np.nan for m, s in per_method.items()})
        best = mean_loss.idxmin() if mean_loss.notna().any() else None
        raw_p = {}
        for method in methods:
            if best is None or method == best:
                continue
            a, b = per_method[method].align(per_method[best], join="inner")
            if len(a) >= 2:  # fewer pairs: not testable, so not a tie (p stays NaN)
                raw_p[method] = paired_pvalue(a.to_numpy(), b.to_numpy(), test=test)
        adjusted = dict(zip(raw_p, holm_adjust(list(raw_p.values())), strict=True)) if raw_p else {}
        for method in methods:
            shown = values[metric].xs(method, level="method").dropna()
            p_holm = 1.0 if method == best else adjusted.get(method, math.nan)
            columns.setdefault((metric, "mean"), {})[method] = shown.mean() if len(shown) else np.nan
            columns.setdefault((metric, "std"), {})[method] = shown.std(ddof=1) if len(shown) > 1 else 0.0
            columns.setdefault((metric, "n"), {})[method] = len(shown)
            columns.setdefault((metric, "p_holm"), {})[method] = p_holm
            columns.setdefault((metric, "tied"), {})[method] = bool(p_holm > alpha) if best is not None else False
            columns.setdefault((metric, "best"), {})[method] = method == best
    table = pd.DataFrame(columns)
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def rank_table(values: pd.DataFrame, rank_metrics: list[str], targets: dict[str, float]) -> tuple[pd.DataFrame, dict]:
    """Mean rank over datasets of each method per metric (rank of its mean over the seeds on each dataset)
    and Friedman's p-value per metric. Only methods with results on every dataset are ranked (a partial run)."""
    ranks, friedman = {}, {}
    for metric in rank_metrics:
        loss = loss_values(values[metric], metric, targets)
        scores = loss.groupby(level=["dataset", "method"]).mean().unstack("method").dropna(axis=1, how="any")
        if scores.shape[1] < 2:
            continue
        ranks[metric] = average_ranks(scores)
        friedman[metric] = friedman_pvalue(scores)
    return pd.DataFrame(ranks), friedman


def cliques(ranks: pd.Series, cd: float) -> list[tuple[str, ...]]:
    """Maximal groups of methods (sorted by rank) whose mean ranks lie within ``cd`` of each other: the
    groups a critical-difference figure joins with a bar (Nemenyi: no significant difference inside)."""
    ordered = ranks.sort_values()
    names, values = list(ordered.index), ordered.to_numpy(float)
    groups, last_end = [], -1
    for i in range(len(values)):
        j = i
        while j + 1 < len(values) and values[j + 1] - values[i] <= cd:
            j += 1
        if j > i and j > last_end:
            groups.append(tuple(names[i:j + 1]))
            last_end = j
    return groups


# ------------------------------------------------------------------------------------------ drawing
def draw_critical_difference(ranks: pd.Series, cd: float, labels: dict[str, str], title: str):
    """Demsar's (2006, Fig. 1) critical-difference diagram: mean ranks on an axis, the CD as a bar, methods
    not significantly different (Nemenyi) joined by thick lines."""
    import matplotlib.pyplot as plt

    ordered = ranks.sort_values()
    groups = cliques(ordered, cd)
    k = len(ordered)
    half = math.ceil(k / 2)
    height = 1.2 + 0.28 * half + 0.12 * len(groups)
    fig, ax = plt.subplots(figsize=(9, height))
    lo, hi = 1, max(k, 2)
    ax.set_xlim(lo - 0.5, hi + 0.5)
    ax.set_ylim(-(half + 1.5 + 0.3 * len(groups)) * 0.3, 1.2)
    ax.axis("off")
    ax.hlines(0, lo, hi, color="k", lw=1)
    for tick in range(lo, hi + 1):
        ax.vlines(tick, 0, 0.08, color="k", lw=1)
        ax.text(tick, 0.14, str(tick), ha="center", va="bottom", fontsize=8)
    # the critical difference, top left
    ax.hlines(0.75, lo, lo + cd, color="k", lw=1.5)
    ax.vlines([lo, lo + cd], 0.7, 0.8, color="k", lw=1.5)
    ax.text(lo + cd / 2, 0.85, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8)
    for i, (method, rank) in enumerate(ordered.items()):
        left = i < half
        row = i if left else k - 1 - i
        y = -0.3 * (row + 1)
        x_text = lo - 0.4 if left else hi + 0.4
        ax.plot([rank, rank, x_text], [0, y, y], color="0.35", lw=0.8)
        ax.text(x_text, y, f"{labels.get(method, method)} ({rank:.2f})", ha="right" if left else "left",
                va="center", fontsize=8)
    for j, group in enumerate(groups):
        y = -0.08 - 0.06 * j  # just below the axis, one level per group
        ax.hlines(y, ordered[group[0]] - 0.03, ordered[group[-1]] + 0.03, color="k", lw=2.5)
    ax.set_title(title, fontsize=9)
    return fig


# ------------------------------------------------------------------------------------------ rendering
def _cell(mean: float, std: float, bold: bool, digits: int = 3) -> str:
    if not np.isfinite(mean):
        return "–"
    text = f"{mean:.{digits}g} ± {std:.2g}"
    return f"<b>{text}</b>" if bold else text


def _html_table(header: list[str], rows: list[list[str]], caption: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (f'<div class="scroll"><table class="results"><caption>{escape(caption)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    def plain(cell: str) -> str:
        return cell.replace("<b>", "**").replace("</b>", "**")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(plain(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _dataset_rows(table: pd.DataFrame, metrics: list[str], primary: str, labels: dict[str, str]) -> list[list[str]]:
    order = table[(primary, "mean")].sort_values(kind="stable").index
    rows = []
    for method in order:
        cells = [escape(labels.get(method, method))]
        for metric in metrics:
            bold = bool(table.loc[method, (metric, "best")] or table.loc[method, (metric, "tied")])
            digits = 2 if metric == TRAIN_SECONDS else 3
            cells.append(_cell(table.loc[method, (metric, "mean")], table.loc[method, (metric, "std")], bold, digits))
        p = table.loc[method, (primary, "p_holm")]
        cells.append("best" if table.loc[method, (primary, "best")] else (f"{p:.3g}" if np.isfinite(p) else "–"))
        rows.append(cells)
    return rows


def build_leaderboard(spec: dict, runs: pd.DataFrame, files: RunFiles, out_dir: Path,
                      labels: dict[str, str]) -> Leaderboard:
    """Tables (HTML section + Markdown under ``out_dir/tables``) and the critical-difference figure; train time
    from the planned runs' train_stats.json (``files``)."""
    from uqcal.methods.api import method_table
    from uqcal.pipeline.report.figures.base import Rendered, figure_stem, save_figure

    metrics = list(spec.get("metrics") or ["rmse", "nlpd", "crps", "ece", "ce", "cov90", "sharpness", TRAIN_SECONDS])
    primary = spec.get("primary", "nlpd")
    rank_metrics = list(spec.get("rank_metrics") or [primary])
    targets = {k: float(v) for k, v in (spec.get("targets") or {"cov90": 0.9}).items()}
    test, alpha = spec.get("test", "wilcoxon"), float(spec.get("alpha", 0.05))
    recalibrations = spec.get("recalibrations") or {}
    names = {**LABELS, **(spec.get("metric_names") or {})}
    if runs.empty:
        html = "<p>No runs yet: nothing to rank.</p>"
        return Leaderboard({}, pd.DataFrame(), math.nan, {}, html)
    depends_on = {name: entry.depends_on for name, entry in method_table(files.family).items()}
    values = per_seed_values(runs, files, metrics, depends_on)
    files: list[Path] = []
    parts = [f"<p>Bold: the best mean, and every method whose paired {escape(test)} test against it over the "
             f"seeds is not significant at {alpha:g} after Holm's correction over the comparisons with the best. "
             f"Coverage is judged by its distance from {', '.join(f'{v:g}' for v in targets.values())}. "
             f"Rows sorted by {escape(names.get(primary, primary))}; the last column is its Holm-adjusted "
             f"p-value against the best. {escape(spec.get('protocol', ''))}</p>"]
    header = ["method", *(names.get(m, m) for m in metrics), f"p Holm ({names.get(primary, primary)})"]
    per_dataset = {}
    for (dataset, setting), block in values.groupby(level=["dataset", "setting"], sort=False):
        block = block.droplevel(["dataset", "setting"])
        table = dataset_table(block, metrics, targets, test, alpha)
        per_dataset[dataset] = table
        rows = _dataset_rows(table, metrics, primary, labels)
        n_seeds = int(block.index.get_level_values("seed").nunique())
        caption = f"{dataset} ({setting}): mean ± std over {n_seeds} splits"
        parts.append(f"<h3>{escape(dataset)}</h3>" + _html_table(header, rows, caption))
        path = out_dir / "tables" / f"leaderboard__{dataset}.md"
        write_text(path, f"{caption}\n\n" + _markdown_table(header, rows))
        files.append(path)
        if recalibrations:
            recal_header, recal_rows = recalibration_rows(table, recalibrations, spec.get("recalibration_metrics")
                                                          or [primary, "crps", "ece", "cov90"], names, labels)
            parts.append(_html_table(recal_header, recal_rows, f"{dataset}: method × recalibration "
                                     "(bold: best or tied with the best of all the methods, as above)"))
            path = out_dir / "tables" / f"recalibration__{dataset}.md"
            write_text(path, _markdown_table(recal_header, recal_rows))
            files.append(path)
    ranks, friedman = rank_table(values, rank_metrics, targets)
    if ranks.empty or rank_metrics[0] not in ranks:
        parts.insert(1, "<p>Fewer than two methods have results on every dataset: no ranks yet.</p>")
        return Leaderboard(per_dataset, ranks, math.nan, friedman, "\n".join(parts), files)
    ranks = ranks.dropna(axis=0, how="any")
    n_datasets = values.index.get_level_values("dataset").nunique()
    cd = nemenyi_critical_difference(len(ranks), n_datasets, alpha) if len(ranks) >= 2 else math.nan
    rank_rows = [[escape(labels.get(m, m)), *(f"{ranks.loc[m, c]:.2f}" for c in ranks.columns)]
                 for m in ranks.sort_values(rank_metrics[0]).index]
    rank_header = ["method", *(f"mean rank, {names.get(c, c)}" for c in ranks.columns)]
    friedman_text = ", ".join(f"{names.get(m, m)} {p:.3g}" for m, p in friedman.items())
    caption = (f"Mean rank over {n_datasets} datasets (1 = best). Friedman p: {friedman_text}. Nemenyi critical "
               f"difference at {alpha:g} for {len(ranks)} methods on {n_datasets} datasets: {cd:.2f}")
    parts.insert(1, "<h3>Mean rank across datasets</h3>" + _html_table(rank_header, rank_rows, caption))
    path = out_dir / "tables" / "leaderboard__ranks.md"
    write_text(path, caption + "\n\n" + _markdown_table(rank_header, rank_rows))
    files.append(path)
    fig = draw_critical_difference(ranks[rank_metrics[0]], cd, labels,
                                   f"Mean rank ({names.get(rank_metrics[0], rank_metrics[0])}) over {n_datasets} "
                                   f"datasets; bars join methods within the Nemenyi CD")
    stem = figure_stem("critical_difference", "all", rank_metrics[0])
    rendered = Rendered("Critical-difference diagram", caption, stem, save_figure(fig, out_dir / "figures", stem))
    files += list(rendered.files.values())
    svg = rendered.files["svg"].name
    parts.insert(2, f'<figure><img src="figures/{escape(svg)}" alt="critical-difference diagram">'
                    f"<figcaption>{escape(caption)}. Bars join methods whose mean ranks differ by less than the "
                    "CD (not significantly different, Nemenyi; Demšar 2006).</figcaption></figure>")
    return Leaderboard(per_dataset, ranks, cd, friedman, "\n".join(parts), files)


def recalibration_rows(table: pd.DataFrame, recalibrations: dict[str, str], metrics: list[str],
                       names: dict[str, str], labels: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """Rows = base methods that have a recalibrated variant; columns = metric x (raw, each recalibration)."""
    methods = list(table.index)
    bases = [m for m in methods if any(f"{m}_{suffix}" in methods for suffix in recalibrations)]
    variants = [("", "raw"), *((f"_{suffix}", label) for suffix, label in recalibrations.items())]
    header = ["method", *(f"{names.get(metric, metric)}: {label}" for metric in metrics for _, label in variants)]
    rows = []
    for base in bases:
        cells = [escape(labels.get(base, base))]
        for metric in metrics:
            for suffix, _ in variants:
                name = base + suffix
                if name not in table.index:
                    cells.append("–")
                    continue
                bold = bool(table.loc[name, (metric, "best")] or table.loc[name, (metric, "tied")])
                cells.append(_cell(table.loc[name, (metric, "mean")], table.loc[name, (metric, "std")], bold))
        rows.append(cells)
    return header, rows

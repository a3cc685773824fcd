"""Ours against the paper, one figure per paper table: each method's mean with its 95 % confidence interval over
runs beside the paper's mean ± its reported spread, one panel per (metric, dataset / setting) with a published
number. What a reader of a reproduction looks at first."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from uqcal.pipeline.report.figures.base import Rendered, figure_stem, save_figure
from uqcal.pipeline.report.palette import OKABE_ITO
from uqcal.pipeline.report.tables import BuiltTable

# Axis words for the metrics the papers' tables print (the table's own name where none is listed).
METRIC_LABELS = {
    "rmse": "RMSE (target units)", "mse": "MSE (target units²)", "nlpd": "NLPD (nats)", "nll": "NLL (nats)",
    "ce": "calibration error CE", "te": "total error TE", "ece": "ECE", "mce": "MCE", "acc": "accuracy",
    "accuracy": "accuracy", "crps": "CRPS (target units)", "cov95": "95 % interval coverage",
    "cov68": "68 % interval coverage", "train_seconds": "training time (s)", "gp_iterations": "GP iterations",
}
PANELS_PER_ROW = 3


def confidence_interval(mean: float, std: float | None, n: int) -> float | None:
    """Half-width of the 95 % t confidence interval of a mean over n runs (None with fewer than two)."""
    if std is None or n < 2 or not np.isfinite(std):
        return None
    return float(stats.t.ppf(0.975, n - 1) * std / np.sqrt(n))


def paper_panels(table: BuiltTable) -> list[tuple[str, str, list]]:
    """(metric, row label, [(method, our mean, our half-width, paper mean, paper spread, verdict)]) for every
    (metric, row) with a published number on the paper's own data: a stand-in's row would put our numbers for one
    dataset and the paper's for another on one axis."""
    panels = []
    for metric in table.metrics:
        for row in table.rows:
            if row.relation.kind != "same":
                continue
            entries = []
            for method in table.methods:
                cell = row.cells.get((metric, method))
                if cell is None or cell.paper is None:
                    continue
                spread = cell.paper.get("std")
                entries.append((method, cell.mean, None if cell.mean is None else confidence_interval(
                    cell.mean, cell.std, cell.n), float(cell.paper["mean"]), None if spread is None else float(spread),
                    cell.verdict))
            if entries:
                panels.append((metric, f"{row.relation.label()} / {row.setting}", entries))
    return panels


def build_paper_comparison(table: BuiltTable, out_dir, names: dict[str, str]) -> Rendered | None:
    """The figure of one table against its paper table, or None where the table has no published number."""
    if table.paper_table is None:
        return None
    panels = paper_panels(table)
    if not panels:
        return None
    ncols = min(PANELS_PER_ROW, len(panels))
    nrows = -(-len(panels) // ncols)
    tallest = max(len(entries) for _, _, entries in panels)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.9 * ncols, (0.7 + 0.34 * tallest) * nrows + 0.6),
                             squeeze=False, layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (metric, label, entries) in zip(axes.flat, panels, strict=False):
        y = np.arange(len(entries))
        ours = [(i, e) for i, e in zip(y, entries, strict=True) if e[1] is not None]
        ax.errorbar([e[3] for e in entries], y + 0.18, xerr=[e[4] or 0.0 for e in entries], fmt="s", ms=4,
                    color="0.45", capsize=2, label="paper: mean ± its spread")
        if ours:
            ax.errorbar([e[1] for _, e in ours], [i - 0.18 for i, _ in ours], xerr=[e[2] or 0.0 for _, e in ours],
                        fmt="o", ms=4, color=OKABE_ITO[0], capsize=2, label="ours: mean, 95 % CI over runs")
        ax.set_yticks(y, [names.get(e[0], e[0]) for e in entries])
        ax.set_ylim(len(entries) - 0.5, -0.5)  # the table's first method on top
        ax.set_xlabel(METRIC_LABELS.get(metric, metric))
        ax.set_title(label, fontsize=8)
    handles = {}
    for ax in axes.flat:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(text, handle)
    fig.legend(handles.values(), handles.keys(), fontsize=7, loc="outside upper center", ncols=2)
    stem = figure_stem(f"paper_{table.id}")
    paper_name = table.paper_table.get("table", "the paper's table")
    caption = (f"Each method's mean with its 95 % confidence interval over runs (ours, circles) beside the paper's "
               f"mean ± its reported spread ({paper_name}, squares), on the paper's own data only.")
    return Rendered(f"{table.title}: ours against {paper_name}", caption, stem, save_figure(fig, out_dir, stem),
                    kind="paper")

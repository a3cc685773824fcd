"""Calibration figures: the regression calibration curve (PIT), learned recalibration maps, the classification
reliability diagram, BO's running calibration score, and absolute error against predicted std."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from uqcal.core.io import load_torch
from uqcal.core.predictive import CategoricalPredictive, RegressionPredictive
from uqcal.pipeline.layout import RunLayout
from uqcal.pipeline.report.figures.base import (
    FigureContext,
    Skipped,
    mean_se_band,
    method_label,
    panel_keys,
    panel_methods,
    pit_values,
    render,
)
from uqcal.pipeline.report.palette import OKABE_ITO
from uqcal.plots import calibration_curve, reliability_diagram


class StoredPIT(RegressionPredictive):
    """A run's predictive as predictions.parquet keeps it: its PIT values F_i(y_i) (the ``pit`` column, or the Gaussian
    CDF of ``mean``/``std``), which is all a calibration curve reads. The values are F at the run's own targets, so
    ``cdf(y)`` reads only how many targets ``y`` holds."""

    def __init__(self, pit):
        self.values = np.clip(np.asarray(pit, dtype=np.float64), 0.0, 1.0)

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def cdf(self, y) -> np.ndarray:
        if len(y) != len(self):
            raise ValueError(f"StoredPIT: y has {len(y)} values for {len(self)} stored PIT values")
        return self.values


def build_pit_calibration(spec: dict, ctx: FigureContext) -> list:
    """Predicted-vs-empirical CDF (regression calibration curve, ``uqcal.plots.calibration_curve``): for p in
    (0,1), fraction of PIT ≤ p."""
    out = []
    for dataset, setting in panel_keys(ctx, spec):
        fig, ax = plt.subplots(figsize=(4.2, 4.0))
        drawn = 0
        for method in panel_methods(ctx, spec, dataset, setting):
            frame = ctx.files.load_predictions(dataset, setting, method)
            pit = None if frame is None else pit_values(frame)
            if pit is None or len(pit) == 0:
                continue
            # Okabe–Ito colours; past the eighth method the dash tells two methods of one colour apart
            colour, dashes = OKABE_ITO[drawn % len(OKABE_ITO)], ("-", "--")[drawn // len(OKABE_ITO) % 2]
            calibration_curve(StoredPIT(pit), pit, ax=ax, label=method_label(ctx, method), color=colour, ls=dashes)
            # ``also: {column: legend suffix}``: the same method's other PIT values, e.g. metacal's before
            # its calibration map (Iwata & Kumagai Fig. 3: uncalibrated vs calibrated CDF)
            for column, suffix in (spec.get("also") or {}).items():
                other = frame[column].dropna().to_numpy(float) if column in frame else np.array([])
                if len(other):
                    calibration_curve(StoredPIT(other), other, ax=ax, label=method_label(ctx, method) + suffix,
                                      color=colour, ls=":", marker=None)
            drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        ax.set_title(f"{dataset} / {setting}")
        ax.legend(fontsize=7)
        out.append(render(spec, ctx, fig, dataset, setting, "Calibration"))
    return out or [Skipped(spec.get("title", spec["id"]), "no predictions.parquet with pit or mean/std columns")]


def build_calibration_map(spec: dict, ctx: FigureContext) -> list:
    """Learned recalibration maps R: [0, 1] -> [0, 1] (isotonic R of QR Sec. 3 / Kuleshov et al., BO's
    Algorithm 3 at the last step), read from each run's model.pt keys ``x``/``y``; one line per seed."""
    x_key, y_key = spec["x"], spec["y"]
    out = []
    for dataset, setting in panel_keys(ctx, spec):
        fig, ax = plt.subplots(figsize=(3.8, 3.6))
        drawn = 0
        for method in panel_methods(ctx, spec, dataset, setting):
            color = f"C{drawn % 10}"
            labelled = False
            for _, path in ctx.files.files(dataset, setting, method, RunLayout.MODEL):
                # weights_only: a model.pt pulled from a shared remote must not run code when the report reads it
                state = load_torch(path, map_location="cpu")
                if x_key not in state or y_key not in state:
                    continue
                ax.plot(np.asarray(state[x_key]), np.asarray(state[y_key]), color=color, lw=0.8, alpha=0.6,
                        label=None if labelled else method_label(ctx, method))
                labelled = True
            drawn += int(labelled)
        if not drawn:
            plt.close(fig)
            continue
        ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="identity")
        ax.set(xlabel=spec.get("xlabel", "predicted CDF level p"), ylabel=spec.get("ylabel", "R(p)"),
               xlim=(0, 1), ylim=(0, 1), title=f"{dataset} / {setting}")
        ax.legend(fontsize=7)
        out.append(render(spec, ctx, fig, dataset, setting, "Calibration map"))
    return out or [Skipped(spec.get("title", spec["id"]), f"no model.pt with keys {x_key}, {y_key}")]


def _class_probs(frame: pd.DataFrame, prefix: str) -> CategoricalPredictive | None:
    """Columns ``<prefix>0``, ``<prefix>1``, ... of a predictions frame as a categorical predictive."""
    columns = sorted((c for c in frame.columns if re.fullmatch(rf"{re.escape(prefix)}\d+", c)),
                     key=lambda c: int(c[len(prefix):]))
    if not columns or frame[columns].isna().any().any():
        return None
    probs = frame[columns].to_numpy(float)
    return CategoricalPredictive(probs / probs.sum(axis=1, keepdims=True))  # stored rounded: renormalise


def build_reliability(spec: dict, ctx: FigureContext) -> list:
    """Classification reliability diagrams (``uqcal.plots.reliability_diagram``): accuracy vs confidence in 15
    equal-width bins with the points per bin, the raw predictive beside the recalibrated one (``recalibrated:
    <column prefix>``, e.g. ``ts_p`` for temperature scaling), one panel per method, at most three per row."""
    out = []
    prefix = spec.get("recalibrated")
    for dataset, setting in panel_keys(ctx, spec):
        panels = []
        for method in panel_methods(ctx, spec, dataset, setting):
            frame = ctx.files.load_predictions(dataset, setting, method)
            raw = None if frame is None or "label" not in frame else _class_probs(frame, "p")
            if raw is not None:
                recal = _class_probs(frame, prefix) if prefix else None
                panels.append((method, raw, recal, frame["label"].to_numpy().astype(np.int64)))
        if not panels:
            continue
        ncols = min(3, len(panels))
        nrows = -(-len(panels) // ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(3.9 * ncols, 3.4 * nrows), squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        for ax, (method, raw, recal, labels) in zip(axes.flat, panels, strict=False):
            reliability_diagram(raw, labels, recalibrated=recal, ax=ax)
            ax.set_title(method_label(ctx, method))
        out.append(render(spec, ctx, fig, dataset, setting, "Reliability"))
    return out or [Skipped(spec.get("title", spec["id"]), "no few-shot predictions.parquet with label and p0.. columns")]


def build_running_calibration(spec: dict, ctx: FigureContext) -> list:
    """Calibration score (Kuleshov et al. 2018) of the one-step-ahead PIT values seen up to each
    iteration, mean ± s.e. over seeds (D&K Figs. 2-3, top). ``columns``: {PIT column: legend suffix}."""
    from uqcal.metrics import calibration_score

    x_col, min_points = spec.get("x", "iteration"), int(spec.get("min_points", 3))
    columns = spec.get("columns") or {"pit": ""}
    out = []
    for dataset, setting in panel_keys(ctx, spec):
        fig, ax = plt.subplots(figsize=(4.8, 3.2))
        drawn = 0
        for method in panel_methods(ctx, spec, dataset, setting):
            frame = ctx.files.load_predictions(dataset, setting, method)
            if frame is None or x_col not in frame:
                continue
            for column, suffix in columns.items():
                if column not in frame or not frame[column].notna().any():
                    continue
                rows = {}
                for seed, run in frame.sort_values(x_col).groupby("seed"):
                    run = run[run[column].notna()]
                    pits, steps = run[column].to_numpy(float), run[x_col].to_numpy()
                    rows[seed] = {
                        steps[t]: calibration_score(pits[: t + 1]) for t in range(min_points - 1, len(pits))
                    }
                table = pd.DataFrame.from_dict(rows, orient="index").sort_index(axis=1)
                if not table.empty:
                    mean_se_band(ax, table, method_label(ctx, method) + suffix)
                    drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        ax.set(xlabel=spec.get("xlabel", x_col), ylabel=spec.get("ylabel", "calibration score"),
               title=f"{dataset} / {setting}")
        ax.legend(fontsize=7)
        out.append(render(spec, ctx, fig, dataset, setting, "Calibration score by step"))
    return out or [Skipped(spec.get("title", spec["id"]), f"no predictions with {x_col} and PIT columns {list(columns)}")]


def build_error_vs_std(spec: dict, ctx: FigureContext) -> list:
    """Absolute error |y − mean| against predicted std, one panel per method (RIO Fig. 3-style)."""
    out = []
    for dataset, setting in panel_keys(ctx, spec):
        panels = []
        for method in panel_methods(ctx, spec, dataset, setting):
            frame = ctx.files.load_predictions(dataset, setting, method)
            if frame is not None and {"y", "mean", "std"} <= set(frame.columns):
                panels.append((method, frame))
        if not panels:
            continue
        fig, axes = plt.subplots(1, len(panels), figsize=(3.0 * len(panels), 3.0), squeeze=False, sharey=True)
        for ax, (method, frame) in zip(axes[0], panels, strict=False):
            # Tens of thousands of points (diamonds: 108k) as SVG vectors made a 29 MB file that took most of
            # the report's time to write and a browser long to draw: dense clouds go in as a bitmap layer.
            sns.scatterplot(x=frame["std"], y=(frame["y"] - frame["mean"]).abs(), s=6, ax=ax, linewidth=0,
                            rasterized=len(frame) > 5000)
            top = float(max(frame["std"].max(), 1e-12))
            ax.plot([0, top], [0, 1.96 * top], "r--", lw=1, label="1.96 σ")
            ax.set(title=method_label(ctx, method), xlabel="predicted std σ (target units)",
                   ylabel="absolute error |y − mean| (target units)")
        axes[0][0].legend(fontsize=7)
        out.append(render(spec, ctx, fig, dataset, setting, "Error vs std"))
    return out or [Skipped(spec.get("title", spec["id"]), "no predictions.parquet with y, mean, std")]

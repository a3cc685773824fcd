"""Curves: a per-run curve over seeds (BO's best-so-far, a learning curve), one method's paired improvement over
another, curves a method logs in train_stats.json, and BO's predictive intervals at chosen iterations."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from uqcal.pipeline.layout import RunLayout
from uqcal.pipeline.report.figures.base import (
    FigureContext,
    Rendered,
    Skipped,
    figure_stem,
    mean_se_band,
    method_label,
    panel_keys,
    panel_methods,
    per_seed_curve,
    render,
    save_figure,
)
from uqcal.pipeline.report.palette import OKABE_ITO


def build_curve(spec: dict, ctx: FigureContext) -> list:
    """Mean over seeds of a per-run curve (``file``: x column vs y column), with a standard-error band."""
    out = []
    filename, x_col, y_col = spec.get("file", RunLayout.PREDICTIONS), spec["x"], spec["y"]
    for dataset, setting in panel_keys(ctx, spec):
        fig, ax = plt.subplots(figsize=(4.8, 3.4))
        drawn = 0
        for method in panel_methods(ctx, spec, dataset, setting):
            frame = ctx.files.load_predictions(dataset, setting, method, filename)
            if frame is None or x_col not in frame or y_col not in frame:
                continue
            hue = spec.get("hue")
            groups = frame.groupby(hue) if hue and hue in frame else [(None, frame)]
            for key, part in groups:
                label = method_label(ctx, method) + (f" / {key}" if key is not None else "")
                mean_se_band(ax, per_seed_curve(part, x_col, y_col), label)
                drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        ax.set(xlabel=spec.get("xlabel", x_col), ylabel=spec.get("ylabel", y_col), title=f"{dataset} / {setting}")
        if spec.get("logy"):
            ax.set_yscale("symlog")
        ax.legend(fontsize=7)
        stem = figure_stem(spec["id"], dataset, setting)
        out.append(
            Rendered(
                f"{spec.get('title', y_col)}: {dataset} / {setting}",
                spec.get("caption", "") + " Band: ± one standard error over seeds.",
                stem,
                save_figure(fig, ctx.out_dir, stem),
            )
        )
    return out or [Skipped(spec.get("title", spec["id"]), f"no per-run {filename} with columns {x_col}, {y_col}")]


def build_paired_improvement(spec: dict, ctx: FigureContext) -> list:
    """Per-repeat improvement of method ``a`` over ``b`` on a per-iteration curve (``b − a`` for a
    minimised ``y``, e.g. best-so-far), mean ± s.e. over the paired seeds (D&K Fig. 4, top)."""
    x_col, y_col, a, b = spec["x"], spec["y"], spec["a"], spec["b"]
    out = []
    for dataset, setting in panel_keys(ctx, spec):
        curves = {}
        for method in (a, b):
            frame = ctx.files.load_predictions(dataset, setting, method)
            if frame is not None and {x_col, y_col} <= set(frame.columns):
                curves[method] = per_seed_curve(frame, x_col, y_col)
        if len(curves) < 2:
            continue
        paired = curves[b].sub(curves[a]).dropna(how="all")  # aligned on seed and iteration
        if paired.empty:
            continue
        fig, ax = plt.subplots(figsize=(4.8, 3.2))
        mean_se_band(ax, paired, f"{method_label(ctx, b)} − {method_label(ctx, a)}", color=OKABE_ITO[3])
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set(xlabel=spec.get("xlabel", x_col), ylabel=spec.get("ylabel", f"improvement in {y_col}"),
               title=f"{dataset} / {setting} ({len(paired)} paired repeats)")
        ax.legend(fontsize=7)
        out.append(render(spec, ctx, fig, dataset, setting, "Paired improvement"))
    return out or [Skipped(spec.get("title", spec["id"]), f"needs paired runs of {a} and {b} with {x_col}, {y_col}")]


def build_stats_xy(spec: dict, ctx: FigureContext) -> list:
    """A per-run curve logged in train_stats.json under ``key`` as [[x, y], ...] (e.g. the meta-training
    loss every few episodes), one panel per method (their objectives differ in scale), mean ± s.e. over
    seeds."""
    out = []
    for dataset, setting in panel_keys(ctx, spec):
        panels = []
        for method in panel_methods(ctx, spec, dataset, setting):
            rows = []
            for seed, logged in ctx.files.logged(dataset, setting, method, spec["key"]):
                for x, y in logged:
                    rows.append({"seed": RunLayout.seed_dir_name(seed), "x": float(x), "y": float(y)})
            if rows:
                panels.append((method, pd.DataFrame(rows).pivot_table(index="seed", columns="x", values="y")))
        if not panels:
            continue
        ncols = min(3, len(panels))  # three readable panels per row rather than five squeezed ones
        nrows = -(-len(panels) // ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(3.8 * ncols, 2.9 * nrows), squeeze=False)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        for ax, (method, table) in zip(axes.flat, panels, strict=False):
            mean_se_band(ax, table, method_label(ctx, method))
            ax.set(title=method_label(ctx, method), xlabel=spec.get("xlabel", "x"))
        for row in axes:
            row[0].set_ylabel(spec.get("ylabel", spec["key"]))
        out.append(render(spec, ctx, fig, dataset, setting, spec["key"]))
    return out or [Skipped(spec.get("title", spec["id"]), f"no train_stats.json with {spec['key']}")]


def build_stats_curves(spec: dict, ctx: FigureContext) -> list:
    """Curves a method logs in train_stats.json (e.g. MD vs GD inner-loop ELBO), mean ± s.e. over curves."""
    out = []
    key = spec["key"]
    for dataset, setting in panel_keys(ctx, spec):
        for method in panel_methods(ctx, spec, dataset, setting):
            curves = ctx.files.stats_curves(dataset, setting, method, key)
            if not curves:
                continue
            fig, ax = plt.subplots(figsize=(4.6, 3.4))
            for name, values in curves.items():
                mean_se_band(ax, pd.DataFrame(values), f"{name} (n={len(values)})")
            ax.set(
                xlabel=spec.get("xlabel", "step"),
                ylabel=spec.get("ylabel", key),
                title=f"{dataset} / {setting}",
            )
            ax.legend(fontsize=7)
            stem = figure_stem(spec["id"], dataset, setting)
            out.append(
                Rendered(
                    f"{spec.get('title', key)}: {dataset} / {setting} ({method_label(ctx, method)})",
                    spec.get("caption", ""),
                    stem,
                    save_figure(fig, ctx.out_dir, stem),
                )
            )
            break  # one method's log suffices (every method logs the same comparison)
    return out or [Skipped(spec.get("title", spec["id"]), f"no train_stats.json with '{key}' curves")]


_INTERVALS = (  # (column suffix, legend label, drawn as a band?) in snapshot files
    ("", "95 % interval", True),
    ("_base", "GP 95 % interval", True),
    ("_recal", "recalibrated 95 %", False),
)


def _first_coordinate(point) -> float:
    """A BO query point as stored in predictions.parquet (a list, or its JSON text) -> its first coordinate."""
    return float(np.ravel(json.loads(point) if isinstance(point, str) else point)[0])


def build_interval_snapshots(spec: dict, ctx: FigureContext) -> list:
    """Predictive intervals over the domain at chosen iterations (Forrester, paper Fig. 1), one row per
    method, for the first seed.

    Input per run: ``snapshots.parquet`` with columns iteration, x, mean, interval bounds ``lower``/``upper``
    or ``lower_base``/``upper_base`` (+ ``lower_recal``/``upper_recal``, drawn where they differ from the
    base), optional ``f`` (true function). The points the GP had seen (predictions.parquet rows of earlier
    iterations) are dots; the point the step then queried is a cross.
    """
    filename = spec.get("file", "snapshots.parquet")
    out = []
    for dataset, setting in panel_keys(ctx, spec):
        snaps = {}
        for method in panel_methods(ctx, spec, dataset, setting):
            frame = ctx.files.load_predictions(dataset, setting, method, filename)
            if frame is None or not {"iteration", "x", "mean"} <= set(frame.columns):
                continue
            bands = [b for b in _INTERVALS if {f"lower{b[0]}", f"upper{b[0]}"} <= set(frame.columns)]
            if not bands:
                continue
            seed = frame["seed"].min()
            observed = ctx.files.load_predictions(dataset, setting, method)
            if observed is not None:
                observed = observed[observed["seed"] == seed]
            snaps[method] = (frame[frame["seed"] == seed], bands, observed)
        if not snaps:
            continue
        available = sorted(next(iter(snaps.values()))[0]["iteration"].unique())
        iterations = [it for it in spec.get("iterations") or available[:4] if it in available]
        fig, axes = plt.subplots(
            len(snaps), len(iterations), figsize=(2.8 * len(iterations), 2.4 * len(snaps) + 0.6), squeeze=False,
            sharex=True, layout="constrained",
        )
        for i, (method, (frame, bands, observed)) in enumerate(snaps.items()):
            for j, it in enumerate(iterations):
                ax, part = axes[i][j], frame[frame["iteration"] == it].sort_values("x")
                if "f" in part:
                    ax.plot(part["x"], part["f"], color=OKABE_ITO[2], lw=1, label="objective")
                ax.plot(part["x"], part["mean"], lw=1, label="GP mean")
                base_lower = None
                for suffix, label, band in bands:
                    lower, upper = part[f"lower{suffix}"], part[f"upper{suffix}"]
                    if band:
                        ax.fill_between(part["x"], lower, upper, alpha=0.25, label=label)
                        base_lower = lower
                    elif base_lower is None or not np.allclose(lower, base_lower):
                        ax.plot(part["x"], lower, "k--", lw=0.8, label=label)
                        ax.plot(part["x"], upper, "k--", lw=0.8)
                if observed is not None and {"iteration", "x", "y"} <= set(observed.columns):
                    xs = observed["x"].map(_first_coordinate)
                    seen, queried = observed["iteration"] < it, observed["iteration"] == it
                    ax.plot(xs[seen], observed["y"][seen], "ko", ms=3, label="observed")
                    ax.plot(xs[queried], observed["y"][queried], "x", color=OKABE_ITO[3], ms=6, label="next query")
                ax.set_title(f"{method_label(ctx, method)}, iteration {it}", fontsize=8)
                if i == len(snaps) - 1:
                    ax.set_xlabel(spec.get("xlabel", "x"))
                if j == 0:
                    ax.set_ylabel(spec.get("ylabel", "f(x)"))
        handles: dict = {}
        for ax in axes.flat:  # one legend for every panel, below them: no panel's data under it
            for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
                handles.setdefault(text, handle)
        fig.legend(handles.values(), handles.keys(), fontsize=7, loc="outside lower center", ncols=len(handles))
        out.append(render(spec, ctx, fig, dataset, setting, "Interval snapshots"))
    return out or [
        Skipped(
            spec.get("title", spec["id"]),
            f"no per-run {filename} (columns iteration, x, mean and lower/upper or lower_base/upper_base)",
        )
    ]

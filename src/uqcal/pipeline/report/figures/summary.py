"""Figures drawn from the summary's means (summary.csv): a metric against a parameter (sensitivity), one metric per
method (bars, e.g. timing), and two metrics against each other."""

from __future__ import annotations

import fnmatch

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, NullFormatter

from uqcal.pipeline.report.figures.base import FigureContext, Rendered, Skipped, figure_stem, method_label, save_figure
from uqcal.pipeline.report.palette import OKABE_ITO


def _param_value(ctx: FigureContext, dataset: str, setting: str, method: str, param: str):
    """Where a sensitivity figure finds its x: the setting's config entry, else a per-run metric of that
    name (e.g. ``n_train_tasks``, the tasks a run actually used), else the method's resolved parameter
    (class default <- config entry <- registry override, e.g. ``metacal_l01`` -> lam 0.1)."""
    family = (ctx.config.get("families") or {}).get(ctx.family) or {}
    setting_params = (family.get("settings") or {}).get(setting) or {}
    if param in setting_params:
        return setting_params[param]
    logged = ctx.summary[
        (ctx.summary["dataset"] == dataset)
        & (ctx.summary["setting"].astype(str) == setting)
        & (ctx.summary["method"] == method)
        & (ctx.summary["metric"] == param)
    ]
    if len(logged):
        return float(logged["mean"].iloc[0])
    from uqcal.methods.api import resolve_params

    try:
        return resolve_params(ctx.family, method, (family.get("methods") or {}).get(method)).get(param)
    except KeyError:  # a method the registry does not know (a results tree from elsewhere)
        return ((family.get("methods") or {}).get(method) or {}).get(param)


def _series_label(spec: dict, ctx: FigureContext, method: str) -> str | None:
    """``series: {label: [method glob, ...]}`` groups a method and its variants into one line; ``series:
    method`` draws one line per method; None leaves the method out."""
    series = spec.get("series")
    if isinstance(series, dict):
        for label, patterns in series.items():
            if any(fnmatch.fnmatchcase(method, pattern) for pattern in patterns):
                return str(label)
        return None
    return method_label(ctx, method) if series == "method" else ""


def build_sensitivity(spec: dict, ctx: FigureContext) -> list:
    """Metric (mean ± std over seeds) against a parameter (λ, k, #tasks): one line per series and
    (dataset, setting) that has runs at two or more values of the parameter."""
    param, metric = spec["param"], spec["metric"]
    frame = ctx.summary[ctx.summary["metric"] == metric].copy()
    if spec.get("methods"):
        frame = frame[frame["method"].isin(spec["methods"])]
    frame["series"] = [_series_label(spec, ctx, m) for m in frame["method"]]
    frame = frame[frame["series"].notna()]
    frame["x"] = [
        _param_value(ctx, str(d), str(s), m, param)
        for d, s, m in zip(frame["dataset"], frame["setting"], frame["method"], strict=True)
    ]
    frame = frame[frame["x"].notna()]
    frame["x"] = frame["x"].astype(float)
    lines = [
        (key, part.groupby("x")[["mean", "std"]].mean().sort_index())
        for key, part in frame.groupby(["series", "dataset", "setting"])
        if part["x"].nunique() >= 2
    ]
    if not lines:
        return [
            Skipped(
                spec.get("title", spec["id"]),
                f"needs runs at ≥ 2 values of '{param}' (setting, logged metric or method parameter) "
                f"with metric '{metric}' in one (dataset, setting)",
            )
        ]
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    for (series, dataset, setting), part in lines:
        label = " · ".join(str(p) for p in (series, dataset, setting) if p)
        ax.errorbar(part.index, part["mean"], yerr=part["std"].fillna(0), marker="o", capsize=3, label=label)
    if spec.get("logx"):
        ax.set_xscale("log")
    ax.set(xlabel=spec.get("xlabel", param), ylabel=spec.get("ylabel", metric))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)  # beside, off the data
    stem = figure_stem(spec["id"])
    return [
        Rendered(
            spec.get("title", f"{metric} vs {param}"),
            spec.get("caption", "") + " Error bars: ± one std over seeds.",
            stem,
            save_figure(fig, ctx.out_dir, stem),
        )
    ]


def build_bar(spec: dict, ctx: FigureContext) -> list:
    """Bar chart of one summary metric per method (e.g. timing), hue = dataset, error bars = std."""
    metric = spec["metric"]
    frame = ctx.summary[ctx.summary["metric"] == metric]
    if spec.get("methods"):
        frame = frame[frame["method"].isin(spec["methods"])]
    if frame.empty:
        return [Skipped(spec.get("title", spec["id"]), f"no '{metric}' in the summary")]
    frame = frame.groupby(["method", "dataset"], sort=False)[["mean", "std"]].mean().reset_index()
    datasets = list(dict.fromkeys(frame["dataset"]))
    methods = list(dict.fromkeys(frame["method"]))
    # Horizontal bars: the method names read as rows, however long, instead of colliding rotated tick labels.
    fig, ax = plt.subplots(figsize=(5.6, 0.9 + 0.28 * len(methods) * max(1, len(datasets)) ** 0.5))
    height = 0.8 / len(datasets)
    for j, dataset in enumerate(datasets):
        part = frame[frame["dataset"] == dataset].set_index("method").reindex(methods)
        ax.barh(np.arange(len(methods)) + j * height, part["mean"], height, xerr=part["std"].fillna(0), capsize=2,
                label=dataset)
    ax.set_yticks(np.arange(len(methods)) + 0.4 - height / 2, [method_label(ctx, m) for m in methods])
    ax.invert_yaxis()  # the spec's first method on top
    ax.set(xlabel=spec.get("ylabel", metric))
    if spec.get("reference_line") is not None:  # e.g. an interval's nominal coverage
        ax.axvline(float(spec["reference_line"]), color="k", ls="--", lw=1, label="nominal")
    if spec.get("logy"):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # labels on the decades only: minor ones crowd a short range
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    stem = figure_stem(spec["id"])
    return [Rendered(spec.get("title", metric), spec.get("caption", ""), stem, save_figure(fig, ctx.out_dir, stem))]


def build_metric_scatter(spec: dict, ctx: FigureContext) -> list:
    """Two summary metrics' means against each other, one point per method (RIO: RMSE vs noise variance)."""
    x_metric, y_metric = spec["x"], spec["y"]
    wide = (
        ctx.summary[ctx.summary["metric"].isin([x_metric, y_metric])]
        .pivot_table(index=["dataset", "setting", "method"], columns="metric", values="mean")
        .reset_index()
    )
    if x_metric not in wide or y_metric not in wide:
        return [Skipped(spec.get("title", spec["id"]), f"needs both '{x_metric}' and '{y_metric}' in the summary")]
    wide = wide.dropna(subset=[x_metric, y_metric])
    if wide.empty:
        return [Skipped(spec.get("title", spec["id"]), f"no method has both '{x_metric}' and '{y_metric}'")]
    keys = list(dict.fromkeys(zip(wide["dataset"], wide["setting"], strict=False)))
    methods = list(dict.fromkeys(wide["method"]))
    markers = "osD^vP*Xh<>p"
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys) + 2.2, 3.2), squeeze=False,
                             layout="constrained")
    for ax, (dataset, setting) in zip(axes[0], keys, strict=False):
        part = wide[(wide["dataset"] == dataset) & (wide["setting"] == setting)]
        # One marker and colour per method, named in one legend: point labels beside the points collide
        # wherever two methods land close together.
        for rec in part.itertuples(index=False):
            k = methods.index(rec.method)
            ax.scatter(getattr(rec, x_metric), getattr(rec, y_metric), marker=markers[k % len(markers)],
                       color=OKABE_ITO[k % len(OKABE_ITO)], s=28, label=method_label(ctx, rec.method))
        for axis in (ax.xaxis, ax.yaxis):  # each tick its own number: an axis offset ("1e5") runs into the label
            axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.4g}"))
        ax.locator_params(axis="x", nbins=4)
        ax.set(xlabel=spec.get("xlabel", x_metric), ylabel=spec.get("ylabel", y_metric), title=f"{dataset} / {setting}")
    handles = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), fontsize=7, loc="outside right upper")
    stem = figure_stem(spec["id"])
    return [
        Rendered(
            spec.get("title", f"{y_metric} vs {x_metric}"),
            spec.get("caption", ""),
            stem,
            save_figure(fig, ctx.out_dir, stem),
        )
    ]

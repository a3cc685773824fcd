"""Generic figure builders over the artifact contract. Each builder takes its spec entry and the family's
inputs and returns rendered figures, or a ``Skipped`` note naming the missing input (shown on the page)."""

from __future__ import annotations

import fnmatch
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from scipy import stats  # noqa: E402

from uqcal.core.io import load_torch, write_bytes  # noqa: E402
from uqcal.pipeline.layout import RunLayout  # noqa: E402
from uqcal.pipeline.report.results import load_predictions  # noqa: E402

plt.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "uqcal", "figure.dpi": 100})


@dataclass
class Rendered:
    title: str
    caption: str
    stem: str  # file stem under <family>/figures/
    files: dict[str, Path] = field(default_factory=dict)  # "svg"/"png" -> path


@dataclass
class Skipped:
    title: str
    reason: str


@dataclass
class FigureContext:
    family: str
    config: dict
    summary: pd.DataFrame
    results_dir: Path
    out_dir: Path  # reports/<family>/figures
    method_names: dict[str, str]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def figure_stem(figure_id: str, dataset: str = "all", setting: str = "all") -> str:
    """``<figure>__<dataset>__<setting>``: the Snakemake report pattern splits on the double underscores."""
    return "__".join(_slug(part) for part in (figure_id, dataset, setting))


def save_figure(fig, out_dir: Path, stem: str) -> dict[str, Path]:
    """Write SVG and PNG atomically; return their paths."""
    paths = {}
    for ext in ("svg", "png"):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=ext, bbox_inches="tight", metadata={"Date": None} if ext == "svg" else None)
        path = Path(out_dir) / f"{stem}.{ext}"
        write_bytes(path, buffer.getvalue())
        paths[ext] = path
    plt.close(fig)
    return paths


def _keys(ctx: FigureContext, spec: dict) -> list[tuple[str, str]]:
    """(dataset, setting) pairs with runs on disk, filtered by the spec."""
    root = RunLayout(ctx.results_dir).family_dir(ctx.family)
    keys = sorted({(p.parent.name, p.name) for p in root.glob("*/*") if p.is_dir()}) if root.is_dir() else []
    if spec.get("datasets"):
        keys = [k for k in keys if k[0] in spec["datasets"]]
    if spec.get("settings"):
        keys = [k for k in keys if k[1] in [str(s) for s in spec["settings"]]]
    return keys[: int(spec.get("max_figures", 6))]


def _methods(ctx: FigureContext, spec: dict, dataset: str, setting: str) -> list[str]:
    root = RunLayout(ctx.results_dir).setting_dir(ctx.family, dataset, setting)
    present = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    wanted = spec.get("methods")
    return [m for m in wanted if m in present] if wanted else present


def _label(ctx: FigureContext, method: str) -> str:
    return ctx.method_names.get(method, method)


def pit_values(frame: pd.DataFrame) -> np.ndarray | None:
    """PIT = predictive CDF at y: the ``pit`` column, else the Gaussian CDF from ``mean``/``std``."""
    if "pit" in frame:
        return frame["pit"].to_numpy(float)
    if {"y", "mean", "std"} <= set(frame.columns):
        return stats.norm.cdf((frame["y"] - frame["mean"]) / frame["std"]).astype(float)
    return None


def _render(spec: dict, ctx: FigureContext, fig, dataset: str, setting: str, default_title: str) -> Rendered:
    """Save one (dataset, setting) panel of a figure spec and describe it for the page."""
    stem = figure_stem(spec["id"], dataset, setting)
    title = f"{spec.get('title', default_title)}: {dataset} / {setting}"
    return Rendered(title, spec.get("caption", ""), stem, save_figure(fig, ctx.out_dir, stem))


def build_pit_calibration(spec: dict, ctx: FigureContext) -> list:
    """Predicted-vs-empirical CDF (regression calibration curve): for p in (0,1), fraction of PIT ≤ p."""
    out = []
    levels = np.linspace(0, 1, 21)
    for dataset, setting in _keys(ctx, spec):
        fig, ax = plt.subplots(figsize=(4.2, 4.0))
        drawn = 0
        for method in _methods(ctx, spec, dataset, setting):
            frame = load_predictions(ctx.results_dir, ctx.family, dataset, setting, method)
            pit = None if frame is None else pit_values(frame)
            if pit is None or len(pit) == 0:
                continue
            observed = [(pit <= p).mean() for p in levels]
            (line,) = ax.plot(levels, observed, marker="o", ms=2.5, label=_label(ctx, method))
            # ``also: {column: legend suffix}``: the same method's other PIT values, e.g. metacal's before
            # its calibration map (Iwata & Kumagai Fig. 3: uncalibrated vs calibrated CDF)
            for column, suffix in (spec.get("also") or {}).items():
                other = frame[column].dropna().to_numpy(float) if column in frame else np.array([])
                if len(other):
                    ax.plot(levels, [(other <= p).mean() for p in levels], ls=":", color=line.get_color(),
                            label=_label(ctx, method) + suffix)
            drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        ax.plot([0, 1], [0, 1], "k--", lw=1, label="ideal")
        ax.set(
            xlabel="predicted CDF level p",
            ylabel="observed fraction with F(y) ≤ p",
            title=f"{dataset} / {setting}",
        )
        ax.legend(fontsize=7)
        out.append(_render(spec, ctx, fig, dataset, setting, "Calibration"))
    return out or [Skipped(spec.get("title", spec["id"]), "no predictions.parquet with pit or mean/std columns")]


def _load_model_state(run_dir: Path):
    # weights_only: a model.pt pulled from a shared remote must not run code when the report reads it
    return load_torch(run_dir / RunLayout.MODEL, map_location="cpu")


def build_calibration_map(spec: dict, ctx: FigureContext) -> list:
    """Learned recalibration maps R: [0, 1] -> [0, 1] (isotonic R of QR Sec. 3 / Kuleshov et al., BO's
    Algorithm 3 at the last step), read from each run's model.pt keys ``x``/``y``; one line per seed."""
    x_key, y_key = spec["x"], spec["y"]
    out = []
    for dataset, setting in _keys(ctx, spec):
        fig, ax = plt.subplots(figsize=(3.8, 3.6))
        drawn = 0
        for method in _methods(ctx, spec, dataset, setting):
            color = f"C{drawn % 10}"
            seeds = RunLayout(ctx.results_dir).seed_dirs(ctx.family, dataset, setting, method)
            labelled = False
            for run in seeds:
                if not (run / RunLayout.MODEL).exists():
                    continue
                state = _load_model_state(run)
                if x_key not in state or y_key not in state:
                    continue
                ax.plot(np.asarray(state[x_key]), np.asarray(state[y_key]), color=color, lw=0.8, alpha=0.6,
                        label=None if labelled else _label(ctx, method))
                labelled = True
            drawn += int(labelled)
        if not drawn:
            plt.close(fig)
            continue
        ax.plot([0, 1], [0, 1], "k--", lw=0.8, label="identity")
        ax.set(xlabel=spec.get("xlabel", "predicted CDF level p"), ylabel=spec.get("ylabel", "R(p)"),
               xlim=(0, 1), ylim=(0, 1), title=f"{dataset} / {setting}")
        ax.legend(fontsize=7)
        out.append(_render(spec, ctx, fig, dataset, setting, "Calibration map"))
    return out or [Skipped(spec.get("title", spec["id"]), f"no model.pt with keys {x_key}, {y_key}")]


def build_reliability(spec: dict, ctx: FigureContext) -> list:
    """Classification reliability diagram: accuracy vs confidence in equal-width bins (15 by default)."""
    out = []
    n_bins = int(spec.get("bins", 15))
    edges = np.linspace(0, 1, n_bins + 1)
    for dataset, setting in _keys(ctx, spec):
        methods = _methods(ctx, spec, dataset, setting)
        panels = []
        for method in methods:
            frame = load_predictions(ctx.results_dir, ctx.family, dataset, setting, method)
            if frame is None or "label" not in frame:
                continue
            prob_cols = sorted((c for c in frame.columns if re.fullmatch(r"p\d+", c)), key=lambda c: int(c[1:]))
            if not prob_cols:
                continue
            probs = frame[prob_cols].to_numpy(float)
            panels.append((method, probs.max(1), probs.argmax(1) == frame["label"].to_numpy()))
        if not panels:
            continue
        ncols = min(4, len(panels))
        nrows = -(-len(panels) // ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(2.8 * ncols, 2.8 * nrows), squeeze=False)
        for ax in axes.flat[len(panels) :]:
            ax.set_visible(False)
        for ax, (method, conf, correct) in zip(axes.flat, panels, strict=False):
            idx = np.clip(np.digitize(conf, edges) - 1, 0, n_bins - 1)
            acc = [correct[idx == b].mean() if np.any(idx == b) else np.nan for b in range(n_bins)]
            ax.bar(edges[:-1], np.nan_to_num(acc), width=1 / n_bins, align="edge", edgecolor="k", lw=0.5)
            ax.plot([0, 1], [0, 1], "r--", lw=1)
            ax.set(title=_label(ctx, method), xlabel="confidence", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1))
        fig.suptitle(f"{dataset} / {setting}", fontsize=9)
        out.append(_render(spec, ctx, fig, dataset, setting, "Reliability"))
    return out or [Skipped(spec.get("title", spec["id"]), "no few-shot predictions.parquet with label and p0.. columns")]


def _per_seed_curve(frame: pd.DataFrame, x_col: str, y_col: str) -> pd.DataFrame:
    """seeds x iterations table of a per-run curve. Several rows can share an x within a run (BO's initial
    design is iteration 0): the last one wins."""
    return frame.groupby(["seed", x_col], sort=True)[y_col].last().unstack(x_col)


def _band(ax, table: pd.DataFrame, label: str, color=None):
    """Mean over the rows (seeds, curves) of a rows x steps table, with a ± one standard error band."""
    mean, sem = table.mean(axis=0), table.sem(axis=0).fillna(0.0)
    marker = "x" if len(mean) < 2 else None  # a one-point curve (an inner loop that broke at once) stays visible
    (line,) = ax.plot(mean.index, mean.values, label=label, color=color, marker=marker)
    ax.fill_between(mean.index, mean - sem, mean + sem, alpha=0.2, color=line.get_color())


def build_curve(spec: dict, ctx: FigureContext) -> list:
    """Mean over seeds of a per-run curve (``file``: x column vs y column), with a standard-error band."""
    out = []
    filename, x_col, y_col = spec.get("file", RunLayout.PREDICTIONS), spec["x"], spec["y"]
    for dataset, setting in _keys(ctx, spec):
        fig, ax = plt.subplots(figsize=(4.8, 3.4))
        drawn = 0
        for method in _methods(ctx, spec, dataset, setting):
            frame = load_predictions(ctx.results_dir, ctx.family, dataset, setting, method, filename)
            if frame is None or x_col not in frame or y_col not in frame:
                continue
            hue = spec.get("hue")
            groups = frame.groupby(hue) if hue and hue in frame else [(None, frame)]
            for key, part in groups:
                label = _label(ctx, method) + (f" / {key}" if key is not None else "")
                _band(ax, _per_seed_curve(part, x_col, y_col), label)
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
    for dataset, setting in _keys(ctx, spec):
        curves = {}
        for method in (a, b):
            frame = load_predictions(ctx.results_dir, ctx.family, dataset, setting, method)
            if frame is not None and {x_col, y_col} <= set(frame.columns):
                curves[method] = _per_seed_curve(frame, x_col, y_col)
        if len(curves) < 2:
            continue
        paired = curves[b].sub(curves[a]).dropna(how="all")  # aligned on seed and iteration
        if paired.empty:
            continue
        fig, ax = plt.subplots(figsize=(4.8, 3.2))
        _band(ax, paired, f"{_label(ctx, b)} − {_label(ctx, a)}", color="tab:red")
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set(xlabel=spec.get("xlabel", x_col), ylabel=spec.get("ylabel", f"improvement in {y_col}"),
               title=f"{dataset} / {setting} ({len(paired)} paired repeats)")
        ax.legend(fontsize=7)
        out.append(_render(spec, ctx, fig, dataset, setting, "Paired improvement"))
    return out or [Skipped(spec.get("title", spec["id"]), f"needs paired runs of {a} and {b} with {x_col}, {y_col}")]


def build_running_calibration(spec: dict, ctx: FigureContext) -> list:
    """Calibration score (Kuleshov et al. 2018) of the one-step-ahead PIT values seen up to each
    iteration, mean ± s.e. over seeds (D&K Figs. 2-3, top). ``columns``: {PIT column: legend suffix}."""
    from uqcal.metrics import calibration_score

    x_col, min_points = spec.get("x", "iteration"), int(spec.get("min_points", 3))
    columns = spec.get("columns") or {"pit": ""}
    out = []
    for dataset, setting in _keys(ctx, spec):
        fig, ax = plt.subplots(figsize=(4.8, 3.2))
        drawn = 0
        for method in _methods(ctx, spec, dataset, setting):
            frame = load_predictions(ctx.results_dir, ctx.family, dataset, setting, method)
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
                    _band(ax, table, _label(ctx, method) + suffix)
                    drawn += 1
        if not drawn:
            plt.close(fig)
            continue
        ax.set(xlabel=spec.get("xlabel", x_col), ylabel=spec.get("ylabel", "calibration score"),
               title=f"{dataset} / {setting}")
        ax.legend(fontsize=7)
        out.append(_render(spec, ctx, fig, dataset, setting, "Calibration score by step"))
    return out or [Skipped(spec.get("title", spec["id"]), f"no predictions with {x_col} and PIT columns {list(columns)}")]


def build_function(spec: dict, ctx: FigureContext) -> list:
    """A figure drawn by library code that needs no run artifacts (e.g. QR's Sec. 3 isotonic toy):
    ``function: "module:callable"`` returns a matplotlib figure, or (figure, anything); ``kwargs`` are
    passed to it."""
    import importlib

    module_name, _, name = spec["function"].partition(":")
    drawn = getattr(importlib.import_module(module_name), name)(**(spec.get("kwargs") or {}))
    fig = drawn[0] if isinstance(drawn, tuple) else drawn
    stem = figure_stem(spec["id"])
    return [Rendered(spec.get("title", spec["id"]), spec.get("caption", ""), stem, save_figure(fig, ctx.out_dir, stem))]


def build_error_vs_std(spec: dict, ctx: FigureContext) -> list:
    """Absolute error |y − mean| against predicted std, one panel per method (RIO Fig. 3-style)."""
    out = []
    for dataset, setting in _keys(ctx, spec):
        panels = []
        for method in _methods(ctx, spec, dataset, setting):
            frame = load_predictions(ctx.results_dir, ctx.family, dataset, setting, method)
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
            ax.set(title=_label(ctx, method), xlabel="predicted std", ylabel="|y − mean|")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{dataset} / {setting}", fontsize=9)
        out.append(_render(spec, ctx, fig, dataset, setting, "Error vs std"))
    return out or [Skipped(spec.get("title", spec["id"]), "no predictions.parquet with y, mean, std")]


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
    return _label(ctx, method) if series == "method" else ""


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
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for (series, dataset, setting), part in lines:
        label = " · ".join(str(p) for p in (series, dataset, setting) if p)
        ax.errorbar(part.index, part["mean"], yerr=part["std"].fillna(0), marker="o", capsize=3, label=label)
    if spec.get("logx"):
        ax.set_xscale("log")
    ax.set(xlabel=spec.get("xlabel", param), ylabel=spec.get("ylabel", metric))
    ax.legend(fontsize=7)
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
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * frame["method"].nunique() + 2), 3.4))
    datasets = list(dict.fromkeys(frame["dataset"]))
    methods = list(dict.fromkeys(frame["method"]))
    width = 0.8 / len(datasets)
    for j, dataset in enumerate(datasets):
        part = frame[frame["dataset"] == dataset].set_index("method").reindex(methods)
        ax.bar(
            np.arange(len(methods)) + j * width,
            part["mean"],
            width,
            yerr=part["std"].fillna(0),
            capsize=2,
            label=dataset,
        )
    ax.set_xticks(np.arange(len(methods)) + 0.4 - width / 2, [_label(ctx, m) for m in methods], rotation=30, ha="right")
    ax.set(ylabel=spec.get("ylabel", metric))
    if spec.get("reference_line") is not None:  # e.g. an interval's nominal coverage
        ax.axhline(float(spec["reference_line"]), color="k", ls="--", lw=1, label="nominal")
    if spec.get("logy"):
        ax.set_yscale("log")
    ax.legend(fontsize=7)
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
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.2), squeeze=False)
    for ax, (dataset, setting) in zip(axes[0], keys, strict=False):
        part = wide[(wide["dataset"] == dataset) & (wide["setting"] == setting)]
        ax.scatter(part[x_metric], part[y_metric])
        for rec in part.itertuples(index=False):
            ax.annotate(_label(ctx, rec.method), (getattr(rec, x_metric), getattr(rec, y_metric)), fontsize=7)
        ax.set(xlabel=x_metric, ylabel=y_metric, title=f"{dataset} / {setting}")
    stem = figure_stem(spec["id"])
    return [
        Rendered(
            spec.get("title", f"{y_metric} vs {x_metric}"),
            spec.get("caption", ""),
            stem,
            save_figure(fig, ctx.out_dir, stem),
        )
    ]


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
    for dataset, setting in _keys(ctx, spec):
        snaps = {}
        for method in _methods(ctx, spec, dataset, setting):
            frame = load_predictions(ctx.results_dir, ctx.family, dataset, setting, method, filename)
            if frame is None or not {"iteration", "x", "mean"} <= set(frame.columns):
                continue
            bands = [b for b in _INTERVALS if {f"lower{b[0]}", f"upper{b[0]}"} <= set(frame.columns)]
            if not bands:
                continue
            seed = frame["seed"].min()
            observed = load_predictions(ctx.results_dir, ctx.family, dataset, setting, method)
            if observed is not None:
                observed = observed[observed["seed"] == seed]
            snaps[method] = (frame[frame["seed"] == seed], bands, observed)
        if not snaps:
            continue
        available = sorted(next(iter(snaps.values()))[0]["iteration"].unique())
        iterations = [it for it in spec.get("iterations") or available[:4] if it in available]
        fig, axes = plt.subplots(
            len(snaps), len(iterations), figsize=(2.8 * len(iterations), 2.4 * len(snaps)), squeeze=False,
            sharex=True,
        )
        for i, (method, (frame, bands, observed)) in enumerate(snaps.items()):
            for j, it in enumerate(iterations):
                ax, part = axes[i][j], frame[frame["iteration"] == it].sort_values("x")
                if "f" in part:
                    ax.plot(part["x"], part["f"], "g", lw=1, label="objective")
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
                    ax.plot(xs[queried], observed["y"][queried], "rx", ms=6, label="next query")
                ax.set_title(f"{_label(ctx, method)}, iteration {it}", fontsize=8)
        axes[0][-1].legend(fontsize=6, loc="best")
        out.append(_render(spec, ctx, fig, dataset, setting, "Interval snapshots"))
    return out or [
        Skipped(
            spec.get("title", spec["id"]),
            f"no per-run {filename} (columns iteration, x, mean and lower/upper or lower_base/upper_base)",
        )
    ]


def load_stats_curves(results_dir: Path, family: str, dataset: str, setting: str, method: str, key: str,
                      truncate: bool = True):
    """Curves stored in ``train_stats.json`` under ``key`` as {name: [[y0, y1, ...], ...]} for every seed:
    returns {name: 2-D array (curves x steps)}, curves of unequal length truncated to the shortest; with
    ``truncate`` False, {name: [list per curve]} as logged (the i-th curves of two names belong together)."""
    collected: dict[str, list] = {}
    for path in RunLayout(results_dir).seed_files(family, dataset, setting, method, RunLayout.TRAIN_STATS):
        stats_json = json.loads(path.read_text())
        for name, curves in (stats_json.get(key) or {}).items():
            curves = [curves] if curves and not isinstance(curves[0], list) else curves
            collected.setdefault(name, []).extend(curves)
    if not truncate:
        return collected
    out = {}
    for name, curves in collected.items():
        length = min(len(c) for c in curves) if curves else 0
        if length:
            out[name] = np.asarray([c[:length] for c in curves], float)
    return out


def build_stats_xy(spec: dict, ctx: FigureContext) -> list:
    """A per-run curve logged in train_stats.json under ``key`` as [[x, y], ...] (e.g. the meta-training
    loss every few episodes), one panel per method (their objectives differ in scale), mean ± s.e. over
    seeds."""
    out = []
    for dataset, setting in _keys(ctx, spec):
        panels = []
        for method in _methods(ctx, spec, dataset, setting):
            rows = []
            for path in RunLayout(ctx.results_dir).seed_files(ctx.family, dataset, setting, method,
                                                              RunLayout.TRAIN_STATS):
                for x, y in json.loads(path.read_text()).get(spec["key"]) or []:
                    rows.append({"seed": path.parent.name, "x": float(x), "y": float(y)})
            if rows:
                panels.append((method, pd.DataFrame(rows).pivot_table(index="seed", columns="x", values="y")))
        if not panels:
            continue
        fig, axes = plt.subplots(1, len(panels), figsize=(2.9 * len(panels), 2.8), squeeze=False)
        for ax, (method, table) in zip(axes[0], panels, strict=True):
            _band(ax, table, _label(ctx, method))
            ax.set(title=_label(ctx, method), xlabel=spec.get("xlabel", "x"))
        axes[0][0].set_ylabel(spec.get("ylabel", spec["key"]))
        fig.suptitle(f"{dataset} / {setting}", fontsize=9)
        fig.tight_layout()
        out.append(_render(spec, ctx, fig, dataset, setting, spec["key"]))
    return out or [Skipped(spec.get("title", spec["id"]), f"no train_stats.json with {spec['key']}")]


def build_stats_curves(spec: dict, ctx: FigureContext) -> list:
    """Curves a method logs in train_stats.json (e.g. MD vs GD inner-loop ELBO), mean ± s.e. over curves."""
    out = []
    key = spec["key"]
    for dataset, setting in _keys(ctx, spec):
        for method in _methods(ctx, spec, dataset, setting):
            curves = load_stats_curves(ctx.results_dir, ctx.family, dataset, setting, method, key)
            if not curves:
                continue
            fig, ax = plt.subplots(figsize=(4.6, 3.4))
            for name, values in curves.items():
                _band(ax, pd.DataFrame(values), f"{name} (n={len(values)})")
            ax.set(
                xlabel=spec.get("xlabel", "step"),
                ylabel=spec.get("ylabel", key),
                title=f"{dataset} / {setting}",
            )
            ax.legend(fontsize=7)
            stem = figure_stem(spec["id"], dataset, setting)
            out.append(
                Rendered(
                    f"{spec.get('title', key)}: {dataset} / {setting} ({_label(ctx, method)})",
                    spec.get("caption", ""),
                    stem,
                    save_figure(fig, ctx.out_dir, stem),
                )
            )
            break  # one method's log suffices (every method logs the same comparison)
    return out or [Skipped(spec.get("title", spec["id"]), f"no train_stats.json with '{key}' curves")]


BUILDERS: dict[str, Callable] = {
    "stats_curves": build_stats_curves,
    "pit_calibration": build_pit_calibration,
    "reliability": build_reliability,
    "curve": build_curve,
    "error_vs_std": build_error_vs_std,
    "sensitivity": build_sensitivity,
    "bar": build_bar,
    "metric_scatter": build_metric_scatter,
    "interval_snapshots": build_interval_snapshots,
    "calibration_map": build_calibration_map,
    "function": build_function,
    "stats_xy": build_stats_xy,
    "paired_improvement": build_paired_improvement,
    "running_calibration": build_running_calibration,
}


def build_figure(spec: dict, ctx: FigureContext) -> list:
    kind = spec.get("type")
    if kind not in BUILDERS:
        raise ValueError(f"figures.{spec.get('id', '?')}.type: unknown figure type {kind!r}; known: {sorted(BUILDERS)}")
    sns.set_theme(style="whitegrid", context="paper")
    try:
        return BUILDERS[kind](spec, ctx)
    finally:
        plt.close("all")

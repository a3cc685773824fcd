"""What every figure builder shares: the page's figure records (``Rendered``, ``Skipped``), the context a builder
reads (``FigureContext``: the family's summary and its planned runs' files), file names, writing SVG and PNG, which
(dataset, setting) panels and methods a spec draws, and the mean ± s.e. band."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from uqcal.core.io import write_bytes
from uqcal.pipeline.report.results import RunFiles

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
    files: RunFiles  # the family's planned runs (what the builders read besides the summary)
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


def panel_keys(ctx: FigureContext, spec: dict) -> list[tuple[str, str]]:
    """(dataset, setting) pairs with runs on disk, filtered by the spec."""
    keys = ctx.files.settings()
    if spec.get("datasets"):
        keys = [k for k in keys if k[0] in spec["datasets"]]
    if spec.get("settings"):
        keys = [k for k in keys if k[1] in [str(s) for s in spec["settings"]]]
    return keys[: int(spec.get("max_figures", 6))]


def panel_methods(ctx: FigureContext, spec: dict, dataset: str, setting: str) -> list[str]:
    present = ctx.files.methods(dataset, setting)
    wanted = spec.get("methods")
    return [m for m in wanted if m in present] if wanted else present


def method_label(ctx: FigureContext, method: str) -> str:
    return ctx.method_names.get(method, method)


def pit_values(frame: pd.DataFrame) -> np.ndarray | None:
    """PIT = predictive CDF at y: the ``pit`` column, else the Gaussian CDF from ``mean``/``std``."""
    if "pit" in frame:
        return frame["pit"].to_numpy(float)
    if {"y", "mean", "std"} <= set(frame.columns):
        return stats.norm.cdf((frame["y"] - frame["mean"]) / frame["std"]).astype(float)
    return None


def render(spec: dict, ctx: FigureContext, fig, dataset: str, setting: str, default_title: str) -> Rendered:
    """Save one (dataset, setting) panel of a figure spec and describe it for the page."""
    stem = figure_stem(spec["id"], dataset, setting)
    title = f"{spec.get('title', default_title)}: {dataset} / {setting}"
    return Rendered(title, spec.get("caption", ""), stem, save_figure(fig, ctx.out_dir, stem))


def per_seed_curve(frame: pd.DataFrame, x_col: str, y_col: str) -> pd.DataFrame:
    """seeds x iterations table of a per-run curve. Several rows can share an x within a run (BO's initial
    design is iteration 0): the last one wins."""
    return frame.groupby(["seed", x_col], sort=True)[y_col].last().unstack(x_col)


def mean_se_band(ax, table: pd.DataFrame, label: str, color=None):
    """Mean over the rows (seeds, curves) of a rows x steps table, with a ± one standard error band."""
    mean, sem = table.mean(axis=0), table.sem(axis=0).fillna(0.0)
    marker = "x" if len(mean) < 2 else None  # a one-point curve (an inner loop that broke at once) stays visible
    (line,) = ax.plot(mean.index, mean.values, label=label, color=color, marker=marker)
    ax.fill_between(mean.index, mean - sem, mean + sem, alpha=0.2, color=line.get_color())

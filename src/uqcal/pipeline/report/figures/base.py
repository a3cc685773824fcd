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
import seaborn as sns
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.text import Text
from scipy import stats

from uqcal.core.io import write_bytes
from uqcal.pipeline.report.palette import OKABE_ITO
from uqcal.pipeline.report.results import RunFiles

# Every figure of the report in one style, whatever was drawn before it in the process: a figure drawn outside
# build_figure (the paper comparisons, the leaderboard) would otherwise take matplotlib's defaults when it comes
# first and the theme when it follows another, and one report built serially or family by family would differ.
sns.set_theme(style="whitegrid", context="paper", palette=list(OKABE_ITO))
plt.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "uqcal", "figure.dpi": 100})
MAX_WIDTH_IN = 12.0  # 1,152 CSS px as SVG: the page's column holds it at its natural size
MAX_SVG_BYTES = 200_000  # an SVG of many paths (scatter clouds) is written only as PNG: the page shows the PNG
ALT_KINDS = {"pit_calibration": "Calibration curves", "reliability": "Reliability diagram", "curve": "Line chart",
             "error_vs_std": "Scatter plot of errors against predicted standard deviations",
             "sensitivity": "Line chart", "bar": "Bar chart", "metric_scatter": "Scatter plot",
             "interval_snapshots": "Panels of predictive intervals", "calibration_map": "Calibration maps",
             "stats_curves": "Line chart", "stats_xy": "Line chart", "paired_improvement": "Line chart of differences",
             "running_calibration": "Line chart of calibration over steps", "function": "Illustration",
             "paper": "Dot plot of our means with 95 % intervals beside the paper's values"}


class SavedFigure(dict):
    """"svg"/"png" -> path, with what the figure check found at save time: ``overlaps`` (pairs of visible texts
    that collide, :func:`overlapping_texts`) and ``width_px`` (the PNG's width: the figure's natural size)."""

    overlaps: list[str]
    width_px: int
    min_text_px: float  # the smallest text's height in the PNG (px at its natural size)
    described: str  # what the axes show, for the alt text ("2 panels of RMSE against iteration")


@dataclass
class Rendered:
    title: str
    caption: str
    stem: str  # file stem under <family>/figures/
    files: dict[str, Path] = field(default_factory=dict)  # "svg"/"png" -> path (a SavedFigure)

    @property
    def overlaps(self) -> list[str]:
        return list(getattr(self.files, "overlaps", []))

    kind: str = ""  # the spec's figure type (for the alt text)
    alt: str = ""  # the spec's own alt text, if it gives one

    @property
    def width_px(self) -> int | None:
        return getattr(self.files, "width_px", None)

    @property
    def min_text_px(self) -> float | None:
        return getattr(self.files, "min_text_px", None)

    def alt_text(self) -> str:
        """What the image shows, for a reader who cannot see it (the caption beside it says what it means)."""
        if self.alt:
            return self.alt
        what = ALT_KINDS.get(self.kind, "Chart")
        described = getattr(self.files, "described", "")
        return f"{what}" + (f", {described}" if described else "") + f": {self.title}"


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
    """``<figure>__<dataset>__<setting>``: double underscores keep the three parts apart."""
    return "__".join(_slug(part) for part in (figure_id, dataset, setting))


def _drawn_texts(fig) -> list[tuple[Text, object]]:
    """The figure's visible, non-empty Text artists as drawn, each with the Axes it belongs to (None for the
    figure's own: suptitle, figure legends): tick labels only of ticks inside the axis' view (matplotlib keeps
    labels of ticks it does not draw), nothing of a hidden Axes or legend."""
    owner: dict[int, object] = {}
    hidden: set[int] = set()
    for ax in fig.axes:
        for text in ax.findobj(Text):  # an axis' labels and tick labels have no ``.axes`` of their own
            owner.setdefault(id(text), ax)
            if not ax.get_visible():
                hidden.add(id(text))
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            span = (high - low) or 1.0
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - 1e-9 * span <= tick.get_loc() <= high + 1e-9 * span:
                    hidden.update((id(tick.label1), id(tick.label2)))
    for legend in _legends(fig):
        if not legend.get_visible():
            hidden.update(id(text) for text in legend.findobj(Text))
    return [(text, owner.get(id(text))) for text in fig.findobj(Text)
            if id(text) not in hidden and text.get_visible() and text.get_text().strip()]


def _legends(fig) -> list:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


def overlapping_texts(fig, tolerance_px: float = 1.0) -> list[str]:
    """What collides in a drawn figure (after ``fig.canvas.draw()``): pairs of visible Text artists (tick labels,
    axis labels, titles, annotations, legend entries) whose bounding boxes overlap by more than ``tolerance_px``
    in both directions, and texts that run into a panel they do not belong to (a y-label into its left-hand
    neighbour). Each as "'a' / 'b'"; an empty list: nothing collides."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = _drawn_texts(fig)
    boxes = [(text.get_text(), text.get_window_extent(renderer)) for text, _ in texts]

    def overlap(a, b) -> bool:
        return (min(a.x1, b.x1) - max(a.x0, b.x0) > tolerance_px
                and min(a.y1, b.y1) - max(a.y0, b.y0) > tolerance_px)

    found = [f"{name_a!r} / {name_b!r}" for i, (name_a, a) in enumerate(boxes)
             for name_b, b in boxes[i + 1:] if overlap(a, b)]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    for (_, ax_of_text), (name, box) in zip(texts, boxes, strict=True):
        own = ax_of_text.bbox.bounds if ax_of_text is not None else None
        for ax in panels:
            # a twin axis shares its panel's box; an inset or a colorbar is a panel of its own
            if ax.bbox.bounds != own and overlap(box, ax.bbox):
                found.append(f"{name!r} / panel {ax.get_title() or ax.get_label() or '?'!r}")
    return found


def describe_axes(fig) -> str:
    """'3 panels of <y label> against <x label>' from the figure's first labelled panel ('' when unlabelled)."""
    panels = [ax for ax in fig.axes if ax.get_visible()]
    labelled = next((ax for ax in panels if ax.get_xlabel() and ax.get_ylabel()), None)
    if labelled is None:
        return ""
    count = f"{len(panels)} panels" if len(panels) > 1 else "one panel"
    return f"{count} of {labelled.get_ylabel()} against {labelled.get_xlabel()}"


def save_figure(fig, out_dir: Path, stem: str) -> SavedFigure:
    """Write SVG and PNG atomically; return their paths, with the text-overlap check's findings and the natural
    width (the report shows a figure at that width and the browser test holds it to the check)."""
    width, height = fig.get_size_inches()
    if width > MAX_WIDTH_IN:  # wider would be shown shrunk below its natural size in the page's column
        fig.set_size_inches(MAX_WIDTH_IN, height)
    if fig.get_layout_engine() is None or isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        # room for every label (suptitles, neighbours' y-labels, legends), redone at the saved size; a one-off
        # tight_layout leaves the placeholder
        fig.set_layout_engine("constrained")
    paths = SavedFigure()
    paths.overlaps = overlapping_texts(fig)
    sizes = [text.get_fontsize() for text, _ in _drawn_texts(fig)]
    paths.min_text_px = round(min(sizes) * fig.dpi / 72, 2) if sizes else None  # points -> PNG px
    paths.described = describe_axes(fig)
    for ext in ("png", "svg"):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=ext, bbox_inches="tight", metadata={"Date": None} if ext == "svg" else None)
        path = Path(out_dir) / f"{stem}.{ext}"
        if ext == "svg" and buffer.tell() > MAX_SVG_BYTES:
            path.unlink(missing_ok=True)  # a stale SVG of an earlier, smaller drawing must not be linked
            continue
        write_bytes(path, buffer.getvalue())
        paths[ext] = path
        if ext == "png":
            paths.width_px = int(plt.imread(io.BytesIO(buffer.getvalue())).shape[1])
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

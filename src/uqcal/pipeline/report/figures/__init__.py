"""Figure builders over the artifact contract, by kind (``type`` in a report spec's ``figures``). Each builder
takes its spec entry and the family's inputs (``base.FigureContext``) and returns rendered figures, or a
``Skipped`` note naming the missing input (shown on the page).

``base`` has what they share; ``calibration`` the calibration figures, ``curves`` per-run and logged curves,
``summary`` the figures of the summary's means; a ``function`` figure is drawn by library code.
"""

from __future__ import annotations

from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported, here or in the builders' modules (this package runs first)
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from uqcal.pipeline.report.figures.base import FigureContext, Rendered, figure_stem, save_figure  # noqa: E402
from uqcal.pipeline.report.figures.calibration import (  # noqa: E402
    build_calibration_map,
    build_error_vs_std,
    build_pit_calibration,
    build_reliability,
    build_running_calibration,
)
from uqcal.pipeline.report.figures.curves import (  # noqa: E402
    build_curve,
    build_interval_snapshots,
    build_paired_improvement,
    build_stats_curves,
    build_stats_xy,
)
from uqcal.pipeline.report.figures.summary import build_bar, build_metric_scatter, build_sensitivity  # noqa: E402
from uqcal.pipeline.report.palette import OKABE_ITO  # noqa: E402


def build_function(spec: dict, ctx: FigureContext) -> list:
    """A figure drawn by library code that needs no run artifacts (e.g. QR's Sec. 3 isotonic toy):
    ``function: "module:callable"`` returns a matplotlib figure, or (figure, anything); ``kwargs`` are
    passed to it."""
    from uqcal.core.lazy import load_target

    drawn = load_target(spec["function"])(**(spec.get("kwargs") or {}))
    fig = drawn[0] if isinstance(drawn, tuple) else drawn
    stem = figure_stem(spec["id"])
    return [Rendered(spec.get("title", spec["id"]), spec.get("caption", ""), stem, save_figure(fig, ctx.out_dir, stem))]


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
    sns.set_theme(style="whitegrid", context="paper", palette=list(OKABE_ITO))
    try:
        drawn = BUILDERS[kind](spec, ctx)
        for item in drawn:
            if isinstance(item, Rendered):
                item.kind, item.alt = kind, spec.get("alt", "")
        return drawn
    finally:
        plt.close("all")

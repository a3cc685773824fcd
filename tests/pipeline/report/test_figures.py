"""Figure builders that read more than the summary: sensitivity x values (config, logged metric or the
method registry), series grouping, and the BO interval snapshots with base and recalibrated intervals."""

from __future__ import annotations

import contextlib

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest

from tests.pipeline.report.report_tree import write_run, write_tables
from uqcal.core.io import write_parquet
from uqcal.methods.api import resolve_params
from uqcal.pipeline.report import figures
from uqcal.pipeline.report.figures import calibration, curves
from uqcal.pipeline.report.figures.base import FigureContext, Rendered, Skipped
from uqcal.pipeline.report.figures.summary import _param_value, build_sensitivity
from uqcal.pipeline.report.results import RunFiles


def _context(tmp_path, family, summary, config=None):
    return FigureContext(family, config or {"families": {family: {}}}, summary,
                         RunFiles.on_disk(tmp_path / "results", family), tmp_path / "out", {})


@contextlib.contextmanager
def drawn_by(method_name):
    """Record (label, x, y) of every Axes.<method_name>(x, y, ...) call the builder makes."""
    real = getattr(matplotlib.axes.Axes, method_name)
    calls = []

    def spy(self, x, y, *args, **kwargs):
        calls.append((kwargs.get("label"), np.asarray(x, float), np.asarray(y, float)))
        return real(self, x, y, *args, **kwargs)

    setattr(matplotlib.axes.Axes, method_name, spy)
    try:
        yield calls
    finally:
        setattr(matplotlib.axes.Axes, method_name, real)


def _summary(rows):
    return pd.DataFrame(rows, columns=["dataset", "setting", "method", "metric", "mean", "std", "n"])


def test_param_value_sources(tmp_path):
    summary = _summary([("ozone", "ns20", "metacal_t5", "n_train_tasks", 5.0, 0.0, 3)])
    config = {"families": {"metareg": {"settings": {"ns20": {"n_support": 20}}, "methods": {}}}}
    ctx = _context(tmp_path, "metareg", summary, config)
    # the setting's config entry
    assert _param_value(ctx, "ozone", "ns20", "metacal", "n_support") == 20
    # a metric the run logged (the number of tasks it actually used)
    assert _param_value(ctx, "ozone", "ns20", "metacal_t5", "n_train_tasks") == 5.0
    # registry overrides (Fig. 6's lambda grid) and class defaults, as the training job resolves them
    assert _param_value(ctx, "ozone", "ns20", "metacal_l01", "lam") == pytest.approx(0.1)
    assert _param_value(ctx, "ozone", "ns20", "metacal", "lam") == resolve_params("metareg", "metacal", {})["lam"]
    # a method the registry does not know falls back to its config entry, else None
    assert _param_value(ctx, "ozone", "ns20", "not_a_method", "lam") is None


def test_sensitivity_groups_variants_into_lines(tmp_path):
    rows = []
    for method, te in (("metacal", 0.30), ("metacal_l001", 0.50), ("metacal_l10", 0.40)):
        rows.append(("ozone", "ns20", method, "te", te, 0.01, 3))
    rows.append(("exam", "ns20", "metacal", "te", 0.2, 0.01, 3))  # one value only: no line
    rows.append(("ozone", "ns20", "mdkl", "te", 0.9, 0.01, 3))  # not in any series
    ctx = _context(tmp_path, "metareg", _summary(rows))
    spec = {"id": "lam", "type": "sensitivity", "param": "lam", "metric": "te",
            "series": {"MetaCal": ["metacal", "metacal_l*"]}}
    with drawn_by("errorbar") as drawn:
        (result,) = build_sensitivity(spec, ctx)
    assert isinstance(result, Rendered) and result.files["png"].stat().st_size > 0
    assert [label for label, _, _ in drawn] == ["MetaCal · ozone · ns20"]
    np.testing.assert_allclose(drawn[0][1], [0.01, 0.5, 1.0])
    np.testing.assert_allclose(drawn[0][2], [0.50, 0.30, 0.40])

    spec["series"] = {"MetaCal": ["metacal"]}  # one lambda per row -> nothing to draw, and the page says why
    (skipped,) = build_sensitivity(spec, ctx)
    assert isinstance(skipped, Skipped) and "≥ 2 values of 'lam'" in skipped.reason


def test_interval_snapshots_base_and_recalibrated(tmp_path):
    grid = np.linspace(0.0, 1.0, 11)
    observed = pd.DataFrame({"iteration": [0, 0, 1, 2], "x": ["[0.1]", "[0.5]", "[0.9]", "[0.3]"],
                             "y": [1.0, 0.0, 2.0, -1.0], "best_so_far": [1.0, 0.0, 0.0, -1.0]})
    for method, widen in (("uncalibrated", 1.0), ("calibrated", 2.0)):
        snaps = []
        for it in (1, 2):
            snaps.append(pd.DataFrame({
                "iteration": it, "x": grid, "f": grid ** 2, "mean": grid, "std_base": 0.1,
                "lower_base": grid - 0.2, "upper_base": grid + 0.2,
                "lower_recal": grid - 0.2 * widen, "upper_recal": grid + 0.2 * widen}))
        run = write_run(tmp_path / "results", "bo", "forrester", "forrester-ucb", method, 0,
                        {"final_best": -1.0}, observed)
        write_parquet(run / "snapshots.parquet", pd.concat(snaps, ignore_index=True))
    summary = write_tables(tmp_path / "results", "bo")
    ctx = _context(tmp_path, "bo", summary)
    spec = {"id": "snap", "type": "interval_snapshots", "methods": ["uncalibrated", "calibrated"],
            "iterations": [1, 2, 7]}
    with drawn_by("plot") as drawn:
        (result,) = curves.build_interval_snapshots(spec, ctx)
    assert isinstance(result, Rendered) and result.files["svg"].stat().st_size > 0
    labels = [label for label, _, _ in drawn]
    # the recalibrated interval is drawn only where it differs from the GP's (calibrated, 2 iterations)
    assert labels.count("recalibrated 95 %") == 2
    # iteration 2's panels: the query of iteration 2 is the cross; points of iterations 0-1 were seen
    assert labels.count("next query") == 4 and labels.count("observed") == 4


def test_calibration_map_draws_each_seeds_stored_map(tmp_path):
    from uqcal.core.io import torch_save

    knots = np.linspace(0.0, 1.0, 5)
    maps = {0: knots**2, 1: np.sqrt(knots)}
    for seed, values in maps.items():
        run = write_run(tmp_path / "results", "qr", "concrete", "cv5", "dvi_iso", seed, {"ce": 1.0})
        torch_save(run / "model.pt", {"knots_u": knots, "knots_r": values, "base_run": "x"})
    write_run(tmp_path / "results", "qr", "concrete", "cv5", "dvi", 0, {"ce": 2.0})  # no model.pt: skipped
    ctx = _context(tmp_path, "qr", write_tables(tmp_path / "results", "qr"))
    spec = {"id": "iso", "type": "calibration_map", "x": "knots_u", "y": "knots_r"}
    with drawn_by("plot") as drawn:
        (result,) = calibration.build_calibration_map(spec, ctx)
    assert isinstance(result, Rendered)
    # seed 0's map, seed 1's map, then the identity
    assert len(drawn) == 3
    for (_, x, y), expected in zip(drawn[:2], (maps[0], maps[1]), strict=True):
        np.testing.assert_allclose(x, knots)
        np.testing.assert_allclose(y, expected)
    np.testing.assert_allclose(drawn[2][2], [0, 1])
    spec["x"] = "missing_key"
    (skipped,) = calibration.build_calibration_map(spec, ctx)
    assert isinstance(skipped, Skipped)


def test_paired_improvement_is_mean_difference_over_paired_seeds(tmp_path):
    best = {("calibrated", 0): [3.0, 2.0, 1.0], ("uncalibrated", 0): [3.0, 3.0, 2.0],
            ("calibrated", 1): [5.0, 5.0, 4.0], ("uncalibrated", 1): [5.0, 4.0, 4.0]}
    for (method, seed), values in best.items():
        frame = pd.DataFrame({"iteration": [0, 1, 2], "best_so_far": values})
        write_run(tmp_path / "results", "bo", "forrester", "forrester-ucb", method, seed, {"final_best": values[-1]}, frame)
    ctx = _context(tmp_path, "bo", write_tables(tmp_path / "results", "bo"))
    spec = {"id": "imp", "type": "paired_improvement", "x": "iteration", "y": "best_so_far",
            "a": "calibrated", "b": "uncalibrated"}
    with drawn_by("plot") as drawn:
        (result,) = curves.build_paired_improvement(spec, ctx)
    assert isinstance(result, Rendered)
    _, x, y = drawn[0]
    # seed 0: (0, 1, 1); seed 1: (0, -1, 0) -> mean (0, 0, 0.5)
    np.testing.assert_allclose(x, [0, 1, 2])
    np.testing.assert_allclose(y, [0.0, 0.0, 0.5])


def test_running_calibration_matches_prefix_scores(tmp_path):
    from uqcal.metrics import calibration_score

    rng = np.random.default_rng(0)
    pits = {seed: rng.uniform(size=8) for seed in (0, 1)}
    for seed, pit in pits.items():
        frame = pd.DataFrame({"iteration": np.arange(8), "pred_pit_base": pit})
        write_run(tmp_path / "results", "bo", "sixhump", "sixhump-ei", "uncalibrated", seed, {"final_best": 0.0}, frame)
    ctx = _context(tmp_path, "bo", write_tables(tmp_path / "results", "bo"))
    spec = {"id": "cal", "type": "running_calibration", "columns": {"pred_pit_base": ""}, "min_points": 3}
    with drawn_by("plot") as drawn:
        (result,) = calibration.build_running_calibration(spec, ctx)
    assert isinstance(result, Rendered)
    _, x, y = drawn[0]
    expected = [np.mean([calibration_score(pits[s][: t + 1]) for s in (0, 1)]) for t in range(2, 8)]
    np.testing.assert_allclose(x, np.arange(2, 8))
    np.testing.assert_allclose(y, expected)


def test_function_figure_saves_what_the_library_draws(tmp_path):
    ctx = _context(tmp_path, "qr", _summary([]))
    spec = {"id": "toy", "type": "function", "function": "uqcal.methods.qr.toy:draw_isotonic_toy",
            "kwargs": {"seed": 1}, "title": "Toy"}
    (result,) = figures.build_function(spec, ctx)
    assert isinstance(result, Rendered) and result.title == "Toy"
    assert {p.suffix for p in result.files.values()} == {".svg", ".png"}
    assert all(p.stat().st_size > 1000 for p in result.files.values())
    with pytest.raises(AttributeError):
        figures.build_function({**spec, "function": "uqcal.methods.qr.toy:no_such_drawing"}, ctx)


def test_pit_calibration_draws_the_uncalibrated_pits_too(tmp_path):
    pit = np.array([0.1, 0.2, 0.6, 0.9])
    pit_uncal = np.array([0.05, 0.5, 0.55, 0.99])
    frame = pd.DataFrame({"pit": pit, "pit_uncal": pit_uncal})
    write_run(tmp_path / "results", "metareg", "ozone", "ns20", "metacal", 0, {"te": 0.1}, frame)
    write_run(tmp_path / "results", "metareg", "ozone", "ns20", "mdkl", 0, {"te": 0.1}, frame[["pit"]])
    ctx = _context(tmp_path, "metareg", write_tables(tmp_path / "results", "metareg"))
    spec = {"id": "cal", "type": "pit_calibration", "also": {"pit_uncal": " before r"}}
    with drawn_by("plot") as drawn:
        (result,) = calibration.build_pit_calibration(spec, ctx)
    assert isinstance(result, Rendered)
    curves = {label: y for label, _, y in drawn}
    levels = np.linspace(0, 1, 21)
    np.testing.assert_allclose(curves["metacal before r"], [(pit_uncal <= p).mean() for p in levels])
    np.testing.assert_allclose(curves["metacal"], [(pit <= p).mean() for p in levels])
    assert "mdkl before r" not in curves  # mdkl has no uncalibrated column


def test_stats_xy_averages_logged_pairs_over_seeds(tmp_path):
    from uqcal.core.io import write_json

    logged = {0: [[0, 2.0], [10, 1.0]], 1: [[0, 4.0], [10, 2.0]]}
    for seed, curve in logged.items():
        run = write_run(tmp_path / "results", "fewshot", "glyphs", "5w1s", "md", seed, {"acc": 0.5})
        write_json(run / "train_stats.json", {"outer_loss_curve": curve})
    ctx = _context(tmp_path, "fewshot", write_tables(tmp_path / "results", "fewshot"))
    with drawn_by("plot") as drawn:
        (result,) = curves.build_stats_xy({"id": "outer", "type": "stats_xy", "key": "outer_loss_curve"}, ctx)
    assert isinstance(result, Rendered)
    _, x, y = drawn[0]
    np.testing.assert_allclose(x, [0, 10])
    np.testing.assert_allclose(y, [3.0, 1.5])


@pytest.mark.parametrize("family", ["metareg", "rio", "qr", "fewshot", "bo", "arena"])
def test_shipped_report_specs_load_and_name_known_figure_types(family):
    from uqcal.pipeline.report.build import load_spec

    spec = load_spec(family)
    for figure in spec.get("figures") or []:
        assert figure["type"] in figures.BUILDERS, (family, figure["id"], figure["type"])


def test_overlap_check_finds_texts_built_to_collide_and_passes_a_clean_figure():
    import matplotlib.pyplot as plt

    from uqcal.pipeline.report.figures.base import overlapping_texts

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1])
    ax.set(xlabel="x (m)", ylabel="y (s)", title="clean")
    assert overlapping_texts(fig) == []
    # two annotations at the same point, and long rotated-off tick labels on a narrow axis
    ax.annotate("first label", (0.5, 0.5))
    ax.annotate("second label", (0.52, 0.51))
    found = overlapping_texts(fig)
    assert found == ["'first label' / 'second label'"]
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(1.5, 2))
    ax.set_xticks(range(4), ["a long method name"] * 4)
    assert any("a long method name" in pair for pair in overlapping_texts(fig))
    plt.close(fig)


def test_overlap_check_finds_a_label_running_into_the_next_panel_and_skips_hidden_texts():
    import matplotlib.pyplot as plt

    from uqcal.pipeline.report.figures.base import overlapping_texts

    fig, axes = plt.subplots(1, 2, figsize=(4, 2))
    fig.subplots_adjust(wspace=0.0)  # no room: the right panel's y-label lies over the left panel
    axes[1].set_ylabel("a y-label in the way")
    assert any("a y-label in the way" in found and "panel" in found for found in overlapping_texts(fig))
    axes[1].set_visible(False)  # a hidden panel's texts are not drawn, so they collide with nothing
    assert overlapping_texts(fig) == []
    plt.close(fig)


def test_save_figure_records_the_check_and_the_natural_width(tmp_path):
    import matplotlib.pyplot as plt

    from uqcal.pipeline.report.figures.base import MAX_WIDTH_IN, save_figure

    fig, ax = plt.subplots(figsize=(20, 2))  # wider than the page: saved at MAX_WIDTH_IN
    ax.annotate("same place", (0.5, 0.5))
    ax.annotate("same place too", (0.5, 0.5))
    saved = save_figure(fig, tmp_path, "wide")
    assert saved.overlaps == ["'same place' / 'same place too'"]
    assert saved["png"].exists() and saved["svg"].exists()
    width = plt.imread(saved["png"]).shape[1]
    assert saved.width_px == width and width <= MAX_WIDTH_IN * 100 + 20  # dpi 100, bbox "tight" adds a margin
    assert Rendered("t", "c", "wide", saved).overlaps == saved.overlaps

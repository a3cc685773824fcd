"""uqcal.plots: each plot draws the numbers a hand count gives, and refuses what it cannot draw."""

from __future__ import annotations

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from uqcal.core.predictive import CategoricalPredictive, GaussianPredictive, QuantilePredictive  # noqa: E402
from uqcal.plots import LEVELS, calibration_curve, pit_histogram, reliability_diagram  # noqa: E402

# Ten standard normal predictives whose targets sit at known PIT values.
PITS = np.array([0.02, 0.11, 0.22, 0.33, 0.44, 0.52, 0.61, 0.74, 0.86, 0.97])
STANDARD = GaussianPredictive(np.zeros(10), np.ones(10))
Y = stats.norm.ppf(PITS)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _line(ax, label):
    return next(line for line in ax.lines if line.get_label() == label)


def test_regression_reliability_counts_targets_inside_each_central_interval():
    ax = reliability_diagram(STANDARD, Y)
    observed = _line(ax, "raw").get_ydata()
    # by hand: the central p interval holds PIT values within p/2 of 1/2
    expected = [sum(abs(u - 0.5) <= p / 2 + 1e-12 for u in PITS) / 10 for p in LEVELS]
    np.testing.assert_allclose(observed, expected)
    assert observed[10] == 0.5  # the central 50 % interval, PIT in [0.25, 0.75]: 0.33, 0.44, 0.52, 0.61, 0.74
    assert ax.get_xlabel().startswith("expected frequency")


def test_regression_reliability_draws_the_recalibrated_curve_beside_the_raw_one():
    wider = GaussianPredictive(np.zeros(10), np.full(10, 3.0))
    ax = reliability_diagram(STANDARD, Y, recalibrated=wider)
    raw, recal = _line(ax, "raw").get_ydata(), _line(ax, "recalibrated").get_ydata()
    pit_wide = stats.norm.cdf(Y / 3.0)
    np.testing.assert_allclose(recal, [np.mean(np.abs(pit_wide - 0.5) <= p / 2 + 1e-12) for p in LEVELS])
    assert (recal >= raw).all() and (recal > raw).any()  # wider intervals hold at least as many targets


def test_classification_reliability_shows_bin_accuracy_and_counts():
    probs = np.array([[0.95, 0.05], [0.92, 0.08], [0.3, 0.7], [0.35, 0.65], [0.38, 0.62]])
    labels = np.array([0, 1, 1, 1, 0])
    ax = reliability_diagram(CategoricalPredictive(probs), labels)
    line = _line(ax, "raw")
    # bins (m/15, (m+1)/15]: 0.95 -> 14, 0.92 -> 13, 0.7 -> 10, 0.65 -> 9, 0.62 -> 9
    bins = np.clip(np.ceil(probs.max(1) * 15).astype(int) - 1, 0, 14)
    expected_acc = [np.mean((probs.argmax(1) == labels)[bins == b]) for b in sorted(set(bins))]
    expected_conf = [np.mean(probs.max(1)[bins == b]) for b in sorted(set(bins))]
    np.testing.assert_allclose(line.get_ydata(), expected_acc)
    np.testing.assert_allclose(line.get_xdata(), expected_conf)
    counts_axis = next(other for other in ax.figure.axes if other is not ax)
    heights = [patch.get_height() for patch in counts_axis.patches]
    assert heights == list(np.bincount(bins, minlength=15))
    assert "per bin" in counts_axis.get_ylabel()


def test_classification_reliability_with_recalibrated_probabilities():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.55, 0.45]])
    softened = CategoricalPredictive(np.array([[0.7, 0.3], [0.65, 0.35], [0.55, 0.45], [0.52, 0.48]]))
    ax = reliability_diagram(CategoricalPredictive(probs), np.array([0, 1, 0, 1]), recalibrated=softened)
    assert {"raw", "recalibrated", "ideal"} <= {line.get_label() for line in ax.lines}
    with pytest.raises(TypeError, match="same kind"):
        reliability_diagram(CategoricalPredictive(probs), np.array([0, 1, 0, 1]), recalibrated=STANDARD)


def test_calibration_curve_is_the_empirical_cdf_of_the_pit_values():
    ax = calibration_curve(STANDARD, Y, label="model")
    np.testing.assert_allclose(_line(ax, "model").get_ydata(), [np.mean(PITS <= p) for p in LEVELS])
    calibration_curve(STANDARD, Y, ax=ax, label="again")
    assert [line.get_label() for line in ax.lines].count("ideal") == 1  # one diagonal however many curves


def test_calibration_curve_of_a_quantile_predictive():
    levels = np.array([0.1, 0.5, 0.9])
    quantiles = np.tile([-1.0, 0.0, 1.0], (4, 1))
    y = np.array([-1.0, -0.5, 0.5, 1.0])  # CDF linear between the quantiles: 0.1, 0.3, 0.7, 0.9
    ax = calibration_curve(QuantilePredictive(levels, quantiles), y, label="q")
    np.testing.assert_allclose(_line(ax, "q").get_ydata(), [np.mean(np.array([0.1, 0.3, 0.7, 0.9]) <= p + 1e-12)
                                                            for p in LEVELS])


def test_pit_histogram_is_a_density_of_the_pit_values():
    ax = pit_histogram(STANDARD, Y, bins=5)
    heights = [patch.get_height() for patch in ax.patches]
    # five bins of width 0.2 over ten PITs: counts 2, 2, 2, 2, 2 -> density 2 / (10 * 0.2) = 1
    np.testing.assert_allclose(heights, [1.0] * 5)
    ax = pit_histogram(STANDARD, np.full(10, 5.0), bins=5)  # every target far above: all mass in the last bin
    np.testing.assert_allclose([p.get_height() for p in ax.patches], [0, 0, 0, 0, 5.0])


def test_plots_refuse_what_they_cannot_draw():
    with pytest.raises(TypeError, match="uqcal.core.predictive"):
        reliability_diagram(np.zeros(3), np.zeros(3))
    with pytest.raises(TypeError, match="regression predictive"):
        pit_histogram(CategoricalPredictive(np.array([[0.5, 0.5]])), np.array([0]))
    with pytest.raises(ValueError, match="y has 2 values"):
        calibration_curve(STANDARD, np.zeros(2))


def test_each_plot_returns_the_axes_it_drew_on():
    fig, axes = plt.subplots(1, 3)
    assert reliability_diagram(STANDARD, Y, ax=axes[0]) is axes[0]
    assert calibration_curve(STANDARD, Y, ax=axes[1]) is axes[1]
    assert pit_histogram(STANDARD, Y, ax=axes[2]) is axes[2]


def test_without_matplotlib_the_import_error_names_the_extra():
    code = ("import sys; sys.modules['matplotlib'] = None; sys.modules['matplotlib.pyplot'] = None\n"
            "try:\n    import uqcal.plots\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'uqcal[plots]'" in out

"""Every metric of a predictive object in one call: ``all_metrics(prediction, y)``.

The library's names: each key says what it measures, and the three regression calibration errors, which the
papers define differently, carry their paper's name. The pipeline's ``metrics.json`` keeps its own short keys
(``regression_metrics_gaussian`` & co., which the report specs and paper_numbers.yaml name); this is not it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from uqcal.core.predictive import (
    CategoricalPredictive,
    Predictive,
    QuantilePredictive,
    RecalibratedPredictive,
    RegressionPredictive,
)
from uqcal.metrics.classification import accuracy, classification_ece, classification_mce, classification_nll
from uqcal.metrics.regression import (
    calibration_score,
    ce_qr,
    ece_iwata,
    interval_coverage,
    mse,
    nlpd_from_logpdf,
    sharpness,
)
from uqcal.metrics.scoring_rules import brier_score, interval_score, miscalibration_area, pinball_loss

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["CLASSIFICATION_BINS", "COVERAGE_LEVELS", "all_metrics"]

# The central intervals whose coverage is reported (RIO App. D.2's 95 / 90 / 68 %), at their exact quantiles.
COVERAGE_LEVELS = {"coverage_95": 0.95, "coverage_90": 0.90, "coverage_68": 0.68}
# The quantiles whose pinball loss is reported.
PINBALL_LEVELS = {"pinball_loss_05": 0.05, "pinball_loss_50": 0.5, "pinball_loss_95": 0.95}
# Guo et al. (2017) and MD-BFSC (Table 2, after Patacchiola et al. 2020): 15 equal-width confidence bins.
CLASSIFICATION_BINS = 15


def all_metrics(prediction: Predictive, y: ArrayLike) -> dict[str, float]:
    """Every metric that applies to ``prediction`` (a uqcal.core.predictive object) against targets or integer
    class labels ``y``.

    Regression (any ``RegressionPredictive``):

    - ``mse``, ``rmse``: of the point prediction (the mean, else the median): :func:`~uqcal.metrics.mse`.
    - ``ece_iwata``: Iwata & Kumagai's ECE, mean |p - p_hat(p)| over p = 0.1..0.9 (:func:`~uqcal.metrics.ece_iwata`,
      which says how it differs from uncertainty-toolbox's default).
    - ``ce_qr_percent``: the QR paper's calibration error, 100 x sum over p = 0.1..1.0 of (p_hat(p) - p)^2
      (:func:`~uqcal.metrics.ce_qr`).
    - ``calibration_score_kuleshov``: Kuleshov et al. (2018) / Deshpande & Kuleshov, sum over p = 0.05..0.95 of
      (p - p_hat(p))^2 (:func:`~uqcal.metrics.calibration_score`).
    - ``coverage_95``, ``coverage_90``, ``coverage_68``: the fraction of targets in the central interval
      (:func:`~uqcal.metrics.interval_coverage`, RIO App. D.2, exact quantiles), where the predictive has those
      quantiles (a ``QuantilePredictive`` only within its levels).

    - ``interval_score_90``: the interval (Winkler) score of the central 90 % interval
      (:func:`~uqcal.metrics.interval_score`), where ``coverage_90`` is reported.
    - ``pinball_loss_05``, ``pinball_loss_50``, ``pinball_loss_95``: the pinball loss of the 0.05, 0.5 and 0.95
      quantiles (:func:`~uqcal.metrics.pinball_loss`), where the predictive has them.
    - ``miscalibration_area``: uncertainty-toolbox's area between the central-interval coverage curve and the
      diagonal (:func:`~uqcal.metrics.miscalibration_area`).
    - ``crps``: the continuous ranked probability score (Gneiting & Raftery 2007): closed form for a Gaussian, the
      quantile-score integral for a recalibrated predictive (quadrature) and, over its own levels, for a
      ``QuantilePredictive``.
    - ``nlpd`` (RIO Eq. 10, QR's NLL) and ``sharpness_variance`` (the mean predictive variance, Kuleshov et al.
      2018) for every predictive with a density and a variance: Gaussian and recalibrated ones, from the
      recalibrated CDF. A ``QuantilePredictive`` has neither (no tails), so they are left out for it.

    Iwata & Kumagai's total error TE = (MSE + ECE) / 2 is left out: it adds a squared error in the target's units
    to a unitless frequency, so it means something only on the standardised targets of the paper's tables
    (Table 2's magnitudes suggest standardised targets; the paper does not say by which statistics). On raw
    targets it is MSE / 2 in disguise (1557 on one of issue 39's data sets). Compute it on standardised data
    with :func:`~uqcal.metrics.total_error` where that is what you compare.

    Classification (``CategoricalPredictive``, integer labels): ``accuracy``, ``nll_categorical`` (mean -log
    probability of the true class), ``ece_guo_15bins`` and ``mce_15bins`` (Guo et al. 2017, 15 equal-width
    confidence bins, as MD-BFSC's Table 2) and ``brier_score`` (:func:`~uqcal.metrics.brier_score`).

    Parameters
    ----------
    prediction : Predictive
        A ``RegressionPredictive`` or a ``CategoricalPredictive``.
    y : array_like of shape (n,)
        Targets (regression) or integer class labels.

    Returns
    -------
    dict of str to float
        Every metric that applies, by name.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal import GaussianPredictive, all_metrics
    >>> metrics = all_metrics(GaussianPredictive(np.zeros(3), np.ones(3)), np.array([-1.0, 0.0, 1.0]))
    >>> round(metrics["crps"], 4), round(metrics["nlpd"], 4)
    (0.4795, 1.2523)
    """
    if isinstance(prediction, RegressionPredictive):
        return _regression_metrics(prediction, y)
    if isinstance(prediction, CategoricalPredictive):
        labels = prediction.labels(y)  # integer labels only, mapped onto the columns of probs
        return {
            "accuracy": accuracy(prediction.probs, labels),
            "nll_categorical": classification_nll(prediction.probs, labels),
            "ece_guo_15bins": classification_ece(prediction.probs, labels, CLASSIFICATION_BINS),
            "mce_15bins": classification_mce(prediction.probs, labels, CLASSIFICATION_BINS),
            "brier_score": brier_score(prediction.probs, labels),
        }
    raise TypeError(f"all_metrics: prediction must be a uqcal.core.predictive object, got {type(prediction).__name__}")


def _regression_metrics(prediction: RegressionPredictive, y) -> dict[str, float]:
    pit = prediction.pit(y)  # validates y against the prediction
    y = np.asarray(y, dtype=np.float64)
    out = {"mse": mse(y, prediction.point())}
    out["rmse"] = float(np.sqrt(out["mse"]))
    out["ece_iwata"] = ece_iwata(pit)
    out["ce_qr_percent"] = ce_qr(pit)
    out["calibration_score_kuleshov"] = calibration_score(pit)
    out["miscalibration_area"] = miscalibration_area(pit)
    for key, level in COVERAGE_LEVELS.items():
        if _predicts_quantiles(prediction, np.array([(1.0 - level) / 2.0, (1.0 + level) / 2.0])):
            out[key] = interval_coverage(y, *prediction.interval(level))
    if "coverage_90" in out:
        out["interval_score_90"] = interval_score(y, *prediction.interval(0.9), alpha=0.1)
    for key, level in PINBALL_LEVELS.items():
        if _predicts_quantiles(prediction, np.array([level])):
            out[key] = pinball_loss(y, prediction.ppf(level), level)
    for key, score in (("nlpd", lambda: nlpd_from_logpdf(prediction.logpdf(y))),
                       ("crps", lambda: float(np.mean(prediction.crps(y)))),
                       ("sharpness_variance", lambda: sharpness(np.sqrt(prediction.var()), "variance"))):
        try:
            out[key] = score()
        except NotImplementedError:
            continue  # the predictive does not define it (a QuantilePredictive's density or variance)
    return out


def _predicts_quantiles(prediction: RegressionPredictive, levels: np.ndarray) -> bool:
    """Whether ``prediction.ppf(levels)`` is defined: a quantile predictive knows only its own level range."""
    if isinstance(prediction, RecalibratedPredictive):
        inner = np.clip(np.asarray(prediction.inverse_map(levels), dtype=np.float64), 1e-12, 1 - 1e-12)
        return _predicts_quantiles(prediction.base, inner)
    if isinstance(prediction, QuantilePredictive):
        return prediction.covers(levels)  # to round-off: 0.05 / 0.95 match (1 -/+ 0.9) / 2
    return True

"""uqcal's metrics against the peer libraries' values on the same predictions (issue 51's note): the largest
absolute difference per metric, per point where the peer scores points, else of the mean. Peers: scoringrules,
uncertainty-toolbox, scikit-learn, skpro (the test extra). Run: python benchmarks/metric_agreement.py [--points N]"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
from scipy.special import ndtri

from uqcal.core.interop import to_skpro
from uqcal.core.predictive import CategoricalPredictive, GaussianPredictive, QuantilePredictive
from uqcal.core.recalibration import IsotonicRecalibrator
from uqcal.metrics import all_metrics


def main() -> None:
    import scoringrules as sr
    import uncertainty_toolbox as uct
    from sklearn.metrics import brier_score_loss, log_loss, mean_pinball_loss
    from skpro.metrics import CRPS, EmpiricalCoverage, LogLoss, PinballLoss

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=10_000)
    n = parser.parse_args().points
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, n)
    y = mean + 1.3 * rng.normal(size=n)
    gaussian = GaussianPredictive(mean, std)
    ours = all_metrics(gaussian, y)
    truth = pd.DataFrame({"y": y})
    normal = to_skpro(gaussian)
    rows = [
        ("crps (Gaussian)", "scoringrules crps_normal", np.max(np.abs(gaussian.crps(y) - sr.crps_normal(y, mean, std)))),
        ("crps (Gaussian)", "skpro CRPS (Normal)", abs(ours["crps"] - CRPS()(truth, normal))),
        ("nlpd (Gaussian)", "scoringrules logs_normal", np.max(np.abs(-gaussian.logpdf(y) - sr.logs_normal(y, mean, std)))),
        ("nlpd (Gaussian)", "skpro LogLoss (Normal)", abs(ours["nlpd"] - LogLoss()(truth, normal))),
        ("miscalibration_area", "uncertainty-toolbox", abs(ours["miscalibration_area"]
                                                           - uct.metrics_calibration.miscalibration_area(mean, std, y))),
        ("sharpness_variance", "uncertainty-toolbox sharpness^2", abs(ours["sharpness_variance"]
                                                                     - uct.metrics_calibration.sharpness(std) ** 2)),
        ("coverage_90", "skpro EmpiricalCoverage",
         abs(ours["coverage_90"] - _skpro_coverage(normal, truth, EmpiricalCoverage))),
    ]
    lower, upper = gaussian.interval(0.9)
    rows.append(("interval_score_90", "scoringrules interval_score",
                 abs(ours["interval_score_90"] - float(np.mean(sr.interval_score(y, lower, upper, 0.1))))))
    for key, level in (("pinball_loss_05", 0.05), ("pinball_loss_50", 0.5), ("pinball_loss_95", 0.95)):
        rows.append((key, "scikit-learn mean_pinball_loss",
                     abs(ours[key] - mean_pinball_loss(y, gaussian.ppf(level), alpha=level))))
        rows.append((key, "skpro PinballLoss (Normal)", abs(ours[key] - PinballLoss()(truth, normal.quantile([level])))))
    levels = np.arange(1, 100) / 100
    quantiles = QuantilePredictive(levels, mean[:, None] + std[:, None] * ndtri(levels)[None, :])
    rows.append(("crps (quantile, 99 levels)", "scoringrules crps_quantile",
                 np.max(np.abs(quantiles.crps(y) - sr.crps_quantile(y, quantiles.quantiles, levels)))))
    half = n // 2
    recalibrated = IsotonicRecalibrator().fit(GaussianPredictive(mean[:half], std[:half]), y[:half]).transform(
        GaussianPredictive(mean[half:half + 500], std[half:half + 500]))
    rows.append(("nlpd (isotonic-recalibrated)", "skpro LogLoss (Mixture of TruncatedNormal)",
                 abs(all_metrics(recalibrated, y[half:half + 500])["nlpd"]
                     - LogLoss()(pd.DataFrame({"y": y[half:half + 500]}), to_skpro(recalibrated)))))
    probs = rng.dirichlet(np.ones(4), size=n)
    labels = rng.integers(0, 4, n)
    classes = all_metrics(CategoricalPredictive(probs), labels)
    rows.append(("brier_score", "scikit-learn brier_score_loss",
                 abs(classes["brier_score"] - brier_score_loss(labels, probs, labels=[0, 1, 2, 3]))))
    rows.append(("nll_categorical", "scikit-learn log_loss", abs(classes["nll_categorical"] - log_loss(labels, probs))))
    print(f"{n} points\n{'metric':<30} {'peer':<44} max abs diff")
    for metric, peer, diff in rows:
        print(f"{metric:<30} {peer:<44} {float(diff):.1e}")


def _skpro_coverage(distribution, truth, metric) -> float:
    bounds = distribution.quantile([0.05, 0.95]).to_numpy()
    interval = pd.DataFrame(bounds, columns=pd.MultiIndex.from_tuples([("y", 0.9, "lower"), ("y", 0.9, "upper")]))
    return metric()(truth, interval)


if __name__ == "__main__":
    main()

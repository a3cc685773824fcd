"""``uqcal.metrics.all_metrics`` on each predictive kind at 10^5 points (prints a table); target: a quantile
predictive of 10^5 points scored in < 1 s (issue 51; it took 14 s with a per-row CDF). Run:
python benchmarks/predictive_metrics.py [--points N]"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import ndtri

from uqcal.core.predictive import GaussianPredictive, QuantilePredictive
from uqcal.core.recalibration import IsotonicRecalibrator
from uqcal.metrics import all_metrics


def _best_of(fn, repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=100_000)
    n = parser.parse_args().points
    rng = np.random.default_rng(0)
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, n)
    y = mean + rng.normal(size=n)
    gaussian = GaussianPredictive(mean, std)
    rows = [("gaussian", _best_of(lambda: all_metrics(gaussian, y)))]
    for n_levels in (19, 99):
        levels = np.round(np.linspace(0.05, 0.95, n_levels) if n_levels == 19 else np.arange(1, 100) / 100, 10)
        quantiles = QuantilePredictive(levels, mean[:, None] + std[:, None] * ndtri(levels)[None, :])
        rows.append((f"quantile, {n_levels} levels", _best_of(lambda q=quantiles: all_metrics(q, y))))
    recalibrated = IsotonicRecalibrator().fit(gaussian, y).transform(gaussian)
    rows.append(("isotonic-recalibrated (CRPS and variance by 2000-level quadrature)",
                 _best_of(lambda: all_metrics(recalibrated, y), repeats=1)))
    width = max(len(name) for name, _ in rows)
    print(f"all_metrics on {n:,} points")
    print(f"{'predictive':<{width}}  seconds")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:.3f}")


if __name__ == "__main__":
    main()

"""Timings of the shared metrics (prints a table). Run: python benchmarks/metrics.py"""

from __future__ import annotations

import time

import numpy as np

from uqcal import metrics as M
from uqcal.metrics import stats as S


def _time(fn, *args, repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for n in (1_000, 100_000, 1_000_000):
        y, mu, sd = rng.normal(size=n), rng.normal(size=n), rng.uniform(0.5, 2, size=n)
        rows.append((f"regression_metrics_gaussian n={n:,}", _time(M.regression_metrics_gaussian, y, mu, sd)))
    for n in (9_000, 45_000):  # 600 episodes x 15 or 75 queries
        probs = rng.dirichlet(np.ones(5), size=n)
        labels = rng.integers(0, 5, size=n)
        rows.append((f"classification_metrics n={n:,} C=5", _time(M.classification_metrics, probs, labels)))
    samples = rng.normal(size=(1_000, 1_000))
    rows.append(("crps_from_samples n=1,000 S=1,000", _time(M.crps_from_samples, np.zeros(1000), samples)))
    table = {f"m{i}": rng.normal(i * 0.05, 1, size=10) for i in range(12)}
    rows.append(("best_and_ties 12 methods x 10 seeds", _time(S.best_and_ties, table)))
    width = max(len(name) for name, _ in rows)
    print(f"{'operation':<{width}}  seconds")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:.4f}")


if __name__ == "__main__":
    main()

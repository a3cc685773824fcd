"""Fit times on 400 rows (issue 51): a user's scikit-learn regressor wrapped and isotonically recalibrated
(WrappedRegressor + IsotonicRecalibrator), MAPIE's split-conformal intervals for the same model (needs
``uqcal[conformal]``), and RIO on the wrapped model. Prints a table. Run: python benchmarks/byom_fit_time.py"""

from __future__ import annotations

import time

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor


def main() -> None:
    from uqcal import IsotonicRecalibrator
    from uqcal.methods.rio import ResidualIOGP
    from uqcal.methods.wrapped import WrappedRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (800, 5))
    y = np.sin(X[:, 0]) * 3 + X[:, 1] + (0.3 + 0.3 * np.abs(X[:, 2])) * rng.normal(size=800)
    train, cal, test = slice(0, 400), slice(400, 600), slice(600, 800)
    model = GradientBoostingRegressor(n_estimators=100, random_state=0).fit(X[train], y[train])
    rows = []
    start = time.process_time()
    wrapped = WrappedRegressor(model=model).fit(X[cal], y[cal])
    IsotonicRecalibrator().fit(wrapped.predict_proba(X[cal]), y[cal]).transform(wrapped.predict_proba(X[test]))
    rows.append(("wrap + isotonic recalibration", time.process_time() - start))
    try:
        from mapie.regression import SplitConformalRegressor

        start = time.process_time()
        SplitConformalRegressor(model, confidence_level=0.9, prefit=True).conformalize(
            X[cal], y[cal]).predict_interval(X[test])
        rows.append(("MAPIE split conformal", time.process_time() - start))
    except ImportError:
        rows.append(("MAPIE split conformal (not installed)", float("nan")))
    start = time.process_time()
    ResidualIOGP(base=wrapped, random_state=0).fit(X[train], y[train]).predict_proba(X[test])
    rows.append(("RIO on the wrapped model (400 rows, default budget)", time.process_time() - start))
    width = max(len(name) for name, _ in rows)
    print(f"{'step':<{width}}  CPU seconds")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:.2f}")


if __name__ == "__main__":
    main()

"""Fit times on 400 rows of scikit-learn's diabetes (issue 51): every registered single-task regressor class with
its defaults (random_state=0, raw targets, as a new user would fit it), a user's scikit-learn model wrapped and
isotonically recalibrated, and MAPIE's split-conformal intervals for the same model. CPU seconds of the fit (one
torch thread), the test CRPS on the other 42 rows, or the error. Each fit runs in its own process with a time
limit. Run: python benchmarks/estimator_fit_times.py [--limit SECONDS] [--only NAME ...]"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

ESTIMATORS = {
    "marginal": "from uqcal.methods.reference_predictors import MarginalGaussian as E; est = E(random_state=0)",
    "nn (RioNetwork)": "from uqcal.methods.rio import RioNetwork as E; est = E(random_state=0)",
    "rio (ResidualIOGP)": "from uqcal.methods.rio import ResidualIOGP as E; est = E(random_state=0)",
    "dvi (DropoutVI)": "from uqcal.methods.qr import DropoutVI as E; est = E(random_state=0)",
    "de (DeepEnsemble)": "from uqcal.methods.qr import DeepEnsemble as E; est = E(random_state=0)",
    "de_iso (IsotonicRecalibrated)": "from uqcal.methods.qr import DeepEnsemble, IsotonicRecalibrated as E; "
                                     "est = E(base=DeepEnsemble(random_state=0), fit_on='train', random_state=0)",
    "nn_iso (IsotonicOnValidation)": "from uqcal.methods.rio import RioNetwork; from uqcal.methods.arena import "
                                     "IsotonicOnValidation as E; est = E(base=RioNetwork(random_state=0), random_state=0)",
    "nn_vs (VarianceScaling)": "from uqcal.methods.rio import RioNetwork; from uqcal.methods.arena import "
                               "VarianceScaling as E; est = E(base=RioNetwork(random_state=0), random_state=0)",
}

CHILD = """
import json, time, warnings
import numpy as np, torch
from sklearn.datasets import load_diabetes
torch.set_num_threads(1)
warnings.simplefilter("ignore")
X, y = load_diabetes(return_X_y=True)
order = np.random.default_rng(0).permutation(len(y))
train, test = order[:400], order[400:]
{build}
start = time.process_time()
est.fit(X[train], y[train])
seconds = time.process_time() - start
print(json.dumps({{"seconds": seconds, "crps": -est.score(X[test], y[test])}}))
"""

BYOM = """
import json, time
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.ensemble import GradientBoostingRegressor
from uqcal import IsotonicRecalibrator
from uqcal.methods.wrapped import WrappedRegressor
X, y = load_diabetes(return_X_y=True)
order = np.random.default_rng(0).permutation(len(y))
train, cal, test = order[:300], order[300:400], order[400:]
model = GradientBoostingRegressor(n_estimators=100, random_state=0).fit(X[train], y[train])
start = time.process_time()
wrapped = WrappedRegressor(model=model).fit(X[cal], y[cal])
recal = IsotonicRecalibrator().fit(wrapped.predict_proba(X[cal]), y[cal])
out = recal.transform(wrapped.predict_proba(X[test]))
wrap_seconds = time.process_time() - start
from mapie.regression import SplitConformalRegressor
start = time.process_time()
SplitConformalRegressor(model, confidence_level=0.9, prefit=True).conformalize(X[cal], y[cal]).predict_interval(X[test])
print(json.dumps({"seconds": wrap_seconds, "crps": float(np.mean(out.crps(y[test]))),
                  "mapie_seconds": time.process_time() - start}))
"""


def _run(code: str, limit: float) -> dict:
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"over {limit:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:100]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=float, default=600.0, help="wall-clock seconds per fit")
    parser.add_argument("--only", nargs="*", help="estimator names (default: all, and the wrapped model)")
    args = parser.parse_args()
    names = args.only or [*ESTIMATORS, "wrapped GBR + isotonic"]
    print(f"{'estimator':<32} {'fit CPU s':>10} {'test CRPS':>10}")
    for name in names:
        code = BYOM if name == "wrapped GBR + isotonic" else CHILD.format(build=ESTIMATORS[name])
        result = _run(code, args.limit)
        if "error" in result:
            print(f"{name:<32} {result['error']}", flush=True)
            continue
        print(f"{name:<32} {result['seconds']:>10.2f} {result['crps']:>10.2f}", flush=True)
        if "mapie_seconds" in result:
            print(f"{'MAPIE split conformal (same GBR)':<32} {result['mapie_seconds']:>10.2f} {'-':>10}", flush=True)


if __name__ == "__main__":
    main()

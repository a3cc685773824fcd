"""Recalibration cost in calibrated BO at N observations (issue 7 speed targets).

Targets: closed-form-LOO recalibration <= 2x one uncalibrated BO iteration (GP fit + acquisition
optimisation), and >= 20x faster than LOO by N exact refits. Prints a table; run:
    PYTHONPATH=src python benchmarks/bo_recal_speed.py [--n 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from botorch.optim import optimize_acqf

from uqcal.methods.bo.acquisition import CalibratedAcquisition
from uqcal.methods.bo.recalibration import fit_recalibration
from uqcal.methods.bo.surrogate import fit_gp, loo_pit, refit_loo_pit, timeseries_pit
from uqcal.objectives import make_synthetic


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        # CPU time of this single-threaded process: robust to other jobs sharing the cores.
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return float(np.median(times)), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--objectives", default="branin,hartmann6")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"N = {args.n} observations, median of {args.repeats} repeats, 1 thread, CPU seconds")
    header = (f"{'objective':<10} {'BO iter (s)':>11} {'recal LOO (s)':>13} {'recal TS (s)':>12} "
              f"{'refit LOO (s)':>13} {'recal/iter':>10} {'refit/recal':>11}")
    print(header)
    print("-" * len(header))
    for name in args.objectives.split(","):
        objective = make_synthetic(name)
        u = np.random.default_rng(0).uniform(size=(args.n, objective.dim))
        x = torch.as_tensor(u)
        y = torch.as_tensor(objective(objective.to_native(u)))
        bounds = torch.stack([torch.zeros(objective.dim), torch.ones(objective.dim)]).double()

        def bo_iteration(x=x, y=y, bounds=bounds):
            model, _ = fit_gp(x, y)
            acq = CalibratedAcquisition(model, "ei", float(y.min()))
            optimize_acqf(acq, bounds=bounds, q=1, num_restarts=4, raw_samples=128)
            return model

        t_iter, model = timed(bo_iteration, args.repeats)
        t_recal, _ = timed(lambda m=model: fit_recalibration(loo_pit(m)).sigma_scale(), args.repeats)
        t_ts, _ = timed(lambda m=model: fit_recalibration(timeseries_pit(m)).sigma_scale(), args.repeats)
        t_refit, _ = timed(lambda x=x, y=y: fit_recalibration(refit_loo_pit(x, y)).sigma_scale(), 1)
        print(f"{name:<10} {t_iter:>11.3f} {t_recal:>13.4f} {t_ts:>12.4f} {t_refit:>13.2f} "
              f"{t_recal / t_iter:>10.3f} {t_refit / t_recal:>11.0f}", flush=True)
    print("targets: recal/iter <= 2, refit/recal >= 20")


if __name__ == "__main__":
    main()

"""Cost of recalibration in calibrated BO at N observations, CPU seconds (issue 27: refit LOO is costlier).

Per objective and N: one uncalibrated BO iteration (ML-II fit + optimize_acqf, 2 restarts / 64 raw samples
as in the configs); the recalibration step of each PIT mode with the GP recalibrator (closed-form LOO,
refit LOO as one batched model fitted by botorch's batched independent L-BFGS-B, and refit LOO as N
separate fits for comparison); the refit-LOO step once more with OpenBLAS' thread pool left at its default
(CalibratedBO.train limits it to torch_threads). CPU time of this process (all its threads), median of
--repeats. Run:
    PYTHONPATH=src python benchmarks/bo_recal_speed.py [--n 10 30] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from botorch.optim import optimize_acqf
from threadpoolctl import threadpool_limits

from uqcal.data.objectives import make_synthetic
from uqcal.methods.bo.acquisition import CalibratedAcquisition
from uqcal.methods.bo.pit_recalibrator import fit_recalibration
from uqcal.methods.bo.surrogate import _fit, _warm_start, fit_gp, hyperparameters, loo_pit, make_gp, refit_loo_pit


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return float(np.median(times))


def sequential_refits(model, x, y):
    """Reference: one botorch fit per leave-one-out split (same warm start as the batched refit)."""
    pits = []
    for i in range(len(y)):
        keep = torch.arange(len(y)) != i
        single = make_gp(x[keep], y[keep])
        _warm_start(single, hyperparameters(model))
        _fit(single)
        with torch.no_grad():
            post = single.posterior(x[i : i + 1], observation_noise=True)
            pits.append(float(torch.special.ndtr((y[i] - post.mean.reshape(())) / post.variance.reshape(()).sqrt())))
    return np.array(pits)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--objectives", default="sixhump,branin")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    print(f"median of {args.repeats} repeats, 1 torch thread, CPU seconds per BO step")
    header = (f"{'objective':<9} {'N':>3} {'BO iter':>8} {'closed LOO+R':>12} {'refit LOO+R':>11} "
              f"{'N fits+R':>9} {'refit, BLAS pool':>16} {'refit/iter':>10}")
    print(header)
    print("-" * len(header))
    for name in args.objectives.split(","):
        objective = make_synthetic(name)
        bounds = torch.stack([torch.zeros(objective.dim), torch.ones(objective.dim)]).double()
        for n in args.n:
            u = np.random.default_rng(n).uniform(size=(n, objective.dim))
            x, y = torch.as_tensor(u), torch.as_tensor(objective(objective.to_native(u)))
            model, _ = fit_gp(x, y)

            def iteration(x=x, y=y, bounds=bounds):
                fitted, _ = fit_gp(x, y)
                acq = CalibratedAcquisition(fitted, "ei", float(y.min()))
                optimize_acqf(acq, bounds=bounds, q=1, num_restarts=2, raw_samples=64)

            def refit(model=model, x=x, y=y):
                fit_recalibration(refit_loo_pit(model, x, y)[0])

            with threadpool_limits(limits=1, user_api="blas"):
                t_iter = timed(iteration, args.repeats)
                t_closed = timed(lambda m=model: fit_recalibration(loo_pit(m)), args.repeats)
                t_refit = timed(refit, args.repeats)
                t_seq = timed(lambda m=model, x=x, y=y: fit_recalibration(sequential_refits(m, x, y)), 1)
            t_pool = timed(refit, 1)
            print(f"{name:<9} {n:>3} {t_iter:>8.3f} {t_closed:>12.3f} {t_refit:>11.3f} {t_seq:>9.3f} "
                  f"{t_pool:>16.3f} {t_refit / t_iter:>10.2f}", flush=True)


if __name__ == "__main__":
    main()

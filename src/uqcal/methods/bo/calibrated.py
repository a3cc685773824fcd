"""Calibrated Bayesian optimisation (Deshpande & Kuleshov, Algorithm 2) and its paired baselines.

``CalibratedBO`` with ``calibrate=True`` is Algorithm 2: after every observation refit the GP (ML-II),
compute held-out PIT values (Algorithm 4; by default leave-one-out with the GP retrained on each split),
fit R (Algorithm 3; by default a GP, as in the paper) and maximise the acquisition of the recalibrated
forecast (``acquisition.py`` states the rule) over the unit cube with botorch's ``optimize_acqf``.
``calibrate=False`` is plain BO (Algorithm 1) with the same surrogate, acquisition optimiser and seed.
``RandomSearchBO`` samples uniformly. All three start from the same initial design (split artifact
``initial_x``, or the setting's ``initial_design`` / ``initial_box``), so repeats are paired.

Setting parameters (config ``families.bo.settings.<objective>-<acq>``):
  acquisition: ei | pi | ucb   budget: BO iterations after the initial design   n_init: initial points
  target_tol: |best - optimum| tolerance for ``steps_to_target``
  initial_design: [[x...], ...] native coordinates, overrides the split's random design
  initial_box: [[lo...], [hi...]] draw the n_init initial points per seed inside this box instead
    (e.g. Fig. 1: random designs that miss the global basin)
  stuck_above: a run whose final best value is above this is ``stuck`` (Forrester: the local minimum's
    value -0.98633; only the global basin has lower values)
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import gpytorch
import numpy as np
import pandas as pd
import torch
from scipy.stats import norm

from uqcal.core.gp.failures import FitFailures
from uqcal.data.objectives import Objective, get_objective
from uqcal.methods.api import Method, RunContext, load_predictions
from uqcal.methods.bo.acquisition import ACQUISITIONS, CALIBRATED_ACQ_MODES, CalibratedAcquisition
from uqcal.methods.bo.pit_recalibrator import RECALIBRATORS, RecalibrationMap, fit_recalibration
from uqcal.methods.bo.surrogate import KERNELS, PIT_MODES, fit_gp, heldout_pit
from uqcal.metrics import calibration_score as shared_calibration_score

SETTING_KEYS = {"acquisition", "budget", "n_init", "target_tol", "initial_design", "initial_box", "stuck_above",
                "datasets"}


CAL_LEVELS = np.linspace(0.05, 0.95, 19)  # m = 19 levels p_j (the paper does not state its m)


def calibration_score(pit, reduce: str = "mean") -> float:
    """Kuleshov et al. (2018) calibration score (Sec. 5.1) of the finite PIT values over the m = 19 levels
    p = 0.05..0.95: ``mean`` = (1/m) sum_j (p_j - p_hat_j)^2 (comparable across m), ``sum`` = the paper's
    sum_j (p_j - p_hat_j)^2 (grows with m); nan if there are no values."""
    pit = np.asarray(pit, dtype=float)
    pit = pit[np.isfinite(pit)]
    if not len(pit):
        return float("nan")
    total = float(shared_calibration_score(pit, levels=CAL_LEVELS))
    return total / len(CAL_LEVELS) if reduce == "mean" else total


def setting(ctx: RunContext) -> dict:
    params = dict(ctx.setting_params or {})
    unknown = set(params) - SETTING_KEYS
    if unknown:
        raise KeyError(f"families.bo.settings.{ctx.setting}: unknown key(s) {sorted(unknown)}")
    acq = params.get("acquisition", "ei")
    if acq not in ACQUISITIONS:
        raise ValueError(f"families.bo.settings.{ctx.setting}.acquisition: {acq!r} not in {ACQUISITIONS}")
    budget = int(params.get("budget", 20))
    if budget < 1:
        raise ValueError(f"families.bo.settings.{ctx.setting}.budget: must be >= 1, got {budget}")
    return {
        "acquisition": acq,
        "budget": budget,
        "n_init": int(params.get("n_init", 3)),
        "target_tol": float(params.get("target_tol", 0.05)),
        "initial_design": params.get("initial_design"),
        "initial_box": params.get("initial_box"),
        "stuck_above": None if params.get("stuck_above") is None else float(params["stuck_above"]),
    }


def objective_for(ctx: RunContext) -> Objective:
    # data/raw/<name>.parquet -> data/cache: the hpo evaluation cache lives beside the raw data.
    cache_dir = Path(ctx.raw_path).parent.parent / "cache" if ctx.raw_path is not None else None
    return get_objective(ctx.dataset_spec["source"], cache_dir=cache_dir)


def initial_design(ctx: RunContext, objective: Objective, cfg: dict) -> np.ndarray:
    """Initial design in the unit cube (snapped to feasible configurations), shared by paired methods."""
    if cfg["initial_design"] is not None:
        x = np.atleast_2d(np.asarray(cfg["initial_design"], dtype=float))
    elif cfg["initial_box"] is not None:  # a random design per seed inside a sub-box (e.g. off the basin)
        lo, hi = (np.asarray(b, dtype=float) for b in cfg["initial_box"])
        x = np.random.default_rng([ctx.seed, 4242]).uniform(lo, hi, size=(cfg["n_init"], objective.dim))
    elif ctx.split_path is not None and ctx.split_path.exists():
        x = np.atleast_2d(np.asarray(ctx.load_split()["initial_x"], dtype=float))
    else:  # no split artifact (unit use): the same seeded design for every method
        ctx.log.warning("bo: no split at %s; drawing the initial design from the seed", ctx.split_path)
        u = np.random.default_rng([ctx.seed, 2024]).uniform(size=(cfg["n_init"], objective.dim))
        return objective.snap(u)
    if x.shape[1] != objective.dim:
        raise ValueError(
            f"initial design for {objective.name}: expected {objective.dim} columns, got shape {x.shape}"
        )
    lo, hi = objective.bounds
    if np.any(x < lo - 1e-9) or np.any(x > hi + 1e-9):
        raise ValueError(f"initial design for {objective.name} leaves the bounds {objective.bounds.tolist()}")
    return objective.snap(objective.to_unit(x))


def _row(objective: Objective, iteration: int, u: np.ndarray, y: float, best: float, **extra) -> dict:
    x = objective.to_native(u)[0]
    return {"iteration": iteration, "x": json.dumps([float(v) for v in x]), "y": float(y),
            "best_so_far": float(best), **extra}


class _BOBase(Method):
    def evaluate(self, ctx: RunContext, predictions=None) -> dict[str, float]:
        predictions = load_predictions(ctx, predictions)
        cfg = setting(ctx)
        return bo_metrics(predictions, objective_for(ctx), cfg["target_tol"], cfg["stuck_above"])


def bo_metrics(predictions: pd.DataFrame, objective: Objective, target_tol: float,
               stuck_above: float | None = None) -> dict[str, float]:
    """final_best, regret_auc, steps_to_target, stuck, calibration scores and the recalibrated forecast's
    width of one BO run."""
    bo_rows = predictions[predictions["iteration"] >= 1].sort_values("iteration")
    trace = predictions.sort_values("iteration").groupby("iteration")["best_so_far"].min()
    optimum = objective.optimum_value
    metrics: dict[str, float] = {"final_best": float(trace.iloc[-1])}
    metrics["n_evaluations"] = float(len(predictions))
    if optimum is not None:
        regret = trace - optimum
        metrics["final_regret"] = float(regret.iloc[-1])
        # Mean simple regret over iterations 0..T (0 = after the initial design): area under curve / (T+1).
        metrics["regret_auc"] = float(regret.mean())
        hit = regret.index[regret.to_numpy() <= target_tol]
        budget = int(trace.index.max())
        metrics["reached_target"] = float(len(hit) > 0)
        metrics["steps_to_target"] = float(hit[0]) if len(hit) else float(budget + 1)  # censored at T+1
    else:
        metrics["regret_auc"] = float(trace.mean())  # unknown optimum: area under best-so-far
    if stuck_above is not None:
        metrics["stuck"] = float(trace.iloc[-1] > stuck_above)
    if "recal_std" in bo_rows and bo_rows["recal_std"].notna().any():
        # median over steps of s_R: the recalibrated forecast's std in units of the GP's (> 1: R widened)
        metrics["recal_width"] = float(bo_rows["recal_std"].median())
    base = bo_rows["pred_pit_base"] if "pred_pit_base" in bo_rows else pd.Series(dtype=float)
    recal = bo_rows["pred_pit_recal"] if "pred_pit_recal" in bo_rows else pd.Series(dtype=float)
    used = recal if np.isfinite(recal.to_numpy(float)).any() else base  # the forecast the method acted on
    for name, pit in (("cal_score_base", base), ("cal_score_recal", recal), ("cal_score", used)):
        value = calibration_score(pit)
        if np.isfinite(value):
            metrics[name] = value  # mean over the m = 19 levels
    paper_sum = calibration_score(used, reduce="sum")
    if np.isfinite(paper_sum):
        metrics["cal_score_sum"] = paper_sum  # the paper's sum over the same 19 levels
    return metrics  # timings (recal_seconds, iteration_seconds) are in train_stats.json: uqcal.methods.api.is_timing_key


class RandomSearchBO(_BOBase):
    """Uniform random search from the shared initial design (the paired reference)."""

    defaults: dict = {}

    def train(self, ctx: RunContext) -> None:
        cfg = setting(ctx)
        objective = objective_for(ctx)
        u = initial_design(ctx, objective, cfg)
        y = objective(objective.to_native(u))
        best = np.minimum.accumulate(y)
        rows = [_row(objective, 0, u[i : i + 1], y[i], best[i]) for i in range(len(y))]
        rng = np.random.default_rng([ctx.seed, 31337])
        best_value = float(best[-1])
        for it in ctx.progress(range(1, cfg["budget"] + 1), total=cfg["budget"], desc="random"):
            u_next = objective.snap(rng.uniform(size=(1, objective.dim)))
            y_next = float(objective(objective.to_native(u_next))[0])
            best_value = min(best_value, y_next)
            rows.append(_row(objective, it, u_next, y_next, best_value))
        ctx.save_outputs(pd.DataFrame(rows), {"objective": objective.name},
                         {"objective": objective.name, "budget": cfg["budget"]})


class CalibratedBO(_BOBase):
    defaults = {
        "calibrate": True,            # False = uncalibrated BO (Algorithm 1)
        "kernel": "rbf",              # rbf (paper) | matern52 (GPyOpt's default)
        "recalibrator": "gp",         # gp (the paper's R) | isotonic (Kuleshov et al. 2018)
        "pit_mode": "refit_loo",      # refit_loo (Algorithm 4) | closed_loo (fixed hyperparameters) | timeseries
        "calibrated_acq": "matched",  # matched (quantile LCB, moment-matched EI/PI) | sigma | quantile
        "min_recal_points": 5,        # identity R below this many held-out PIT values
        "ucb_beta": 4.0,              # LCB = mu - sqrt(beta) sigma (GPyOpt's exploration weight 2)
        "num_restarts": 4,
        "raw_samples": 128,
        "snapshot_grid": 201,         # 1-D objectives: save intervals on this grid every iteration
    }

    def _check(self) -> None:
        p = self.params
        for key, allowed in (("kernel", KERNELS), ("recalibrator", RECALIBRATORS), ("pit_mode", PIT_MODES),
                             ("calibrated_acq", CALIBRATED_ACQ_MODES)):
            if p[key] not in allowed:
                raise ValueError(f"families.bo.methods.*.{key}: {p[key]!r} not in {allowed}")

    def train(self, ctx: RunContext) -> None:
        from threadpoolctl import threadpool_limits

        self._check()
        threads = int(ctx.config.get("torch_threads", 1) or 1)
        torch.set_num_threads(threads)
        # scipy's L-BFGS-B (ML-II fits, the batched refit LOO, optimize_acqf) calls BLAS on a few numbers;
        # OpenBLAS' thread pool costs far more than that work (refit LOO: ~14x the CPU on a loaded 2-core
        # machine, benchmarks/bo_recal_speed.py).
        with threadpool_limits(limits=threads, user_api="blas"):
            self._train(ctx)

    def _train(self, ctx: RunContext) -> None:
        from botorch.optim import optimize_acqf

        p = self.params
        cfg = setting(ctx)
        objective = objective_for(ctx)
        dtype, device = torch.float64, ctx.device
        u = initial_design(ctx, objective, cfg)
        y = objective(objective.to_native(u))
        best = np.minimum.accumulate(y)
        rows = [_row(objective, 0, u[i : i + 1], y[i], best[i]) for i in range(len(y))]
        bounds = torch.stack([torch.zeros(objective.dim, dtype=dtype, device=device),
                              torch.ones(objective.dim, dtype=dtype, device=device)])
        snapshots = []
        failures = FitFailures.for_run(ctx)
        recal_stds = []
        # gpytorch's debug checks (shapes, dtypes) do no arithmetic; off, each ML-II fit is ~10 % cheaper.
        with gpytorch.settings.debug(False):
            for it in ctx.progress(range(1, cfg["budget"] + 1), total=cfg["budget"], desc=ctx.method):
                start = time.perf_counter()
                train_x = torch.as_tensor(u, dtype=dtype, device=device)
                train_y = torch.as_tensor(y, dtype=dtype, device=device)
                model, failed = fit_gp(train_x, train_y, p["kernel"])
                if failed:
                    failures.record(f"ML-II fit of the GP at iteration {it} (botorch ModelFittingError)")
                recal_start = time.perf_counter()
                recal = RecalibrationMap.identity_map()
                if p["calibrate"] and len(y) >= p["min_recal_points"]:  # fewer PIT values: R = identity
                    pit, failed = heldout_pit(model, p["pit_mode"], train_x, train_y, p["kernel"])
                    recal = fit_recalibration(pit, p["recalibrator"], p["min_recal_points"], device=device)
                    if failed:
                        failures.record(f"ML-II refits of the {p['pit_mode']} splits at iteration {it}")
                    if recal.fit_failed:
                        failures.record(f"ML-II fit of the GP recalibrator at iteration {it}")
                recal_seconds = time.perf_counter() - recal_start if p["calibrate"] else 0.0
                acq = CalibratedAcquisition(model, cfg["acquisition"], float(y.min()), recal, p["ucb_beta"],
                                            p["calibrated_acq"])
                torch.manual_seed(ctx.seed * 100003 + it)  # same restarts for paired methods
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    candidate, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=p["num_restarts"],
                                                 raw_samples=p["raw_samples"])
                u_next = objective.snap(candidate.detach().cpu().numpy())
                # One-step-ahead forecast of the new observation (Sec. 5.1: F_t = F_{x_next}(y_next)).
                with torch.no_grad():
                    post = model.posterior(torch.as_tensor(u_next, dtype=dtype, device=device), observation_noise=True)
                    mean = float(post.mean.reshape(()))
                    std = float(post.variance.reshape(()).sqrt())
                if objective.dim == 1 and p["snapshot_grid"]:
                    snapshots.append(_snapshot(model, acq, objective, it, int(p["snapshot_grid"])))
                y_next = float(objective(objective.to_native(u_next))[0])
                z = (y_next - mean) / std
                pit_recal = acq.recalibrated_pit(z) if p["calibrate"] else float("nan")
                recal_mean, recal_std = recal.moments()
                recal_stds.append(recal_std)
                u = np.vstack([u, u_next])
                y = np.append(y, y_next)
                rows.append(_row(objective, it, u_next, y_next, float(y.min()), pred_mean=mean, pred_std=std,
                                 pred_pit_base=float(norm.cdf(z)), pred_pit_recal=pit_recal,
                                 recal_mean=recal_mean, recal_std=recal_std, sigma_scale=recal.sigma_scale(),
                                 recal_seconds=recal_seconds, iteration_seconds=time.perf_counter() - start))
        predictions = pd.DataFrame(rows)
        if snapshots:
            from uqcal.core.io import write_parquet

            write_parquet(ctx.run_dir / "snapshots.parquet", pd.concat(snapshots, ignore_index=True))
        state = {"objective": objective.name, "train_x": u, "train_y": y,
                 "gp_state": {k: v.detach().clone() for k, v in model.state_dict().items()},
                 "recal_knots": recal.knots, "recal_values": recal.values}
        stats = {"objective": objective.name, "budget": cfg["budget"], **failures.stats(),
                 "median_recal_std": float(np.median(recal_stds)), "max_recal_std": float(np.max(recal_stds)),
                 "first_widening_iteration": _first_widening(recal_stds),
                 "recal_seconds": float(predictions["recal_seconds"].fillna(0.0).sum()),
                 "iteration_seconds": float(predictions["iteration_seconds"].mean())}
        ctx.save_outputs(predictions, state, stats)


def _first_widening(scales: list[float], threshold: float = 1.5) -> int:
    """First iteration whose recalibrated forecast is >= threshold times as wide as the GP's (-1 if none)."""
    for i, s in enumerate(scales, start=1):
        if s >= threshold:
            return i
    return -1


def _snapshot(model, acq: CalibratedAcquisition, objective: Objective, iteration: int, n_grid: int) -> pd.DataFrame:
    """Fig. 1 material: the GP's and the acted-on (recalibrated) 95 % intervals on a 1-D grid before the
    step's query."""
    device = model.train_inputs[0].device
    grid = torch.linspace(0, 1, n_grid, dtype=torch.float64, device=device).unsqueeze(-1)
    with torch.no_grad():
        post = model.posterior(grid)
        mean = post.mean.reshape(-1).cpu().numpy()
        std = post.variance.reshape(-1).sqrt().cpu().numpy()
        acq_values = acq(grid.unsqueeze(1)).reshape(-1).cpu().numpy()
    z_lo, z_hi = acq.standardised_quantile(np.array([0.025, 0.975]))
    x = objective.to_native(grid.cpu().numpy())[:, 0]
    return pd.DataFrame({
        "iteration": iteration, "x": x, "f": objective(x[:, None]), "mean": mean, "std_base": std,
        "std_recal": std * (z_hi - z_lo) / (2 * 1.959964),
        "lower_base": mean - 1.959964 * std, "upper_base": mean + 1.959964 * std,
        "lower_recal": mean + z_lo * std, "upper_recal": mean + z_hi * std, "acquisition": acq_values,
    })

"""Calibrated Bayesian optimisation (Deshpande & Kuleshov, Algorithm 2) and its paired baselines.

``CalibratedBO`` with ``calibrate=True`` is Algorithm 2: after every observation refit the GP (ML-II),
compute held-out PIT values (Algorithm 4; closed-form LOO by default), fit R (Algorithm 3) and maximise a
calibrated acquisition over the unit cube with botorch's ``optimize_acqf``. ``calibrate=False`` is plain
BO (Algorithm 1) with the same surrogate, acquisition optimiser and seed. ``RandomSearchBO`` samples
uniformly. All three start from the same initial design (split artifact ``initial_x``, or the setting's
``initial_design``), so repeats are paired.

Setting parameters (config ``families.bo.settings.<objective>-<acq>``):
  acquisition: ei | pi | ucb   budget: BO iterations after the initial design   n_init: initial points
  target_tol: |best - optimum| tolerance for ``steps_to_target``
  initial_design: [[x...], ...] native coordinates, overrides the split's random design
  initial_box: [[lo...], [hi...]] draw the n_init initial points per seed inside this box instead
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

from uqcal.api import Method, RunContext
from uqcal.methods.bo.acquisition import ACQUISITIONS, CALIBRATED_ACQ_MODES, CalibratedAcquisition
from uqcal.methods.bo.recalibration import RECALIBRATORS, RecalibrationMap, fit_recalibration
from uqcal.methods.bo.surrogate import KERNELS, PIT_MODES, fit_gp, heldout_pit
from uqcal.metrics import calibration_score as shared_calibration_score
from uqcal.objectives import Objective, get_objective

SETTING_KEYS = {"acquisition", "budget", "n_init", "target_tol", "initial_design", "initial_box", "datasets"}


def calibration_score(pit) -> float:
    """Kuleshov et al. (2018) calibration score (Sec. 5.1) of the finite PIT values; nan if there are none."""
    pit = np.asarray(pit, dtype=float)
    pit = pit[np.isfinite(pit)]
    return float(shared_calibration_score(pit)) if len(pit) else float("nan")


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
    def evaluate(self, ctx: RunContext) -> dict[str, float]:
        predictions = pd.read_parquet(ctx.run_dir / "predictions.parquet")
        cfg = setting(ctx)
        return bo_metrics(predictions, objective_for(ctx), cfg["target_tol"])


def bo_metrics(predictions: pd.DataFrame, objective: Objective, target_tol: float) -> dict[str, float]:
    """final_best, regret_auc, steps_to_target, calibration scores and timing of one BO run."""
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
    base = calibration_score(bo_rows["pred_pit_base"]) if "pred_pit_base" in bo_rows else float("nan")
    recal = calibration_score(bo_rows["pred_pit_recal"]) if "pred_pit_recal" in bo_rows else float("nan")
    if np.isfinite(base):
        metrics["cal_score_base"] = base
    if np.isfinite(recal):
        metrics["cal_score_recal"] = recal
    if np.isfinite(base) or np.isfinite(recal):
        metrics["cal_score"] = recal if np.isfinite(recal) else base  # the forecast the method acted on
    return metrics  # timings (recal_seconds, iteration_seconds) are in train_stats.json: uqcal.api.is_timing_key


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
        "kernel": "rbf",              # rbf (paper) | matern52
        "recalibrator": "isotonic",   # isotonic (Kuleshov 2018) | gp (the paper's)
        "pit_mode": "loo",            # loo (closed form) | loo_refit | timeseries
        "calibrated_acq": "sigma",    # sigma (sigma -> s*sigma, the paper's) | quantile (calibrated CDF)
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
        from botorch.optim import optimize_acqf

        self._check()
        p = self.params
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        cfg = setting(ctx)
        objective = objective_for(ctx)
        dtype = torch.float64
        u = initial_design(ctx, objective, cfg)
        y = objective(objective.to_native(u))
        best = np.minimum.accumulate(y)
        rows = [_row(objective, 0, u[i : i + 1], y[i], best[i]) for i in range(len(y))]
        bounds = torch.stack([torch.zeros(objective.dim), torch.ones(objective.dim)]).to(dtype)
        snapshots = []
        fit_failures = 0
        scales = []
        # gpytorch's debug checks (shapes, dtypes) cost ~13 % of each ML-II fit here and change nothing in
        # the fitted state (tests/test_bo_surrogate.py).
        with gpytorch.settings.debug(False):
            for it in ctx.progress(range(1, cfg["budget"] + 1), total=cfg["budget"], desc=ctx.method):
                start = time.perf_counter()
                train_x = torch.as_tensor(u, dtype=dtype)
                train_y = torch.as_tensor(y, dtype=dtype)
                model, failed = fit_gp(train_x, train_y, p["kernel"])
                fit_failures += int(failed)
                recal_start = time.perf_counter()
                if p["calibrate"]:
                    pit = heldout_pit(model, p["pit_mode"], train_x, train_y, p["kernel"])
                    recal = fit_recalibration(pit, p["recalibrator"], p["min_recal_points"])
                else:
                    recal = RecalibrationMap.identity_map()
                recal_seconds = time.perf_counter() - recal_start if p["calibrate"] else 0.0
                acq = CalibratedAcquisition(model, cfg["acquisition"], float(y.min()), recal, p["ucb_beta"],
                                            p["calibrated_acq"])
                torch.manual_seed(ctx.seed * 100003 + it)  # same restarts for paired methods
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    candidate, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=p["num_restarts"],
                                                 raw_samples=p["raw_samples"])
                u_next = objective.snap(candidate.detach().numpy())
                # One-step-ahead forecast of the new observation (Sec. 5.1: F_t = F_{x_next}(y_next)).
                with torch.no_grad():
                    post = model.posterior(torch.as_tensor(u_next, dtype=dtype), observation_noise=True)
                    mean = float(post.mean.reshape(()))
                    std = float(post.variance.reshape(()).sqrt())
                if objective.dim == 1 and p["snapshot_grid"]:
                    snapshots.append(_snapshot(model, acq, recal, objective, it, int(p["snapshot_grid"])))
                y_next = float(objective(objective.to_native(u_next))[0])
                z = (y_next - mean) / std
                pit_base = float(norm.cdf(z))
                if p["calibrate"]:
                    pit_recal = float(recal(pit_base)) if p["calibrated_acq"] == "quantile" else float(
                        norm.cdf(z / acq.scale))
                else:
                    pit_recal = float("nan")
                scales.append(acq.scale)
                u = np.vstack([u, u_next])
                y = np.append(y, y_next)
                rows.append(_row(objective, it, u_next, y_next, float(y.min()), pred_mean=mean, pred_std=std,
                                 pred_pit_base=pit_base, pred_pit_recal=pit_recal, recal_seconds=recal_seconds,
                                 sigma_scale=acq.scale, iteration_seconds=time.perf_counter() - start))
        predictions = pd.DataFrame(rows)
        if snapshots:
            from uqcal.io import write_parquet

            write_parquet(ctx.run_dir / "snapshots.parquet", pd.concat(snapshots, ignore_index=True))
        state = {"objective": objective.name, "train_x": u, "train_y": y,
                 "gp_state": {k: v.detach().clone() for k, v in model.state_dict().items()},
                 "recal_knots": recal.knots, "recal_values": recal.values}
        stats = {"objective": objective.name, "budget": cfg["budget"], "gp_fit_failures": fit_failures,
                 "mean_sigma_scale": float(np.mean(scales)), "max_sigma_scale": float(np.max(scales)),
                 "first_widening_iteration": _first_widening(scales),
                 "recal_seconds": float(predictions["recal_seconds"].fillna(0.0).sum()),
                 "iteration_seconds": float(predictions["iteration_seconds"].mean())}
        ctx.save_outputs(predictions, state, stats)


def _first_widening(scales: list[float], threshold: float = 1.5) -> int:
    """First iteration whose recalibration widens the intervals by >= threshold (-1 if none)."""
    for i, s in enumerate(scales, start=1):
        if s >= threshold:
            return i
    return -1


def _snapshot(model, acq, recal, objective: Objective, iteration: int, n_grid: int) -> pd.DataFrame:
    """Fig. 1 material: base and recalibrated 95% intervals on a 1-D grid before the step's query."""
    grid = torch.linspace(0, 1, n_grid, dtype=torch.float64).unsqueeze(-1)
    with torch.no_grad():
        post = model.posterior(grid)
        mean = post.mean.reshape(-1).numpy()
        std = post.variance.reshape(-1).sqrt().numpy()
        acq_values = acq(grid.unsqueeze(1)).reshape(-1).numpy()
    z_lo = norm.ppf(np.clip(recal.inverse(0.025), 1e-12, 1 - 1e-12))
    z_hi = norm.ppf(np.clip(recal.inverse(0.975), 1e-12, 1 - 1e-12))
    x = objective.to_native(grid.numpy())[:, 0]
    return pd.DataFrame({
        "iteration": iteration, "x": x, "f": objective(x[:, None]), "mean": mean, "std_base": std,
        "std_recal": std * acq.scale,
        "lower_base": mean - 1.959964 * std, "upper_base": mean + 1.959964 * std,
        "lower_recal": mean + z_lo * std, "upper_recal": mean + z_hi * std, "acquisition": acq_values,
    })

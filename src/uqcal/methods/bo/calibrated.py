"""Calibrated Bayesian optimisation (Deshpande & Kuleshov, Algorithm 2) and its paired baselines.

Both classes are estimators (uqcal.methods.api.Method's protocol) whose ``fit(X, y)`` / ``predict(X)`` is
the search's surrogate, plus ``minimize(objective, bounds, n_iterations)``, the optimisation loop, which
calls that ``fit`` and ``predict`` at every step:

``CalibratedBO`` with ``calibrate=True`` is Algorithm 2: after every observation ``fit`` refits the GP
(ML-II), computes held-out PIT values (Algorithm 4; by default leave-one-out with the GP retrained on each
split) and fits R (Algorithm 3; by default a GP, as in the paper); ``minimize`` maximises the acquisition of
the recalibrated forecast (``acquisition.py`` states the rule) over the unit cube with botorch's
``optimize_acqf``. ``calibrate=False`` is plain BO (Algorithm 1) with the same surrogate, acquisition
optimiser and seed. ``RandomSearchBO`` samples uniformly (its surrogate is only the marginal Gaussian of the
observed values). In the pipeline all three start from the same initial design (split artifact
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gpytorch
import numpy as np
import pandas as pd
import torch

from uqcal.core.gp.failures import FitFailures
from uqcal.core.predictive import GaussianPredictive, RecalibratedPredictive, RegressionPredictive
from uqcal.data.objectives import Dimension, Objective, get_objective
from uqcal.methods.api import ParameterError, RunContext, load_predictions
from uqcal.methods.bo.acquisition import ACQUISITIONS, CALIBRATED_ACQ_MODES, CalibratedAcquisition
from uqcal.methods.bo.pit_recalibrator import RECALIBRATORS, RecalibrationMap, fit_recalibration
from uqcal.methods.bo.surrogate import KERNELS, PIT_MODES, fit_gp, heldout_pit
from uqcal.methods.estimator import Method
from uqcal.metrics import calibration_score as shared_calibration_score

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

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


def initial_design(ctx: RunContext, objective: Objective, cfg: dict) -> np.ndarray | None:
    """The run's initial design in native coordinates (snapped to feasible configurations), shared by paired
    methods; None without a split artifact or a design in the setting (``minimize`` then draws it from the
    seed, the same for every method)."""
    if cfg["initial_design"] is not None:
        x = np.atleast_2d(np.asarray(cfg["initial_design"], dtype=float))
    elif cfg["initial_box"] is not None:  # a random design per seed inside a sub-box (e.g. off the basin)
        lo, hi = (np.asarray(b, dtype=float) for b in cfg["initial_box"])
        x = np.random.default_rng([ctx.seed, 4242]).uniform(lo, hi, size=(cfg["n_init"], objective.dim))
    elif ctx.split_path is not None and ctx.split_path.exists():
        x = np.atleast_2d(np.asarray(ctx.load_split()["initial_x"], dtype=float))
    else:  # no split artifact (unit use)
        ctx.log.warning("bo: no split at %s; drawing the initial design from the seed", ctx.split_path)
        return None
    if x.shape[1] != objective.dim:
        raise ValueError(
            f"initial design for {objective.name}: expected {objective.dim} columns, got shape {x.shape}"
        )
    lo, hi = objective.bounds
    if np.any(x < lo - 1e-9) or np.any(x > hi + 1e-9):
        raise ValueError(f"initial design for {objective.name} leaves the bounds {objective.bounds.tolist()}")
    return objective.to_native(objective.snap(objective.to_unit(x)))


def search_space(space: Objective | Any | None, X: np.ndarray | None = None, where: str = "fit") -> Objective:
    """The search domain as an Objective (its ``to_unit`` maps inputs onto the unit cube the GP works in).

    ``space``: an Objective (its own dimensions, log-scaled and discrete ones included), a (2, d) array of
    lower and upper bounds (continuous dimensions), or None: the bounding box of ``X`` (a column with one
    value gets the box [value, value + 1])."""
    if isinstance(space, Objective):
        return space
    if space is None:
        if X is None:
            raise ValueError(f"{where}: bounds is required")
        lo, hi = X.min(axis=0), X.max(axis=0)
        space = np.stack([lo, np.where(hi > lo, hi, lo + 1.0)])
    bounds = np.asarray(space, dtype=float)
    if bounds.ndim != 2 or bounds.shape[0] != 2 or not np.isfinite(bounds).all() or np.any(bounds[1] <= bounds[0]):
        raise ValueError(f"{where}: bounds must be a finite (2, d) array of lower and upper bounds with upper > "
                         f"lower, got {bounds.tolist()}")
    dims = [Dimension(f"x{j}", float(lo), float(hi)) for j, (lo, hi) in enumerate(bounds.T)]
    return Objective("search space", dims, function=_no_function)


def _no_function(x: np.ndarray) -> np.ndarray:
    raise TypeError("a search space built from bounds has no objective function")


def as_objective(objective: Objective | Callable[[np.ndarray], np.ndarray], bounds, where: str) -> Objective:
    """``objective`` as an Objective: itself (then ``bounds`` must be None), or a callable of (n, d) native
    inputs -> (n,) values on the box ``bounds`` (2, d)."""
    if isinstance(objective, Objective):
        if bounds is not None:
            raise ValueError(f"{where}: bounds must be None for an Objective (it has its own: "
                             f"{objective.bounds.tolist()})")
        return objective
    if not callable(objective):
        raise TypeError(f"{where}: objective must be an Objective or a callable, got {type(objective).__name__}")
    if bounds is None:
        raise ValueError(f"{where}: bounds (a (2, d) array of lower and upper bounds) is required for a callable "
                         "objective")
    space = search_space(bounds, where=where)
    name = getattr(objective, "__name__", "objective")
    return Objective(name, space.dims, function=objective)


def _observations(where: str, X, y) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, d), y (n,)) as finite float arrays, or a ValueError naming the bad one."""
    X = _inputs(where, X)
    y = np.asarray(y, dtype=float)
    if y.ndim != 1 or len(y) != len(X):
        raise ValueError(f"{where}: y must have shape ({len(X)},) (one value per row of X), got {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError(f"{where}: y has non-finite values")
    return X, y


def _inputs(where: str, X, dim: int | None = None) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or len(X) == 0 or (dim is not None and X.shape[1] != dim):
        want = f"(n, {dim})" if dim is not None else "(n, d)"
        raise ValueError(f"{where}: X must have shape {want} with n >= 1, got {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"{where}: X has non-finite values")
    return X


@dataclass
class BOResult:
    """One optimisation run, in evaluation order.

    ``x`` (n, d): the evaluated inputs in the objective's native coordinates; ``y`` (n,): their values;
    ``iteration`` (n,): 0 for the initial design, t for the point chosen at step t. ``forecasts``: for each
    step t = 1..T, the surrogate's predictive (``predict``) of y at the chosen point before it was observed
    (one point each; empty for random search). ``steps``: one row per step with what the acquisition acted
    on (``pred_pit_recal``: the PIT of the observation under the forecast the acquisition used; ``recal_mean``,
    ``recal_std``: moments of the recalibrated standardised forecast; ``sigma_scale``) and timings (seconds).
    ``snapshots``: per step, the 95 % intervals on a grid (1-D objectives, ``snapshot_grid`` > 0).
    ``fit_failures``: failed ML-II fits during the run.

    Parameters
    ----------
    x : numpy.ndarray of shape (n, d)
        The evaluated inputs, native coordinates.
    y : numpy.ndarray of shape (n,)
        Their objective values.
    iteration : numpy.ndarray of shape (n,)
        0 for the initial design, t for step t.
    forecasts : list of RegressionPredictive, optional
        The one-point forecast of each step's observation.
    steps : pandas.DataFrame, optional
        One row per step: the acquisition's record and timings.
    snapshots : list of pandas.DataFrame, optional
        Per step, the 95 % intervals on a grid (1-D objectives).
    fit_failures : int, default 0
        Failed ML-II fits during the run.
    """

    x: np.ndarray
    y: np.ndarray
    iteration: np.ndarray
    forecasts: list[RegressionPredictive] = field(default_factory=list)
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    snapshots: list[pd.DataFrame] = field(default_factory=list)
    fit_failures: int = 0

    @property
    def best_so_far(self) -> np.ndarray:
        return np.minimum.accumulate(self.y)

    @property
    def best_x(self) -> np.ndarray:
        return self.x[int(np.argmin(self.y))]

    @property
    def best_y(self) -> float:
        return float(np.min(self.y))


class _BOBase(Method):
    def evaluate(self, ctx: RunContext, predictions=None) -> dict[str, float]:
        predictions = load_predictions(ctx, predictions)
        cfg = setting(ctx)
        return bo_metrics(predictions, objective_for(ctx), cfg["target_tol"], cfg["stuck_above"])

    def _start(self, objective, bounds, n_iterations: int, initial_x, n_initial: int
               ) -> tuple[Objective, np.ndarray, np.ndarray]:
        """The objective as an Objective and the initial design (native) with its values."""
        where = f"{type(self).__name__}.minimize"
        objective = as_objective(objective, bounds, where)
        for name, value, low in (("n_iterations", n_iterations, 1), ("n_initial", n_initial, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{where}: {name} must be an integer >= {low}, got {value!r}")
        if initial_x is None:  # the same seeded design for every method
            u = np.random.default_rng([self.runtime.seed, 2024]).uniform(size=(n_initial, objective.dim))
            x = objective.to_native(objective.snap(u))
        else:
            x = _inputs(f"{where}: initial_x", initial_x, objective.dim)
            lo, hi = objective.bounds
            if np.any(x < lo - 1e-9) or np.any(x > hi + 1e-9):
                raise ValueError(f"{where}: initial_x leaves the bounds {objective.bounds.tolist()}")
            # Evaluated as given (snapping a feasible point again could only round it off): on discrete
            # dimensions the points must already be feasible configurations.
            off_grid = ~np.isclose(objective.to_native(objective.to_unit(x)), x, rtol=1e-9, atol=1e-12).all(axis=1)
            if objective.has_discrete and off_grid.any():
                raise ValueError(f"{where}: initial_x row {int(np.argmax(off_grid))} is not a feasible configuration "
                                 f"of {objective.name} (a discrete dimension's value off its grid)")
        return objective, x, objective(x)


def predictions_frame(result: BOResult) -> pd.DataFrame:
    """predictions.parquet of a BO run: one row per evaluation (iteration, x as JSON, y, best_so_far) and, for
    the steps with a forecast, its mean, std and PIT (``pred_*``) and the step's record (``BOResult.steps``)."""
    best = result.best_so_far
    steps = result.steps.to_dict("records")
    rows = []
    for i, it in enumerate(result.iteration):
        row = {"iteration": int(it), "x": json.dumps([float(v) for v in result.x[i]]), "y": float(result.y[i]),
               "best_so_far": float(best[i])}
        if it >= 1 and result.forecasts:
            forecast = result.forecasts[it - 1]
            gaussian = forecast.base if isinstance(forecast, RecalibratedPredictive) else forecast
            row.update(pred_mean=float(gaussian.mean[0]), pred_std=float(gaussian.std[0]),
                       pred_pit_base=float(gaussian.pit(result.y[i : i + 1])[0]), **steps[it - 1])
        rows.append(row)
    return pd.DataFrame(rows)


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
    """Uniform random search from the shared initial design (the paired reference).

    It has no surrogate: its ``fit(X, y)`` / ``predict(X)`` is the marginal Gaussian of the observed values,
    N(mean(y), std(y)^2) at every input (std floored at 1e-6), the honest reference forecast, which
    ``minimize`` does not use: it draws each point uniformly from the search box.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only; it has none of its own).
    random_state : int, numpy.random.Generator or None, default None
        The seed of the initial design and of the random draws.
    device : str or torch.device, default "cpu"
        Unused (numpy only).

    Examples
    --------
    >>> import numpy as np
    >>> search = RandomSearchBO(random_state=0)
    >>> result = search.minimize(lambda X: (X[:, 0] - 0.3) ** 2, bounds=[[0.0], [1.0]], n_iterations=5)
    >>> result.x.shape, result.y.shape
    ((8, 1), (8,))
    >>> forecast = search.fit(result.x, result.y).predict(np.array([[0.5]]))
    >>> bool(np.isclose(forecast.mean[0], result.y.mean()))
    True
    """

    defaults: dict = {}
    MIN_STD = 1e-6

    def fit(self, X: ArrayLike, y: ArrayLike) -> RandomSearchBO:
        """Fit the marginal Gaussian of the observed values.

        Parameters
        ----------
        X : array_like of shape (n, d)
            Observed inputs (native units).
        y : array_like of shape (n,)
            Observed values.

        Returns
        -------
        RandomSearchBO
            self, fitted.
        """
        X, y = _observations(f"{type(self).__name__}.fit", X, y)
        self.dim_ = X.shape[1]
        self.mean_, self.std_ = float(y.mean()), max(float(y.std()), self.MIN_STD)
        self.fitted_ = True
        return self

    def predict(self, X: ArrayLike) -> GaussianPredictive:
        """The marginal Gaussian of the observed values at every input.

        Parameters
        ----------
        X : array_like of shape (m, d)
            Inputs (native units).

        Returns
        -------
        GaussianPredictive
            N(mean(y), std(y)^2) (std floored at 1e-6) for each of the m rows.
        """
        self.check_fitted()
        X = _inputs(f"{type(self).__name__}.predict", X, self.dim_)
        return GaussianPredictive(np.full(len(X), self.mean_), np.full(len(X), self.std_))

    def minimize(self, objective: Objective | Callable[[np.ndarray], np.ndarray], bounds: ArrayLike | None = None,
                 n_iterations: int = 20, *, initial_x: ArrayLike | None = None, n_initial: int = 3) -> BOResult:
        """Random search: the initial design, then ``n_iterations`` points drawn uniformly from the box.

        ``objective``: an ``uqcal.data.objectives.Objective`` (then ``bounds`` is None) or a callable mapping
        an (n, d) array of inputs to (n,) values to minimise; ``bounds``: (2, d) lower and upper bounds of the
        inputs. ``initial_x``: (n0, d) initial design in native coordinates (feasible points: on the grid of
        discrete dimensions); None draws ``n_initial`` points uniformly from the seed (the same design as
        ``CalibratedBO`` with the same seed).

        Parameters
        ----------
        objective : Objective or callable
            An ``uqcal.data.objectives.Objective`` (then ``bounds`` is None) or a callable mapping an (n, d) array of
            inputs to (n,) values to minimise.
        bounds : array_like of shape (2, d) or None, default None
            Lower and upper bounds of the inputs (with a callable objective).
        n_iterations : int, default 20
            The number of steps after the initial design (>= 1).
        initial_x : array_like of shape (n0, d) or None, default None
            The initial design in native coordinates (feasible points); None: ``n_initial`` seeded uniform points.
        n_initial : int, default 3
            The size of the drawn initial design (>= 1).

        Returns
        -------
        BOResult
            The evaluated points in order (initial design, then one per step); no forecasts.
        """
        objective, x, y = self._start(objective, bounds, n_iterations, initial_x, n_initial)
        iteration = [0] * len(y)
        rng = np.random.default_rng([self.runtime.seed, 31337])
        for it in self.runtime.progress(range(1, n_iterations + 1), total=n_iterations, desc=self.runtime.name):
            x_next = objective.to_native(objective.snap(rng.uniform(size=(1, objective.dim))))
            y_next = float(objective(x_next)[0])
            x, y = np.vstack([x, x_next]), np.append(y, y_next)
            iteration.append(it)
        return BOResult(x, y, np.asarray(iteration))

    def train(self, ctx: RunContext) -> None:
        self.runtime = ctx.runtime
        cfg = setting(ctx)
        objective = objective_for(ctx)
        result = self.minimize(objective, n_iterations=cfg["budget"], initial_x=initial_design(ctx, objective, cfg),
                               n_initial=cfg["n_init"])
        ctx.save_outputs(predictions_frame(result), {"objective": objective.name},
                         {"objective": objective.name, "budget": cfg["budget"]})


# String choices of CalibratedBO's parameters (Method.__init__ checks types and ranges).
CHOICES = {"kernel": KERNELS, "recalibrator": RECALIBRATORS, "pit_mode": PIT_MODES,
           "calibrated_acq": CALIBRATED_ACQ_MODES}


class CalibratedBO(_BOBase):
    """GP-based BO, calibrated (Deshpande & Kuleshov, Algorithm 2) or not (Algorithm 1).

    As an estimator it is the search's surrogate: ``fit(X, y)`` fits the GP on observed points and, with
    ``calibrate=True``, the recalibrator R on held-out PIT values; ``predict(X)`` gives the GP's forecast of a
    new observation (a GaussianPredictive), or with ``calibrate=True`` the recalibrated forecast F'(y) =
    R(F(y)) (a RecalibratedPredictive). ``minimize`` runs the optimisation loop with that fit/predict.

    Parameters (``defaults``; checked by ``Method.__init__``): calibrate (bool), kernel (rbf | matern52),
    recalibrator (gp | isotonic), pit_mode (refit_loo | closed_loo | timeseries), calibrated_acq (matched |
    sigma | quantile), min_recal_points (identity R below this many PIT values), ucb_beta (LCB = mu -
    sqrt(beta) sigma), num_restarts and raw_samples (botorch's optimize_acqf), snapshot_grid (grid size of
    the interval snapshots of 1-D objectives; 0: none). ``seed`` fixes the initial design and the
    acquisition's restarts; ``device`` is where the GPs live. The GPs solve tiny systems: on a CPU, run it under
    ``threadpoolctl.threadpool_limits(1, "blas")`` (as the pipeline's ``train`` does), or OpenBLAS' thread pool
    costs several times the work.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the initial design and of the acquisition's restarts.
    device : str or torch.device, default "cpu"
        Where the GPs live.
    **kwargs
        The ``defaults`` above.

    Examples
    --------
    >>> import numpy as np
    >>> bo = CalibratedBO(calibrate=True, num_restarts=2, raw_samples=32, snapshot_grid=0, random_state=0)
    >>> result = bo.minimize(lambda X: np.sin(3 * X[:, 0]) + X[:, 0], bounds=[[0.0], [2.0]], n_iterations=3,
    ...                      n_initial=5, acquisition="ucb")
    >>> result.x.shape, len(result.forecasts)
    ((8, 1), 3)
    >>> forecast = bo.fit(result.x, result.y, [[0.0], [2.0]]).predict(np.array([[0.5], [1.5]]))
    >>> type(forecast).__name__, forecast.interval(0.9)[0].shape
    ('RecalibratedPredictive', (2,))
    """

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

    def __init__(self, params: dict[str, Any] | None = None, /, *,
                 random_state: int | np.random.Generator | np.random.RandomState | None = None, device: Any = "cpu",
                 **kwargs: Any):
        super().__init__(params, random_state=random_state, device=device, **kwargs)
        for key, allowed in CHOICES.items():
            if self.params[key] not in allowed:
                raise ParameterError(f"{type(self).__name__}.{key}: {self.params[key]!r} is not one of "
                                     f"{', '.join(allowed)}")
        # Failed ML-II fits are counted and logged, never silent (uqcal.core.gp.failures); a pipeline run
        # names itself here (train).
        self.failures = FitFailures(self.runtime.log, self.runtime.name)

    def fit(self, X: ArrayLike, y: ArrayLike, bounds: ArrayLike | Objective | None = None) -> CalibratedBO:
        """Fit the surrogate on observed points. Returns self.

        X: (n, d) observed inputs in the objective's native coordinates; y: (n,) observed values (the
        objective is minimised; any units). bounds: the search domain, which the GP sees as the unit cube: a
        (2, d) array of lower and upper bounds, an ``uqcal.data.objectives.Objective`` (its log-scaled and
        discrete dimensions included), or None: the bounding box of X.

        Sets ``model_`` (botorch's SingleTaskGP, ML-II), ``recal_`` (R, a RecalibrationMap: the identity with
        ``calibrate=False`` or fewer than ``min_recal_points`` points), ``pit_`` (the held-out PIT values R
        was fitted on, Algorithm 4; None without R) and ``recal_seconds_``.

        Parameters
        ----------
        X : array_like of shape (n, d)
            Observed inputs in the objective's native coordinates.
        y : array_like of shape (n,)
            Observed values (minimised; any units).
        bounds : array_like of shape (2, d), Objective or None, default None
            The search domain, mapped to the unit cube; None: the bounding box of X.

        Returns
        -------
        CalibratedBO
            self, fitted.
        """
        where = f"{type(self).__name__}.fit"
        p = self.params
        X, y = _observations(where, X, y)
        space = search_space(bounds, X, where)
        if space.dim != X.shape[1]:
            raise ValueError(f"{where}: X has {X.shape[1]} columns but bounds has {space.dim}")
        dtype, device = torch.float64, self.runtime.device
        train_x = torch.as_tensor(space.to_unit(X), dtype=dtype, device=device)
        train_y = torch.as_tensor(y, dtype=dtype, device=device)
        n = len(y)
        # gpytorch's debug checks (shapes, dtypes) do no arithmetic; off, each ML-II fit is ~10 % cheaper.
        with gpytorch.settings.debug(False):
            model, failed = fit_gp(train_x, train_y, p["kernel"])
            if failed:
                self.failures.record(f"ML-II fit of the GP on {n} points (botorch ModelFittingError)")
            recal_start = time.perf_counter()
            recal, pit = RecalibrationMap.identity_map(), None
            if p["calibrate"] and n >= p["min_recal_points"]:  # fewer PIT values: R = identity
                pit, failed = heldout_pit(model, p["pit_mode"], train_x, train_y, p["kernel"])
                recal = fit_recalibration(pit, p["recalibrator"], p["min_recal_points"], device=device)
                if failed:
                    self.failures.record(f"ML-II refits of the {p['pit_mode']} splits on {n} points")
                if recal.fit_failed:
                    self.failures.record(f"ML-II fit of the GP recalibrator on {n} points")
        self.recal_seconds_ = time.perf_counter() - recal_start if p["calibrate"] else 0.0
        self.space_, self.model_, self.recal_, self.pit_ = space, model, recal, pit
        self.fitted_ = True
        return self

    def predict(self, X: ArrayLike) -> GaussianPredictive | RecalibratedPredictive:
        """The forecast of a new observation (observation noise included) at each row of X ((m, d), native
        coordinates): GaussianPredictive(mean, std) in y's units, or with ``calibrate=True`` the recalibrated
        forecast F'(y) = R(F(y)) (Kuleshov et al. 2018, Eq. 5; Deshpande & Kuleshov Algorithm 2), a
        RecalibratedPredictive over that Gaussian.

        Parameters
        ----------
        X : array_like of shape (m, d)
            Inputs in native coordinates.

        Returns
        -------
        GaussianPredictive or RecalibratedPredictive
            The forecast of each of the m rows, in y's units.
        """
        self.check_fitted()
        X = _inputs(f"{type(self).__name__}.predict", X, self.space_.dim)
        u = torch.as_tensor(self.space_.to_unit(X), dtype=torch.float64, device=self.runtime.device)
        with torch.no_grad(), gpytorch.settings.debug(False):
            post = self.model_.posterior(u, observation_noise=True)
            mean = post.mean.reshape(-1).cpu().numpy()
            std = post.variance.reshape(-1).sqrt().cpu().numpy()
        forecast = GaussianPredictive(mean, std)
        if not self.params["calibrate"]:
            return forecast
        return RecalibratedPredictive(forecast, self.recal_, self.recal_.inverse)

    def minimize(self, objective: Objective | Callable[[np.ndarray], np.ndarray], bounds: ArrayLike | None = None,
                 n_iterations: int = 20, *, initial_x: ArrayLike | None = None, n_initial: int = 3,
                 acquisition: str = "ei") -> BOResult:
        """Minimise ``objective``: the initial design, then ``n_iterations`` BO steps.

        Each step fits the surrogate on every observation so far (``fit``), maximises the acquisition
        (``acquisition``: ei | pi | ucb, of the recalibrated forecast with ``calibrate=True``; the rule is
        ``calibrated_acq``, see acquisition.py) over the search box with botorch's ``optimize_acqf``, records
        the forecast of the chosen point (``predict``) and evaluates it. ``objective``: an
        ``uqcal.data.objectives.Objective`` (then ``bounds`` is None) or a callable mapping an (n, d) array of
        inputs to (n,) values; ``bounds``: (2, d) lower and upper bounds of the inputs. ``initial_x``: (n0, d)
        initial design in native coordinates (feasible points: on the grid of discrete dimensions); None draws
        ``n_initial`` points uniformly from the seed.
        Afterwards the estimator holds the last step's surrogate (fitted before the last observation).

        Parameters
        ----------
        objective : Objective or callable
            An ``uqcal.data.objectives.Objective`` (then ``bounds`` is None) or a callable mapping an (n, d) array of
            inputs to (n,) values to minimise.
        bounds : array_like of shape (2, d) or None, default None
            Lower and upper bounds of the inputs (with a callable objective).
        n_iterations : int, default 20
            The number of steps after the initial design (>= 1).
        initial_x : array_like of shape (n0, d) or None, default None
            The initial design in native coordinates (feasible points); None: ``n_initial`` seeded uniform points.
        n_initial : int, default 3
            The size of the drawn initial design (>= 1).
        acquisition : {"ei", "pi", "ucb"}, default "ei"
            The acquisition (of the recalibrated forecast with ``calibrate=True``).

        Returns
        -------
        BOResult
            The evaluated points in order, the forecast of each step's point, the steps' records, the interval
            snapshots and the number of failed ML-II fits.
        """
        from botorch.optim import optimize_acqf

        where = f"{type(self).__name__}.minimize"
        if acquisition not in ACQUISITIONS:
            raise ValueError(f"{where}: acquisition {acquisition!r} is not one of {', '.join(ACQUISITIONS)}")
        p = self.params
        objective, x, y = self._start(objective, bounds, n_iterations, initial_x, n_initial)
        iteration = [0] * len(y)
        dtype, device = torch.float64, self.runtime.device
        cube = torch.stack([torch.zeros(objective.dim, dtype=dtype, device=device),
                            torch.ones(objective.dim, dtype=dtype, device=device)])
        failures_before = self.failures.count
        forecasts, steps, snapshots = [], [], []
        with gpytorch.settings.debug(False):
            for it in self.runtime.progress(range(1, n_iterations + 1), total=n_iterations, desc=self.runtime.name):
                start = time.perf_counter()
                self.fit(x, y, objective)
                acq = CalibratedAcquisition(self.model_, acquisition, float(y.min()), self.recal_, p["ucb_beta"],
                                            p["calibrated_acq"])
                torch.manual_seed(self.runtime.seed * 100003 + it)  # same restarts for paired methods
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    candidate, _ = optimize_acqf(acq, bounds=cube, q=1, num_restarts=p["num_restarts"],
                                                 raw_samples=p["raw_samples"])
                x_next = objective.to_native(objective.snap(candidate.detach().cpu().numpy()))
                # One-step-ahead forecast of the new observation (Sec. 5.1: F_t = F_{x_next}(y_next)).
                forecast = self.predict(x_next)
                if objective.dim == 1 and p["snapshot_grid"]:
                    snapshots.append(_snapshot(self.model_, acq, objective, it, int(p["snapshot_grid"])))
                y_next = float(objective(x_next)[0])
                gaussian = forecast.base if p["calibrate"] else forecast
                z = (y_next - gaussian.mean[0]) / gaussian.std[0]
                recal_mean, recal_std = self.recal_.moments()
                x, y = np.vstack([x, x_next]), np.append(y, y_next)
                iteration.append(it)
                forecasts.append(forecast)
                steps.append({"pred_pit_recal": acq.recalibrated_pit(z) if p["calibrate"] else float("nan"),
                              "recal_mean": recal_mean, "recal_std": recal_std,
                              "sigma_scale": self.recal_.sigma_scale(), "recal_seconds": self.recal_seconds_,
                              "iteration_seconds": time.perf_counter() - start})
        return BOResult(x, y, np.asarray(iteration), forecasts, pd.DataFrame(steps), snapshots,
                        self.failures.count - failures_before)

    def train(self, ctx: RunContext) -> None:
        from threadpoolctl import threadpool_limits

        self.runtime = ctx.runtime
        self.failures = FitFailures.for_run(ctx)
        cfg = setting(ctx)
        objective = objective_for(ctx)
        threads = int(ctx.config.get("torch_threads", 1) or 1)
        torch.set_num_threads(threads)
        # scipy's L-BFGS-B (ML-II fits, the batched refit LOO, optimize_acqf) calls BLAS on a few numbers;
        # OpenBLAS' thread pool costs far more than that work (refit LOO: ~14x the CPU on a loaded 2-core
        # machine, benchmarks/bo_recal_speed.py).
        with threadpool_limits(limits=threads, user_api="blas"):
            result = self.minimize(objective, n_iterations=cfg["budget"],
                                   initial_x=initial_design(ctx, objective, cfg), n_initial=cfg["n_init"],
                                   acquisition=cfg["acquisition"])
        predictions = predictions_frame(result)
        if result.snapshots:
            from uqcal.core.io import write_parquet

            write_parquet(ctx.run_dir / "snapshots.parquet", pd.concat(result.snapshots, ignore_index=True))
        recal_stds = result.steps["recal_std"].tolist()
        state = {"objective": objective.name, "train_x": objective.to_unit(result.x), "train_y": result.y,
                 "gp_state": {k: v.detach().clone() for k, v in self.model_.state_dict().items()},
                 "recal_knots": self.recal_.knots, "recal_values": self.recal_.values}
        stats = {"objective": objective.name, "budget": cfg["budget"], "fit_failures": result.fit_failures,
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

"""Honest reference predictors, labelled as such in every table.

- MarginalGaussian: N(mean, std^2) of the training targets (per task where there are tasks: the task's
  support set). The QR paper's Claim 5: perfectly calibrated in expectation, with no sharpness.
- RandomSearch: uniform random search for optimisation, from the shared initial design.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from uqcal.methods.api import REFERENCE_RESOURCES, Method, RunContext

__all__ = ["MarginalGaussian", "RandomSearch"]


class MarginalGaussian(Method):
    defaults: dict = {"min_std": 1e-6}
    cpu_only = True  # numpy only: a cluster job never asks a GPU for it
    job_resources = REFERENCE_RESOURCES  # not the family's GPU-sized request (uqcal.pipeline.plan.resources)

    def train(self, ctx: RunContext) -> None:
        table, split = ctx.load_data(), ctx.load_split()
        y = table.y
        if "test_episodes" in split:  # an episodic (multi-task) split: the support sets are the data
            y_mean, y_std = _metatrain_target_stats(table, split)
            # A support set without spread (one point, or equal targets) says nothing about the task's
            # spread: use the meta-training tasks' pooled within-task std instead of a near-zero sigma.
            fallback = _pooled_within_task_std(table, split, y_mean, y_std)
            rows, n_fallback = [], 0
            for e, ep in enumerate(split["test_episodes"]):
                ys, yq = (y[ep["support"]] - y_mean) / y_std, (y[ep["query"]] - y_mean) / y_std
                mu, sd = ys.mean(), ys.std()
                if sd < self.params["min_std"]:
                    sd, n_fallback = fallback, n_fallback + 1
                rows.append(pd.DataFrame({"task": str(ep["task"]), "episode": e, "y": yq, "mean": mu, "std": sd}))
            pred = pd.concat(rows, ignore_index=True)
            model = {"note": "per-task support mean/std (standardised targets)", "y_mean": y_mean, "y_std": y_std,
                     "fallback_std": fallback}
            if n_fallback:
                ctx.log.info("marginal: %d of %d support sets have no spread; their sigma is the meta-training "
                             "tasks' pooled within-task std %.4g", n_fallback, len(split["test_episodes"]), fallback)
            stats = {"zero_spread_support_sets": n_fallback}
        else:
            train, test = np.asarray(split["train"]), np.asarray(split["test"])
            # A constant training target is refused when the dataset is materialised (uqcal.data.validate).
            mu, sd = float(y[train].mean()), max(float(y[train].std()), self.params["min_std"])
            pred = pd.DataFrame({"y": y[test], "mean": mu, "std": sd})
            model = {"mean": mu, "std": sd}
            stats = {}
        ctx.save_outputs(pred, model, stats)


def _pooled_within_task_std(table, split, y_mean: float, y_std: float) -> float:
    """sqrt(sum_t sum_i (y_ti - mean_t)^2 / sum_t (n_t - 1)) over the meta-training tasks, in the
    standardised units of the predictions (1.0 if no training task has two rows)."""
    y = (table.y - y_mean) / y_std
    tasks = table.task
    squares, dof = 0.0, 0
    for task in split["tasks"]["train"]:
        values = y[tasks == np.asarray(task, dtype=tasks.dtype)]
        if len(values) > 1:
            squares += float(((values - values.mean()) ** 2).sum())
            dof += len(values) - 1
    pooled = float(np.sqrt(squares / dof)) if dof else 0.0
    return pooled if pooled > 0 else 1.0


def _metatrain_target_stats(table, split) -> tuple[float, float]:
    """Targets are standardised with meta-train statistics (see docs/metareg.md)."""
    mask = np.isin(table.task, np.asarray(split["tasks"]["train"], dtype=table.task.dtype))
    y = table.y[mask]
    return float(y.mean()), float(y.std()) if y.std() > 0 else 1.0


class RandomSearch(Method):
    defaults: dict = {}
    cpu_only = True
    job_resources = REFERENCE_RESOURCES

    def train(self, ctx: RunContext) -> None:
        from uqcal.data.objectives import get_objective

        split = ctx.load_split()
        objective = get_objective(ctx.dataset_spec["source"])
        budget = int(ctx.setting_params.get("budget", 20))
        lower, upper = (np.asarray(b, float) for b in split["bounds"])
        rng = ctx.rng()
        xs = [np.asarray(x, float) for x in split["initial_x"]]
        xs += [rng.uniform(lower, upper) for _ in range(budget)]
        ys = [float(objective(x)) for x in xs]
        best = np.minimum.accumulate(ys)
        pred = pd.DataFrame({
            "iteration": np.arange(len(xs)) - len(split["initial_x"]) + 1,
            "x": [json.dumps(x.tolist()) for x in xs],
            "y": ys,
            "best_so_far": best,
        })
        ctx.save_outputs(pred, {"n_evaluations": len(xs)}, {})

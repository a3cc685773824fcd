"""Honest reference predictors, labelled as such in every table.

- MarginalGaussian: N(mean, std^2) of the training targets. The QR paper's Claim 5: perfectly calibrated in
  expectation, with no sharpness. (Meta-regression's per-task version is uqcal.methods.metareg's
  TaskMarginalGaussian.)
- UniformClassifier: 1/C for every class of a few-shot episode.
- RandomSearch: uniform random search for optimisation, from the shared initial design.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from uqcal.methods.api import REFERENCE_RESOURCES, Method, RunContext

__all__ = ["MarginalGaussian", "RandomSearch", "UniformClassifier"]


class MarginalGaussian(Method):
    defaults: dict = {"min_std": 1e-6}
    cpu_only = True  # numpy only: a cluster job never asks a GPU for it
    job_resources = REFERENCE_RESOURCES  # not the family's GPU-sized request (uqcal.pipeline.plan.resources)

    def train(self, ctx: RunContext) -> None:
        table, split = ctx.load_data(), ctx.load_split()
        y = table.y
        train, test = np.asarray(split["train"]), np.asarray(split["test"])
        # A constant training target is refused when the dataset is materialised (uqcal.data.validate).
        mu, sd = float(y[train].mean()), max(float(y[train].std()), self.params["min_std"])
        pred = pd.DataFrame({"y": y[test], "mean": mu, "std": sd})
        ctx.save_outputs(pred, {"mean": mu, "std": sd}, {})


class UniformClassifier(Method):
    defaults: dict = {}
    cpu_only = True
    job_resources = REFERENCE_RESOURCES

    def train(self, ctx: RunContext) -> None:
        split = ctx.load_split()
        n_way, n_query = split["n_way"], split["n_query"]
        rows = []
        for e in range(len(split["test_episodes"])):
            labels = np.repeat(np.arange(n_way), n_query)
            frame = pd.DataFrame({"episode": e, "label": labels})
            for c in range(n_way):
                frame[f"p{c}"] = 1.0 / n_way
            rows.append(frame)
        ctx.save_outputs(pd.concat(rows, ignore_index=True), {"n_way": n_way}, {})


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

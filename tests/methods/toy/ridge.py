"""Bayesian ridge regression (scikit-learn) as a uqcal method: a Gaussian predictive N(mean, std^2)."""

import numpy as np
import pandas as pd

from uqcal.methods.api import Method, RunContext


class BayesianRidgeRegression(Method):
    defaults = {"max_iter": 300}
    cpu_only = True

    def train(self, ctx: RunContext) -> None:
        from sklearn.linear_model import BayesianRidge

        table, split = ctx.load_data(), ctx.load_split()
        train, test = np.asarray(split["train"]), np.asarray(split["test"])
        x, y = table.X, table.y
        centre, scale = x[train].mean(axis=0), x[train].std(axis=0) + 1e-12
        model = BayesianRidge(max_iter=self.params["max_iter"]).fit((x[train] - centre) / scale, y[train])
        mean, std = model.predict((x[test] - centre) / scale, return_std=True)
        ctx.save_outputs(pd.DataFrame({"y": y[test], "mean": mean, "std": std}),
                         {"coef": model.coef_.tolist(), "intercept": float(model.intercept_)})

"""The meta-regression reference predictor: N(mean, std^2) of each task's own support targets (numpy only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from uqcal.core.predictive import GaussianPredictive
from uqcal.methods.api import REFERENCE_RESOURCES, RunContext
from uqcal.methods.estimator import Method
from uqcal.methods.metareg.tasks import load_arrays, predictions_frame, targets

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class TaskMarginalGaussian(Method):
    """An honest reference, labelled as such in every table: for a task, N(mean, std^2) of its support set's
    targets (ddof 0) at every query point, whatever the features. A support set without spread (one point, or
    equal targets: std < ``min_std`` in the meta-training tasks' standardised units) says nothing about the
    task's spread, so it gets the meta-training tasks' pooled within-task std instead of a near-zero sigma.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        Unused (the fit is deterministic).
    device : str or torch.device, default "cpu"
        Unused (numpy only).
    **kwargs
        ``min_std`` (float, default 1e-6): below this support std (standardised units) the fallback std is
        used.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.metareg import TaskMarginalGaussian
    >>> rng = np.random.default_rng(0)
    >>> tasks = [(rng.normal(size=(20, 2)), rng.normal(t, 1.0, 20)) for t in range(4)]
    >>> reference = TaskMarginalGaussian().fit(tasks)
    >>> prediction = reference.predict(np.zeros((3, 2)), np.array([1.0, 2.0, 3.0]), np.zeros((5, 2)))
    >>> prediction.mean.round(6).tolist(), bool(np.allclose(prediction.std, np.std([1.0, 2.0, 3.0])))
    ([2.0, 2.0, 2.0, 2.0, 2.0], True)
    """

    defaults: dict = {"min_std": 1e-6}
    cpu_only = True  # numpy only: a cluster job never asks a GPU for it
    job_resources = REFERENCE_RESOURCES  # not the family's GPU-sized request (uqcal.pipeline.plan.resources)

    def fit(self, tasks: Sequence[tuple[ArrayLike, ArrayLike]],
            validation_tasks: Sequence | None = None) -> TaskMarginalGaussian:
        """``tasks``: a sequence of ``(X_t, y_t)``, one per meta-training task (only the targets are used:
        their mean and std standardise, and their pooled within-task std is the fallback sigma).
        ``validation_tasks`` is accepted for the meta-regression protocol and not used.

        Parameters
        ----------
        tasks : sequence of (array_like, array_like)
            ``(X_t (N_t, D), y_t (N_t,))`` of each meta-training task, original units.
        validation_tasks : sequence or None, default None
            Not used.

        Returns
        -------
        TaskMarginalGaussian
            self, fitted.
        """
        ys = [targets(y, len(y), f"tasks[{i}] y") for i, (_, y) in enumerate(tasks)]
        if not ys:
            raise ValueError("tasks is empty: the fallback std needs at least one meta-training task")
        pooled = np.concatenate(ys)
        self.y_mean_ = float(pooled.mean())
        self.y_std_ = float(pooled.std()) if pooled.std() > 0 else 1.0
        # sqrt(sum_t sum_i (y_ti - mean_t)^2 / sum_t (n_t - 1)), standardised (1.0 if no task has two rows)
        squares, dof = 0.0, 0
        for y in ys:
            values = (y - self.y_mean_) / self.y_std_
            if len(values) > 1:
                squares += float(((values - values.mean()) ** 2).sum())
                dof += len(values) - 1
        fallback = float(np.sqrt(squares / dof)) if dof else 0.0
        self.fallback_std_ = fallback if fallback > 0 else 1.0
        self.fitted_ = True
        return self

    def support_has_no_spread(self, y_support: ArrayLike) -> bool:
        """True where ``predict`` uses the fallback std for this support set.

        Parameters
        ----------
        y_support : array_like of shape (S,)
            A support set's targets, original units.

        Returns
        -------
        bool
            Whether their std, standardised, is below ``min_std``.
        """
        self.check_fitted()
        return float(np.std((np.asarray(y_support, dtype=np.float64) - self.y_mean_) / self.y_std_)) < \
            self.params["min_std"]

    def predict(self, X_support: ArrayLike, y_support: ArrayLike, X_query: ArrayLike) -> GaussianPredictive:
        """N(mean, std^2) of ``y_support`` (S,) at each of the ``len(X_query)`` query points; original units.

        Parameters
        ----------
        X_support : array_like of shape (S, D)
            Not used beyond the protocol.
        y_support : array_like of shape (S,)
            The support targets.
        X_query : array_like of shape (Q, D)
            The query points (only their number is used).

        Returns
        -------
        GaussianPredictive
            The same N(mean, std^2) for each of the Q query points, original units.
        """
        self.check_fitted()
        ys = (targets(y_support, len(y_support), "y_support") - self.y_mean_) / self.y_std_
        mu, sd = ys.mean(), ys.std()
        if self.support_has_no_spread(y_support):
            sd = self.fallback_std_
        n = len(X_query)
        return GaussianPredictive(np.full(n, mu * self.y_std_ + self.y_mean_), np.full(n, sd * self.y_std_))

    def predict_tasks(self, episodes: Sequence[tuple]) -> list[GaussianPredictive]:
        """``predict`` for each episode.

        Parameters
        ----------
        episodes : sequence of tuple
            ``(X_support, y_support, X_query[, y_query])`` per episode.

        Returns
        -------
        list of GaussianPredictive
            One predictive per episode.
        """
        return [self.predict(*episode[:3]) for episode in episodes]

    def train(self, ctx: RunContext) -> None:
        self.runtime = ctx.runtime
        arrays = load_arrays(ctx)
        self.fit(arrays["tasks"])
        predictions = self.predict_tasks(arrays["test"])
        n_fallback = sum(self.support_has_no_spread(episode[1]) for episode in arrays["test"])
        if n_fallback:
            ctx.log.info("marginal: %d of %d support sets have no spread; their sigma is the meta-training "
                         "tasks' pooled within-task std %.4g", n_fallback, len(arrays["test"]), self.fallback_std_)
        frame = predictions_frame(arrays["test_tasks"], [e[3] for e in arrays["test"]], predictions, self.y_mean_,
                                  self.y_std_)
        model = {"note": "per-task support mean/std (standardised targets)", "y_mean": self.y_mean_,
                 "y_std": self.y_std_, "fallback_std": self.fallback_std_}
        ctx.save_outputs(frame, model, {"zero_spread_support_sets": int(n_fallback)})

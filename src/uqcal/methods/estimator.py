"""The estimators' base classes: scikit-learn estimators (``sklearn.base.BaseEstimator``) with uqcal's parameter
tables.

- ``Method``: every method. Its parameters are the class's ``defaults`` (each an attribute of the estimator, the
  constructor's keyword arguments, validated there with one error naming the key), ``random_state`` (int,
  ``numpy.random.Generator`` or None, as in scikit-learn) and ``device``, plus a subclass's own keyword-only
  constructor arguments (``base``). ``get_params`` / ``set_params`` / ``sklearn.base.clone`` work on them; the
  pipeline builds an estimator from its resolved parameters and gives it the run's ``Runtime`` (``train``).
- ``ProbabilisticRegressor``: a single-task regression method. ``fit(X, y)``; ``predict(X)`` the point
  prediction (an array, as scikit-learn code expects); ``predict_proba(X)`` the predictive object (skpro's
  convention); ``predict_interval``, ``predict_quantiles``, ``predict_var``; ``score`` the negative mean CRPS (a
  proper scoring rule, higher is better), so ``cross_val_score`` and ``GridSearchCV`` rank by it.
  ``n_features_in_`` is set by ``fit``; a different feature count at ``predict`` is refused by name.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError as SklearnNotFittedError

from uqcal.core.predictive import NotFittedError, RegressionPredictive
from uqcal.methods.api import (
    Bound,
    RunContext,
    Runtime,
    check_params,
    get_family,
    is_timing_key,
    load_predictions,
    unknown_params,
)

if TYPE_CHECKING:
    import pandas as pd
    from numpy.typing import ArrayLike

__all__ = ["EstimatorNotFittedError", "Method", "ProbabilisticRegressor", "seed_of"]


class EstimatorNotFittedError(NotFittedError, SklearnNotFittedError):
    """An estimator used before ``fit``: uqcal's ``NotFittedError`` and scikit-learn's at once."""


def seed_of(random_state) -> int:
    """The integer seed of a scikit-learn ``random_state``: an int as it is, a ``numpy.random.Generator`` or
    ``RandomState`` one draw from it, None a draw from numpy's global stream (a new seed each time).

    Parameters
    ----------
    random_state : int, numpy.random.Generator, numpy.random.RandomState or None

    Returns
    -------
    int
        A seed in [0, 2**31 - 1).

    Examples
    --------
    >>> seed_of(7)
    7
    """
    if isinstance(random_state, (bool, np.bool_)):
        raise ValueError(f"random_state: expected an int, a numpy Generator or None, got {random_state!r}")
    if isinstance(random_state, (int, np.integer)):
        if random_state < 0:
            raise ValueError(f"random_state: expected a non-negative int, got {random_state!r}")
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if random_state is None:
        return int(np.random.randint(0, 2**31 - 1))
    raise ValueError(f"random_state: expected an int, a numpy Generator or None, got {random_state!r}")


class Method(BaseEstimator):
    """Base class of every method: subclasses set ``defaults`` and implement ``fit``, ``predict`` and ``train``.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only; the pipeline passes its resolved ones so). Keyword arguments
        add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the estimator's random streams (``runtime``): an int fixes them, a Generator or None draws
        one seed at the first fit.
    device : str or torch.device, default "cpu"
        Where torch computes.
    **kwargs
        The class's ``defaults`` keys; an unknown key or a value of the wrong type or range is one
        ``ParameterError`` naming it.
    """

    defaults: dict[str, Any] = {}
    # True for a method that never touches ``ctx.device``: its train jobs never request a GPU, whatever the
    # family's resources say (uqcal.pipeline.plan.resources; a per-method GPU request for it is a config error).
    cpu_only: bool = False

    # Ranges of numeric parameters beyond PARAM_BOUNDS (by name); see ``param_problem``.
    bounds: dict[str, Bound] = {}
    # True for a method whose parameters may be given as {dataset or setting name: value} (fewshot's).
    run_mappings: bool = False
    # A method whose jobs need little whatever their family trains (the reference predictors): these resources
    # replace the family's and per_dataset's (resources.per_method in the config still overrides them).
    job_resources: dict[str, int] | None = None

    def __init__(self, params: dict[str, Any] | None = None, /, *,
                 random_state: int | np.random.Generator | np.random.RandomState | None = None, device: Any = "cpu",
                 **kwargs: Any):
        params = {**(params or {}), **kwargs}
        where = type(self).__name__
        unknown_params(type(self), params, where)
        check_params(type(self), params, where)
        for key, value in {**self.defaults, **params}.items():
            setattr(self, key, value)
        self.random_state = random_state
        self.device = device
        self._runtime: Runtime | None = None

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The ``defaults`` keys and every keyword-only argument of the constructors (random_state, device, base)."""
        names = set(cls.defaults)
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is not None and klass is not BaseEstimator and klass is not object:
                names.update(name for name, p in inspect.signature(init).parameters.items()
                             if p.kind is p.KEYWORD_ONLY)
        return sorted(names)

    @property
    def params(self) -> dict[str, Any]:
        """The ``defaults`` keys with this estimator's values (a new dict; assigning one sets each value)."""
        return {key: getattr(self, key) for key in self.defaults}

    @params.setter
    def params(self, values: dict[str, Any]) -> None:
        for key, value in values.items():
            setattr(self, key, value)

    @property
    def runtime(self) -> Runtime:
        """The random streams, device and log the estimator runs with: the pipeline run's (``train``), else one
        seeded by ``random_state`` at first use (kept until ``set_params``)."""
        if self._runtime is None:
            self._runtime = Runtime(seed=seed_of(self.random_state), device=self.device, name=type(self).__name__)
        return self._runtime

    @runtime.setter
    def runtime(self, value: Runtime) -> None:
        self._runtime = value

    def set_params(self, **params) -> Method:
        """Set parameters (scikit-learn's ``set_params``), validated as the constructor does.

        Parameters
        ----------
        **params
            Parameter names and values.

        Returns
        -------
        Method
            self.
        """
        own = {k: v for k, v in params.items() if k in self.defaults}
        check_params(type(self), own, type(self).__name__)
        super().set_params(**params)
        self._runtime = None
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags

    # The estimator protocol (docs/library.md): ``fit(X, y)`` (single-task methods) or ``fit(tasks)``
    # (meta-learners) returns the fitted estimator; ``predict(...)`` (meta-learners, few-shot) or ``predict_proba``
    # (single-task regressors) returns a predictive object (uqcal.core.predictive). Before ``fit`` it raises
    # NotFittedError.
    def fit(self, *args, **kwargs) -> Method:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not implement fit")

    def predict(self, *args, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not implement predict")

    def check_fitted(self) -> None:
        """Raise NotFittedError unless ``fit`` has run (it sets ``fitted_``)."""
        if not getattr(self, "fitted_", False):
            raise EstimatorNotFittedError(f"{type(self).__name__} is not fitted yet: call fit(...) before predict(...)")

    def __sklearn_is_fitted__(self) -> bool:
        return bool(getattr(self, "fitted_", False))

    def train(self, ctx: RunContext) -> None:  # pragma: no cover - abstract
        """The pipeline's entry: load the run's arrays, ``fit``, ``predict`` and ``ctx.save_outputs``.

        Parameters
        ----------
        ctx : RunContext
            The run's data, split, runtime (seed, device, threads) and output paths.
        """
        raise NotImplementedError

    def evaluate(self, ctx: RunContext, predictions: pd.DataFrame | None = None) -> dict[str, float]:
        """The family's metrics of the run's predictions merged with the numeric entries of train_stats.json.

        ``predictions``: the frame the run's training has just saved (``ctx.saved_predictions``); None reads
        the run's predictions.parquet (``uqcal evaluate``, a run trained earlier). An override passes it on.

        Parameters
        ----------
        ctx : RunContext
            The run whose predictions are scored.
        predictions : pandas.DataFrame or None, optional
            The run's prediction frame; None reads it from the run directory.

        Returns
        -------
        dict of str to float
            Metric name to value.
        """
        from uqcal.core.io import read_json
        metrics = get_family(ctx.family).evaluate(load_predictions(ctx, predictions), ctx)
        stats_path = ctx.run_dir / "train_stats.json"
        if stats_path.exists():
            for key, value in read_json(stats_path).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and not is_timing_key(key):
                    metrics.setdefault(key, float(value))
        return metrics


class ProbabilisticRegressor(RegressorMixin, Method):
    """A single-task regression method: scikit-learn's regressor conventions over a predictive distribution.

    Subclasses implement ``fit(X, y)`` (calling ``fit_arrays`` first) and ``predict_proba(X)`` (calling
    ``predict_array`` first).
    """

    def fit_arrays(self, X, y) -> tuple[np.ndarray, np.ndarray]:
        """``X`` as an (n, d) float array and ``y`` as (n,), both finite; sets ``n_features_in_``.

        Parameters
        ----------
        X : array_like of shape (n, d)
        y : array_like of shape (n,)

        Returns
        -------
        tuple of numpy.ndarray
            X and y as float arrays.
        """
        from sklearn.utils.validation import validate_data

        X, y = validate_data(self, X, y, reset=True, dtype=np.float64, y_numeric=True)
        return X, np.asarray(y, dtype=np.float64)

    def predict_array(self, X) -> np.ndarray:
        """``X`` as an (n, d) float array with the fitted number of features (refused by name otherwise).

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        numpy.ndarray
        """
        from sklearn.utils.validation import validate_data

        self.check_fitted()
        return validate_data(self, X, reset=False, dtype=np.float64)

    def predict_proba(self, X: ArrayLike) -> RegressionPredictive:  # pragma: no cover - abstract
        """The predictive distribution of each row of X (a ``uqcal.core.predictive`` object).

        Parameters
        ----------
        X : array_like of shape (n, d)
            Inputs with the fitted number of features.

        Returns
        -------
        RegressionPredictive
            One predictive distribution per row, in y's units.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement predict_proba")

    def predict(self, X) -> np.ndarray:
        """The point prediction of each row of X: the predictive mean where there is one, else the median.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return self.predict_proba(X).point()

    def predict_interval(self, X, coverage: float = 0.9) -> np.ndarray:
        """The central ``coverage`` interval of each row of X.

        Parameters
        ----------
        X : array_like of shape (n, d)
        coverage : float, default 0.9
            In (0, 1).

        Returns
        -------
        numpy.ndarray of shape (n, 2)
            Lower and upper bounds.
        """
        lower, upper = self.predict_proba(X).interval(coverage)
        return np.column_stack([lower, upper])

    def predict_quantiles(self, X, alpha=(0.05, 0.5, 0.95)) -> np.ndarray:
        """Predictive quantiles of each row of X.

        Parameters
        ----------
        X : array_like of shape (n, d)
        alpha : sequence of float, default (0.05, 0.5, 0.95)
            Levels in (0, 1).

        Returns
        -------
        numpy.ndarray of shape (n, len(alpha))
        """
        return np.asarray(self.predict_proba(X).ppf(np.asarray(alpha, dtype=np.float64)))

    def predict_var(self, X) -> np.ndarray:
        """The predictive variance of each row of X.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return self.predict_proba(X).var()

    def score(self, X, y, sample_weight=None) -> float:
        """The negative mean CRPS of the predictive distributions at ``y`` (a proper scoring rule in y's units;
        higher is better, 0 is a perfect point mass), so that ``cross_val_score`` and ``GridSearchCV`` rank by it.
        Not scikit-learn's default R^2, which scores the point prediction only.

        Parameters
        ----------
        X : array_like of shape (n, d)
        y : array_like of shape (n,)
        sample_weight : array_like of shape (n,), optional
            Weights of the points.

        Returns
        -------
        float
        """
        crps = self.predict_proba(X).crps(np.asarray(y, dtype=np.float64))
        return -float(np.average(crps, weights=sample_weight))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # score is -CRPS (<= 0), not R^2: check_regressors_train's 0.5 is R^2's
        return tags

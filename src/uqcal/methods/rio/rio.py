"""RIO and its variants (Qiu, Meyerson & Miikkulainen, Sec. 3-4): one class, two switches.

- ``target``: ``"residual"`` fits r = y - y_hat (Eq. 1) and predicts y_hat + r_bar (Eq. 7) — the "R" variants;
  ``"y"`` fits y directly and predicts the GP mean — the "Y" variants.
- ``kernel_inputs``: ``"io"`` (I/O kernel, Eq. 2-3), ``"i"`` (inputs only), ``"o"`` (NN output only).

RIO = R+IO, r_i = R+I, r_o = R+O, y_o = Y+O, y_io = Y+IO, svgp = Y+I. Every variant of a run reuses the
network trained by `nn` in the same run (``depends_on="nn"``) and sees the whole training split.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch

from uqcal.core.predictive import GaussianPredictive
from uqcal.methods.api import load_predictions
from uqcal.methods.estimator import ProbabilisticRegressor
from uqcal.methods.rio.holdout import apply_per_dataset, input_standardisation, load_holdout
from uqcal.methods.rio.network import RioNetwork
from uqcal.methods.rio.svgp import KERNEL_INPUTS, batchable, fit_svgp, fit_svgp_batch

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from uqcal.methods.api import RunContext
    from uqcal.methods.rio.svgp import FitResult

TARGETS = ("residual", "y")
OPTIMIZERS = ("lbfgs", "adam")


class ResidualIOGP(ProbabilisticRegressor):
    """RIO (R+IO) and its variants: a sparse variational GP on a network's residuals or on the targets, with the
    I/O kernel or one of its halves (Sec. 3-4; ``target`` and ``kernel_inputs``, the module's docstring).

    Parameters (``defaults``): ``target``, ``kernel_inputs``, ``n_inducing``, ``ard``, ``optimizer``
    (``"lbfgs"``: L-BFGS-B as the paper, ``max_iter``, ``lbfgs_history``; ``"adam"``: ``batch_size``,
    ``epochs``, ``lr``), ``minibatch_above``, ``scale_targets``, ``centre_targets``, ``standardise_yhat``;
    ``per_dataset`` (pipeline only). ``base``: the network, a ``RioNetwork`` fitted or not (None: a default
    ``RioNetwork`` with this estimator's random_state and device).

    ``fit(X, y)``: X (n, d) floats (standardised inside with their own statistics), y (n,) raw targets; fits
    ``base`` on them unless it is fitted already, then the GP on [X, y_hat]. ``predict_proba(X)`` ->
    ``GaussianPredictive``: y_hat + the GP's mean for the residual variants (Eq. 7), the GP's mean for the
    others, and the GP's predictive variance including the noise (y's units).

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    base : RioNetwork, optional
        The network whose residuals the GP models, fitted or not (None: a default ``RioNetwork``).
    **kwargs
        The ``defaults`` above, ``random_state`` and ``device``.

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.rio import ResidualIOGP, RioNetwork
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (60, 2)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    >>> rio = ResidualIOGP(base=RioNetwork(max_epochs=5), max_iter=10, random_state=0).fit(X, y)
    >>> prediction = rio.predict_proba(X[:4])
    >>> prediction.mean.shape, bool((prediction.std > 0).all())
    ((4,), True)
    """

    defaults = {
        "target": "residual",
        "kernel_inputs": "io",
        "n_inducing": 50,
        "ard": False,
        "optimizer": "lbfgs",  # lbfgs: scipy L-BFGS-B, full batch (paper) | adam: minibatch ELBO for large n
        "max_iter": 1000,  # L-BFGS-B iterations (paper: maxiter 1000)
        "lbfgs_history": 10,
        "batch_size": 1024,  # adam only
        "epochs": 20,  # adam only
        "lr": 0.05,  # adam only
        "minibatch_above": 0,  # > 0: switch to adam when the training split has more rows than this
        # GP targets: raw, as the authors' code (a zero-mean GP on raw targets; the paper is silent). Ours, run
        # beside it as labelled ablations (rio_std, svgp_std): standardised targets, predictions mapped back;
        # scaling is a change of units (GPflow's unit initial variances then mean var(target)), centring adds a
        # constant mean (the training mean).
        "scale_targets": False,
        "centre_targets": False,
        "standardise_yhat": False,  # the output kernel reads (y_hat - mean) / std instead of raw y_hat (authors)
        "per_dataset": {},  # {dataset: {param: value}}
    }

    def __init__(self, params: dict | None = None, /, *, base: RioNetwork | None = None, **kwargs):
        super().__init__(params, **kwargs)
        for key, allowed in (("target", TARGETS), ("kernel_inputs", KERNEL_INPUTS), ("optimizer", OPTIMIZERS)):
            if self.params[key] not in allowed:
                raise ValueError(f"{type(self).__name__}.{key}: expected one of {list(allowed)}, "
                                 f"got {self.params[key]!r}")
        self.base = base

    def fit(self, X: ArrayLike, y: ArrayLike) -> ResidualIOGP:
        """Fit ``base`` (unless fitted) and the GP on its residuals or on y.

        Parameters
        ----------
        X : array_like of shape (n, d)
        y : array_like of shape (n,)
            Raw targets.

        Returns
        -------
        ResidualIOGP
            self, fitted: ``base_`` the network, ``result_`` the GP fit (``result_.failure`` names a failed fit).
        """
        X, y = self.fit_arrays(X, y)
        self.result_ = fit_residual_gp(**self._gp_problem(X, y))
        return self._fitted()

    def _gp_problem(self, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
        """Fit or take the network, set the input standardisation and optimiser; returns the arguments of
        ``fit_residual_gp`` for this fit."""
        p = self.params
        # base stays the constructor's parameter (scikit-learn's rule): a fitted one is used as it is (RIO on the
        # user's network), an unfitted one is cloned and fitted; base_ is the network used.
        if self.base is None:
            self.base_ = RioNetwork(random_state=self.runtime.seed, device=self.runtime.device).fit(X, y)
        elif getattr(self.base, "fitted_", False):
            self.base_ = self.base
        else:
            from sklearn.base import clone

            self.base_ = clone(self.base).fit(X, y)
        yhat = self.base_.predict_proba(X).mean
        self.x_mean_, self.x_std_ = input_standardisation(X)
        self.optimizer_ = p["optimizer"]
        if int(p["minibatch_above"]) > 0 and len(y) > int(p["minibatch_above"]):
            self.optimizer_ = "adam"
        return dict(
            x_train=self._standardise(X), y_train=y, yhat_train=yhat,
            target=p["target"], kernel_inputs=p["kernel_inputs"], standardise_yhat=bool(p["standardise_yhat"]),
            ard=bool(p["ard"]), n_inducing=int(p["n_inducing"]), optimizer=self.optimizer_,
            max_iter=int(p["max_iter"]), lbfgs_history=int(p["lbfgs_history"]), batch_size=int(p["batch_size"]),
            epochs=int(p["epochs"]), lr=float(p["lr"]), scale_targets=bool(p["scale_targets"]),
            centre_targets=bool(p["centre_targets"]), seed=int(self.runtime.rng(2).integers(0, 2**31 - 1)),
            progress=self.runtime.progress, device=self.runtime.device,
        )  # fmt: skip

    def _fitted(self) -> ResidualIOGP:
        self.n_iter_ = int(self.result_.iterations)  # optimiser iterations (scikit-learn's name, beside max_iter)
        self.fitted_ = True
        return self

    def _standardise(self, X: np.ndarray) -> np.ndarray:
        return (X - self.x_mean_) / self.x_std_

    def predict_proba(self, X: ArrayLike) -> GaussianPredictive:
        """y_hat + the GP's mean (residual variants) or the GP's mean, with its variance including the noise.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        GaussianPredictive
        """
        X = self.predict_array(X)
        mean, var = predict_residual_gp(self.result_, self._standardise(X), self.base_.predict_proba(X).mean,
                                        target=self.params["target"])
        return GaussianPredictive(mean, np.sqrt(var))

    def train(self, ctx: RunContext) -> None:
        data = self._load_run(ctx)
        self.fit(data.x_train, data.y_train)
        self._save_run(ctx, data)

    def train_batch(self, ctxs: list[RunContext]) -> bool:
        """Train the seeds of one job (issue 53): each seed's GP fit as ``train(ctx)`` runs it (its own L-BFGS-B,
        or its own Adam steps on its own minibatches), their objective evaluations computed together by one
        batched SVGP (``svgp.fit_svgp_batch``). Seeds of unequal training sizes or settings are declined
        (returns False, saves nothing): the pipeline trains them one by one with ``train``.

        Tolerance, each seed against ``train(ctx)`` of the same seed (benchmarks/rio_batch_tolerance.py, the
        default config's concrete jobs against a run of main; docs/rio.md, "Seeds batched"): every batched
        evaluation equals the seed's own to ~1e-15 relative (float64 summation order of the batched kernels,
        Cholesky factors and reductions; tests/methods/rio/test_train_batch.py), but L-BFGS-B multiplies such a
        difference roughly tenfold an iteration, so the iterates part after a few dozen iterations.

        - Fits that stop on L-BFGS-B's own convergence test reach the same optimum: metrics within 1e-4
          relative (ece, cal_score, coverages within 1e-3 absolute); iteration counts may differ.
        - Fits stopped by the 1,000-iteration cap (most raw-target fits) end where rounding led them on a flat
          ELBO: rmse, mse, te, crps, nlpd/nll, sharpness, noise_var within 5 % relative, gp_final_loss within
          1 %; coverages and improvement_ratio within 0.06 absolute, ece and cal_score within 0.01, ce within
          0.3; predictive mean and std within 0.5 of the mean predictive std. gp_iterations and
          gp_function_evals within 50 % (measured: 29 %; the per-seed path under native numerics: 33 %): a fit
          near L-BFGS-B's stopping test stops hundreds of iterations apart, or stops in one run and reaches
          the cap in the other (gp_converged then differs). fit_seconds is the batch's time divided by the
          seeds.
        - Minibatch Adam (diamonds): elementwise, no line search; short runs agree to ~1e-13 (test). Over 20
          epochs a coordinate whose gradient is nearly zero moves by Adam's scale-free step whatever the sign
          of its rounding noise: rmse, mse, te, crps, nlpd/nll, sharpness, noise_var, gp_final_loss within 1 %
          relative (rio on diamonds: 3e-7; svgp: mse 0.4 %), coverages and improvement_ratio within 0.01
          absolute, ece and cal_score within 0.01, ce within 0.15, predictive mean and std within 0.1 of the
          mean predictive std (svgp on diamonds per seed, native vs portable: rmse 0.03 %, ce 0.056, means 0.058).

        Why this is the tolerance: the per-seed path moves as much under a pure change of floating-point
        order, its own run under the project's other numerics mode (native vs portable, same seeds and code):
        on concrete, svgp's rmse by 1.4 %, noise_var 2.7 %, means by 0.19 std; y_io's ce by 0.29, means by
        0.29 std (the batch: 1.0 %, 3.8 %, 0.22; 0.16, 0.39).

        Parameters
        ----------
        ctxs : list of RunContext
            The pending seeds of one train job, in seed order; each gets what ``train(ctx)`` saves.

        Returns
        -------
        bool
            True: each seed's model, predictions and train stats saved through its ``ctx``; False: declined.
        """
        seeds = []
        for ctx in ctxs:
            ctx.seed_everything()  # as the train step does before each seed's train(ctx)
            estimator = copy.deepcopy(self)
            data = estimator._load_run(ctx)
            X, y = estimator.fit_arrays(data.x_train, data.y_train)
            problem = estimator._gp_problem(X, y)
            seeds.append((ctx, estimator, data, residual_gp_arguments(**problem)))
        fits = [svgp_kwargs for *_, (svgp_kwargs, _, _) in seeds]
        if not batchable(fits):
            return False
        for (ctx, estimator, data, (_, offset, scale)), result in zip(seeds, fit_svgp_batch(fits), strict=True):
            result.yhat_offset, result.yhat_scale = offset, scale
            estimator.result_ = result
            estimator._fitted()._save_run(ctx, data)
        return True

    def _load_run(self, ctx: RunContext):
        """Take the run's parameters, streams and `nn` network; returns its holdout data."""
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        self.runtime = ctx.runtime
        self.params = apply_per_dataset(self.params, ctx.dataset, self.defaults)
        if ctx.depends_dir is None:
            raise ValueError(f"rio method {ctx.method!r} needs the run directory of `nn` (depends_on)")
        data = load_holdout(ctx)
        self.base = RioNetwork.from_run(ctx.depends_dir, ctx.device)
        if self.base.saved_.get("split_digest") != data.split_digest:
            raise ValueError(
                f"{ctx.depends_dir}: the network was trained on a different split than {ctx.split_path}"
            )
        return data

    def _save_run(self, ctx: RunContext, data) -> None:
        """Predict the run's test rows and save its outputs."""
        prediction = self.predict_proba(data.x_test)
        predictions = pd.DataFrame({"row": data.test_rows, "y": data.y_test, "mean": prediction.mean,
                                    "std": prediction.std, "nn_mean": self.base_.predict_proba(data.x_test).mean})
        result, optimizer, p = self.result_, self.optimizer_, self.params
        stats = {
            "noise_var": result.noise_var,
            "fit_seconds": result.fit_seconds,  # GP only; the NN counts as pretrained (App. D.1)
            "gp_iterations": result.iterations,
            "gp_function_evals": result.function_evals,
            "gp_final_loss": result.final_loss,
            "gp_converged": int(result.converged),
            "fit_failures": int(result.failed),
            "gp_failure": result.failure,
            "optimizer": optimizer,
            "hyperparameters": result.hyperparameters,
        }
        if result.loss_trace:
            stats["gp_loss_trace"] = result.loss_trace
        if result.failed:
            ctx.log.warning(
                "rio/%s/%s/%s/seed%d: GP fit failed (%s); predictions use the optimiser's last valid state",
                ctx.dataset, ctx.setting, ctx.method, ctx.seed, result.failure,
            )  # fmt: skip
        ctx.log.info(
            "%s: sigma_n^2 %.4g, %d iterations (%s), %.1f s", ctx.method, result.noise_var, result.iterations,
            "converged" if result.converged else "failed" if result.failed else "not converged", result.fit_seconds,
        )  # fmt: skip
        model = {
            "model_state": result.model.state_dict(),
            "likelihood_state": result.likelihood.state_dict(),
            "target": p["target"],
            "kernel_inputs": p["kernel_inputs"],
            "ard": bool(p["ard"]),
            "n_features": int(data.x_train.shape[1]),
            "target_offset": result.target_offset,
            "target_scale": result.target_scale,
            "yhat_offset": result.yhat_offset,
            "yhat_scale": result.yhat_scale,
        }
        ctx.save_outputs(predictions, model, stats)

    def evaluate(self, ctx: RunContext, predictions: pd.DataFrame | None = None) -> dict[str, float]:
        """The family's metrics of the run and the correction metrics of App. D.3.

        Parameters
        ----------
        ctx : RunContext
            The run whose predictions are scored.
        predictions : pandas.DataFrame or None, optional
            The run's prediction frame; None reads it from the run directory.

        Returns
        -------
        dict of str to float
            The family's metrics plus ``improvement_ratio`` and ``nn_rmse`` (App. D.3) where the frame has ``nn_mean``.
        """
        predictions = load_predictions(ctx, predictions)
        metrics = super().evaluate(ctx, predictions)
        metrics.update(correction_metrics(predictions))
        return metrics


def combined_inputs(x: np.ndarray, yhat: np.ndarray) -> np.ndarray:
    """``[x, y_hat]``: the GP's input matrix (the authors append the NN prediction as a column)."""
    return np.column_stack([np.asarray(x, dtype=float), np.asarray(yhat, dtype=float).reshape(-1)])


def fit_residual_gp(x_train, y_train, yhat_train, *, target="residual", kernel_inputs="io", standardise_yhat=False,
                    **fit_kwargs):  # fmt: skip
    """Fit one RIO variant's GP on standardised inputs ``x_train``, raw targets and the network's outputs; returns
    the FitResult (``fit_svgp``'s keywords pass through).

    ``standardise_yhat``: the GP's y_hat column is (y_hat - mean) / std of the training y_hat, so that the
    output kernel's unit initial lengthscale is on the scale of the network's outputs (the authors feed raw
    y_hat; on targets in the thousands its lengthscale then starts far too short). Recorded on the result
    as ``yhat_offset`` / ``yhat_scale``.
    """
    svgp_kwargs, offset, scale = residual_gp_arguments(x_train, y_train, yhat_train, target=target,
                                                       kernel_inputs=kernel_inputs, standardise_yhat=standardise_yhat,
                                                       **fit_kwargs)  # fmt: skip
    result = fit_svgp(**svgp_kwargs)
    result.yhat_offset, result.yhat_scale = offset, scale
    return result


def residual_gp_arguments(x_train, y_train, yhat_train, *, target="residual", kernel_inputs="io",
                          standardise_yhat=False, **fit_kwargs) -> tuple[dict[str, Any], float, float]:  # fmt: skip
    """``fit_residual_gp``'s SVGP problem: (the keyword arguments of ``fit_svgp``, the y_hat column's offset and
    scale)."""
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: expected one of {TARGETS}")
    y_train = np.asarray(y_train, dtype=float).reshape(-1)
    yhat_train = np.asarray(yhat_train, dtype=float).reshape(-1)
    offset, scale = 0.0, 1.0
    if standardise_yhat:
        offset, scale = float(np.mean(yhat_train)), float(np.std(yhat_train))
        scale = scale if scale > 0 else 1.0
    # Eq. (1): residuals of the NN, or the raw targets for the Y variants.
    gp_target = y_train - yhat_train if target == "residual" else y_train
    svgp_kwargs = dict(inputs=combined_inputs(x_train, (yhat_train - offset) / scale), targets=gp_target,
                       kernel_inputs=kernel_inputs, n_features=np.asarray(x_train).shape[1], **fit_kwargs)  # fmt: skip
    return svgp_kwargs, offset, scale


def predict_residual_gp(result, x, yhat, *, target="residual") -> tuple[np.ndarray, np.ndarray]:
    """The predictive mean of y and its variance including the noise, at standardised inputs ``x`` with network
    outputs ``yhat``, of a GP fitted by ``fit_residual_gp`` with the same ``target``."""
    yhat = np.asarray(yhat, dtype=float).reshape(-1)
    gp_mean, var = result.predict(combined_inputs(x, (yhat - result.yhat_offset) / result.yhat_scale))
    # Eq. (7): y_hat + r_bar for residual variants.
    return (yhat + gp_mean if target == "residual" else gp_mean), var


def fit_and_predict(x_train: np.ndarray, y_train: ArrayLike, yhat_train: ArrayLike, x_test: np.ndarray,
                    yhat_test: ArrayLike, *, target: str = "residual", kernel_inputs: str = "io",
                    standardise_yhat: bool = False,
                    **fit_kwargs: Any) -> tuple[FitResult, np.ndarray, np.ndarray]:  # fmt: skip
    """Fit one RIO variant and return (FitResult, predictive mean of y, predictive variance incl. noise) at the
    test points: ``fit_residual_gp`` then ``predict_residual_gp`` (inputs standardised, targets raw).

    Parameters
    ----------
    x_train : numpy.ndarray of shape (n, d)
        Standardised training inputs.
    y_train : array_like of shape (n,)
        Raw training targets.
    yhat_train : array_like of shape (n,)
        The network's outputs at the training inputs.
    x_test : numpy.ndarray of shape (m, d)
        Standardised test inputs.
    yhat_test : array_like of shape (m,)
        The network's outputs at the test inputs.
    target : {"residual", "y"}, default "residual"
        The GP models the residuals y - y_hat (Eq. 1) or the targets.
    kernel_inputs : {"io", "i", "o"}, default "io"
        The I/O kernel (Eq. 2) or one of its halves.
    standardise_yhat : bool, default False
        Standardise the GP's y_hat column with the training y_hat's statistics.
    **fit_kwargs
        Passed on to ``fit_svgp``.

    Returns
    -------
    tuple of (FitResult, numpy.ndarray, numpy.ndarray)
        The fit, the predictive mean of y (Eq. 7: y_hat + the GP's mean for the residual variants) and its
        variance including the noise, each (m,) in y's units.
    """
    result = fit_residual_gp(x_train, y_train, yhat_train, target=target, kernel_inputs=kernel_inputs,
                             standardise_yhat=standardise_yhat, **fit_kwargs)
    mean, var = predict_residual_gp(result, x_test, yhat_test, target=target)
    return result, mean, var


def correction_metrics(predictions: pd.DataFrame) -> dict[str, float]:
    """App. D.3: the improvement ratio (share of test points whose error the GP reduced) and NN RMSE."""
    if "nn_mean" not in predictions:
        return {}
    y = predictions["y"].to_numpy()
    gp_err = np.abs(y - predictions["mean"].to_numpy())
    nn_err = np.abs(y - predictions["nn_mean"].to_numpy())
    return {
        "improvement_ratio": float(np.mean(gp_err < nn_err)),
        "nn_rmse": float(np.sqrt(np.mean(nn_err**2))),
    }

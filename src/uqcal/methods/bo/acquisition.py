"""Calibrated acquisition functions for minimisation (Deshpande & Kuleshov Sec. 4.2), as botorch
``AnalyticAcquisitionFunction`` s so that ``optimize_acqf`` can maximise them.

For a Gaussian posterior N(mu, sigma^2) at x, best value b and u = (b - mu) / sigma:

- ``sigma`` mode (default, the paper's implementation): sigma -> s * sigma with s = R.sigma_scale(), then
  EI = sigma (u Phi(u) + phi(u)),  PI = Phi(u),  -LCB = -(mu - sqrt(beta) sigma).
- ``quantile`` mode: the calibrated CDF R(Phi((y - mu) / sigma)) used directly,
  PI = R(Phi(u));  EI = E[max(b - Y, 0)] = int_{-inf}^{b} R(Phi((t - mu) / sigma)) dt = sigma G(u),
  G(u) = int_{-inf}^{u} R(Phi(z)) dz (tabulated, trapezoid rule, linear beyond the table since R(1) = 1);
  -LCB = -(mu + sigma Phi^-1(R^-1(alpha))), alpha = Phi(-sqrt(beta)) (the calibrated alpha-quantile).

With R = identity both modes reduce to botorch's ExpectedImprovement / ProbabilityOfImprovement /
UpperConfidenceBound with ``maximize=False`` (tested).

The posterior moments come from ``posterior_moments``: botorch's ``SingleTaskGP.posterior`` (gpytorch's exact
prediction with the cached mean / covariance roots, then the ``Standardize`` untransform) evaluated op for op
without the lazy-tensor bookkeeping, so values and autograd gradients are bit-for-bit botorch's (tested).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from botorch.acquisition.analytic import AnalyticAcquisitionFunction
from botorch.utils.transforms import t_batch_mode_transform
from scipy.stats import norm

from uqcal.methods.bo.recalibration import RecalibrationMap, torch_interp

ACQUISITIONS = ("ei", "pi", "ucb")
CALIBRATED_ACQ_MODES = ("sigma", "quantile")
Z_TABLE = np.linspace(-10.0, 10.0, 8001)


class CalibratedAcquisition(AnalyticAcquisitionFunction):
    def __init__(self, model, kind: str, best_f: float, recal: RecalibrationMap | None = None,
                 beta: float = 4.0, mode: str = "sigma"):
        super().__init__(model=model)
        if kind not in ACQUISITIONS:
            raise ValueError(f"acquisition {kind!r} not in {ACQUISITIONS}")
        if mode not in CALIBRATED_ACQ_MODES:
            raise ValueError(f"calibrated_acq {mode!r} not in {CALIBRATED_ACQ_MODES}")
        self.kind, self.mode = kind, mode
        self.best_f = float(best_f)
        self.beta = float(beta)
        self.recal = recal or RecalibrationMap.identity_map()
        self.scale = self.recal.sigma_scale() if mode == "sigma" else 1.0
        if mode == "quantile":
            integrand = self.recal(norm.cdf(Z_TABLE))
            steps = 0.5 * (integrand[1:] + integrand[:-1]) * np.diff(Z_TABLE)
            self._g_table = torch.as_tensor(np.concatenate([[0.0], np.cumsum(steps)]))
            self._z_table = torch.as_tensor(Z_TABLE)
            alpha = norm.cdf(-np.sqrt(self.beta))
            self._z_lcb = float(norm.ppf(np.clip(self.recal.inverse(alpha), 1e-12, 1 - 1e-12)))

    def _mean_and_sigma(self, X: torch.Tensor, compute_sigma: bool = True, min_var: float = 1e-12):
        moments = posterior_moments(self.model, X) if self.posterior_transform is None else None
        if moments is None:  # anything posterior_moments does not mirror: botorch's own path
            return super()._mean_and_sigma(X, compute_sigma, min_var)
        mean_fn, variance_fn = moments
        # AnalyticAcquisitionFunction._mean_and_sigma, with GPyTorchPosterior.mean/.variance (unsqueeze(-1))
        mean = mean_fn().unsqueeze(-1).squeeze(-2)
        if not compute_sigma:
            return mean, None
        sigma = variance_fn().unsqueeze(-1).clamp_min(min_var).sqrt().view(mean.shape)
        return mean, sigma

    def _g(self, u: torch.Tensor) -> torch.Tensor:
        z, g = self._z_table.to(u), self._g_table.to(u)
        inside = torch_interp(u, z, g)
        beyond = g[-1] + (u - z[-1])  # R(Phi(z)) = 1 past the table
        return torch.where(u > z[-1], beyond, inside)

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: torch.Tensor) -> torch.Tensor:
        mean, sigma = self._mean_and_sigma(X)
        mean, sigma = mean.squeeze(-1), sigma.squeeze(-1)  # single output: drop the m dimension
        if self.mode == "sigma":
            sigma = sigma * self.scale
            u = (self.best_f - mean) / sigma
            if self.kind == "ei":
                return sigma * (u * torch.special.ndtr(u) + torch.exp(-0.5 * u**2) / np.sqrt(2 * np.pi))
            if self.kind == "pi":
                return torch.special.ndtr(u)
            return -(mean - np.sqrt(self.beta) * sigma)
        u = (self.best_f - mean) / sigma
        if self.kind == "ei":
            return sigma * self._g(u)
        if self.kind == "pi":
            return self.recal.torch_call(torch.special.ndtr(u))
        return -(mean + sigma * self._z_lcb)


def posterior_moments(model, X: torch.Tensor):
    """(mean, variance) thunks equal to ``model.posterior(X).distribution``'s ``mean`` and ``variance``.

    For a ``SingleTaskGP`` in eval mode whose prediction caches exist (after its first posterior) this follows
    gpytorch's ``ExactGP.__call__`` (posterior mode, ``DefaultPredictionStrategy.exact_prediction`` under
    botorch's ``gpt_posterior_settings``) and botorch's ``Standardize.untransform_posterior`` op for op: the
    same kernel calls on the same slices of cat([train X, X]), the same cached ``mean_cache``/``covar_cache``,
    the same arithmetic, created in the same order, so values and gradients are bit-identical. It skips
    the lazy kernel tensors, linear operators, distributions and the ``self.to(X)`` / ``model.eval()`` calls,
    which do no arithmetic here. Returns None where it does not apply (the caller then uses botorch).
    """
    import gpytorch
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from botorch.models.utils.assorted import gpt_posterior_settings
    from gpytorch.models.exact_prediction_strategies import DefaultPredictionStrategy

    strategy = getattr(model, "prediction_strategy", None)
    if (
        type(model) is not SingleTaskGP
        or model.training
        or type(strategy) is not DefaultPredictionStrategy
        or getattr(model, "input_transform", None) is not None
        or model._num_outputs != 1
        or len(model.train_inputs) != 1
        or X.dim() < 2
    ):
        return None
    train_x = model.train_inputs[0]
    if X.dtype != train_x.dtype or X.device != train_x.device or train_x.dim() != 2:
        return None
    transform = getattr(model, "outcome_transform", None)
    if transform is not None and (type(transform) is not Standardize or transform._m != 1):
        return None
    covar_module, mean_module = model.covar_module, model.mean_module
    if type(mean_module) is not gpytorch.means.ConstantMean or hasattr(mean_module, "raw_constant_constraint"):
        return None
    with gpt_posterior_settings():
        if (
            not gpytorch.settings.fast_pred_var.on()
            or gpytorch.settings.skip_posterior_variances.on()
            or not gpytorch.settings.lazily_evaluate_kernels.on()
            or gpytorch.settings.trace_mode.on()
            or gpytorch.settings.observation_nan_policy.value() != "ignore"
            or covar_module.active_dims is not None
            or covar_module.num_outputs_per_input(train_x, train_x) != 1
        ):
            return None
        n = train_x.shape[-2]
        if X.shape[-2] + n > gpytorch.settings.max_eager_kernel_size.value():  # exact_prediction: dense
            return None
        # ExactGP._get_test_prior_mean_and_covariances
        batch_shape = train_x.shape[:-2]
        train_input, test_input = train_x, X
        if batch_shape != test_input.shape[:-2]:
            batch_shape = torch.broadcast_shapes(batch_shape, test_input.shape[:-2])
            train_input = train_input.expand(*batch_shape, *train_input.shape[-2:])
            test_input = test_input.expand(*batch_shape, *test_input.shape[-2:])
        full = torch.cat([train_input, test_input], dim=-2)
        joint_mean = mean_module.forward(full)  # SingleTaskGP.forward (the kernel part is lazy there)
        test_mean = joint_mean[..., n:]
        batch = (slice(None),) * len(batch_shape)
        rows, cols, dim = slice(n, None), slice(None, n), slice(None)
        # LazyEvaluatedKernelTensor._getitem + evaluate_kernel: kernel(x1[rows], x2[cols]) -> forward
        test_test = covar_module.forward(full[(*batch, rows, dim)], full[(*batch, rows, dim)])
        test_train = covar_module.forward(full[(*batch, rows, dim)], full[(*batch, cols, dim)])
        # DefaultPredictionStrategy.exact_predictive_mean
        mean_cache = strategy.mean_cache
        if len(mean_cache.shape) == 4:
            mean_cache = mean_cache.squeeze(1)
        predictive_mean = (test_train @ mean_cache.unsqueeze(-1)).squeeze(-1)
        predictive_mean = predictive_mean + test_mean
        # DefaultPredictionStrategy.exact_predictive_covar (fast_pred_var, dense test covariances)
        strategy._last_test_train_covar = test_train
        root = test_train.matmul(strategy.covar_cache)
        predictive_covar = torch.add(test_test, root @ root.transpose(-1, -2), alpha=-1)
        predictive_mean = predictive_mean.view(*batch_shape, X.shape[-2]).contiguous()

    # Standardize.untransform_posterior (lazy predictive covariance: diag(s) @ C @ diag(s))
    if transform is None:
        scale_fac = None
        mean_tf = predictive_mean
    else:
        offset, scale_fac = transform.means, transform.stdvs
        mean_tf = offset.squeeze(-1) + scale_fac.squeeze(-1) * predictive_mean
        scale_fac = scale_fac.squeeze(-1).expand_as(mean_tf)
        scale_fac = scale_fac.expand(predictive_covar.shape[:-1])

    def mean():
        return mean_tf

    def variance():
        # gpytorch MultivariateNormal.variance of the (untransformed) lazy covariance
        if scale_fac is None:
            diag = predictive_covar.diagonal(dim1=-1, dim2=-2)
        else:  # MatmulLinearOperator(Dense(s[..., None] * C), Diag(s))._diagonal()
            diag = (scale_fac.unsqueeze(-1) * predictive_covar).diagonal(dim1=-1, dim2=-2) * scale_fac
        variance = diag.view(diag.shape[:-1] + predictive_mean.shape[-1:])
        variance = variance.expand(mean_tf.shape)
        min_variance = gpytorch.settings.min_variance.value(variance.dtype)
        if variance.lt(min_variance).any():
            warnings.warn(
                "Negative variance values detected. This is likely due to numerical instabilities. "
                f"Rounding negative variances up to {min_variance}.",
                gpytorch.utils.warnings.NumericalWarning,
                stacklevel=2,
            )
            variance = variance.clamp_min(min_variance)
        return variance

    return mean, variance

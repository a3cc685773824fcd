"""GP surrogate and held-out PIT values for recalibration (Deshpande & Kuleshov, Algorithms 3-4).

The surrogate is botorch's SingleTaskGP on unit-cube inputs with an explicit RBF kernel (Matern-5/2 as an
option), a Standardize outcome transform (paper Sec. 5: "output values ... are normalized") and ML-II
hyperparameters from ``fit_gpytorch_mll``.

Held-out PIT values F_i = [M_{-i}(x_i)](y_i) (Algorithm 4), three ways:

- ``loo`` (default): leave-one-out in closed form with the hyperparameters and the standardisation held
  fixed (Rasmussen & Williams Eq. 5.12): with K = k(X, X) + sigma_n^2 I and r = y - c (standardised
  targets minus the constant mean), mu_{-i} = y_i - [K^-1 r]_i / [K^-1]_ii and
  sigma^2_{-i} = 1 / [K^-1]_ii. This is the predictive of the *noisy* observation y_i, so
  PIT_i = Phi([K^-1 r]_i / sqrt([K^-1]_ii)). PIT values are invariant to the standardisation.
- ``loo_refit``: N exact ML-II refits on D minus point i (what public re-implementations do).
- ``timeseries``: one-step-ahead forecasts in observation order with fixed hyperparameters. With
  K = L L^T, e = L^-1 r holds the standardised innovations, e_t = (y_t - mu_{t|<t}) / sigma_{t|<t},
  so PIT_t = Phi(e_t) from a single Cholesky factorisation.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

KERNELS = ("rbf", "matern52")
PIT_MODES = ("loo", "loo_refit", "timeseries")


def make_gp(train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf"):
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

    if kernel not in KERNELS:
        raise ValueError(f"kernel {kernel!r} not in {KERNELS}")
    d = train_x.shape[-1]
    base = RBFKernel(ard_num_dims=d) if kernel == "rbf" else MaternKernel(nu=2.5, ard_num_dims=d)
    return SingleTaskGP(
        train_x, train_y.reshape(-1, 1), covar_module=ScaleKernel(base), outcome_transform=Standardize(m=1)
    )


class ExactMLLLoss:
    """botorch's negative exact marginal log likelihood of a ``make_gp`` model, without gpytorch's machinery.

    ``fit_gpytorch_mll`` evaluates ``-mll(model(X), y)`` through gpytorch's lazy kernel tensors, linear
    operators and distributions; for the 5-20 points of a BO run that Python machinery costs several times
    the arithmetic. This evaluates the same arithmetic, op for op: the kernel (``ScaleKernel.forward``; the
    ARD-RBF case written out as gpytorch's ``RBFKernel.forward``/``sq_dist``), K + diag(noise), linear_operator's
    ``psd_safe_cholesky``, torch's ``MultivariateNormal.log_prob``, the registered priors (a LogNormal written out
    as torch's ``LogNormal.log_prob``), the division by n. Only shape bookkeeping that does no arithmetic differs,
    so the loss *and its autograd gradient* are bit-for-bit gpytorch's and L-BFGS takes exactly the same steps
    (tests/test_bo_surrogate.py compares whole fits). Bit-for-bit matters: the BO loop is chaotic, a one-ulp
    change in one gradient changes later proposals. ``supports`` says whether a model has the structure this
    mirrors; anything else keeps botorch's closure.
    """

    def __init__(self, mll):
        from gpytorch.kernels import RBFKernel
        from gpytorch.priors import LogNormalPrior

        model = mll.model
        self.x = model.train_inputs[0]
        self.y = model.train_targets
        self.n = self.y.shape[-1]
        self.scale = model.covar_module
        base = self.scale.base_kernel
        self.base = base
        # RBFKernel.forward takes its plain-autograd branch for ARD lengthscales (the custom RBFCovariance
        # function otherwise): only that branch is written out here.
        self.ard_rbf = type(base) is RBFKernel and base.ard_num_dims is not None and base.ard_num_dims > 1
        self.noise = model.likelihood.noise_covar
        self.mean = model.mean_module
        self.priors = []
        for _, module, prior, closure, _ in model.named_priors():
            lognormal = None
            if type(prior) is LogNormalPrior and prior._transform is None:
                # torch LogNormal = TransformedDistribution(Normal(loc, scale), ExpTransform): constants of its
                # log_prob (the same tensor ops give the same values)
                base_dist = prior.base_dist
                var = base_dist.scale**2
                lognormal = (base_dist.loc, 2 * var, base_dist.scale.log(), bool(prior._validate_args))
            self.priors.append((prior, closure, module, lognormal))
        self.log_2pi_n = self.n * math.log(2 * math.pi)
        self.pad = torch.ones(*self.x.shape[:-1], 1, dtype=self.x.dtype, device=self.x.device)

    @staticmethod
    def supports(mll) -> bool:
        import gpytorch
        from botorch.models import SingleTaskGP
        from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
        from gpytorch.likelihoods import GaussianLikelihood
        from gpytorch.likelihoods.noise_models import HomoskedasticNoise
        from gpytorch.means import ConstantMean
        from gpytorch.mlls import ExactMarginalLogLikelihood

        model = getattr(mll, "model", None)
        if type(mll) is not ExactMarginalLogLikelihood or type(model) is not SingleTaskGP:
            return False
        scale = model.covar_module
        base = getattr(scale, "base_kernel", None)
        return (
            type(base) in (RBFKernel, MaternKernel)
            and type(scale) is ScaleKernel
            and scale.active_dims is None and base.active_dims is None
            and scale.batch_shape == torch.Size() and base.batch_shape == torch.Size()
            and type(model.likelihood) is GaussianLikelihood
            and type(model.likelihood.noise_covar) is HomoskedasticNoise
            and type(model.mean_module) is ConstantMean
            and not hasattr(model.mean_module, "raw_constant_constraint")
            and getattr(model, "input_transform", None) is None
            and len(model.train_inputs) == 1 and model.train_inputs[0].dim() == 2
            and model.train_targets.dim() == 1
            and not list(model.added_loss_terms())
            and gpytorch.settings.observation_nan_policy.value() == "ignore"
            and not gpytorch.settings.trace_mode.on()
            and not gpytorch.settings.fast_computations.log_prob.on()
        )

    def _kernel(self) -> torch.Tensor:
        base, scale, x = self.base, self.scale, self.x
        if not (self.ard_rbf and base.raw_lengthscale.requires_grad):
            return scale.forward(x, x)
        # ScaleKernel.forward -> RBFKernel.forward: x.div(self.lengthscale) twice (one softplus each, as the
        # property is read twice), covar_dist -> sq_dist (inputs require grad: no diagonal zeroing),
        # postprocess_rbf; then times the outputscale.
        transform, raw = base.raw_lengthscale_constraint.transform, base.raw_lengthscale
        x1 = x.div(transform(raw))
        x2 = x.div(transform(raw))
        covar = _sq_dist_grad(x1, x2, self.pad).div_(-2).exp_()
        outputscale = scale.raw_outputscale_constraint.transform(scale.raw_outputscale)
        return covar.mul(outputscale)

    def __call__(self, **kwargs) -> torch.Tensor:
        from linear_operator.utils.cholesky import psd_safe_cholesky

        n = self.n
        noise_module = self.noise
        noise = noise_module.raw_noise_constraint.transform(noise_module.raw_noise)
        # likelihood(model(X)).lazy_covariance_matrix.to_dense(): 0 + K + diag_embed(noise expanded) (adding
        # the integer 0 changes no value and passes gradients through, so it is left out)
        covar = self._kernel() + torch.diag_embed(noise.expand(n))
        # torch MultivariateNormal.log_prob with linear_operator's (contiguous) Cholesky factor; the
        # Mahalanobis term is torch's _batch_mahalanobis for one n-vector and one n x n factor.
        chol = psd_safe_cholesky(covar).contiguous()
        diff = self.y - self.mean.raw_constant  # ConstantMean.forward: the constant expanded to n
        solved = torch.linalg.solve_triangular(chol, diff.unsqueeze(-1), upper=False)
        mahalanobis = solved.pow(2).sum()
        half_log_det = chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        res = -0.5 * (self.log_2pi_n + mahalanobis) - half_log_det
        for prior, closure, module, lognormal in self.priors:  # ExactMarginalLogLikelihood._add_other_terms
            value = closure(module)
            if lognormal is None:
                term = prior.log_prob(value)
            else:
                loc_p, two_var, log_scale, validate = lognormal
                if validate and not bool((value > 0).all()):  # Distribution._validate_sample (support)
                    term = prior.log_prob(value)  # raises torch's own error
                else:
                    # TransformedDistribution.log_prob: x = exp^-1(value), 0.0 - log|J| (= x), + Normal.log_prob(x)
                    z = value.log()
                    term = (0.0 - z) + (-((z - loc_p) ** 2) / two_var - log_scale - math.log(math.sqrt(2 * math.pi)))
            res.add_(term.sum())
        return -res.div_(n)


def _sq_dist_grad(x1: torch.Tensor, x2: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
    """gpytorch.kernels.kernel.sq_dist(x1, x2) for inputs that require grad (no diagonal zeroing); ``pad`` is
    its ``ones_like(x_norm)`` column when x1 and x2 have the same rows (computed here otherwise)."""
    adjustment = x1.mean(-2, keepdim=True)
    x1 = x1 - adjustment
    x1_norm = x1.pow(2).sum(dim=-1, keepdim=True)
    x1_pad = torch.ones_like(x1_norm) if pad is None else pad
    x2 = x2 - adjustment
    x2_norm = x2.pow(2).sum(dim=-1, keepdim=True)
    x2_pad = torch.ones_like(x2_norm) if pad is None else pad
    x1_ = torch.cat([-2.0 * x1, x1_norm, x1_pad], dim=-1)
    x2_ = torch.cat([x2, x2_pad, x2_norm], dim=-1)
    return x1_.matmul(x2_.transpose(-2, -1)).clamp_min_(0)


_NDARRAY_CLOSURE = None


def _ndarray_closure_class():
    """botorch's ``NdarrayOptimizationClosure`` around ``ForwardBackwardClosure(ExactMLLLoss)``, in one call.

    Same state (flat float64 vector in parameter order), same value, same gradients and the same handling
    of numerical errors; what differs is bookkeeping only: one ndarray -> tensor conversion per call instead
    of one per parameter, and ``torch.autograd.grad`` instead of ``backward()`` into ``.grad`` under
    botorch's ``zero_grad_ctx`` (the engine sums a parameter's incoming gradients in the same order either
    way).
    """
    global _NDARRAY_CLOSURE
    if _NDARRAY_CLOSURE is None:
        from botorch.optim.closures import NdarrayOptimizationClosure
        from botorch.optim.utils import _handle_numerical_errors

        class _Closure(NdarrayOptimizationClosure):
            state = NdarrayOptimizationClosure.state

            @state.setter
            def state(self, state) -> None:
                flat = torch.as_tensor(state)
                with torch.no_grad():
                    index = 0
                    for tnsr in self._params:
                        size = tnsr.numel()
                        values = flat[index : index + size] if tnsr.ndim else flat[index]
                        tnsr.copy_(values.view(tnsr.shape))
                        index += size

            def __init__(self, loss, parameters):
                super().__init__(loss, parameters)
                self._params = list(parameters.values())

            def __call__(self, state=None, **kwargs):
                if state is not None:
                    self.state = state
                try:
                    value = self.closure(**kwargs)  # ExactMLLLoss: a 0-dim tensor (its .sum() is itself)
                    grad_tensors = torch.autograd.grad(value, self._params, allow_unused=True)
                    grads = self._get_gradient_ndarray()
                    index = 0
                    for param, grad in zip(self._params, grad_tensors, strict=True):
                        size = param.numel()
                        if grad is not None:
                            grads[index : index + size] = grad.reshape(-1).numpy()
                        index += size
                    value = value.detach().numpy()
                except RuntimeError as e:
                    value, grads = _handle_numerical_errors(e, x=self.state, dtype=np.float64)
                return value, grads

        _NDARRAY_CLOSURE = _Closure
    return _NDARRAY_CLOSURE


def fast_loss_closure(mll):
    """Closure for botorch's ``fit_gpytorch_mll_scipy(mll, closure=...)``: ``ExactMLLLoss`` and its gradient
    for the parameters botorch's scipy fit optimises (same order, same ndarray interface); None (use botorch's
    own closure) when the model is not the structure ``ExactMLLLoss`` mirrors or does not live on the CPU."""
    from botorch.optim.utils import get_parameters_and_bounds

    if not ExactMLLLoss.supports(mll):
        return None
    parameters, _ = get_parameters_and_bounds(mll)
    parameters = {name: p for name, p in parameters.items() if p.requires_grad}
    if any(p.device.type != "cpu" or p.dtype != torch.float64 for p in parameters.values()):
        return None
    return _ndarray_closure_class()(ExactMLLLoss(mll), parameters)


def _fit_scipy_fast(mll, closure=None, **kwargs):
    """botorch's ``fit_gpytorch_mll_scipy`` with the ``ExactMLLLoss`` closure, built afresh for every fit attempt
    of ``fit_gpytorch_mll``'s retry loop (as botorch builds its own closure)."""
    from botorch.optim.fit import fit_gpytorch_mll_scipy

    if closure is None:
        closure = fast_loss_closure(mll)
    return fit_gpytorch_mll_scipy(mll, closure=closure, **kwargs)


def fit_gp(train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf", fast: bool = True):
    """ML-II fit. Returns (model, fit_failed: bool); a failed fit keeps botorch's initial hyperparameters.

    ``fast`` evaluates the loss with ``ExactMLLLoss`` (bit-identical values, gradients and hence fit to
    botorch's gpytorch closure, a fraction of the CPU); ``fast=False`` is botorch's own closure (the tests'
    reference).
    """
    from botorch.exceptions import ModelFittingError
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    model = make_gp(train_x, train_y, kernel)
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    failed = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit_gpytorch_mll(mll, optimizer=_fit_scipy_fast if fast else None)
        except ModelFittingError:
            failed = True
    model.eval()
    return model, failed


def _standardised_system(model) -> tuple[torch.Tensor, torch.Tensor]:
    """(K incl. noise, r = standardised targets minus constant mean) of a fitted SingleTaskGP."""
    x = model.train_inputs[0]
    y = model.train_targets  # already standardised by the outcome transform
    noise = model.likelihood.noise.reshape(-1)
    with torch.no_grad():
        k = model.covar_module(x).to_dense()
        k = k + noise * torch.eye(len(y), dtype=k.dtype)
        r = y - model.mean_module.constant.reshape(())
    return k, r


def _cholesky(k: torch.Tensor) -> torch.Tensor:
    from gpytorch.utils.cholesky import psd_safe_cholesky

    return psd_safe_cholesky(k)


def loo_moments(model) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Closed-form LOO (standardised units): (y, mu_{-i}, sigma^2_{-i}) with fixed hyperparameters."""
    k, r = _standardised_system(model)
    chol = _cholesky(k)
    k_inv = torch.cholesky_inverse(chol)
    alpha = torch.cholesky_solve(r.unsqueeze(-1), chol).squeeze(-1)
    diag = torch.diagonal(k_inv)
    y = model.train_targets
    return y, y - alpha / diag, 1.0 / diag


def loo_pit(model) -> np.ndarray:
    """PIT_i = Phi((y_i - mu_{-i}) / sigma_{-i}) = Phi([K^-1 r]_i / sqrt([K^-1]_ii))."""
    y, mu, var = loo_moments(model)
    z = (y - mu) / var.sqrt()
    return torch.special.ndtr(z).detach().cpu().numpy()


def timeseries_pit(model, start: int = 1) -> np.ndarray:
    """One-step-ahead PIT values e_t -> Phi(e_t) for t >= start (observation order), fixed hyperparameters."""
    k, r = _standardised_system(model)
    chol = _cholesky(k)
    innovations = torch.linalg.solve_triangular(chol, r.unsqueeze(-1), upper=False).squeeze(-1)
    return torch.special.ndtr(innovations[start:]).detach().cpu().numpy()


def refit_loo_pit(train_x: torch.Tensor, train_y: torch.Tensor, kernel: str = "rbf") -> np.ndarray:
    """LOO by N exact ML-II refits (Algorithm 4 taken literally); the slow reference for benchmarks."""
    n = len(train_y)
    pits = np.empty(n)
    for i in range(n):
        keep = torch.arange(n) != i
        model, _ = fit_gp(train_x[keep], train_y[keep], kernel)
        with torch.no_grad():
            post = model.posterior(train_x[i : i + 1], observation_noise=True)
            mean, std = post.mean.reshape(()), post.variance.reshape(()).sqrt()
        pits[i] = float(torch.special.ndtr((train_y[i] - mean) / std))
    return pits


def heldout_pit(model, mode: str, train_x=None, train_y=None, kernel: str = "rbf") -> np.ndarray:
    if mode == "loo":
        return loo_pit(model)
    if mode == "timeseries":
        return timeseries_pit(model)
    if mode == "loo_refit":
        return refit_loo_pit(train_x, train_y, kernel)
    raise ValueError(f"pit_mode {mode!r} not in {PIT_MODES}")

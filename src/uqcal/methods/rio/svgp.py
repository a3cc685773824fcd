"""The sparse variational GP behind RIO and all its variants (Qiu, Meyerson & Miikkulainen, Sec. 3, App. B.3).

The GP sees a combined input matrix ``[x_standardised, y_hat]`` (d + 1 columns) like the authors' code;
which columns the kernel reads is set by ``kernel_inputs``:

- ``"io"``: k_in(x) + k_out(y_hat), each an RBF with its own variance and lengthscale (Eq. 2-3);
- ``"i"``: the input RBF only; ``"o"``: the output RBF only.

Zero mean, Gaussian likelihood, 50 trainable inducing points initialised from (shuffled) training rows, and
hyperparameters initialised like GPflow's defaults (variances 1, lengthscales 1, noise 1), as in the
authors' code. Full-batch L-BFGS (the paper's L-BFGS-B, <= 1000 iterations) or minibatch Adam on the ELBO.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import gpytorch
import numpy as np
import scipy.optimize
import threadpoolctl
import torch
from linear_operator.utils.errors import NanError, NotPSDError

# What a GP evaluation raises at a bad state: a Cholesky of a non-PSD or NaN matrix (after gpytorch's jitter
# escalation), a non-finite ELBO. The fit keeps its last valid state and reports the failure (FitResult.failure).
GP_FAILURES = (FloatingPointError, NanError, NotPSDError)

KERNEL_INPUTS = ("io", "i", "o")


def io_kernel(kernel_inputs: str, n_features: int, ard: bool = False) -> gpytorch.kernels.Kernel:
    """The kernel over the combined inputs ``[x (n_features columns), y_hat (1 column)]``."""
    if kernel_inputs not in KERNEL_INPUTS:
        raise ValueError(f"kernel_inputs={kernel_inputs!r}: expected one of {KERNEL_INPUTS}")
    if n_features < 1:
        raise ValueError(f"n_features={n_features}: need at least one input feature")
    parts = []
    if "i" in kernel_inputs:
        rbf_in = gpytorch.kernels.RBFKernel(
            active_dims=tuple(range(n_features)), ard_num_dims=n_features if ard else None
        )
        parts.append(gpytorch.kernels.ScaleKernel(rbf_in))
        parts[-1].rio_role = "in"
    if "o" in kernel_inputs:
        parts.append(gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(active_dims=(n_features,))))
        parts[-1].rio_role = "out"
    # Eq. (2): k_c = k_in + k_out.
    kernel = parts[0] if len(parts) == 1 else gpytorch.kernels.AdditiveKernel(*parts)
    for scaled in _scale_kernels(kernel):
        scaled.outputscale = 1.0  # GPflow default variance
        scaled.base_kernel.lengthscale = 1.0  # GPflow default lengthscale
    return kernel


def _scale_kernels(kernel: gpytorch.kernels.Kernel) -> list[gpytorch.kernels.ScaleKernel]:
    if isinstance(kernel, gpytorch.kernels.ScaleKernel):
        return [kernel]
    return [k for k in kernel.kernels if isinstance(k, gpytorch.kernels.ScaleKernel)]


class IOKernelSVGP(gpytorch.models.ApproximateGP):
    """SVGP (Hensman et al. 2013) with a zero mean and the given kernel."""

    def __init__(self, inducing_points: torch.Tensor, kernel: gpytorch.kernels.Kernel):
        distribution = gpytorch.variational.CholeskyVariationalDistribution(inducing_points.size(0))
        strategy = gpytorch.variational.VariationalStrategy(
            self, inducing_points, distribution, learn_inducing_locations=True
        )
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = kernel

    def forward(self, inputs: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(inputs), self.covar_module(inputs))


@dataclass
class FitResult:
    model: IOKernelSVGP
    likelihood: gpytorch.likelihoods.GaussianLikelihood
    fit_seconds: float
    iterations: int
    function_evals: int
    final_loss: float  # negative ELBO summed over the training rows, in the fitted (standardised) units
    noise_var: float  # sigma_n^2 in the targets' units
    converged: bool  # L-BFGS-B stopped on its own tolerance (not the iteration cap); Adam: always False
    failure: str = ""  # why the optimiser failed ("" when it did not); the kept state is its last valid one
    hyperparameters: dict[str, list[float]] = field(default_factory=dict)
    target_offset: float = 0.0  # the GP models (targets - target_offset) / target_scale; predict() undoes it
    target_scale: float = 1.0
    loss_trace: list[float] = field(default_factory=list)  # Adam: per epoch, the summed minibatch losses
    yhat_offset: float = 0.0  # set by rio.fit_and_predict: the GP's y_hat column is (y_hat - offset) / scale
    yhat_scale: float = 1.0

    @property
    def failed(self) -> bool:
        return bool(self.failure)

    def predict(self, inputs: np.ndarray, include_noise: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance in the targets' units."""
        mean, var = predict_svgp(self.model, self.likelihood, inputs, include_noise=include_noise)
        return mean * self.target_scale + self.target_offset, var * self.target_scale**2


def fit_svgp(
    inputs: np.ndarray,
    targets: np.ndarray,
    *,
    kernel_inputs: str = "io",
    n_features: int | None = None,
    ard: bool = False,
    n_inducing: int = 50,
    optimizer: str = "lbfgs",
    max_iter: int = 1000,
    lbfgs_history: int = 10,
    batch_size: int = 1024,
    epochs: int = 10,
    lr: float = 0.01,
    learn_inducing: bool = True,
    inducing_points: np.ndarray | None = None,
    seed: int = 0,
    scale_targets: bool = False,
    centre_targets: bool = False,
    dtype: torch.dtype = torch.float64,
    progress: Callable[..., Iterable[int]] | None = None,
    epoch_callback: Callable[[int, Callable], None] | None = None,
    device: torch.device | str = "cpu",
) -> FitResult:
    """Fit the SVGP on ``inputs`` (n x (d+1): standardised x then y_hat) against ``targets`` (n,).

    ``optimizer="lbfgs"``: scipy's L-BFGS-B on the full-batch ELBO, at most ``max_iter`` iterations, with
    scipy's default tolerances on the summed objective — what the authors' GPflow ``ScipyOptimizer`` runs.
    ``optimizer="adam"``: minibatch ELBO with Adam, ``epochs`` passes of ``batch_size`` rows, for large n.
    ``inducing_points`` overrides the default initialisation (the first ``n_inducing`` of a seeded shuffle
    of the rows, as the authors take the first rows of their shuffled training set).
    ``scale_targets`` / ``centre_targets``: fit on (targets - mean) / std and map the predictions back
    (``FitResult.target_offset``, ``target_scale``). Scaling is a change of units: the same zero-mean GP,
    only GPflow's unit initial variances now mean var(targets). Centring also changes the model (a zero-mean
    GP on the centred targets is a GP with constant mean = the training mean).
    ``epoch_callback(epoch, predict)`` (Adam only) is called after each epoch with a function that returns
    the current predictive mean and variance in the targets' units for given inputs (benchmarks' curves).
    ``device``: where the model and data live; the kernel is built on the CPU and then moved, so every
    device starts from the same initial state.

    Parameters
    ----------
    inputs : numpy.ndarray of shape (n, d + 1)
        Standardised inputs, then the network's output y_hat.
    targets : numpy.ndarray of shape (n,)
        The GP's targets (residuals or y), raw.
    kernel_inputs : {"io", "i", "o"}, default "io"
        The kernel's inputs: the I/O kernel (sum of an input and an output kernel, Eq. 2) or one half.
    n_features : int or None, default None
        d, the input columns (None: all but the last column).
    ard : bool, default False
        One lengthscale per input feature.
    n_inducing : int, default 50
        The number of inducing points.
    optimizer : {"lbfgs", "adam"}, default "lbfgs"
        Full-batch L-BFGS-B or minibatch Adam.
    max_iter : int, default 1000
        L-BFGS-B's iteration cap.
    lbfgs_history : int, default 10
        L-BFGS-B's memory.
    batch_size : int, default 1024
        Adam's rows per minibatch.
    epochs : int, default 10
        Adam's passes.
    lr : float, default 0.01
        Adam's learning rate.
    learn_inducing : bool, default True
        Optimise the inducing locations.
    inducing_points : numpy.ndarray or None, default None
        Initial inducing locations, (n_inducing, d + 1); None: seeded rows of ``inputs``.
    seed : int, default 0
        The seed of the inducing rows and minibatch orders.
    scale_targets, centre_targets : bool, default False
        Fit on standardised or centred targets and map the predictions back.
    dtype : torch.dtype, default torch.float64
        The model's floating type.
    progress : callable or None, default None
        Wraps Adam's epoch iterator (``progress(range, total=, desc=)``); None: none.
    epoch_callback : callable or None, default None
        ``epoch_callback(epoch, predict)`` after each Adam epoch.
    device : torch.device or str, default "cpu"
        Where the model and data live.

    Returns
    -------
    FitResult
        The fitted model and likelihood, the optimiser's facts (seconds, iterations, final loss, convergence,
        failure), the noise variance and hyperparameters in the targets' units.
    """
    inputs = np.asarray(inputs, dtype=float)
    targets = np.asarray(targets, dtype=float).reshape(-1)
    if inputs.ndim != 2 or inputs.shape[0] != targets.shape[0]:
        raise ValueError(f"inputs {inputs.shape} and targets {targets.shape} disagree in rows")
    if not (np.isfinite(inputs).all() and np.isfinite(targets).all()):
        raise ValueError("inputs or targets contain NaN/inf")
    n_features = inputs.shape[1] - 1 if n_features is None else n_features
    if inputs.shape[1] != n_features + 1:
        raise ValueError(f"inputs have {inputs.shape[1]} columns; expected n_features + 1 = {n_features + 1}")
    if optimizer not in ("lbfgs", "adam"):
        raise ValueError(f"optimizer={optimizer!r}: expected 'lbfgs' or 'adam'")
    rng = np.random.default_rng(seed)
    torch.manual_seed(int(rng.integers(0, 2**31 - 1)))

    n = inputs.shape[0]
    target_offset = float(np.mean(targets)) if centre_targets else 0.0
    target_scale = float(np.std(targets)) if scale_targets else 1.0
    if not target_scale > 0:
        target_scale = 1.0
    targets = (targets - target_offset) / target_scale
    if inducing_points is None:
        order = rng.permutation(n)[: min(n_inducing, n)]
        inducing_points = inputs[order]
    train_x = torch.as_tensor(inputs, dtype=dtype, device=device)
    train_y = torch.as_tensor(targets, dtype=dtype, device=device)
    model = IOKernelSVGP(
        torch.as_tensor(np.asarray(inducing_points), dtype=dtype, device=device).clone(),
        io_kernel(kernel_inputs, n_features, ard),
    ).to(device=device, dtype=dtype)
    if not learn_inducing:
        model.variational_strategy.inducing_points.requires_grad_(False)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(device=device, dtype=dtype)
    likelihood.noise = 1.0  # GPflow default likelihood variance
    model.train()
    likelihood.train()
    # ELBO of Hensman et al. (2013); gpytorch's is the per-row mean, so x n gives GPflow's summed objective.
    elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=n)
    params = [p for p in list(model.parameters()) + list(likelihood.parameters()) if p.requires_grad]

    start = time.perf_counter()
    if optimizer == "lbfgs":
        run = _run_lbfgsb(model, elbo, params, train_x, train_y, max_iter, lbfgs_history)
    else:
        def predict_now(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            mean, var = predict_svgp(model, likelihood, x)
            model.train()
            likelihood.train()
            return mean * target_scale + target_offset, var * target_scale**2

        on_epoch = None if epoch_callback is None else (lambda epoch: epoch_callback(epoch, predict_now))
        run = _run_adam(model, elbo, params, train_x, train_y, batch_size, epochs, lr, rng, progress, on_epoch)
    fit_seconds = time.perf_counter() - start
    model.eval()
    likelihood.eval()
    return FitResult(
        model=model,
        likelihood=likelihood,
        fit_seconds=fit_seconds,
        noise_var=float(likelihood.noise.item()) * target_scale**2,
        hyperparameters=kernel_hyperparameters(model.covar_module, target_scale),
        target_offset=target_offset,
        target_scale=target_scale,
        **run,
    )


def _summed_loss(model, elbo, train_x, train_y) -> torch.Tensor:
    """Negative ELBO summed over the rows (GPflow's SVGP objective); gpytorch's ELBO is its mean."""
    return -elbo(model(train_x), train_y) * train_x.shape[0]


def _run_lbfgsb(model, elbo, params, train_x, train_y, max_iter, history) -> dict:
    """scipy L-BFGS-B with its default tolerances (pgtol 1e-5, ftol 2.2e-9), as GPflow's ScipyOptimizer.

    An evaluation that fails (Cholesky failure after gpytorch's jitter escalation, a non-finite ELBO)
    returns NaN, which makes L-BFGS-B stop with an abnormal termination; its result is then the last
    accepted iterate, and the fit is reported as failed. (Returning +inf instead lets L-BFGS-B report a
    false convergence, which is why NaN is used.)
    """
    sizes = [p.numel() for p in params]
    errors: list[str] = []
    best: dict = {"loss": math.inf, "theta": None}  # the lowest finite objective evaluated: the fallback state

    def set_params(theta: np.ndarray) -> None:
        with torch.no_grad():
            flat = torch.as_tensor(theta, dtype=params[0].dtype, device=params[0].device)
            for p, chunk in zip(params, torch.split(flat, sizes), strict=True):
                p.copy_(chunk.view_as(p))

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        set_params(theta)
        for p in params:
            p.grad = None
        try:
            loss = _summed_loss(model, elbo, train_x, train_y)
            if not torch.isfinite(loss):
                raise FloatingPointError("non-finite ELBO")
            loss.backward()
        except GP_FAILURES as exc:
            errors.append(f"{type(exc).__name__}: {exc}".splitlines()[0])
            return math.nan, np.full_like(theta, math.nan)
        value = float(loss.item())
        if value < best["loss"]:
            best["loss"], best["theta"] = value, np.array(theta, copy=True)
        grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        return value, grad.double().cpu().numpy()

    theta0 = torch.cat([p.detach().reshape(-1) for p in params]).double().cpu().numpy()
    # L-BFGS-B's own vector work is tiny: OpenBLAS threads beyond torch's only contend (2x CPU measured).
    with threadpoolctl.threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
        res = scipy.optimize.minimize(
            objective, theta0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "maxcor": history}
        )
    final_loss = _loss_at(res.x, set_params, model, elbo, train_x, train_y)
    if not math.isfinite(final_loss) and best["theta"] is not None:
        # L-BFGS-B stopped at a state whose ELBO cannot be evaluated: fall back to the best one it evaluated.
        final_loss = _loss_at(best["theta"], set_params, model, elbo, train_x, train_y)
    if not math.isfinite(final_loss):
        raise GPFitError(f"the SVGP's ELBO cannot be evaluated at any state the optimiser reached ({errors[:1]})")
    failure = ""
    if errors:
        failure = f"{len(errors)} failed evaluation(s), first: {errors[0]}"
    elif res.status not in (0, 1):  # 0: converged, 1: iteration/evaluation cap
        failure = f"L-BFGS-B status {res.status}: {res.message}"
    elif not math.isfinite(final_loss):
        failure = "non-finite ELBO at the final parameters"
    return {
        "iterations": int(res.nit),
        "function_evals": int(res.nfev),
        "final_loss": final_loss,
        "converged": res.status == 0 and not failure,
        "failure": failure,
    }


class GPFitError(RuntimeError):
    """No state of the GP's optimisation could be evaluated (not even the initial one): nothing to predict with."""


def _loss_at(theta, set_params, model, elbo, train_x, train_y) -> float:
    """The summed negative ELBO at parameters ``theta`` (set on the model), NaN where it cannot be evaluated."""
    set_params(theta)
    try:
        with torch.no_grad():
            return float(_summed_loss(model, elbo, train_x, train_y).item())
    except GP_FAILURES:
        return math.nan


def _run_adam(model, elbo, params, train_x, train_y, batch_size, epochs, lr, rng, progress, on_epoch=None) -> dict:
    """Minibatch Adam on the ELBO; a non-finite loss stops the fit at the last epoch's (finite) state."""
    opt = torch.optim.Adam(params, lr=lr)
    n = train_x.shape[0]
    steps, trace, failure = 0, [], ""
    epoch_iter = range(epochs) if progress is None else progress(range(epochs), total=epochs, desc="svgp epochs")
    for epoch in epoch_iter:
        saved = [p.detach().clone() for p in params]
        order = torch.as_tensor(rng.permutation(n), device=train_x.device)
        total = 0.0
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            opt.zero_grad()
            try:
                loss = -elbo(model(train_x[rows]), train_y[rows])
            except GP_FAILURES as exc:
                failure = f"epoch {epoch}: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                break
            if not torch.isfinite(loss):
                failure = f"epoch {epoch}: non-finite ELBO"
                break
            loss.backward()
            opt.step()
            total += float(loss.item()) * len(rows)
            steps += 1
        if failure:
            with torch.no_grad():
                for p, value in zip(params, saved, strict=True):
                    p.copy_(value)
            break
        trace.append(total)  # summed over the epoch's rows: the full-data negative ELBO, estimated
        if on_epoch is not None:
            on_epoch(epoch)
    return {
        "iterations": steps,
        "function_evals": steps,
        "final_loss": trace[-1] if trace else math.nan,
        "converged": False,
        "failure": failure,
        "loss_trace": trace,
    }


@torch.no_grad()
def predict_svgp(
    model: IOKernelSVGP,
    likelihood: gpytorch.likelihoods.GaussianLikelihood,
    inputs: np.ndarray,
    chunk: int = 8192,
    include_noise: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and variance; the variance includes sigma_n^2 (GPflow predict_y, authors' code)."""
    model.eval()
    likelihood.eval()
    first = next(model.parameters())
    means, variances = [], []
    for start in range(0, len(inputs), chunk):
        x = torch.as_tensor(np.asarray(inputs[start : start + chunk], dtype=float), dtype=first.dtype,
                            device=first.device)
        latent = model(x)
        # Eq. (6) is the latent variance; the evaluated predictive adds the noise (predict_y in GPflow).
        dist = likelihood(latent) if include_noise else latent
        means.append(dist.mean.cpu().numpy())
        variances.append(dist.variance.cpu().numpy())
    return np.concatenate(means), np.concatenate(variances)


def kernel_hyperparameters(kernel: gpytorch.kernels.Kernel, target_scale: float = 1.0) -> dict[str, list]:
    """Learned variances and lengthscales of the input ("in") and output ("out") kernels."""
    out: dict[str, list[float]] = {}
    for scaled in _scale_kernels(kernel):
        role = scaled.rio_role
        out[f"{role}_variance"] = [float(scaled.outputscale.item()) * target_scale**2]
        out[f"{role}_lengthscale"] = scaled.base_kernel.lengthscale.detach().reshape(-1).tolist()
    return out

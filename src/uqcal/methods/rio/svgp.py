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

import copy
import math
import time
from dataclasses import dataclass, field

import gpytorch
import numpy as np
import torch

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
    final_loss: float
    noise_var: float
    optimizer_failed: bool = False
    hyperparameters: dict[str, list[float]] = field(default_factory=dict)
    target_scale: float = 1.0  # the GP models targets / target_scale; predict_svgp undoes it

    def predict(self, inputs: np.ndarray, include_noise: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and variance in the targets' units."""
        mean, var = predict_svgp(self.model, self.likelihood, inputs, include_noise=include_noise)
        return mean * self.target_scale, var * self.target_scale**2


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
    dtype: torch.dtype = torch.float64,
    progress=None,
) -> FitResult:
    """Fit the SVGP on ``inputs`` (n x (d+1): standardised x then y_hat) against ``targets`` (n,).

    ``optimizer="lbfgs"``: full-batch L-BFGS on the ELBO, at most ``max_iter`` iterations (paper).
    ``optimizer="adam"``: minibatch ELBO with Adam, ``epochs`` passes of ``batch_size`` rows, for large n.
    ``inducing_points`` overrides the default initialisation (the first ``n_inducing`` of a seeded shuffle
    of the rows, as the authors take the first rows of their shuffled training set).
    ``scale_targets``: fit on targets / std(targets) and map back (``FitResult.target_scale``). The model is
    the same GP (variances and noise scale by std^2); only the starting point changes — variances start at
    the target's variance instead of 1. Needed for Adam on large-unit targets, whose small steps cannot
    climb from 1 to e.g. 1e5; off by default to keep the authors' initialisation.
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
    target_scale = float(np.std(targets)) if scale_targets else 1.0
    if not target_scale > 0:
        target_scale = 1.0
    targets = targets / target_scale
    if inducing_points is None:
        order = rng.permutation(n)[: min(n_inducing, n)]
        inducing_points = inputs[order]
    train_x = torch.as_tensor(inputs, dtype=dtype)
    train_y = torch.as_tensor(targets, dtype=dtype)
    model = IOKernelSVGP(
        torch.as_tensor(np.asarray(inducing_points), dtype=dtype).clone(),
        io_kernel(kernel_inputs, n_features, ard),
    ).to(dtype)
    if not learn_inducing:
        model.variational_strategy.inducing_points.requires_grad_(False)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(dtype)
    likelihood.noise = 1.0  # GPflow default likelihood variance
    model.train()
    likelihood.train()
    # ELBO of Hensman et al. (2013); gpytorch divides it by n, which leaves the optimum unchanged.
    elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=n)
    params = [p for p in list(model.parameters()) + list(likelihood.parameters()) if p.requires_grad]

    start = time.perf_counter()
    failed = False
    if optimizer == "lbfgs":
        iterations, evals, final_loss, failed = _run_lbfgs(
            model, likelihood, elbo, params, train_x, train_y, max_iter, lbfgs_history
        )
    else:
        iterations, evals, final_loss = _run_adam(
            model, elbo, params, train_x, train_y, batch_size, epochs, lr, rng, progress
        )
    fit_seconds = time.perf_counter() - start
    model.eval()
    likelihood.eval()
    return FitResult(
        model=model,
        likelihood=likelihood,
        fit_seconds=fit_seconds,
        iterations=iterations,
        function_evals=evals,
        final_loss=final_loss,
        noise_var=float(likelihood.noise.item()) * target_scale**2,
        optimizer_failed=failed,
        hyperparameters=kernel_hyperparameters(model.covar_module, target_scale),
        target_scale=target_scale,
    )


def _run_lbfgs(model, likelihood, elbo, params, train_x, train_y, max_iter, history):
    # scipy L-BFGS-B defaults used by the authors: maxcor 10, pgtol 1e-5, ftol ~2.2e-9.
    opt = torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=max_iter,
        max_eval=int(max_iter * 1.25),
        tolerance_grad=1e-5,
        tolerance_change=1e-9,
        history_size=history,
        line_search_fn="strong_wolfe",
    )
    best = {"loss": math.inf, "state": None}

    def closure():
        opt.zero_grad()
        loss = -elbo(model(train_x), train_y)
        if not torch.isfinite(loss):
            raise FloatingPointError("non-finite ELBO")
        loss.backward()
        value = float(loss.item())
        if value < best["loss"]:
            best["loss"] = value
            best["state"] = (copy.deepcopy(model.state_dict()), copy.deepcopy(likelihood.state_dict()))
        return loss

    failed = False
    try:
        opt.step(closure)
    except (FloatingPointError, gpytorch.utils.errors.NotPSDError, RuntimeError):
        # A line-search probe left the valid region: keep the best parameters seen (counted, not silent).
        failed = True
    if best["state"] is not None:
        model.load_state_dict(best["state"][0])
        likelihood.load_state_dict(best["state"][1])
    state = opt.state[params[0]]
    return int(state.get("n_iter", 0)), int(state.get("func_evals", 0)), best["loss"], failed


def _run_adam(model, elbo, params, train_x, train_y, batch_size, epochs, lr, rng, progress):
    opt = torch.optim.Adam(params, lr=lr)
    n = train_x.shape[0]
    steps = 0
    loss = torch.tensor(math.nan)
    epoch_iter = (
        range(epochs) if progress is None else progress(range(epochs), total=epochs, desc="svgp epochs")
    )
    for _ in epoch_iter:
        order = torch.as_tensor(rng.permutation(n))
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            opt.zero_grad()
            loss = -elbo(model(train_x[rows]), train_y[rows])
            loss.backward()
            opt.step()
            steps += 1
    return steps, steps, float(loss.item())


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
    dtype = next(model.parameters()).dtype
    means, variances = [], []
    for start in range(0, len(inputs), chunk):
        x = torch.as_tensor(np.asarray(inputs[start : start + chunk], dtype=float), dtype=dtype)
        latent = model(x)
        # Eq. (6) is the latent variance; the evaluated predictive adds the noise (predict_y in GPflow).
        dist = likelihood(latent) if include_noise else latent
        means.append(dist.mean.numpy())
        variances.append(dist.variance.numpy())
    return np.concatenate(means), np.concatenate(variances)


def kernel_hyperparameters(kernel: gpytorch.kernels.Kernel, target_scale: float = 1.0) -> dict[str, list]:
    """Learned variances and lengthscales of the input ("in") and output ("out") kernels."""
    out: dict[str, list[float]] = {}
    for scaled in _scale_kernels(kernel):
        role = scaled.rio_role
        out[f"{role}_variance"] = [float(scaled.outputscale.item()) * target_scale**2]
        out[f"{role}_lengthscale"] = scaled.base_kernel.lengthscale.detach().reshape(-1).tolist()
    return out

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
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import gpytorch
import numpy as np
import scipy.optimize
import threadpoolctl
import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)
from linear_operator.utils.errors import NanError, NotPSDError

# What a GP evaluation raises at a bad state: a Cholesky of a non-PSD or NaN matrix (after gpytorch's jitter
# escalation), a non-finite ELBO. The fit keeps its last valid state and reports the failure (FitResult.failure).
GP_FAILURES = (FloatingPointError, NanError, NotPSDError)

KERNEL_INPUTS = ("io", "i", "o")
NO_BATCH = torch.Size()  # one model (gpytorch's default batch shape)


def io_kernel(kernel_inputs: str, n_features: int, ard: bool = False,
              batch_shape: torch.Size = NO_BATCH) -> gpytorch.kernels.Kernel:  # fmt: skip
    """The kernel over the combined inputs ``[x (n_features columns), y_hat (1 column)]``; ``batch_shape``: one
    independent set of hyperparameters per batch member (the seeds of ``fit_svgp_batch``)."""
    if kernel_inputs not in KERNEL_INPUTS:
        raise ValueError(f"kernel_inputs={kernel_inputs!r}: expected one of {KERNEL_INPUTS}")
    if n_features < 1:
        raise ValueError(f"n_features={n_features}: need at least one input feature")
    parts = []
    if "i" in kernel_inputs:
        rbf_in = gpytorch.kernels.RBFKernel(
            active_dims=tuple(range(n_features)), ard_num_dims=n_features if ard else None, batch_shape=batch_shape
        )
        parts.append(gpytorch.kernels.ScaleKernel(rbf_in, batch_shape=batch_shape))
        parts[-1].rio_role = "in"
    if "o" in kernel_inputs:
        rbf_out = gpytorch.kernels.RBFKernel(active_dims=(n_features,), batch_shape=batch_shape)
        parts.append(gpytorch.kernels.ScaleKernel(rbf_out, batch_shape=batch_shape))
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
    """SVGP (Hensman et al. 2013) with a zero mean and the given kernel; ``batch_shape``: independent SVGPs, one
    per batch member (inducing points ``batch_shape + (m, d + 1)``, a kernel of the same batch shape)."""

    def __init__(self, inducing_points: torch.Tensor, kernel: gpytorch.kernels.Kernel,
                 batch_shape: torch.Size = NO_BATCH):  # fmt: skip
        distribution = gpytorch.variational.CholeskyVariationalDistribution(
            inducing_points.size(-2), batch_shape=batch_shape
        )
        strategy = gpytorch.variational.VariationalStrategy(
            self, inducing_points, distribution, learn_inducing_locations=True
        )
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ZeroMean(batch_shape=batch_shape)
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
    if optimizer not in ("lbfgs", "adam"):
        raise ValueError(f"optimizer={optimizer!r}: expected 'lbfgs' or 'adam'")
    problem = _set_up(inputs, targets, kernel_inputs=kernel_inputs, n_features=n_features, ard=ard,
                      n_inducing=n_inducing, learn_inducing=learn_inducing, inducing_points=inducing_points,
                      seed=seed, scale_targets=scale_targets, centre_targets=centre_targets, dtype=dtype,
                      device=device)  # fmt: skip
    start = time.perf_counter()
    if optimizer == "lbfgs":
        run = _run_lbfgsb(problem, max_iter, lbfgs_history)
    else:
        model, likelihood = problem.model, problem.likelihood

        def predict_now(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            mean, var = predict_svgp(model, likelihood, x)
            model.train()
            likelihood.train()
            return mean * problem.target_scale + problem.target_offset, var * problem.target_scale**2

        on_epoch = None if epoch_callback is None else (lambda epoch: epoch_callback(epoch, predict_now))
        run = _run_adam(model, problem.elbo, problem.params, problem.train_x, problem.train_y, batch_size, epochs,
                        lr, problem.rng, progress, on_epoch)  # fmt: skip
    return problem.result(run, time.perf_counter() - start)


@dataclass
class _Problem:
    """One SVGP fit as ``fit_svgp`` sets it up, before its optimiser runs."""

    model: IOKernelSVGP
    likelihood: gpytorch.likelihoods.GaussianLikelihood
    elbo: gpytorch.mlls.VariationalELBO
    params: list[torch.nn.Parameter]  # the trained ones, in the order of the flat vector L-BFGS-B sees
    train_x: torch.Tensor
    train_y: torch.Tensor
    rng: np.random.Generator  # the seed's stream after the inducing rows (Adam's minibatch orders)
    target_offset: float
    target_scale: float
    kernel_inputs: str
    n_features: int
    ard: bool
    # fit_svgp_batch only: the variational mean and Cholesky factor that gpytorch's first forward pass would set
    # (drawn ahead, in the same order); the seed's first evaluation uses them, then None.
    initial_variational: tuple[torch.Tensor, torch.Tensor] | None = None

    def flat_params(self) -> np.ndarray:
        return torch.cat([p.detach().reshape(-1) for p in self.params]).double().cpu().numpy()

    def set_params(self, theta: np.ndarray) -> None:
        with torch.no_grad():
            flat = torch.as_tensor(theta, dtype=self.params[0].dtype, device=self.params[0].device)
            for p, chunk in zip(self.params, torch.split(flat, [p.numel() for p in self.params]), strict=True):
                p.copy_(chunk.view_as(p))

    def evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """The summed negative ELBO at ``theta`` and its gradient; raises one of GP_FAILURES at a bad state."""
        self.set_params(theta)
        for p in self.params:
            p.grad = None
        loss = _summed_loss(self.model, self.elbo, self.train_x, self.train_y)
        if not torch.isfinite(loss):
            raise FloatingPointError("non-finite ELBO")
        loss.backward()
        grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params])
        return float(loss.item()), grad.double().cpu().numpy()

    def loss_at(self, theta: np.ndarray) -> float:
        """The summed negative ELBO at ``theta`` (set on the model), NaN where it cannot be evaluated."""
        self.set_params(theta)
        try:
            with torch.no_grad():
                return float(_summed_loss(self.model, self.elbo, self.train_x, self.train_y).item())
        except GP_FAILURES:
            return math.nan

    def result(self, run: dict, fit_seconds: float) -> FitResult:
        self.model.eval()
        self.likelihood.eval()
        return FitResult(
            model=self.model,
            likelihood=self.likelihood,
            fit_seconds=fit_seconds,
            noise_var=float(self.likelihood.noise.item()) * self.target_scale**2,
            hyperparameters=kernel_hyperparameters(self.model.covar_module, self.target_scale),
            target_offset=self.target_offset,
            target_scale=self.target_scale,
            **run,
        )


def _set_up(inputs, targets, *, kernel_inputs, n_features, ard, n_inducing, learn_inducing, inducing_points, seed,
            scale_targets, centre_targets, dtype, device) -> _Problem:  # fmt: skip
    """Validate the data and build the model, likelihood and ELBO of one fit (``fit_svgp``'s parameters)."""
    inputs = np.asarray(inputs, dtype=float)
    targets = np.asarray(targets, dtype=float).reshape(-1)
    if inputs.ndim != 2 or inputs.shape[0] != targets.shape[0]:
        raise ValueError(f"inputs {inputs.shape} and targets {targets.shape} disagree in rows")
    if not (np.isfinite(inputs).all() and np.isfinite(targets).all()):
        raise ValueError("inputs or targets contain NaN/inf")
    n_features = inputs.shape[1] - 1 if n_features is None else n_features
    if inputs.shape[1] != n_features + 1:
        raise ValueError(f"inputs have {inputs.shape[1]} columns; expected n_features + 1 = {n_features + 1}")
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

    return _Problem(model, likelihood, elbo, params, train_x, train_y, rng, target_offset, target_scale,
                    kernel_inputs, n_features, ard)


def _summed_loss(model, elbo, train_x, train_y) -> torch.Tensor:
    """Negative ELBO summed over the rows (GPflow's SVGP objective); gpytorch's ELBO is its mean."""
    return -elbo(model(train_x), train_y) * train_x.shape[-2]


def _run_lbfgsb(problem: _Problem, max_iter: int, history: int) -> dict:
    """scipy L-BFGS-B with its default tolerances (pgtol 1e-5, ftol 2.2e-9), as GPflow's ScipyOptimizer."""
    # L-BFGS-B's own vector work is tiny: OpenBLAS threads beyond torch's only contend (2x CPU measured).
    with threadpoolctl.threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
        search = _minimize_lbfgsb(problem.evaluate, problem.flat_params(), max_iter, history)
    return _lbfgsb_outcome(problem, *search)


def _minimize_lbfgsb(evaluate, theta0: np.ndarray, max_iter: int, history: int):
    """Minimise ``evaluate(theta) -> (value, gradient)`` with L-BFGS-B; returns (scipy's result, the failed
    evaluations' messages, the best finite evaluation ``{"loss", "theta"}``).

    An evaluation that fails (Cholesky failure after gpytorch's jitter escalation, a non-finite ELBO)
    returns NaN, which makes L-BFGS-B stop with an abnormal termination; its result is then the last
    accepted iterate, and the fit is reported as failed. (Returning +inf instead lets L-BFGS-B report a
    false convergence, which is why NaN is used.)
    """
    errors: list[str] = []
    best: dict = {"loss": math.inf, "theta": None}  # the lowest finite objective evaluated: the fallback state

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            value, grad = evaluate(theta)
        except GP_FAILURES as exc:
            errors.append(f"{type(exc).__name__}: {exc}".splitlines()[0])
            return math.nan, np.full_like(theta, math.nan)
        if value < best["loss"]:
            best["loss"], best["theta"] = value, np.array(theta, copy=True)
        return value, grad

    res = scipy.optimize.minimize(
        objective, theta0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "maxcor": history}
    )
    return res, errors, best


def _lbfgsb_outcome(problem: _Problem, res, errors: list[str], best: dict) -> dict:
    """Leave ``problem``'s model at L-BFGS-B's result (or the best state it evaluated, where the result's ELBO
    cannot be evaluated) and report the run's facts."""
    final_loss = problem.loss_at(res.x)
    if not math.isfinite(final_loss) and best["theta"] is not None:
        # L-BFGS-B stopped at a state whose ELBO cannot be evaluated: fall back to the best one it evaluated.
        final_loss = problem.loss_at(best["theta"])
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


def fit_svgp_batch(fits: list[dict]) -> list[FitResult]:
    """``[fit_svgp(**kwargs) for kwargs in fits]`` for fits of one shape and optimiser (the seeds of one job), with
    every objective evaluation of all the seeds computed at once by one batched SVGP (gpytorch ``batch_shape``;
    a seed's rows of it depend on that seed's parameters only). Each seed starts from its own ``fit_svgp``
    state: its inducing rows and gpytorch's variational initialisation drawn from its seed's streams, in the
    same order. The batched float64 kernels, Cholesky factors and reductions sum in another order (relative
    ~1e-15 per evaluation).

    L-BFGS-B: each seed keeps its own scipy run (its own line search, iterations and stopping) in its own
    thread; the threads only hand their parameter vectors over and wait for the batched loss and gradient.
    L-BFGS-B amplifies rounding differences (roughly tenfold an iteration): converged fits reach the same
    optimum, fits stopped by ``max_iter`` on a flat objective end where rounding led them, as the per-seed fit
    does under another floating-point order. An evaluation that fails in the batch (a Cholesky failure even
    after gpytorch's per-member jitter) is redone seed by seed, so a seed fails only where it fails alone.
    Every evaluation of a seed is computed by a batched model (a lone seed, a redo: a batch of one), whose
    rows did not depend on the other rows in any bit where measured (batches of 1-4, portable numerics): a
    seed's fit then does not depend on which seeds share its batch (a resumed job with two or more seeds
    left; one seed left, or one --seed, takes the per-seed ``train``: within the stated tolerance).

    Adam: one Adam on the batched parameters is each seed's own Adam (elementwise), on each seed's minibatches
    drawn from its own stream in ``fit_svgp``'s order; a seed whose loss turns non-finite is put back to its
    last epoch's state and kept there, as alone. A Cholesky failure in the batch (not attributable to one
    seed) makes every seed fit again in a batch of one, which records it as ``fit_svgp`` does.

    The tolerances, measured: ``ResidualIOGP.train_batch``. ``fits``: keyword arguments of ``fit_svgp`` with
    one optimiser and its settings, the same data shape, kernel, dtype and device, no ``epoch_callback``
    (``batchable`` checks). ``fit_seconds`` of each result is the batch's optimisation time divided by the seeds.
    """
    if not batchable(fits):
        raise ValueError("fit_svgp_batch: the fits differ in optimiser, shape, kernel, dtype or device "
                         "(check with batchable(fits))")  # fmt: skip
    return _fit_together(fits)


def _fit_together(fits: list[dict]) -> list[FitResult]:
    """``fit_svgp_batch`` for fits ``batchable`` has accepted (or one fit: a batch of one)."""
    settings = [{k: v for k, v in fit.items() if k not in _OPTIMISER_OPTIONS} for fit in fits]
    problems = []
    for kw in settings:
        problem = _set_up(**{**_SET_UP_DEFAULTS, **kw})  # seeds torch's global stream with the fit's seed
        # what gpytorch's first forward pass would draw next from that stream (fit_svgp draws nothing between)
        problem.initial_variational = _take_initial_variational(problem.model)
        problems.append(problem)
    options = {**_OPTIMISER_DEFAULTS, **{k: v for k, v in fits[0].items() if k in _OPTIMISER_DEFAULTS}}
    start = time.perf_counter()
    if options["optimizer"] == "adam":
        runs = _adam_batch(problems, int(options["batch_size"]), int(options["epochs"]), float(options["lr"]))
        if runs is None:  # a Cholesky failure in the batch, which no seed can be told apart in: each seed alone
            return [_fit_together([fit])[0] for fit in fits]
    else:
        with threadpoolctl.threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
            searches = _lockstep_lbfgsb(problems, int(options["max_iter"]), int(options["lbfgs_history"]))
        runs = [_lbfgsb_outcome(problem, *search) for problem, search in zip(problems, searches, strict=True)]
    seconds = (time.perf_counter() - start) / len(problems)
    return [problem.result(run, seconds) for problem, run in zip(problems, runs, strict=True)]


_SET_UP_DEFAULTS = {"inputs": None, "targets": None, "kernel_inputs": "io", "n_features": None, "ard": False,
                    "n_inducing": 50, "learn_inducing": True, "inducing_points": None, "seed": 0,
                    "scale_targets": False, "centre_targets": False, "dtype": torch.float64, "device": "cpu"}
_OPTIMISER_DEFAULTS = {"optimizer": "lbfgs", "max_iter": 1000, "lbfgs_history": 10, "batch_size": 1024, "epochs": 10,
                       "lr": 0.01}  # fit_svgp's
_OPTIMISER_OPTIONS = {*_OPTIMISER_DEFAULTS, "progress"}  # progress: only the log's epoch lines


def batchable(fits: list[dict]) -> bool:
    """Whether ``fit_svgp_batch`` can fit these ``fit_svgp`` keyword sets together: more than one, one optimiser
    with the same settings (L-BFGS-B: iteration cap, memory; Adam: batch size, epochs, learning rate; no
    epoch_callback), inputs of one shape, the same kernel, inducing count, dtype and device."""
    if len(fits) < 2 or any(set(fit) - set(_SET_UP_DEFAULTS) - _OPTIMISER_OPTIONS for fit in fits):
        return False

    def key(fit: dict) -> tuple:
        full = {**_SET_UP_DEFAULTS, **_OPTIMISER_DEFAULTS, **fit}
        options = (full["max_iter"], full["lbfgs_history"]) if full["optimizer"] == "lbfgs" else (
            full["batch_size"], full["epochs"], full["lr"])
        return (full["optimizer"], *(float(v) for v in options), np.shape(full["inputs"]),
                full["kernel_inputs"], full["n_features"], bool(full["ard"]), int(full["n_inducing"]),
                bool(full["learn_inducing"]), full["inducing_points"] is None, full["dtype"], str(full["device"]))
    keys = {key(fit) for fit in fits}
    return len(keys) == 1 and next(iter(keys))[0] in ("lbfgs", "adam")


def _take_initial_variational(model: IOKernelSVGP) -> tuple[torch.Tensor, torch.Tensor]:
    """Run now the variational initialisation gpytorch runs at a model's first forward pass (prior mean plus
    1e-3 N(0, 1) noise from torch's global stream, the prior's Cholesky factor) and return it; the model's own
    parameters are left as they were (the flat vector L-BFGS-B starts from) and marked initialised."""
    strategy = model.variational_strategy
    distribution = strategy._variational_distribution
    before = [p.detach().clone() for p in (distribution.variational_mean, distribution.chol_variational_covar)]
    with torch.no_grad():
        distribution.initialize_variational_distribution(strategy.prior_distribution)
        drawn = (distribution.variational_mean.detach().clone(), distribution.chol_variational_covar.detach().clone())
        distribution.variational_mean.copy_(before[0])
        distribution.chol_variational_covar.copy_(before[1])
    strategy.variational_params_initialized.fill_(1)
    return drawn


def _set_variational(model: IOKernelSVGP, values: tuple[torch.Tensor, torch.Tensor], member=...) -> None:
    distribution = model.variational_strategy._variational_distribution
    with torch.no_grad():
        distribution.variational_mean[member].copy_(values[0])
        distribution.chol_variational_covar[member].copy_(values[1])


class _BatchedSVGP:
    """The seeds' SVGPs as one gpytorch model of batch shape (seeds,): evaluates many seeds' losses at once."""

    def __init__(self, problems: list[_Problem], members: list[int]):
        self.members = members  # the seeds' indices in the caller's list, in batch order
        first = problems[0]
        batch = torch.Size([len(problems)])
        dtype, device = first.train_x.dtype, first.train_x.device
        inducing = torch.stack([p.model.variational_strategy.inducing_points.detach() for p in problems])
        self.model = IOKernelSVGP(inducing.clone(), io_kernel(first.kernel_inputs, first.n_features, first.ard,
                                                              batch_shape=batch), batch_shape=batch)
        self.model = self.model.to(device=device, dtype=dtype)
        self.model.variational_strategy.variational_params_initialized.fill_(1)  # set from the seeds' own draws
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood(batch_shape=batch).to(device=device, dtype=dtype)
        self.model.train()
        self.likelihood.train()
        self.elbo = gpytorch.mlls.VariationalELBO(self.likelihood, self.model, num_data=first.train_x.shape[-2])
        named = list(self.model.named_parameters()) + list(self.likelihood.named_parameters())
        names = [n for n, p in list(first.model.named_parameters()) + list(first.likelihood.named_parameters())
                 if p.requires_grad]  # fmt: skip
        self.params = [dict(named)[n] for n in names]  # the seeds' parameter order, with a leading seed axis
        for p in set(dict(named).values()) - set(self.params):
            p.requires_grad_(False)
        self.sizes = [p.numel() for p in first.params]
        self.train_x = torch.stack([p.train_x for p in problems])
        self.train_y = torch.stack([p.train_y for p in problems])
        self.problems = problems

    def set_row(self, row: int, theta: np.ndarray) -> None:
        """Seed ``row``'s parameters from its flat vector (and, before its first evaluation, gpytorch's
        variational initialisation, as its own model's first forward pass would set it)."""
        with torch.no_grad():
            flat = torch.as_tensor(theta, dtype=self.params[0].dtype, device=self.params[0].device)
            for p, chunk in zip(self.params, torch.split(flat, self.sizes), strict=True):
                p[row].copy_(chunk.view_as(p[row]))
            if self.problems[row].initial_variational is not None:
                _set_variational(self.model, self.problems[row].initial_variational, row)

    def evaluate(self, requests: dict[int, np.ndarray]) -> dict[int, tuple[float, np.ndarray] | Exception]:
        """Loss and gradient of each requested seed at its ``theta``; a seed's failure is returned as its
        exception. The other seeds' rows keep their last parameters (their results are not used)."""
        rows = {seed: row for row, seed in enumerate(self.members) if seed in requests}
        for seed, row in rows.items():
            self.set_row(row, requests[seed])
        for p in self.params:
            p.grad = None
        try:
            losses = _summed_loss(self.model, self.elbo, self.train_x, self.train_y)
            finite = torch.isfinite(losses)
            ok = [row for row in rows.values() if bool(finite[row])]
            if ok:
                losses[ok].sum().backward()
        except GP_FAILURES as exc:
            if len(self.members) == 1:
                self.problems[0].initial_variational = None  # gpytorch initialises before it fails, too
                return {seed: exc for seed in rows}
            # Redone seed by seed (each in a batch of one), so that a seed fails only where it fails alone.
            return {seed: _BatchedSVGP([self.problems[row]], [seed]).evaluate({seed: requests[seed]})[seed]
                    for seed, row in rows.items()}  # fmt: skip
        replies: dict[int, tuple[float, np.ndarray] | Exception] = {}
        for seed, row in rows.items():
            self.problems[row].initial_variational = None  # used: later evaluations start from theta alone
            if row not in ok:
                replies[seed] = FloatingPointError("non-finite ELBO")
                continue
            grad = torch.cat([(p.grad[row] if p.grad is not None else torch.zeros_like(p[row])).reshape(-1)
                              for p in self.params])  # fmt: skip
            replies[seed] = (float(losses[row].item()), grad.double().cpu().numpy())
        return replies


def _adam_batch(problems: list[_Problem], batch_size: int, epochs: int, lr: float) -> list[dict] | None:
    """``_run_adam`` for every seed at once: one Adam on the batched model (elementwise, so each seed's rows take
    its own Adam steps), each seed's minibatches drawn from its own stream in ``_run_adam``'s order. A seed
    whose loss turns non-finite is put back to its last epoch's state and kept there, as ``_run_adam`` stops
    it. A batch of one meets one of GP_FAILURES as ``_run_adam`` does; a larger batch returns None (the caller
    then fits each seed in a batch of one)."""
    members = list(range(len(problems)))
    batched = _BatchedSVGP(problems, members)
    for row, problem in enumerate(problems):
        batched.set_row(row, problem.flat_params())
        problem.initial_variational = None
    opt = torch.optim.Adam(batched.params, lr=lr)
    n = problems[0].train_x.shape[0]
    device = batched.train_x.device
    steps, traces, failures = [0] * len(problems), [[] for _ in problems], [""] * len(problems)
    frozen: dict[int, list[torch.Tensor]] = {}  # stopped seeds: the state they keep
    for epoch in range(epochs):
        saved = [p.detach().clone() for p in batched.params]
        orders = [torch.as_tensor(problem.rng.permutation(n), device=device) if row not in frozen
                  else torch.arange(n, device=device) for row, problem in enumerate(problems)]  # fmt: skip
        totals = [0.0] * len(problems)
        for start in range(0, n, batch_size):
            rows = torch.stack([order[start : start + batch_size] for order in orders])
            x = torch.stack([batched.train_x[row, r] for row, r in enumerate(rows)])
            y = torch.stack([batched.train_y[row, r] for row, r in enumerate(rows)])
            opt.zero_grad()
            try:
                losses = -batched.elbo(batched.model(x), y)
            except GP_FAILURES as exc:
                if len(problems) > 1:
                    return None
                failures[0] = f"epoch {epoch}: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                frozen[0] = [p[0].clone() for p in saved]
                losses = torch.zeros(1, dtype=x.dtype, device=device)
            live = [row for row in members if row not in frozen]
            for row in live:
                if not torch.isfinite(losses[row]):
                    failures[row] = f"epoch {epoch}: non-finite ELBO"
                    frozen[row] = [p[row].clone() for p in saved]
            live = [row for row in live if row not in frozen]
            if not live:
                break
            losses[live].sum().backward()
            opt.step()
            with torch.no_grad():
                for row, state in frozen.items():
                    for p, value in zip(batched.params, state, strict=True):
                        p[row].copy_(value)
            for row in live:
                totals[row] += float(losses[row].item()) * rows.shape[1]
                steps[row] += 1
        for row in members:
            if row not in frozen:
                traces[row].append(totals[row])  # summed over the epoch's rows, as _run_adam's trace
        if len(frozen) == len(problems):
            break
    for row, problem in enumerate(problems):  # each seed's own model takes its final (or kept) state
        state = frozen.get(row) or [p[row].detach() for p in batched.params]
        problem.set_params(torch.cat([value.reshape(-1) for value in state]).cpu().numpy())
    return [{"iterations": steps[row], "function_evals": steps[row],
             "final_loss": traces[row][-1] if traces[row] else math.nan, "converged": False,
             "failure": failures[row], "loss_trace": traces[row]} for row in members]  # fmt: skip


def _lockstep_lbfgsb(problems: list[_Problem], max_iter: int, history: int) -> list:
    """One L-BFGS-B run per seed in its own thread; this thread evaluates, in one batched call, the parameter
    vectors of every seed still running once each has asked (the optimisers only wait on their objective).
    The batch shrinks to the seeds still running (the last one: a batch of one)."""
    cond = threading.Condition()
    requests: dict[int, np.ndarray] = {}
    replies: dict[int, object] = {}
    running = [len(problems)]
    searches: list = [None] * len(problems)
    crashes: list[BaseException] = []

    def optimise(i: int) -> None:
        def evaluate(theta: np.ndarray) -> tuple[float, np.ndarray]:
            with cond:
                requests[i] = np.array(theta, copy=True)
                cond.notify_all()
                cond.wait_for(lambda: i in replies)
                reply = replies.pop(i)
            if isinstance(reply, BaseException):
                raise reply
            return reply

        try:
            searches[i] = _minimize_lbfgsb(evaluate, problems[i].flat_params(), max_iter, history)
        except BaseException as exc:  # handed to the caller below
            crashes.append(exc)
        finally:
            with cond:
                running[0] -= 1
                cond.notify_all()

    batched = None
    threads = [threading.Thread(target=optimise, args=(i,), daemon=True) for i in range(len(problems))]
    for thread in threads:
        thread.start()
    while True:
        with cond:
            cond.wait_for(lambda: len(requests) >= running[0])
            if not requests:
                break
            batch = dict(requests)
            requests.clear()
        try:
            members = sorted(batch)
            if batched is None or batched.members != members:
                batched = _BatchedSVGP([problems[i] for i in members], members)
            answers = batched.evaluate(batch)
        except BaseException as exc:  # not a GP failure: every waiting seed stops with it
            answers = dict.fromkeys(batch, exc)
        with cond:
            replies.update(answers)
            cond.notify_all()
    for thread in threads:
        thread.join()
    if crashes:
        raise crashes[0]
    return searches


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

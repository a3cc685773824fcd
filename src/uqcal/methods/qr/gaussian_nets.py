"""Heteroscedastic Gaussian MLPs trained with (optionally) the quantile regulariser, shared by Dropout VI
and the Deep Ensemble (QR paper Sec. 5.2; authors' code for the details the paper leaves out).

Units: features and target are standardised with the training split's statistics; the net outputs mu and
sigma = min_std + (1 - min_std) * softplus(.) in those units; predictions are mapped back to original units.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)
from torch import nn

from uqcal.core.predictive import GaussianPredictive
from uqcal.methods.api import RunContext
from uqcal.methods.estimator import ProbabilisticRegressor
from uqcal.methods.qr.entropy import SORTS, QuantileRegularizer, gaussian_nll, gaussian_pit

VARIANCE_RULES = ("mixture", "authors")
ADVERSARIAL = ("none", "fgsm", "fgsm_authors")


class HeteroscedasticMLP(nn.Module):
    """depth x hidden ReLU layers (dropout after each), head -> (mu, sigma).

    Parameters
    ----------
    in_dim : int
        The number of input features d.
    hidden : int, default 128
        The width of each hidden layer.
    depth : int, default 2
        The number of hidden layers.
    dropout : float, default 0.0
        The dropout probability after each hidden layer (0: no dropout layers).
    min_std : float, default 0.1
        The floor of the predicted std: sigma = min_std + (1 - min_std) softplus(head), standardised units.
    """

    def __init__(self, in_dim: int, hidden: int = 128, depth: int = 2, dropout: float = 0.0,
                 min_std: float = 0.1):
        super().__init__()
        layers: list[nn.Module] = []
        width = in_dim
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, 2)
        self.min_std = min_std

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian (mu, sigma) of each input row.

        Parameters
        ----------
        x : torch.Tensor of shape (n, in_dim)
            Standardised inputs.

        Returns
        -------
        tuple of torch.Tensor
            The means mu and stds sigma (>= ``min_std``), each of shape (n,), in standardised target units.
        """
        out = self.head(self.body(x))
        std = self.min_std + (1.0 - self.min_std) * nn.functional.softplus(out[:, 1])
        return out[:, 0], std


@dataclass
class Standardiser:
    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: float
    y_std: float

    @classmethod
    def from_arrays(cls, X: np.ndarray, y: np.ndarray) -> Standardiser:
        """The training rows' statistics (ddof 0); a constant column or target is left unscaled."""
        x_std, y_std = X.std(axis=0), float(y.std())
        return cls(X.mean(axis=0), np.where(x_std > 0, x_std, 1.0), float(y.mean()), y_std if y_std > 0 else 1.0)

    def x(self, X: np.ndarray) -> np.ndarray:
        return (X - self.x_mean) / self.x_std

    def y(self, y: np.ndarray) -> np.ndarray:
        return (y - self.y_mean) / self.y_std


def minibatch_loss(net: HeteroscedasticMLP, xb: torch.Tensor, yb: torch.Tensor, regularizer: QuantileRegularizer,
                   adversarial: str, fgsm_eps: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, nll, penalty) of one minibatch; the step is Adam on the loss's gradient.

    - ``none``: NLL(x) - lam H(PIT(x)) (Eq. 7).
    - ``fgsm`` (the paper as written, Lakshminarayanan et al. 2017): NLL(x) + NLL(x_adv) - lam H(PIT(x)),
      x_adv = x + eps sign(grad_x NLL(x)).
    - ``fgsm_authors`` (the authors' code, step for step): ``perturb()`` back-propagates NLL(x) into the
      parameters without zeroing them afterwards, then the step adds the gradient of
      ((NLL(x) - lam H) + NLL_adv) / 2, where NLL_adv reuses the clean outputs. The step's gradient is
      therefore 2 grad NLL + (lam / 2) grad(-H), the gradient of 2 NLL - (lam / 2) H; x_adv never reaches it.
    """
    if adversarial == "fgsm":
        xb = xb.detach().requires_grad_(True)
    mean, std = net(xb)
    nll = gaussian_nll(yb, mean, std)
    penalty = regularizer.penalty(gaussian_pit(yb, mean, std))  # -lam H; 0 without computing H at lam = 0
    if adversarial == "none":
        loss = nll + penalty
    elif adversarial == "fgsm_authors":
        loss = 2.0 * nll + 0.5 * penalty
    elif adversarial == "fgsm":
        (grad_x,) = torch.autograd.grad(nll, xb, retain_graph=True)
        adv_mean, adv_std = net((xb + fgsm_eps * grad_x.sign()).detach())
        loss = nll + gaussian_nll(yb, adv_mean, adv_std) + penalty
    else:
        raise ValueError(f"adversarial must be one of {ADVERSARIAL}, got {adversarial!r}")
    return loss, nll, penalty


def train_member(net: HeteroscedasticMLP, X: torch.Tensor, y: torch.Tensor, params: dict,
                 regularizer: QuantileRegularizer, generator: torch.Generator,
                 fgsm_eps: torch.Tensor | None) -> dict:
    """torch.optim.Adam on ``minibatch_loss`` over shuffled minibatches (a new order every epoch).

    Parameters
    ----------
    net : HeteroscedasticMLP
        The member to train, in place.
    X : torch.Tensor of shape (n, d)
        Standardised training inputs.
    y : torch.Tensor of shape (n,)
        Standardised training targets.
    params : dict
        The estimator's parameters; ``lr``, ``batch_size``, ``epochs`` and ``adversarial`` are read.
    regularizer : QuantileRegularizer
        The loss NLL - lam H(PIT) (QR Eq. 7).
    generator : torch.Generator
        A CPU generator of the minibatch orders (the same order on any device).
    fgsm_eps : torch.Tensor or None
        The per-feature FGSM step for the adversarial variants; None without adversarial training.

    Returns
    -------
    dict
        ``nll`` and ``penalty`` (floats) of the last minibatch.
    """
    optimiser = torch.optim.Adam(net.parameters(), lr=params["lr"])
    n, batch_size = X.shape[0], int(params["batch_size"])
    net.train()
    last = {}
    for _ in range(int(params["epochs"])):
        order = torch.randperm(n, generator=generator).to(X.device)  # a CPU generator: the same order on any device
        for start in range(0, n, batch_size):
            index = order[start : start + batch_size]
            loss, nll, penalty = minibatch_loss(net, X[index], y[index], regularizer, params["adversarial"],
                                                fgsm_eps)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            last = {"nll": float(nll.detach()), "penalty": float(penalty.detach())}
    return last


@torch.no_grad()
def member_passes(net: HeteroscedasticMLP, X: torch.Tensor, passes: int) -> tuple[np.ndarray, np.ndarray]:
    """(passes, n) means and stds; passes > 1 keeps dropout on (MC dropout)."""
    net.train(passes > 1)
    means, stds = zip(*(net(X) for _ in range(passes)), strict=True)
    return torch.stack(means).cpu().numpy(), torch.stack(stds).cpu().numpy()


def mixture_moments(means: np.ndarray, stds: np.ndarray, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Moment-matched Gaussian of a uniform mixture over axis 0.

    'mixture': var = mean(sigma^2) + var(mu) (the law of total variance);
    'authors': var = mean(sigma)^2 + var(mu) (the authors' code; smaller by var(sigma)).

    Parameters
    ----------
    means, stds : numpy.ndarray of shape (m, n)
        The means and stds of m mixture components (passes or members) for n points.
    rule : {"mixture", "authors"}
        The variance rule above.

    Returns
    -------
    tuple of numpy.ndarray
        The pooled mean and std, each of shape (n,).
    """
    if rule not in VARIANCE_RULES:
        raise ValueError(f"variance must be one of {VARIANCE_RULES}, got {rule!r}")
    means, stds = np.asarray(means, np.float64), np.asarray(stds, np.float64)
    mean = means.mean(axis=0)
    spread = means.var(axis=0)
    aleatoric = (stds**2).mean(axis=0) if rule == "mixture" else stds.mean(axis=0) ** 2
    return mean, np.sqrt(aleatoric + spread)


def check_choice(owner: str, key: str, value, allowed: tuple[str, ...]) -> None:
    """A string parameter must be one of ``allowed``: the error names the estimator, the key and the choices."""
    if value not in allowed:
        raise ValueError(f"{owner}.{key}: expected one of {list(allowed)}, got {value!r}")


class GaussianNetMethod(ProbabilisticRegressor):
    """Common estimator of Dropout VI and the Deep Ensemble: ``n_members`` heteroscedastic MLPs, each predicted
    with ``mc_samples`` passes, pooled as one moment-matched Gaussian (``mixture_moments``).

    ``fit(X, y)``: X (n, d) floats, y (n,) targets in their own units. Features and target are standardised
    with (X, y)'s statistics; with ``calibration_fraction`` > 0 a random part of the rows (the runtime's stream
    1) is held out of training, and the PITs of the training rows and of that part are kept (``train_pit_``,
    ``calibration_pit_``, standardised units) for an isotonic recalibration to fit on.
    ``predict(X)`` -> ``GaussianPredictive`` (mean, std) in y's units.
    """

    defaults = {
        "hidden": 128, "depth": 2, "min_std": 0.1, "lr": 1e-2, "batch_size": 512, "epochs": 64,
        "dropout": 0.0, "mc_samples": 1, "n_members": 1, "adversarial": "none", "fgsm_eps_fraction": 0.01,
        "lam": 0.0, "k": None, "k_multiplier": 1.0, "sort": "neuralsort", "tau": 1e-3, "spacing_eps": 1e-6,
        "variance": "mixture", "calibration_fraction": 0.0,
    }

    def __init__(self, params: dict | None = None, /, **kwargs):
        super().__init__(params, **kwargs)
        owner, p = type(self).__name__, self.params
        check_choice(owner, "variance", p["variance"], VARIANCE_RULES)
        check_choice(owner, "adversarial", p["adversarial"], ADVERSARIAL)
        check_choice(owner, "sort", p["sort"], SORTS)

    def fit(self, X, y) -> GaussianNetMethod:
        """Train the nets on (X, y) (standardised inside).

        Parameters
        ----------
        X : array_like of shape (n, d)
        y : array_like of shape (n,)

        Returns
        -------
        GaussianNetMethod
            self, fitted.
        """
        X, y = self.fit_arrays(X, y)
        setup = self._begin_fit(X, y)
        p = self.params
        start = time.perf_counter()
        nets, finals = [], []
        for _ in self.runtime.progress(range(int(p["n_members"])), total=int(p["n_members"])):
            net = self._new_net(setup)  # its initial weights: torch's global stream, after the previous member
            finals.append(train_member(net, setup.X_train, setup.y_train, p, setup.regularizer, setup.generator,
                                       setup.fgsm_eps))
            nets.append(net)
        self._end_fit(X, y, setup, nets, finals, time.perf_counter() - start)
        return self

    def _begin_fit(self, X: np.ndarray, y: np.ndarray) -> _FitSetup:
        """Everything ``fit`` does before the members: seeds, standardiser, held-out rows, loss, orders' stream."""
        p, runtime = self.params, self.runtime
        runtime.seed_everything()  # the nets' initial weights (torch's global stream)
        scale = self.scale_ = Standardiser.from_arrays(X, y)
        train_rows, calibration_rows = np.arange(y.size), np.empty(0, int)
        if p["calibration_fraction"] > 0:
            shuffled = runtime.rng(1).permutation(train_rows)
            n_cal = max(2, int(round(p["calibration_fraction"] * shuffled.size)))
            calibration_rows, train_rows = np.sort(shuffled[:n_cal]), np.sort(shuffled[n_cal:])
        X_train, y_train = self._tensors(X[train_rows]), self._tensor(scale.y(y[train_rows]))
        spacing = batch_spacing_k(p, int(train_rows.size))
        regularizer = QuantileRegularizer(p["lam"], spacing, p["k_multiplier"], p["sort"], p["tau"], p["spacing_eps"])
        fgsm_eps = None
        if p["adversarial"] == "fgsm":
            feature_range = X_train.max(dim=0).values - X_train.min(dim=0).values
            fgsm_eps = p["fgsm_eps_fraction"] * feature_range  # 0.01 x range, standardised units
        return _FitSetup(train_rows, calibration_rows, X_train, y_train, spacing, regularizer, fgsm_eps,
                         runtime.torch_generator(2))

    def _new_net(self, setup: _FitSetup) -> HeteroscedasticMLP:
        p = self.params
        return HeteroscedasticMLP(setup.X_train.shape[1], int(p["hidden"]), int(p["depth"]), float(p["dropout"]),
                                  float(p["min_std"])).to(self.runtime.device)

    def _end_fit(self, X: np.ndarray, y: np.ndarray, setup: _FitSetup, nets: list, finals: list[dict],
                 train_seconds: float) -> None:
        p = self.params
        train_rows, calibration_rows = setup.train_rows, setup.calibration_rows
        self.nets_ = nets
        self.train_rows_, self.calibration_rows_ = train_rows, calibration_rows
        self._pit_rows = {"train": (X[train_rows], y[train_rows]), "calibration": (X[calibration_rows],
                                                                                    y[calibration_rows])}
        self._pits: dict[str, np.ndarray] = {}
        self.fit_stats_ = {
            "train_seconds": train_seconds,
            "n_train": int(train_rows.size), "n_calibration": int(calibration_rows.size),
            "final_batch_nll": float(np.mean([f.get("nll", math.nan) for f in finals])),
            "final_batch_qr_penalty": float(np.mean([f.get("penalty", math.nan) for f in finals])),
            "spacing_k": setup.spacing,
            "variance_rule": p["variance"], "variance_authors": float(p["variance"] == "authors"),
            "adversarial": p["adversarial"], "lam": float(p["lam"]),
        }
        self.fitted_ = True

    # The PITs are computed when first read, not in fit: MC dropout draws its masks from torch's global stream,
    # and the pipeline has always predicted the test rows first (the same masks, the same numbers as before).
    @property
    def train_pit_(self) -> np.ndarray:
        """PIT values F_i(y_i) of the rows the nets trained on (standardised units; QR Tables 4-5 fit on these)."""
        return self._pit("train")

    @property
    def calibration_pit_(self) -> np.ndarray:
        """PIT values of the held-out calibration part (empty without ``calibration_fraction``)."""
        return self._pit("calibration")

    def _pit(self, part: str) -> np.ndarray:
        self.check_fitted()
        if part not in self._pits:
            X, y = self._pit_rows[part]
            self._pits[part] = self._standardised_pit(X, y)
        return self._pits[part]

    def predict_proba(self, X) -> GaussianPredictive:
        """The nets' pooled Gaussian in y's units.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        GaussianPredictive
        """
        X = self.predict_array(X)
        mean, std = self._standardised_moments(X)
        scale = self.scale_
        return GaussianPredictive(scale.y_mean + scale.y_std * mean, scale.y_std * std)

    def _tensor(self, values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32, device=self.runtime.device)

    def _tensors(self, X: np.ndarray) -> torch.Tensor:
        return self._tensor(self.scale_.x(X))

    def _standardised_moments(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pooled mixture's mean and std in standardised units (Sec. 5.2: MC passes x members)."""
        X = self._tensors(X)
        passes = [member_passes(net, X, int(self.params["mc_samples"])) for net in self.nets_]
        means = np.concatenate([m for m, _ in passes])
        stds = np.concatenate([s for _, s in passes])
        return mixture_moments(means, stds, self.params["variance"])

    def _standardised_pit(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        if y.size == 0:
            return np.empty(0)
        mean, std = self._standardised_moments(X)
        return _norm_cdf((self.scale_.y(y) - mean) / std)

    def train(self, ctx: RunContext) -> None:
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        self.runtime = ctx.runtime
        X_all, y_all, train_rows, test_rows = _run_arrays(ctx)
        self.fit(X_all[train_rows], y_all[train_rows])
        self._save_run(ctx, X_all, y_all, train_rows, test_rows)

    def _save_run(self, ctx: RunContext, X_all: np.ndarray, y_all: np.ndarray, train_rows: np.ndarray,
                  test_rows: np.ndarray) -> None:
        """Predict the test rows (then the training PITs: MC dropout draws in this order) and save the run."""
        prediction = self.predict_proba(X_all[test_rows])
        predictions = pd.DataFrame({"y": y_all[test_rows], "mean": prediction.mean, "std": prediction.std})
        scale = self.scale_
        model = {
            "state_dicts": [{k: v.cpu() for k, v in net.state_dict().items()} for net in self.nets_],
            "params": self.params, "x_mean": scale.x_mean, "x_std": scale.x_std,
            "y_mean": scale.y_mean, "y_std": scale.y_std,
            "train_rows": train_rows[self.train_rows_], "calibration_rows": train_rows[self.calibration_rows_],
            "train_pit": self.train_pit_, "calibration_pit": self.calibration_pit_,
        }
        stats = dict(self.fit_stats_)
        stats.update(n_test=int(test_rows.size), train_ce=_ce_percent(self.train_pit_))
        ctx.save_outputs(predictions, model, stats)

    def train_batch(self, ctxs: list[RunContext]) -> bool:
        """The pipeline's ``train`` of several seeds (issue 53): every seed's members trained side by side as one
        stacked model (``uqcal.methods.qr.batched``), each seed then predicted and saved as ``train`` does.

        Each seed's random streams are its own run's: its initial weights drawn from torch's global stream
        seeded as its run seeds it, its minibatch orders from its stream 2, its dropout masks from the global
        stream after its initial weights, its prediction passes after its training masks.

        Tolerance: a seed's saved predictions, PITs, weights, train stats and metrics equal its own run's to
        relative 1e-5 (float32 rounding). Within a group of seeds of one training size every layer, loss and Adam
        step of a model is its own run's operation on the same operands: ``torch.baddbmm`` per model slice is
        ``nn.Linear``'s ``addmm`` of the same shapes, the input layer and the NeuralSort's matrix-vector
        product run model by model (their batched kernels round differently), the row means and sorts are per
        model, and Adam is elementwise. This matters: training amplifies a last-bit difference in a step into
        differences of 10 % and more in a seed's metrics after 64 epochs (the NeuralSort at tau = 1e-3 most), so
        any tolerance looser than rounding would hide a different computation. tests/methods/qr/test_batched.py
        checks it against ``train`` per seed; the default jobs on CPU matched their per-seed runs to the bit.
        Declined (returns False, saves nothing: the pipeline trains the seeds one by one with ``train``): off the
        CPU (a GPU's batched GEMMs round differently from its per-model ones, and its dropout draws from another
        generator), the real-FGSM variants (``adversarial: fgsm``), dropout with several members (their initial
        weights and masks interleave in one stream), and seeds whose parameters differ.

        Parameters
        ----------
        ctxs : list of RunContext
            The pending seeds of one train job, in seed order; each gets what ``train(ctx)`` saves.

        Returns
        -------
        bool
            True: every seed trained and saved; False: declined, nothing saved.
        """
        p = self.params
        same_params = all(dict(ctx.params) == dict(ctxs[0].params) for ctx in ctxs)
        on_cpu = all(torch.device(ctx.device).type == "cpu" for ctx in ctxs)
        stackable = (on_cpu and same_params and p["adversarial"] != "fgsm"
                     and (float(p["dropout"]) == 0 or int(p["n_members"]) == 1))
        if not stackable:
            return False
        from uqcal.methods.qr.batched import train_stacked

        torch.set_num_threads(int(ctxs[0].config.get("torch_threads", 1) or 1))
        runs = []
        for ctx in ctxs:
            method = type(self)(ctx.params)
            method.runtime = ctx.runtime
            ctx.seed_everything()  # as the per-seed path does before train
            X_all, y_all, train_rows, test_rows = _run_arrays(ctx)
            X, y = method.fit_arrays(X_all[train_rows], y_all[train_rows])
            setup = method._begin_fit(X, y)
            # Without dropout training draws nothing from the global stream, so the members' initial weights
            # may all be drawn first; with dropout there is one member (stackable above).
            nets = [method._new_net(setup) for _ in range(int(p["n_members"]))]
            n, epochs = int(setup.y_train.shape[0]), int(p["epochs"])
            # member by member, epoch by epoch: train_member's draws
            orders = torch.stack([torch.stack([torch.randperm(n, generator=setup.generator, device="cpu")
                                               for _ in range(epochs)]) for _ in nets])
            global_stream = torch.Generator(device="cpu")
            global_stream.set_state(torch.get_rng_state())  # the masks' stream: the global one after the weights
            runs.append(_BatchedRun(ctx, method, X, y, X_all, y_all, train_rows, test_rows, setup, nets, orders,
                                    global_stream))
        chunk = max(1, int(MAX_STACKED_MODELS // max(1, int(p["n_members"]))))
        by_size: dict[int, list[_BatchedRun]] = {}
        for run in runs:  # seeds whose training sets differ in size take different minibatches: stacked apart
            by_size.setdefault(int(run.setup.y_train.shape[0]), []).append(run)
        for group in by_size.values():
            for first in range(0, len(group), chunk):
                part = group[first : first + chunk]
                start = time.perf_counter()
                finals = train_stacked(
                    [net for run in part for net in run.nets],
                    torch.stack([run.setup.X_train for run in part for _ in run.nets]),
                    torch.stack([run.setup.y_train for run in part for _ in run.nets]),
                    torch.cat([run.orders for run in part]), p, part[0].setup.regularizer,
                    [run.global_stream for run in part] if float(p["dropout"]) > 0 else None)
                seconds = (time.perf_counter() - start) / len(part)
                for i, run in enumerate(part):
                    members = len(run.nets)
                    run.method._end_fit(run.X, run.y, run.setup, run.nets,
                                        finals[i * members : (i + 1) * members], seconds)
        for run in runs:
            torch.set_rng_state(run.global_stream.get_state())  # the prediction passes go on from training's draws
            run.method._save_run(run.ctx, run.X_all, run.y_all, run.train_rows, run.test_rows)
        return True

    def evaluate(self, ctx: RunContext, predictions=None) -> dict[str, float]:
        from uqcal.methods.qr.metrics import qr_metrics

        return qr_metrics(super().evaluate, ctx, predictions)


# The most models (seeds x members) one stacked training holds: five seeds of a 5-member ensemble. A step of 25
# stacked models costs ~40 % less CPU per model than 25 steps of one (dispatch and small-GEMM overhead shared);
# beyond, the (models, batch, hidden) activations leave the cache and the gain stops.
MAX_STACKED_MODELS = 25


@dataclass
class _FitSetup:
    train_rows: np.ndarray
    calibration_rows: np.ndarray
    X_train: torch.Tensor
    y_train: torch.Tensor
    spacing: int
    regularizer: QuantileRegularizer
    fgsm_eps: torch.Tensor | None
    generator: torch.Generator


@dataclass
class _BatchedRun:
    ctx: RunContext
    method: GaussianNetMethod
    X: np.ndarray
    y: np.ndarray
    X_all: np.ndarray
    y_all: np.ndarray
    train_rows: np.ndarray
    test_rows: np.ndarray
    setup: _FitSetup
    nets: list
    orders: torch.Tensor
    global_stream: torch.Generator


def _run_arrays(ctx: RunContext) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The run's features, targets, training rows and test rows."""
    table, split = ctx.load_data(), ctx.load_split()
    return (np.asarray(table.X, float), np.asarray(table.y, float), np.asarray(split["train"], int),
            np.asarray(split["test"], int))


def batch_spacing_k(p: dict, n_train: int) -> int:
    """The spacing k of Eq. 6, one value for every minibatch: ``k`` if given, else round(k_multiplier * sqrt(n))
    with n the batch size (Sec. 5.2: "k = sqrt(n) ... where n is the batch size"; the authors' trainer takes one
    fixed ``spacing``), i.e. min(batch_size, n_train). A last, smaller minibatch keeps this k (the estimator
    clips it to its size - 1)."""
    from uqcal.methods.qr.entropy import spacing_k

    n = min(int(p["batch_size"]), n_train)
    return spacing_k(n, p["k"], p["k_multiplier"]) if n >= 2 else 1


def _norm_cdf(z: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return ndtr(z)


def _ce_percent(pit: np.ndarray) -> float:
    from uqcal.methods.qr.metrics import ce_percent

    return ce_percent(pit) if pit.size else math.nan

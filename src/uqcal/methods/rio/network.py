"""The pretrained network RIO augments (`nn`), App. D.1 of Qiu, Meyerson & Miikkulainen.

ReLU MLP (2x64 by default, Keras' Glorot-uniform initialisation), RMSprop lr 1e-3 with Keras' constants,
MSE loss, at most 1000 epochs, early stopping with patience 10 on a seeded random 20% validation part of
the training split. Like the authors' Keras code (EarlyStopping without restore_best_weights) the network
kept is the one at the stopping epoch unless ``restore_best`` is set.

The paper gives the NN no predictive distribution. So that the regression evaluator can score it, the
predictions carry a homoscedastic Gaussian whose std is the RMSE of the network on its validation part
(held out from its training, so not shrunk by overfitting). Its NLPD is ours, not a paper number.
"""

from __future__ import annotations

import copy
import inspect
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)
from torch import nn

from uqcal.core.io import load_torch
from uqcal.core.nn import mlp
from uqcal.core.predictive import GaussianPredictive
from uqcal.methods.estimator import ProbabilisticRegressor
from uqcal.methods.rio.holdout import HoldoutData, apply_per_dataset, input_standardisation, load_holdout

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from numpy.typing import ArrayLike

    from uqcal.methods.api import RunContext

RMSPROP_ALPHA, RMSPROP_EPS = 0.9, 1e-7  # Keras RMSprop(0.001): rho 0.9, epsilon 1e-7


def build_network(in_dim: int, hidden: int, depth: int) -> nn.Sequential:
    """The ReLU MLP with Keras' Dense initialisation (the authors' code): Glorot-uniform weights, zero biases."""
    net = mlp(in_dim, 1, hidden=hidden, depth=depth)
    for layer in net:
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return net


def train_network(
    x_train: np.ndarray,
    y_train: np.ndarray,
    *,
    hidden: int = 64,
    depth: int = 2,
    lr: float = 1e-3,
    max_epochs: int = 1000,
    patience: int = 10,
    val_fraction: float = 0.2,
    batch_size: int = 32,
    restore_best: bool = False,
    seed: int = 0,
    progress: Callable[..., Iterable[int]] | None = None,
    device: torch.device | str = "cpu",
) -> tuple[nn.Sequential, dict]:
    """Train the NN on standardised inputs and raw targets; returns the network (on ``device``) and training
    facts. The weights are initialised on the CPU and then moved, so every device starts from the same net.

    RMSprop (Keras' defaults) on the MSE over minibatches of the rows not held out, with Keras-style early
    stopping on a held-out ``val_fraction`` of the rows (the authors' ``EarlyStopping(patience=10)``).

    Parameters
    ----------
    x_train : numpy.ndarray of shape (n, d)
        Standardised inputs.
    y_train : numpy.ndarray of shape (n,)
        Raw targets.
    hidden, depth : int
        The width and number of hidden ReLU layers.
    lr : float
        RMSprop's learning rate.
    max_epochs : int
        The most epochs.
    patience : int
        Epochs without a better validation MSE before stopping.
    val_fraction : float
        The share of rows held out for early stopping, in (0, 1).
    batch_size : int
        Rows per minibatch.
    restore_best : bool
        Restore the weights of the best validation epoch at the end (the authors keep the last ones).
    seed : int
        The seed of the split, the minibatch orders and the initial weights.
    progress : callable or None
        Wraps the epoch iterator (``progress(range, total, description)``), e.g. a progress bar; None: none.
    device : torch.device or str
        Where the network trains.

    Returns
    -------
    tuple of (torch.nn.Sequential, dict)
        The trained network (eval mode, on ``device``) and its facts: ``fit_seconds``, ``epochs``,
        ``best_val_mse``, ``val_rmse`` (of the returned weights) and ``val_rows`` (the held-out row indices).
    """
    problem = _set_up(x_train, y_train, hidden=hidden, depth=depth, val_fraction=val_fraction, seed=seed,
                      device=device)
    net, rng = problem.net, problem.rng
    x_fit, y_fit, x_val, y_val = problem.x_fit, problem.y_fit, problem.x_val, problem.y_val
    n_fit = len(x_fit)
    opt = torch.optim.RMSprop(net.parameters(), lr=lr, alpha=RMSPROP_ALPHA, eps=RMSPROP_EPS)
    loss_fn = nn.MSELoss()
    best_val, best_state, since_best, epochs_run = np.inf, None, 0, 0
    start = time.perf_counter()
    epochs = range(max_epochs) if progress is None else progress(range(max_epochs), max_epochs, "nn epochs")
    for _ in epochs:
        net.train()
        perm = torch.as_tensor(rng.permutation(n_fit), device=device)
        for s in range(0, n_fit, batch_size):
            rows = perm[s : s + batch_size]
            opt.zero_grad()
            loss_fn(net(x_fit[rows]), y_fit[rows]).backward()
            opt.step()
        epochs_run += 1
        net.eval()
        with torch.no_grad():
            val_loss = float(loss_fn(net(x_val), y_val))
        if val_loss < best_val:
            best_val, since_best = val_loss, 0
            if restore_best:
                best_state = {k: v.clone() for k, v in net.state_dict().items()}
        else:
            since_best += 1
            if since_best >= patience:  # Keras EarlyStopping(monitor='val_loss', patience=10)
                break
    if restore_best and best_state is not None:
        net.load_state_dict(best_state)
    return net, _facts(problem, epochs_run, best_val, time.perf_counter() - start)


@dataclass
class _Problem:
    """One network's training problem as ``train_network`` draws it from its seed: the seed's stream (the
    minibatch orders), the fitted and held-out rows, and the initial network."""

    rng: np.random.Generator
    net: nn.Sequential
    val_rows: np.ndarray
    x_fit: torch.Tensor
    y_fit: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor


def _set_up(x_train: np.ndarray, y_train: np.ndarray, *, hidden: int, depth: int, val_fraction: float, seed: int,
            device: torch.device | str) -> _Problem:
    """The split, the initial weights (torch's global stream seeded from ``seed``'s stream) and the tensors."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction={val_fraction}: must lie in (0, 1)")
    n = len(x_train)
    rng = np.random.default_rng(seed)
    torch.manual_seed(int(rng.integers(0, 2**31 - 1)))
    order = rng.permutation(n)
    n_val = max(1, int(round(val_fraction * n)))
    val_rows, fit_rows = np.sort(order[:n_val]), order[n_val:]
    x = torch.as_tensor(x_train, dtype=torch.float32, device=device)
    y = torch.as_tensor(y_train, dtype=torch.float32, device=device).reshape(-1, 1)
    net = build_network(x.shape[1], hidden, depth).to(device)
    return _Problem(rng, net, val_rows, x[fit_rows], y[fit_rows], x[val_rows], y[val_rows])


def _facts(problem: _Problem, epochs_run: int, best_val: float, seconds: float) -> dict:
    """``train_network``'s facts of a trained network (left in eval mode): its validation RMSE among them."""
    net = problem.net
    net.eval()
    with torch.no_grad():
        val_rmse = float(torch.sqrt(nn.MSELoss()(net(problem.x_val), problem.y_val)))
    return {
        "fit_seconds": seconds,
        "epochs": epochs_run,
        "best_val_mse": best_val,
        "val_rmse": val_rmse,
        "val_rows": problem.val_rows.tolist(),
    }


# The keyword arguments of train_network that every network of one stacked training shares.
_SHARED = ("hidden", "depth", "lr", "max_epochs", "patience", "val_fraction", "batch_size", "restore_best")


def stackable(arguments: list[dict]) -> bool:
    """Whether ``train_network_batch`` trains these ``train_network`` keyword sets as one stacked model: two
    or more, on the CPU, without a progress wrapper, with the same shared parameters (the network's shape and
    the training's) and the same training shape (rows, features).

    Parameters
    ----------
    arguments : list of dict
        ``train_network``'s keyword arguments, one set per network.

    Returns
    -------
    bool
    """
    if len(arguments) < 2:
        return False
    first = _shared(arguments[0])
    return all(
        torch.device(a.get("device", "cpu")).type == "cpu"
        and a.get("progress") is None
        and _shared(a) == first
        and np.shape(a["x_train"]) == np.shape(arguments[0]["x_train"])
        for a in arguments
    )


def _shared(arguments: dict) -> dict:
    """The ``_SHARED`` parameters of a ``train_network`` keyword set, its defaults filled in."""
    signature = inspect.signature(train_network).parameters
    return {k: arguments.get(k, signature[k].default) for k in _SHARED}


def train_network_batch(arguments: list[dict]) -> list[tuple[nn.Sequential, dict]]:
    """``train_network(**a)`` of every keyword set ``a`` at once, as one stacked model (issue 53); returns what
    each call returns, in order.

    Each network keeps its own seed's draws (split, initial weights, minibatch orders, in ``train_network``'s
    order), its own RMSprop state and its own early stopping: a network that stops is taken out of the stack
    (the weights of its stopping epoch, or its best ones with ``restore_best``) and the others go on. A step is
    RMSprop on the sum of the networks' minibatch MSEs, whose gradient with respect to one network's weights is
    that network's own, and RMSprop is elementwise; the hidden layers are ``torch.baddbmm`` over the network
    axis (each slice is ``nn.Linear``'s ``addmm`` of the same shapes), while the input and output layers run
    network by network (their batched kernels' weight gradients round differently), and the validation MSE of
    every epoch is computed network by network as ``train_network`` computes it. So on the CPU each network
    takes ``train_network``'s steps to the bit (tests/methods/rio/test_network_batch.py); the stated tolerance
    is relative 1e-5 (float32 rounding), since the stopping epoch decides the whole network and any looser
    agreement would mean another computation. ``fit_seconds`` is the stacked training's time divided by the
    networks.

    Parameters
    ----------
    arguments : list of dict
        ``train_network``'s keyword arguments, one set per network; ``stackable(arguments)`` must hold.

    Returns
    -------
    list of tuple of (torch.nn.Sequential, dict)
        Each network (eval mode, CPU) and its facts, as ``train_network`` returns them.
    """
    if not stackable(arguments):
        raise ValueError("train_network_batch: the networks are not stackable (two or more, on the CPU, with the "
                         f"same {', '.join(_SHARED)} and training shape)")
    first = _shared(arguments[0])
    problems = [_set_up(a["x_train"], a["y_train"], hidden=first["hidden"], depth=first["depth"],
                        val_fraction=first["val_fraction"], seed=a.get("seed", 0), device="cpu")
                for a in arguments]
    start = time.perf_counter()
    outcomes = _train_stacked(problems, lr=first["lr"], max_epochs=first["max_epochs"], patience=first["patience"],
                              batch_size=first["batch_size"], restore_best=first["restore_best"])
    seconds = (time.perf_counter() - start) / len(problems)
    return [(problem.net, _facts(problem, epochs_run, best_val, seconds))
            for problem, (epochs_run, best_val) in zip(problems, outcomes, strict=True)]


class _StackedNetworks:
    """The weights of ``build_network`` nets (same shape) on a leading network axis: ``weights[i]`` of shape
    (networks, out, in), ``biases[i]`` (networks, out), the layers in order, the output layer last."""

    def __init__(self, weights: list[torch.Tensor], biases: list[torch.Tensor]):
        self.weights = [w.detach().clone().requires_grad_(True) for w in weights]
        self.biases = [b.detach().clone().requires_grad_(True) for b in biases]

    @classmethod
    def of(cls, nets: list[nn.Sequential]) -> _StackedNetworks:
        linears = [[m for m in net if isinstance(m, nn.Linear)] for net in nets]
        return cls([torch.stack([layers[i].weight.detach() for layers in linears]) for i in range(len(linears[0]))],
                   [torch.stack([layers[i].bias.detach() for layers in linears]) for i in range(len(linears[0]))])

    def parameters(self) -> list[torch.Tensor]:
        """Weights and biases in ``nn.Module`` order (layer by layer, weight then bias)."""
        return [t for pair in zip(self.weights, self.biases, strict=True) for t in pair]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The outputs (networks, n, 1) of inputs x (networks, n, d), network i reading x[i]."""
        h, last = x, len(self.weights) - 1
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            if i in (0, last):
                # Network by network: the weight gradient of the input layer (few features) and of the one-unit
                # output layer takes another GEMM kernel in a bmm than in nn.Linear's mm, and rounds differently.
                h = torch.stack([nn.functional.linear(*one) for one in zip(h, weight, bias, strict=True)])
            else:
                h = torch.baddbmm(bias[:, None, :], h, weight.transpose(1, 2))
            if i < last:
                h = torch.relu(h)
        return h

    def forward_one(self, network: int, x: torch.Tensor) -> torch.Tensor:
        """Network ``network``'s outputs (n, 1) of x (n, d): the ``nn.Sequential``'s operations."""
        h, last = x, len(self.weights) - 1
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = nn.functional.linear(h, weight[network], bias[network])
            if i < last:
                h = torch.relu(h)
        return h

    def state_of(self, network: int) -> list[torch.Tensor]:
        """A copy of network ``network``'s weights and biases in ``parameters()`` order."""
        return [t[network].detach().clone() for t in self.parameters()]

    def keep(self, networks: list[int], optimiser: torch.optim.Optimizer) -> tuple[_StackedNetworks,
                                                                                  torch.optim.Optimizer]:
        """The stack of ``networks`` only, and an optimiser of the same kind carrying their state."""
        index = torch.tensor(networks, device="cpu")  # the stack is CPU only (stackable)
        kept = _StackedNetworks([w[index] for w in self.weights], [b[index] for b in self.biases])
        moved = type(optimiser)(kept.parameters(), **optimiser.defaults)
        for old, new in zip(self.parameters(), kept.parameters(), strict=True):
            moved.state[new] = {k: v[index].clone() if torch.is_tensor(v) and v.dim() > 0
                                else v.clone() if torch.is_tensor(v) else v
                                for k, v in optimiser.state[old].items()}
        return kept, moved


def _train_stacked(problems: list[_Problem], *, lr: float, max_epochs: int, patience: int, batch_size: int,
                   restore_best: bool) -> list[tuple[int, float]]:
    """``train_network``'s loop for every problem at once; writes each network's final weights into its
    ``problem.net`` and returns each one's (epochs run, best validation MSE)."""
    stack = _StackedNetworks.of([p.net for p in problems])
    optimiser = torch.optim.RMSprop(stack.parameters(), lr=lr, alpha=RMSPROP_ALPHA, eps=RMSPROP_EPS)
    loss_fn = nn.MSELoss()
    running = list(range(len(problems)))  # the problems still training, in stack order
    x_fit = torch.stack([p.x_fit for p in problems])
    y_fit = torch.stack([p.y_fit for p in problems])
    n_fit = x_fit.shape[1]
    best_val, since_best, epochs_run = [np.inf] * len(problems), [0] * len(problems), [0] * len(problems)
    best_state: list[list[torch.Tensor] | None] = [None] * len(problems)
    final_state: list[list[torch.Tensor] | None] = [None] * len(problems)
    for _ in range(max_epochs):
        # Each problem's permutation of this epoch from its own stream, as train_network draws it.
        order = torch.stack([torch.as_tensor(problems[i].rng.permutation(n_fit), device="cpu") for i in running])
        networks = torch.arange(len(running), device="cpu")[:, None]
        for s in range(0, n_fit, batch_size):
            rows = order[:, s : s + batch_size]
            # nn.MSELoss of each network: mean over its rows (its gradient rounds as mse_loss's backward)
            losses = nn.functional.mse_loss(stack.forward(x_fit[networks, rows]), y_fit[networks, rows],
                                            reduction="none").mean(dim=(1, 2))
            optimiser.zero_grad()
            losses.sum().backward()
            optimiser.step()
        stopped = []
        with torch.no_grad():
            for slot, i in enumerate(running):
                epochs_run[i] += 1
                val_loss = float(loss_fn(stack.forward_one(slot, problems[i].x_val), problems[i].y_val))
                if val_loss < best_val[i]:
                    best_val[i], since_best[i] = val_loss, 0
                    if restore_best:
                        best_state[i] = stack.state_of(slot)
                else:
                    since_best[i] += 1
                    if since_best[i] >= patience:  # Keras EarlyStopping(monitor='val_loss', patience=10)
                        stopped.append(slot)
        for slot in stopped:
            final_state[running[slot]] = stack.state_of(slot)
        if stopped:
            going = [slot for slot in range(len(running)) if slot not in stopped]
            if not going:
                running = []
                break
            stack, optimiser = stack.keep(going, optimiser)
            x_fit, y_fit = x_fit[going], y_fit[going]
            running = [running[slot] for slot in going]
    for slot, i in enumerate(running):  # the ones max_epochs stopped
        final_state[i] = stack.state_of(slot)
    for i, problem in enumerate(problems):
        state = best_state[i] if restore_best and best_state[i] is not None else final_state[i]
        with torch.no_grad():
            for parameter, value in zip(problem.net.parameters(), state, strict=True):
                parameter.copy_(value)
    return list(zip(epochs_run, best_val, strict=True))


@torch.no_grad()
def network_predict(net: nn.Module, x: np.ndarray) -> np.ndarray:
    """The net's predictions at ``x``, computed on the device the net is on.

    Parameters
    ----------
    net : torch.nn.Module
        A network with one output.
    x : numpy.ndarray of shape (n, d)
        Inputs in the units the network reads (standardised).

    Returns
    -------
    numpy.ndarray of shape (n,)
        The outputs as float64, in the targets' units.
    """
    net.eval()
    device = next(net.parameters()).device
    return net(torch.as_tensor(x, dtype=torch.float32, device=device)).reshape(-1).double().cpu().numpy()


def load_network(run_dir, device: torch.device | str = "cpu") -> tuple[nn.Sequential, dict]:
    """Rebuild the trained network saved by `nn` in ``run_dir/model.pt``, on ``device``."""
    path = run_dir / "model.pt"
    if not path.exists():
        raise FileNotFoundError(f"{path}: the `nn` run this method depends on has no model.pt")
    saved = load_torch(path, map_location="cpu")  # refuses a file holding anything but tensors and containers
    net = build_network(saved["in_dim"], saved["hidden"], saved["depth"])
    net.load_state_dict(saved["state_dict"])
    net.to(device).eval()
    return net, saved


class RioNetwork(ProbabilisticRegressor):
    """`nn`: the standard network RIO augments; its predictions are the baseline row of Table 1.

    ``fit(X, y)``: X (n, d) floats, standardised inside with their own statistics; y (n,) raw targets (the
    network fits them unscaled, as the authors' code). ``predict_proba(X)`` -> ``GaussianPredictive``: the network's
    output as the mean, and one std for every point, the RMSE on the network's own validation part. The paper
    gives the network no predictive distribution; this homoscedastic Gaussian is ours (held-out, so not shrunk
    by overfitting), and so is its NLPD.

    Parameters
    ----------
    params : dict, optional
        Parameters as one mapping (positional only); keyword arguments add to it.
    random_state : int, numpy.random.Generator or None, default None
        The seed of the split, minibatch orders and initial weights.
    device : str or torch.device, default "cpu"
        Where the network trains.
    **kwargs
        The ``defaults``: ``hidden``, ``depth`` (the MLP), ``lr``, ``max_epochs``, ``patience``,
        ``val_fraction`` (the early-stopping part, drawn from the runtime's stream 1), ``batch_size``,
        ``restore_best``; ``per_dataset`` (pipeline only: ``{dataset: {param: value}}``).

    Examples
    --------
    >>> import numpy as np
    >>> from uqcal.methods.rio import RioNetwork
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (60, 2)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    >>> prediction = RioNetwork(max_epochs=5, random_state=0).fit(X, y).predict_proba(X[:4])
    >>> prediction.mean.shape, bool(np.all(prediction.std == prediction.std[0]))
    ((4,), True)
    """

    defaults = {
        "hidden": 64,
        "depth": 2,
        "lr": 1e-3,
        "max_epochs": 1000,
        "patience": 10,
        "val_fraction": 0.2,
        "batch_size": 32,  # Keras' default fit batch size (the authors pass none)
        "restore_best": False,
        "per_dataset": {},  # {dataset: {param: value}}, e.g. the paper's 2x128 net for SC
    }

    def fit(self, X: ArrayLike, y: ArrayLike) -> RioNetwork:
        """Train the network on (X, y).

        Parameters
        ----------
        X : array_like of shape (n, d)
        y : array_like of shape (n,)
            Raw targets.

        Returns
        -------
        RioNetwork
            self, fitted.
        """
        X, y = self.fit_arrays(X, y)
        return self._fitted(*train_network(**self._network_arguments(X, y)))

    def _network_arguments(self, X: np.ndarray, y: np.ndarray) -> dict:
        """``train_network``'s keyword arguments for (X, y); sets the input standardisation."""
        p = self.params
        self.x_mean_, self.x_std_ = input_standardisation(X)
        return dict(
            x_train=self.standardise(X),
            y_train=y,
            hidden=int(p["hidden"]),
            depth=int(p["depth"]),
            lr=float(p["lr"]),
            max_epochs=int(p["max_epochs"]),
            patience=int(p["patience"]),
            val_fraction=float(p["val_fraction"]),
            batch_size=int(p["batch_size"]),
            restore_best=bool(p["restore_best"]),
            seed=int(self.runtime.rng(1).integers(0, 2**31 - 1)),
            device=self.runtime.device,
        )

    def _fitted(self, net: nn.Sequential, info: dict) -> RioNetwork:
        self.net_, self.fit_info_ = net, info
        self.std_ = max(info["val_rmse"], 1e-12)
        self.fitted_ = True
        return self

    def standardise(self, X: np.ndarray) -> np.ndarray:
        """X in the units the network reads: (X - the training mean) / the training std, per column.

        Parameters
        ----------
        X : numpy.ndarray of shape (n, d)
            Raw inputs.

        Returns
        -------
        numpy.ndarray of shape (n, d)
            The standardised inputs.
        """
        return (X - self.x_mean_) / self.x_std_

    def predict_proba(self, X: ArrayLike) -> GaussianPredictive:
        """The network's output with its validation RMSE as the std.

        Parameters
        ----------
        X : array_like of shape (n, d)

        Returns
        -------
        GaussianPredictive
        """
        X = self.predict_array(X)
        mean = network_predict(self.net_, self.standardise(X))
        return GaussianPredictive(mean, np.full_like(mean, self.std_))

    @classmethod
    def from_run(cls, run_dir, device: torch.device | str = "cpu") -> RioNetwork:
        """The fitted network that an `nn` run saved in ``run_dir/model.pt`` (its ``split_digest`` in ``saved_``)."""
        net, saved = load_network(run_dir, device)
        fitted = cls(device=device)
        fitted.net_, fitted.saved_ = net, saved
        fitted.x_mean_, fitted.x_std_ = np.asarray(saved["x_mean"], float), np.asarray(saved["x_std"], float)
        fitted.std_ = float(saved["std"])
        fitted.n_features_in_ = int(saved["in_dim"])
        fitted.fitted_ = True
        return fitted

    def train(self, ctx: RunContext) -> None:
        data = self._load_run(ctx)
        self.fit(data.x_train, data.y_train)
        self._save_run(ctx, data)

    def train_batch(self, ctxs: list[RunContext]) -> bool:
        """The pipeline's ``train`` of several seeds (issue 53): the seeds' networks trained side by side as one
        stacked model (``train_network_batch``), each seed then predicted and saved as ``train`` saves it (the
        same ``model.pt`` the GP methods load with ``from_run``).

        Each seed keeps its own draws: its split of the validation rows, initial weights and minibatch orders
        come from its own stream 1, drawn in ``train_network``'s order, and a seed that stops early is frozen
        at its stopping epoch (its own RMSprop state and patience) while the others go on.

        Tolerance: a seed's saved weights, predictions, train stats and metrics equal its own run's to relative
        1e-5 (float32 rounding), ``fit_seconds`` excepted (the stacked training's time divided by the seeds).
        On the CPU they are its own run's to the bit: every operation of a seed's step is its own run's on the
        same operands (the hidden layers' ``torch.baddbmm`` slices are ``nn.Linear``'s ``addmm`` of the same
        shapes; the input and one-unit output layers, whose batched weight gradients round differently, and
        every validation MSE run seed by seed; RMSprop is elementwise). Nothing looser would do: a last-bit
        difference can move a seed's stopping epoch and with it the whole network, and every GP method of the
        seed reads that network. tests/methods/rio/test_network_batch.py checks it against ``train`` per seed.
        Declined (returns False, saves nothing: the pipeline trains the seeds one by one with ``train``): off the
        CPU (a GPU's batched GEMMs round differently), and seeds whose parameters or training sizes differ.

        Parameters
        ----------
        ctxs : list of RunContext
            The pending seeds of one train job, in seed order; each gets what ``train(ctx)`` saves.

        Returns
        -------
        bool
            True: each seed's model, predictions and train stats saved through its ``ctx``; False: declined.
        """
        runs = []
        for ctx in ctxs:
            ctx.seed_everything()  # as the train step does before each seed's train(ctx)
            estimator = copy.deepcopy(self)
            data = estimator._load_run(ctx)
            X, y = estimator.fit_arrays(data.x_train, data.y_train)
            runs.append((ctx, estimator, data, estimator._network_arguments(X, y)))
        same_params = all(dict(ctx.params) == dict(ctxs[0].params) for ctx in ctxs)
        if not (same_params and stackable([arguments for *_, arguments in runs])):
            return False
        trained = train_network_batch([arguments for *_, arguments in runs])
        for (ctx, estimator, data, _), (net, info) in zip(runs, trained, strict=True):
            estimator._fitted(net, info)._save_run(ctx, data)
        return True

    def _load_run(self, ctx: RunContext) -> HoldoutData:
        """Take the run's threads, streams and parameters; returns its holdout data."""
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        self.runtime = ctx.runtime
        self.params = apply_per_dataset(self.params, ctx.dataset, self.defaults)
        return load_holdout(ctx)

    def _save_run(self, ctx: RunContext, data: HoldoutData) -> None:
        """Predict the run's test rows and save its outputs."""
        prediction = self.predict_proba(data.x_test)
        predictions = pd.DataFrame({"row": data.test_rows, "y": data.y_test, "mean": prediction.mean,
                                    "std": prediction.std})
        p, info = self.params, self.fit_info_
        model = {
            "state_dict": self.net_.state_dict(),
            "in_dim": int(data.x_train.shape[1]),
            "hidden": int(p["hidden"]),
            "depth": int(p["depth"]),
            "x_mean": self.x_mean_,
            "x_std": self.x_std_,
            "std": float(self.std_),
            "split_digest": data.split_digest,
            "val_rows": info["val_rows"],
        }
        stats = {k: v for k, v in info.items() if k != "val_rows"}
        stats["homoscedastic_std"] = float(self.std_)
        ctx.log.info(
            "nn: %d epochs, val RMSE %.4g, %.1f s", info["epochs"], info["val_rmse"], info["fit_seconds"]
        )
        ctx.save_outputs(predictions, model, stats)

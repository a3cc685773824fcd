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

import time
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
from uqcal.methods.rio.holdout import apply_per_dataset, input_standardisation, load_holdout

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
    x_fit, y_fit, x_val, y_val = x[fit_rows], y[fit_rows], x[val_rows], y[val_rows]

    net = build_network(x.shape[1], hidden, depth).to(device)
    opt = torch.optim.RMSprop(net.parameters(), lr=lr, alpha=RMSPROP_ALPHA, eps=RMSPROP_EPS)
    loss_fn = nn.MSELoss()
    best_val, best_state, since_best, epochs_run = np.inf, None, 0, 0
    start = time.perf_counter()
    epochs = range(max_epochs) if progress is None else progress(range(max_epochs), max_epochs, "nn epochs")
    for _ in epochs:
        net.train()
        perm = torch.as_tensor(rng.permutation(len(fit_rows)), device=device)
        for s in range(0, len(fit_rows), batch_size):
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
    net.eval()
    with torch.no_grad():
        val_rmse = float(torch.sqrt(loss_fn(net(x_val), y_val)))
    info = {
        "fit_seconds": time.perf_counter() - start,
        "epochs": epochs_run,
        "best_val_mse": best_val,
        "val_rmse": val_rmse,
        "val_rows": val_rows.tolist(),
    }
    return net, info


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
        p = self.params
        self.x_mean_, self.x_std_ = input_standardisation(X)
        self.net_, self.fit_info_ = train_network(
            self.standardise(X),
            y,
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
        self.std_ = max(self.fit_info_["val_rmse"], 1e-12)
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
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        self.runtime = ctx.runtime
        self.params = apply_per_dataset(self.params, ctx.dataset, self.defaults)
        data = load_holdout(ctx)
        prediction = self.fit(data.x_train, data.y_train).predict_proba(data.x_test)
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

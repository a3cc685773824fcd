"""Episode tensors, the shared meta-training loop and the estimator base class of the `metareg` family.

Targets and features are standardised with the meta-training tasks' statistics (see docs/metareg.md);
every prediction and metric of this family is in those standardised units.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch._dynamo  # noqa: F401  (an optimiser's first step imports it; here, before any timer: core/numerics.py)
from torch import nn

from uqcal.methods.api import ParameterError, RunContext, Runtime
from uqcal.methods.estimator import Method
from uqcal.methods.metareg.predictive import from_standardised
from uqcal.methods.metareg.tasks import choose_tasks, features, load_arrays, predictions_frame, split_arrays, targets

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def feedforward(
    in_dim: int, out_dim: int, hidden: int = 32, layers: int = 3, dropout: float = 0.0
) -> nn.Sequential:
    """``layers`` linear layers with ReLU between them (Sec. 5.3: g has 3 layers, mu and baselines 4)."""
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
    modules: list[nn.Module] = []
    for i in range(layers):
        modules.append(nn.Linear(dims[i], dims[i + 1]))
        if i < layers - 1:
            modules.append(nn.ReLU())
            if dropout > 0:
                modules.append(nn.Dropout(dropout))
    return nn.Sequential(*modules)


@dataclass
class Episodes:
    """A batch of episodes: support (xs, ys) and query (xq, yq), leading dimension = task. ``yq`` is None for
    episodes whose query targets are unknown (prediction)."""

    xs: torch.Tensor  # (B, S, D)
    ys: torch.Tensor  # (B, S)
    xq: torch.Tensor  # (B, Q, D)
    yq: torch.Tensor | None = None  # (B, Q)

    def __len__(self) -> int:
        return self.xs.shape[0]

    def __getitem__(self, index) -> Episodes:
        return Episodes(self.xs[index], self.ys[index], self.xq[index], None if self.yq is None else self.yq[index])


class EpisodeData:
    """Standardised tensors for meta-training: the meta-training tasks, padded to one width, and the fixed
    validation episodes (``val``; None without them). Features and targets are standardised with the
    meta-training tasks' statistics (no peeking at validation or test tasks; docs/metareg.md).

    ``EpisodeData(X, y, task, split)`` builds it from a split file's contract (tests, benchmarks; it also holds
    the ``test`` episodes); ``EpisodeData.from_tasks`` from arrays (what ``fit`` uses).

    Parameters
    ----------
    X : array_like of shape (N, D)
        Features of every row, original units.
    y : array_like of shape (N,)
        Targets of every row, original units.
    task : array_like of shape (N,)
        The task of each row.
    split : dict
        A metareg split file's contract: the meta-training tasks, the validation and test episodes and their
        support and query sizes.
    max_train_tasks : int or None, default None
        Keep a random subset of this many meta-training tasks (Fig. 5); None keeps all.
    rng : numpy.random.Generator or None, default None
        The draw of that subset (None: seed 0).
    device : str or torch.device, default "cpu"
        Where the tensors live.
    dtype : torch.dtype, default torch.float64
        The tensors' floating type.
    """

    def __init__(self, X: ArrayLike, y: ArrayLike, task: ArrayLike, split: dict, max_train_tasks: int | None = None,
                 rng: np.random.Generator | None = None, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float64):
        arrays = split_arrays(X, y, task, split)
        keep = choose_tasks(len(arrays["tasks"]), max_train_tasks, rng)
        self._build([arrays["tasks"][i] for i in keep], arrays["validation"], arrays["n_support"],
                    arrays["n_query"], device, dtype, [arrays["names"][i] for i in keep])
        self.test = self.episodes(arrays["test"])
        self.test_tasks = arrays["test_tasks"]

    @classmethod
    def from_tasks(cls, tasks, validation=None, *, n_support: int, n_query: int, device="cpu",
                   dtype=torch.float64) -> EpisodeData:
        """``tasks``: [(X_t (N_t, D), y_t (N_t,))], each with at least ``n_support + n_query`` rows;
        ``validation``: [(X_support, y_support, X_query, y_query)] or None; original units."""
        data = cls.__new__(cls)
        data._build(tasks, validation, n_support, n_query, device, dtype, [str(i) for i in range(len(tasks))])
        return data

    def _build(self, tasks, validation, n_support, n_query, device, dtype, names):
        if not tasks:
            raise ValueError("tasks is empty: meta-training needs at least one task")
        self.n_support, self.n_query = int(n_support), int(n_query)
        arrays = []
        for i, (X_t, y_t) in enumerate(tasks):
            X_t = features(X_t, f"tasks[{i}] X")
            arrays.append((X_t, targets(y_t, len(X_t), f"tasks[{i}] y")))
        widths = {a[0].shape[1] for a in arrays}
        if len(widths) != 1:
            raise ValueError(f"the tasks' features have different numbers of columns: {sorted(widths)}")
        needed = self.n_support + self.n_query
        too_small = [n for n, a in zip(names, arrays, strict=True) if len(a[1]) < needed]
        if too_small:
            raise ValueError(f"meta-training tasks with fewer than N_S + N_Q = {needed} rows: {too_small[:5]}")
        X_train = np.concatenate([a[0] for a in arrays])
        y_train = np.concatenate([a[1] for a in arrays])
        # Standardise with meta-training statistics only (no peeking at val/test tasks).
        self.x_mean = X_train.mean(0)
        self.x_std = np.where(X_train.std(0) > 0, X_train.std(0), 1.0)
        self.y_mean = float(y_train.mean())
        self.y_std = float(y_train.std()) or 1.0
        self.dtype, self.device = dtype, torch.device(device)
        self.train_tasks = list(names)
        self.n_features = X_train.shape[1]
        counts = np.array([len(a[1]) for a in arrays])
        width = counts.max()
        padded_X = np.zeros((len(arrays), width, self.n_features))
        padded_y = np.zeros((len(arrays), width))  # padding: never drawn (train_counts)
        for i, (X_t, y_t) in enumerate(arrays):
            padded_X[i, : len(y_t)], padded_y[i, : len(y_t)] = self.standardise_x(X_t), self.standardise_y(y_t)
        self.train_counts = torch.as_tensor(counts, device=self.device)
        self.train_X = self._tensor(padded_X)
        self.train_y = self._tensor(padded_y)
        self.pooled_X, self.pooled_y = X_train, y_train
        self.val = self.episodes(validation) if validation else None

    def standardise_x(self, X: np.ndarray) -> np.ndarray:
        """Features standardised with the meta-training tasks' statistics.

        Parameters
        ----------
        X : numpy.ndarray of shape (..., D)
            Features, original units.

        Returns
        -------
        numpy.ndarray
            (X - x_mean) / x_std per column, of X's shape.
        """
        return (X - self.x_mean) / self.x_std

    def standardise_y(self, y: np.ndarray) -> np.ndarray:
        """Targets standardised with the meta-training tasks' statistics.

        Parameters
        ----------
        y : numpy.ndarray
            Targets, original units.

        Returns
        -------
        numpy.ndarray
            (y - y_mean) / y_std, of y's shape.
        """
        return (y - self.y_mean) / self.y_std

    def _tensor(self, array) -> torch.Tensor:
        return torch.as_tensor(np.asarray(array), dtype=self.dtype, device=self.device)

    def episodes(self, listing: Sequence[tuple]) -> Episodes:
        """[(X_support, y_support, X_query[, y_query])] of equal sizes, original units -> standardised Episodes.

        Parameters
        ----------
        listing : sequence of tuple
            Episodes ``(X_support (S, D), y_support (S,), X_query (Q, D)[, y_query (Q,)])``, all of one S and Q.

        Returns
        -------
        Episodes
            The batch, standardised, leading dimension = episode (``yq`` None without query targets).
        """
        if not listing:
            raise ValueError("metareg: an empty episode list")
        columns = list(zip(*listing, strict=True))
        xs = self.standardise_x(np.stack([features(x, "X_support") for x in columns[0]]))
        ys = self.standardise_y(np.stack([np.asarray(v, dtype=np.float64) for v in columns[1]]))
        xq = self.standardise_x(np.stack([features(x, "X_query") for x in columns[2]]))
        yq = self.standardise_y(np.stack([np.asarray(v, dtype=np.float64) for v in columns[3]])) \
            if len(columns) > 3 else None
        return Episodes(self._tensor(xs), self._tensor(ys), self._tensor(xq), None if yq is None else self._tensor(yq))

    def sample(self, task_index: torch.Tensor, n_support: int, n_query: int, generator: torch.Generator) -> Episodes:
        """Alg. 1 lines 3-4 for a batch of tasks at once: disjoint random support/query sets per task.

        Parameters
        ----------
        task_index : torch.Tensor of shape (B,)
            The meta-training tasks of the batch (indices, may repeat).
        n_support, n_query : int
            N_S and N_Q.
        generator : torch.Generator
            A CPU generator of the draws.

        Returns
        -------
        Episodes
            B episodes, support (B, N_S) and query (B, N_Q) rows of each task, standardised.
        """
        counts = self.train_counts[task_index]
        width = self.train_X.shape[1]
        keys = torch.rand(len(task_index), width, generator=generator, dtype=torch.float64).to(self.device)
        keys = keys.masked_fill(
            torch.arange(width, device=self.device) >= counts[:, None], 2.0
        )  # padding last
        # The n smallest keys in ascending order: what argsort(-1)[:, :n] gives for distinct keys (random
        # doubles; the padding's equal 2.0 keys are never among them), at O(width) instead of a full sort.
        chosen = keys.topk(n_support + n_query, -1, largest=False, sorted=True).indices
        X = self.train_X[task_index[:, None], chosen]
        y = self.train_y[task_index[:, None], chosen]
        return Episodes(X[:, :n_support], y[:, :n_support], X[:, n_support:], y[:, n_support:])

    def pooled(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The meta-training tasks' rows, concatenated in task order (standardised).

        Returns
        -------
        tuple of torch.Tensor
            Features (N, D) and targets (N,).
        """
        return self._tensor(self.standardise_x(self.pooled_X)), self._tensor(self.standardise_y(self.pooled_y))


def calibration_loss_per_episode(pit: torch.Tensor) -> torch.Tensor:
    """Eq. (10) per episode: mean_n |p_(n) - n/N_Q| over each task's sorted query CDF values, shape (B,)."""
    n = pit.shape[-1]
    levels = torch.arange(1, n + 1, dtype=pit.dtype, device=pit.device) / n
    return (pit.sort(-1).values - levels).abs().mean(-1)


def sorted_calibration_loss(pit: torch.Tensor) -> torch.Tensor:
    """Eq. (10) averaged over the tasks of the batch."""
    return calibration_loss_per_episode(pit).mean()


def gaussian_nll_per_episode(y, mean, var) -> torch.Tensor:
    """Mean negative log-likelihood of each episode's query points, shape (B,)."""
    return 0.5 * (torch.log(2 * math.pi * var) + (y - mean) ** 2 / var).mean(-1)


class EarlyStopping:
    """When to stop meta-training, counted in Adam steps (not epochs, whose length depends on the number
    of meta-training tasks), on a criterion that averages out validation noise (docs/metareg.md, "Early
    stopping"): the meta-validation loss is an exponential moving average over checks (``smoothing`` is
    the weight of the previous average; 0 = the raw value), no stop before ``min_steps``, stop once the
    average has not improved for ``patience`` steps. The best state is the one at the smoothed
    criterion's minimum. The same rule serves every early-stopped metareg method."""

    def __init__(self, eval_every: int, patience: int, min_steps: int = 0, smoothing: float = 0.0):
        if eval_every < 1 or patience < 1 or min_steps < 0:
            raise ValueError(
                f"early stopping needs eval_every >= 1, patience >= 1, min_steps >= 0; got "
                f"{eval_every}, {patience}, {min_steps}"
            )
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"val_smoothing must be in [0, 1), got {smoothing}")
        self.eval_every, self.patience, self.min_steps, self.smoothing = eval_every, patience, min_steps, smoothing
        self.smoothed: float | None = None
        self.best, self.best_step, self.last_check = math.inf, 0, 0
        self.best_state: dict | None = None
        self.curve: list[list[float]] = []  # [step, raw criterion, smoothed criterion] at every check

    def due(self, step: int) -> bool:
        return step - self.last_check >= self.eval_every

    def update(self, step: int, value: float, state: dict) -> bool:
        """Record the finite criterion at ``step`` (``state``: the model's state_dict then); True = stop."""
        self.last_check = step
        a = self.smoothing
        self.smoothed = value if self.smoothed is None else a * self.smoothed + (1.0 - a) * value
        self.curve.append([step, value, self.smoothed])
        if self.smoothed < self.best - 1e-6:
            self.best, self.best_step, self.best_state = self.smoothed, step, copy.deepcopy(state)
        return step >= self.min_steps and step - self.best_step >= self.patience

    def state_dict(self) -> dict:
        return dict(self.__dict__)

    def load_state_dict(self, state: dict) -> None:
        self.__dict__.update(state)


def early_stopping(params: dict) -> EarlyStopping:
    return EarlyStopping(
        int(params["eval_every"]), int(params["patience"]), int(params.get("min_steps", 0)),
        float(params.get("val_smoothing", 0.0)),
    )


def meta_train(
    model: nn.Module,
    loss_fn,
    data: EpisodeData,
    params: dict,
    hooks,
    generator: torch.Generator,
    monitor=None,
) -> dict:
    """Alg. 1 with Adam, 32 tasks a batch, one epoch = one pass over the meta-training tasks (ragged last
    batch dropped), at most ``epochs`` epochs, and ``EarlyStopping`` on the meta-validation episodes' loss
    (checked at the end of an epoch once ``eval_every`` Adam steps have passed since the last check); without
    validation episodes (``data.val`` None) all epochs run and the last state is kept.
    ``hooks``: None, or what reports and resumes the loop (``FitHooks``): ``progress(...)``, ``log``, ``name``
    and ``checkpoint()`` (a uqcal.core.resume.TrainingCheckpoint or None).
    ``monitor(step, model)``, if given, is called at every check (e.g. to record extra validation curves)."""
    optimiser = torch.optim.Adam(model.parameters(), lr=params["lr"])
    n_tasks = len(data.train_tasks)
    batch = min(params["batch_tasks"], n_tasks)
    stopper = early_stopping(params)
    stopper.best_state = copy.deepcopy(model.state_dict())
    steps, epochs_run, elapsed, first_epoch = 0, 0, 0.0, 0
    checkpoint = hooks.checkpoint() if hooks is not None else None
    state = checkpoint.load() if checkpoint is not None else None
    if state is not None:  # resume exactly where an interrupted run saved: weights, Adam moments, RNG streams
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        if "cuda_rng" in state and data.device.type == "cuda":  # dropout draws on the device
            torch.cuda.set_rng_state(state["cuda_rng"], data.device)
        stopper.load_state_dict(state["stopper"])
        first_epoch = epochs_run = state["epoch"]
        steps, elapsed = state["steps"], state["elapsed"]
    epochs = range(first_epoch, params["epochs"])
    iterator = hooks.progress(epochs, total=len(epochs), desc="meta-train") if hooks is not None else epochs
    start = time.perf_counter()
    stopped = state is not None and state.get("stopped", False)
    failures = state.get("fit_failures", 0) if state is not None else 0
    for epoch in [] if stopped else iterator:
        model.train()
        order = torch.randperm(n_tasks, generator=generator).to(data.device)
        for first in range(0, n_tasks - batch + 1, batch):  # drop the ragged last batch
            episodes = data.sample(order[first : first + batch], data.n_support, data.n_query, generator)
            optimiser.zero_grad()
            loss = loss_fn(model, episodes)
            if not torch.isfinite(loss):  # never step on a broken loss; the best state is restored below
                failures, stopped = failures + 1, True
                break
            loss.backward()
            optimiser.step()
            steps += 1
        epochs_run = epoch + 1
        if not stopped and data.val is not None and (stopper.due(steps) or epoch + 1 == params["epochs"]):
            model.eval()
            with torch.no_grad():
                val = float(loss_fn(model, data.val))
            if math.isfinite(val):
                stopped = stopper.update(steps, val, model.state_dict())
            else:
                failures, stopped = failures + 1, True
            if monitor is not None:
                monitor(steps, model)
            if checkpoint is not None:  # at validation points, so a resumed run replays the same checks
                rngs = {"torch_rng": torch.get_rng_state()}
                if data.device.type == "cuda":
                    rngs["cuda_rng"] = torch.cuda.get_rng_state(data.device)
                checkpoint.save({
                    "epoch": epochs_run, "steps": steps, "model": model.state_dict(),
                    "optimiser": optimiser.state_dict(), "generator": generator.get_state(), **rngs,
                    "stopper": stopper.state_dict(), "stopped": stopped,
                    "fit_failures": failures, "elapsed": elapsed + time.perf_counter() - start,
                })
        if stopped:
            break
    if failures:
        name = getattr(hooks, "name", "meta_train")
        log = getattr(hooks, "log", None) or logging.getLogger(__name__)
        log.warning("%s: non-finite loss at step %d; training stopped, the best state (step %d) restored",
                    name, steps, stopper.best_step)
    if data.val is not None or failures:
        model.load_state_dict(stopper.best_state)
    model.eval()
    return {
        "fit_failures": failures,
        "train_seconds": elapsed + time.perf_counter() - start,
        "epochs_run": epochs_run,
        "steps_run": steps,
        "best_step": stopper.best_step,
        "best_val_loss": stopper.best,
        "val_curve": stopper.curve,
    }


@dataclass
class FitHooks:
    """What reports and resumes a training loop (``meta_train``): the estimator's Runtime (progress, log, name)
    and, on the pipeline path, the run's checkpoint."""

    runtime: Runtime
    training_checkpoint: object | None = None

    @property
    def log(self) -> logging.Logger:
        return self.runtime.log

    @property
    def name(self) -> str:
        return f"{self.runtime.name} seed {self.runtime.seed}"

    def progress(self, iterable, total=None, desc=""):
        return self.runtime.progress(iterable, total=total, desc=desc)

    def checkpoint(self):
        return self.training_checkpoint


# Algorithm 1's support and query sizes when neither fit's arguments nor validation episodes give them: the
# paper's smallest N_S and its N_Q (Sec. 5.3).
DEFAULT_N_SUPPORT, DEFAULT_N_QUERY = 10, 30


class MetaRegMethod(Method):
    """A meta-regression estimator (Iwata & Kumagai's setting): ``fit(tasks)`` meta-trains on tasks
    ``[(X_t, y_t)]``; ``predict(X_support, y_support, X_query)`` adapts to one new task's support set and returns
    the predictive distribution of its query points, in the targets' original units. Features and targets are
    standardised inside with the meta-training tasks' statistics.

    ``train(ctx)`` is the pipeline's path through the same ``fit`` and ``predict_tasks``."""

    defaults: dict = {}
    # String parameters and their accepted values (checked by the constructor, naming the key).
    choices: dict[str, tuple[str, ...]] = {}
    # Set by ``train``: where an interrupted pipeline run's meta-training resumes (uqcal.core.resume).
    checkpoint = None

    def __init__(self, params: dict[str, Any] | None = None, /, *,
                 random_state: int | np.random.Generator | np.random.RandomState | None = None,
                 device: str | torch.device = "cpu", **kwargs):
        super().__init__(params, random_state=random_state, device=device, **kwargs)
        for key, allowed in self.choices.items():
            if self.params[key] not in allowed:
                raise ParameterError(f"{type(self).__name__}.{key}: expected one of {list(allowed)}, got "
                                     f"{self.params[key]!r}")

    # ---- the estimator protocol ------------------------------------------------------------------------
    def fit(self, tasks, validation_tasks=None, *, n_support: int | None = None, n_query: int | None = None):
        """Meta-train on ``tasks``: a sequence of ``(X_t, y_t)``, features (N_t, D) and targets (N_t,) of one
        meta-training task each (original units; every task needs at least n_support + n_query rows).

        ``validation_tasks``: fixed meta-validation episodes ``(X_support, y_support, X_query, y_query)`` for
        early stopping; None trains every epoch and keeps the last state. ``n_support`` / ``n_query``: the
        support and query sizes of the training episodes (Alg. 1's N_S, N_Q); None takes the validation
        episodes' sizes, else 10 and 30 (Sec. 5.3). Random draws (the ``max_train_tasks`` subset, weights,
        episodes) come from ``self.runtime``'s streams. Returns self."""
        tasks = list(tasks)
        validation = list(validation_tasks) if validation_tasks else None
        if n_support is None:
            n_support = len(validation[0][1]) if validation else DEFAULT_N_SUPPORT
        if n_query is None:
            n_query = len(validation[0][3]) if validation else DEFAULT_N_QUERY
        data, generator = self._fit_data(tasks, validation, n_support, n_query)
        self.data_ = data
        self.model_, self.fit_stats_ = self._train_model(data, generator)
        self.fitted_ = True
        return self

    def _fit_data(self, tasks, validation, n_support: int, n_query: int) -> tuple[EpisodeData, torch.Generator]:
        """``fit``'s draws before training, in its order: the task subset, then the seed of torch's global stream
        (initial weights) and of the episode generator."""
        self.runtime.seed_everything()
        keep = choose_tasks(len(tasks), self.params.get("max_train_tasks"), self.runtime.rng(1))
        data = EpisodeData.from_tasks([tasks[i] for i in keep], validation, n_support=n_support, n_query=n_query,
                                      device=self.runtime.device)
        seed = int(self.runtime.rng(2).integers(0, 2**31 - 1))
        torch.manual_seed(seed)
        generator = torch.Generator(device="cpu").manual_seed(seed)  # CPU draws, moved: one stream per seed
        return data, generator

    def predict(self, X_support, y_support, X_query):
        """The predictive distribution of the query points ``X_query`` (Q, D) of one task, adapted to its
        support set ``X_support`` (S, D), ``y_support`` (S,); original units."""
        return self.predict_tasks([(X_support, y_support, X_query)])[0]

    def predict_tasks(self, episodes) -> list:
        """``predict`` for many episodes ``(X_support, y_support, X_query)`` at once (batched where their sizes
        agree): one predictive object per episode."""
        self.check_fitted()
        episodes = [tuple(e[:3]) for e in episodes]
        shapes = {(np.shape(e[0])[0], np.shape(e[2])[0]) for e in episodes}
        if len(shapes) > 1:
            return [p for e in episodes for p in self.predict_tasks([e])]
        outputs = self._predict_episodes(self.model_, self.data_.episodes(episodes))
        return self._predictives(outputs, self.data_.y_mean, self.data_.y_std)

    # ---- what each method supplies ---------------------------------------------------------------------
    def _train_model(self, data: EpisodeData, generator: torch.Generator) -> tuple[object, dict]:
        raise NotImplementedError

    def _predict_episodes(self, model, episodes: Episodes) -> dict:
        """Standardised outputs for a batch of episodes (``predictive.from_standardised``)."""
        raise NotImplementedError

    def _predictives(self, outputs: dict, y_mean: float, y_std: float) -> list:
        host = {k: v.detach().cpu().numpy() if torch.is_tensor(v) else v for k, v in outputs.items()}
        return from_standardised(host, y_mean, y_std)

    def extra_stats(self, model: object) -> dict:
        """Fitted quantities of ``model`` worth recording (learned noise, scales, ...).

        Parameters
        ----------
        model : object
            The meta-trained model (``model_``).

        Returns
        -------
        dict
            Statistic name to value, added to the run's train_stats (none by default).
        """
        return {}

    def _hooks(self) -> FitHooks:
        return FitHooks(self.runtime, self.checkpoint)

    # ---- the pipeline's path ---------------------------------------------------------------------------
    def train(self, ctx: RunContext) -> None:
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        self.runtime, self.checkpoint = ctx.runtime, ctx.checkpoint()
        arrays = self._run_arrays(ctx)
        self.fit(arrays["tasks"], arrays["validation"], n_support=arrays["n_support"], n_query=arrays["n_query"])
        self._save_run(ctx, arrays)

    @staticmethod
    def _run_arrays(ctx: RunContext) -> dict:
        arrays = load_arrays(ctx)
        if arrays["n_support"] is None or not arrays["validation"]:
            raise ValueError(f"{ctx.split_path}: a metareg split needs n_support and val_episodes")
        return arrays

    def _save_run(self, ctx: RunContext, arrays: dict) -> None:
        """Predict the run's test episodes with the fitted model and save the run's outputs."""
        start = time.perf_counter()
        predictions = self.predict_tasks(arrays["test"])
        stats = {**self.fit_stats_, "predict_seconds_per_task": (time.perf_counter() - start) / len(predictions)}
        stats.update(self.extra_stats(self.model_))
        data = self.data_
        stats.update({"n_train_tasks": len(data.train_tasks), "y_mean": data.y_mean, "y_std": data.y_std})
        frame = predictions_frame(arrays["test_tasks"], [e[3] for e in arrays["test"]], predictions, data.y_mean,
                                  data.y_std)
        state = self.model_.state_dict() if isinstance(self.model_, nn.Module) else self.model_
        ctx.save_outputs(frame, {"state": state, "params": self.params}, stats)


class EpisodicMetaMethod(MetaRegMethod):
    """A meta-learner trained by ``meta_train`` on a per-episode-batch loss."""

    defaults = {
        "epochs": 1000,
        "lr": 1e-2,
        "batch_tasks": 32,
        # EarlyStopping in Adam steps, chosen from docs/experiments/metareg_stopping.py (docs/metareg.md, "Early
        # stopping"; with 10 validation episodes per task, split.val_episodes_per_task)
        "eval_every": 10,
        "patience": 300,
        "min_steps": 0,
        "val_smoothing": 0.0,
        "max_train_tasks": None,
        "hidden": 32,
    }

    def build(self, data: EpisodeData) -> nn.Module:
        """The method's model, before meta-training.

        Parameters
        ----------
        data : EpisodeData
            The meta-training data (its number of features sizes the networks).

        Returns
        -------
        torch.nn.Module
            The untrained model.
        """
        raise NotImplementedError

    def episode_losses(self, model: nn.Module, episodes: Episodes) -> torch.Tensor:
        """The training loss of each episode of the batch, shape (B,).

        Parameters
        ----------
        model : torch.nn.Module
            The model ``build`` made.
        episodes : Episodes
            A batch of B standardised episodes with query targets.

        Returns
        -------
        torch.Tensor of shape (B,)
            The loss of each episode (differentiable in the model's parameters).
        """
        raise NotImplementedError

    def loss(self, model, episodes: Episodes) -> torch.Tensor:
        return self.episode_losses(model, episodes).mean()

    def _train_model(self, data, generator):
        model = self.build(data).to(device=data.device, dtype=data.dtype)
        stats = meta_train(model, self.loss, data, self.params, self._hooks(), generator)
        return model, stats

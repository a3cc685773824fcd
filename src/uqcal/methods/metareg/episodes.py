"""Episode data and the shared meta-training loop of the `metareg` family.

Targets and features are standardised with the meta-training tasks' statistics (see docs/metareg.md);
every prediction and metric of this family is in those standardised units.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from uqcal.methods.api import Method, RunContext

QUANTILE_LEVELS = (0.025, 0.05, 0.16, 0.84, 0.95, 0.975)


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
    """A batch of episodes: support (xs, ys) and query (xq, yq), leading dimension = task."""

    xs: torch.Tensor  # (B, S, D)
    ys: torch.Tensor  # (B, S)
    xq: torch.Tensor  # (B, Q, D)
    yq: torch.Tensor  # (B, Q)

    def __len__(self) -> int:
        return self.xs.shape[0]

    def __getitem__(self, index) -> Episodes:
        return Episodes(self.xs[index], self.ys[index], self.xq[index], self.yq[index])


class EpisodeData:
    """Standardised tensors of one metareg split: padded meta-training tasks and fixed val/test episodes."""

    def __init__(
        self,
        X,
        y,
        task,
        split: dict,
        max_train_tasks: int | None = None,
        rng=None,
        device="cpu",
        dtype=torch.float64,
    ):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[:, None]
        y = np.asarray(y, dtype=np.float64)
        task = np.asarray(task)
        for key in ("tasks", "n_support", "val_episodes", "test_episodes"):
            if key not in split:
                raise KeyError(f"metareg split is missing {key!r}")
        self.n_support = int(split["n_support"])
        self.n_query = int(split.get("n_query", len(split["test_episodes"][0]["query"])))
        train_tasks = list(split["tasks"]["train"])
        if max_train_tasks is not None and max_train_tasks < len(train_tasks):
            if max_train_tasks < 1:
                raise ValueError(f"max_train_tasks must be >= 1, got {max_train_tasks}")
            order = (rng or np.random.default_rng(0)).permutation(len(train_tasks))
            train_tasks = [train_tasks[i] for i in sorted(order[:max_train_tasks])]
        task_str = task.astype(str)
        rows = [np.flatnonzero(task_str == str(t)) for t in train_tasks]
        needed = self.n_support + self.n_query
        too_small = [str(t) for t, r in zip(train_tasks, rows, strict=True) if len(r) < needed]
        if too_small:
            raise ValueError(f"meta-training tasks with fewer than N_S + N_Q rows: {too_small[:5]}")
        train_rows = np.concatenate(rows)
        # Standardise with meta-training statistics only (no peeking at val/test tasks).
        self.x_mean = X[train_rows].mean(0)
        self.x_std = np.where(X[train_rows].std(0) > 0, X[train_rows].std(0), 1.0)
        self.y_mean = float(y[train_rows].mean())
        self.y_std = float(y[train_rows].std()) or 1.0
        self.X = (X - self.x_mean) / self.x_std
        self.y = (y - self.y_mean) / self.y_std
        self.task = task
        self.dtype, self.device = dtype, torch.device(device)
        self.train_tasks = train_tasks
        self.n_features = X.shape[1]
        counts = np.array([len(r) for r in rows])
        width = counts.max()
        index = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            index[i, : len(r)] = r
        self.train_counts = torch.as_tensor(counts, device=self.device)
        self.train_X = self._tensor(self.X[index])
        self.train_y = self._tensor(self.y[index])
        self.train_rows = train_rows
        self.val = self.episodes(split["val_episodes"])
        self.test = self.episodes(split["test_episodes"])
        self.test_tasks = [e["task"] for e in split["test_episodes"]]

    def _tensor(self, array) -> torch.Tensor:
        return torch.as_tensor(np.asarray(array), dtype=self.dtype, device=self.device)

    def episodes(self, listing: list[dict]) -> Episodes:
        if not listing:
            raise ValueError("metareg split has an empty episode list")
        support = np.array([e["support"] for e in listing], dtype=np.int64)
        query = np.array([e["query"] for e in listing], dtype=np.int64)
        return Episodes(
            self._tensor(self.X[support]),
            self._tensor(self.y[support]),
            self._tensor(self.X[query]),
            self._tensor(self.y[query]),
        )

    def sample(self, task_index: torch.Tensor, n_support: int, n_query: int, generator) -> Episodes:
        """Alg. 1 lines 3-4 for a batch of tasks at once: disjoint random support/query sets per task."""
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
        return self._tensor(self.X[self.train_rows]), self._tensor(self.y[self.train_rows])


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
    ctx: RunContext | None,
    generator: torch.Generator,
    monitor=None,
) -> dict:
    """Alg. 1 with Adam, 32 tasks a batch, one epoch = one pass over the meta-training tasks (ragged last
    batch dropped), at most ``epochs`` epochs, and ``EarlyStopping`` on the meta-validation episodes' loss
    (checked at the end of an epoch once ``eval_every`` Adam steps have passed since the last check).
    ``monitor(step, model)``, if given, is called at every check (e.g. to record extra validation curves)."""
    optimiser = torch.optim.Adam(model.parameters(), lr=params["lr"])
    n_tasks = len(data.train_tasks)
    batch = min(params["batch_tasks"], n_tasks)
    stopper = early_stopping(params)
    stopper.best_state = copy.deepcopy(model.state_dict())
    steps, epochs_run, elapsed, first_epoch = 0, 0, 0.0, 0
    checkpoint = ctx.checkpoint() if ctx is not None else None
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
    iterator = ctx.progress(epochs, total=len(epochs), desc="meta-train") if ctx else epochs
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
        if not stopped and (stopper.due(steps) or epoch + 1 == params["epochs"]):
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
        name = f"{ctx.method} seed {ctx.seed}" if ctx is not None else "meta_train"
        log = ctx.log if ctx is not None else logging.getLogger(__name__)
        log.warning("%s: non-finite loss at step %d; training stopped, the best state (step %d) restored",
                    name, steps, stopper.best_step)
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


def predictions_frame(data: EpisodeData, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per meta-test query point: task, episode, y (standardised) and the method's columns."""
    n_episodes, n_query = data.test.yq.shape
    frame = {
        "task": np.repeat(np.asarray(data.test_tasks, dtype=str), n_query),
        "episode": np.repeat(np.arange(n_episodes), n_query),
        "y": data.test.yq.detach().cpu().numpy().reshape(-1),
    }
    for name, values in columns.items():
        values = np.asarray(values.detach().cpu() if torch.is_tensor(values) else values, dtype=np.float64)
        if values.shape != (n_episodes, n_query):
            raise ValueError(
                f"prediction column {name!r} has shape {values.shape}, want {(n_episodes, n_query)}"
            )
        frame[name] = values.reshape(-1)
    return pd.DataFrame(frame)


class MetaRegMethod(Method):
    """Shared driver: load + standardise the split, ``fit``, predict the meta-test episodes, save."""

    defaults: dict = {}

    def fit(
        self, data: EpisodeData, ctx: RunContext | None, generator: torch.Generator
    ) -> tuple[object, dict]:
        raise NotImplementedError

    def predict(self, model, episodes: Episodes) -> dict[str, torch.Tensor | np.ndarray]:
        raise NotImplementedError

    def extra_stats(self, model) -> dict:
        return {}

    def load(self, ctx: RunContext) -> EpisodeData:
        from uqcal.data.datasets import load_table

        # ctx.load_data() needs the full config; the CLI's job carries the dataset spec instead.
        table = load_table(ctx.dataset, spec=ctx.dataset_spec, raw_path=ctx.raw_path)
        if getattr(table, "task", None) is None:
            raise ValueError(f"dataset {ctx.dataset!r} has no task column; metareg needs multitask data")
        return EpisodeData(
            table.X,
            table.y,
            table.task,
            ctx.load_split(),
            max_train_tasks=self.params.get("max_train_tasks"),
            rng=ctx.rng(1),
            device=ctx.device,
        )

    def run(self, data: EpisodeData, ctx: RunContext | None = None, seed: int = 0):
        """Fit and predict; returns (predictions frame, model, stats). Usable without a RunContext."""
        torch.manual_seed(seed)
        generator = torch.Generator(device="cpu").manual_seed(seed)  # CPU draws, moved: one stream per seed
        model, stats = self.fit(data, ctx, generator)
        start = time.perf_counter()
        columns = self.predict(model, data.test)
        stats["predict_seconds_per_task"] = (time.perf_counter() - start) / len(data.test)
        stats.update(self.extra_stats(model))
        stats.update({"n_train_tasks": len(data.train_tasks), "y_mean": data.y_mean, "y_std": data.y_std})
        return predictions_frame(data, columns), model, stats

    def train(self, ctx: RunContext) -> None:
        torch.set_num_threads(int(ctx.config.get("torch_threads", 1) or 1))
        ctx.seed_everything()
        data = self.load(ctx)
        seed = int(ctx.rng(2).integers(0, 2**31 - 1))
        frame, model, stats = self.run(data, ctx, seed)
        state = model.state_dict() if isinstance(model, nn.Module) else model
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
        raise NotImplementedError

    def episode_losses(self, model, episodes: Episodes) -> torch.Tensor:
        """The training loss of each episode of the batch, shape (B,)."""
        raise NotImplementedError

    def loss(self, model, episodes: Episodes) -> torch.Tensor:
        return self.episode_losses(model, episodes).mean()

    def fit(self, data, ctx, generator):
        model = self.build(data).to(device=data.device, dtype=data.dtype)
        stats = meta_train(model, self.loss, data, self.params, ctx, generator)
        return model, stats

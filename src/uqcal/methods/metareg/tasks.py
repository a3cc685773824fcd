"""Meta-regression data as arrays (numpy only): tasks, episodes, a split file read into them, and the pipeline's
predictions frame built from predictive objects.

A task is ``(X_t, y_t)``: features (N_t, D) and targets (N_t,). An episode is ``(X_support, y_support, X_query)``
(plus ``y_query`` where the targets are known): the support set a method adapts to and the query points it predicts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from uqcal.methods.metareg.predictive import frame_columns


def features(X, where: str = "X") -> np.ndarray:
    """``X`` as a float64 (n, D) array (a 1-D array is one feature)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{where} must be 2-D (points x features), got shape {X.shape}")
    return X


def targets(y, n: int, where: str = "y") -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or len(y) != n:
        raise ValueError(f"{where} must be 1-D with one target per row of its features ({n}), got shape {y.shape}")
    return y


def choose_tasks(n_tasks: int, max_train_tasks: int | None, rng) -> list[int]:
    """Indices of the meta-training tasks kept: all, or a random subset of ``max_train_tasks`` (Fig. 5), in their
    original order."""
    if max_train_tasks is None or max_train_tasks >= n_tasks:
        return list(range(n_tasks))
    if max_train_tasks < 1:
        raise ValueError(f"max_train_tasks must be >= 1, got {max_train_tasks}")
    order = (rng or np.random.default_rng(0)).permutation(n_tasks)
    return sorted(int(i) for i in order[:max_train_tasks])


def split_arrays(X, y, task, split: dict) -> dict:
    """A metareg split file's tasks and episodes as arrays (docs/ARCHITECTURE.md, the split contract):
    ``tasks`` [(X_t, y_t)] of the meta-training tasks in the split's order, ``names`` their task names,
    ``validation`` and ``test`` [(X_support, y_support, X_query, y_query)] episodes, ``test_tasks`` the test
    episodes' task names, ``n_support`` and ``n_query``."""
    X, y, task = features(X), np.asarray(y, dtype=np.float64), np.asarray(task)
    for key in ("tasks", "test_episodes"):
        if key not in split:
            raise KeyError(f"metareg split is missing {key!r}")
    task_str = task.astype(str)
    names = list(split["tasks"]["train"])
    rows = [np.flatnonzero(task_str == str(t)) for t in names]

    def episodes(listing: list[dict]) -> list[tuple]:
        return [(X[e["support"]], y[e["support"]], X[e["query"]], y[e["query"]]) for e in listing]

    return {
        "tasks": [(X[r], y[r]) for r in rows],
        "names": [str(t) for t in names],
        "validation": episodes(split.get("val_episodes", [])),
        "test": episodes(split["test_episodes"]),
        "test_tasks": [e["task"] for e in split["test_episodes"]],
        "n_support": int(split["n_support"]) if "n_support" in split else None,
        "n_query": int(split.get("n_query", len(split["test_episodes"][0]["query"]))),
    }


def load_arrays(ctx) -> dict:
    """The run's dataset (it must have a task column) and split file as ``split_arrays`` gives them."""
    from uqcal.data.datasets import load_table

    # ctx.load_data() needs the full config; the CLI's job carries the dataset spec instead.
    table = load_table(ctx.dataset, spec=ctx.dataset_spec, raw_path=ctx.raw_path)
    if getattr(table, "task", None) is None:
        raise ValueError(f"dataset {ctx.dataset!r} has no task column; metareg needs multitask data")
    return split_arrays(table.X, table.y, table.task, ctx.load_split())


def predictions_frame(test_tasks, y_query, predictions, y_mean: float, y_std: float) -> pd.DataFrame:
    """One row per meta-test query point: task, episode, y and the prediction's columns, standardised with the
    meta-training statistics (``y_mean``, ``y_std``): every prediction and metric of this family is in those
    units (docs/metareg.md). ``y_query``: each episode's query targets, original units."""
    parts = []
    for e, (task, y, prediction) in enumerate(zip(test_tasks, y_query, predictions, strict=True)):
        y = np.asarray(y, dtype=np.float64)
        parts.append({"task": np.full(len(y), str(task)), "episode": np.full(len(y), e),
                      "y": (y - y_mean) / y_std, **frame_columns(prediction, y, y_mean, y_std)})
    return pd.DataFrame({name: np.concatenate([part[name] for part in parts]) for name in parts[0]})

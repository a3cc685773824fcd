"""Synthetic multi-task regression shaped like the paper's data (for tests and benchmarks only)."""

from __future__ import annotations

import numpy as np


def sine_tasks(n_tasks: int, n_per_task: int, n_features: int = 1, seed: int = 0, noise: float = 0.1):
    """Task t: y = a_t sin(w_t . x + phi_t) + heteroscedastic-ish noise; x ~ U(-3, 3)^D."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n_tasks * n_per_task, n_features))
    task = np.repeat(np.arange(n_tasks), n_per_task)
    amplitude = rng.uniform(0.5, 2.0, n_tasks)[task]
    frequency = rng.uniform(0.5, 1.5, (n_tasks, n_features))[task]
    phase = rng.uniform(0, np.pi, n_tasks)[task]
    signal = amplitude * np.sin((frequency * X).sum(1) + phase)
    y = signal + noise * (1 + 0.5 * np.abs(X[:, 0])) * rng.standard_t(5, size=len(task))
    return X, y, task


def episode_split(
    task,
    n_support: int,
    n_query: int = 30,
    fractions=(0.6, 0.2, 0.2),
    seed: int = 0,
    episodes_per_task: int = 1,
) -> dict:
    """A split dict in the metareg contract (docs/ARCHITECTURE.md) for tests and benchmarks."""
    rng = np.random.default_rng(seed)
    tasks = np.unique(task)
    order = rng.permutation(tasks)
    n_train = int(round(fractions[0] * len(tasks)))
    n_val = int(round(fractions[1] * len(tasks)))
    groups = {
        "train": order[:n_train],
        "val": order[n_train : n_train + n_val],
        "test": order[n_train + n_val :],
    }

    def episodes(names):
        out = []
        for t in names:
            rows = np.flatnonzero(task == t)
            for _ in range(episodes_per_task):
                chosen = rng.choice(rows, n_support + n_query, replace=False)
                out.append(
                    {
                        "task": str(t),
                        "support": chosen[:n_support].tolist(),
                        "query": chosen[n_support:].tolist(),
                    }
                )
        return out

    return {
        "tasks": {k: [str(t) for t in v] for k, v in groups.items()},
        "n_support": n_support,
        "n_query": n_query,
        "val_episodes": episodes(groups["val"]),
        "test_episodes": episodes(groups["test"]),
    }

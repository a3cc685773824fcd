"""Task splits and episode samplers, deterministic given (dataset, setting parameters, seed).

Formats are documented in docs/ARCHITECTURE.md. Row indices always index ``Table.frame``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uqcal.data import validate
from uqcal.data.datasets import Table
from uqcal.data.validate import DataValidationError, check_partition, constant_task_problem, partition_sizes


def _rng(*parts) -> np.random.Generator:
    keys = [p if isinstance(p, int) else zlib.crc32(str(p).encode()) for p in parts]
    return np.random.default_rng(keys)


def _fractions(values: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.shape != (3,) or np.any(arr < 0) or not np.isclose(arr.sum(), 1.0):
        raise DataValidationError(f"{name} must be three non-negative fractions summing to 1, got {list(values)}")
    return arr


def _partition(items: np.ndarray, fractions: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle, then cut by rounded fractions; a part with a positive fraction that rounding left empty
    gets one item from the largest part (uqcal.data.validate.partition_sizes), so three tasks split
    60/20/20 give 1/1/1 rather than 2/1/0."""
    items = items[rng.permutation(len(items))]
    n_train, n_val, _ = partition_sizes(len(items), fractions)
    return [items[:n_train], items[n_train : n_train + n_val], items[n_train + n_val :]]


# ------------------------------------------------------------------------------------- multi-task
def task_rows(table: Table) -> dict:
    tasks = table.task
    order = np.argsort(tasks, kind="stable")
    uniq, starts = np.unique(tasks[order], return_index=True)
    bounds = list(starts) + [len(order)]
    return {_plain(t): order[bounds[i] : bounds[i + 1]] for i, t in enumerate(uniq)}


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def sample_task_episodes(
    rows_by_task: dict,
    tasks: Sequence,
    n_support: int,
    n_query: int,
    n_episodes: int,
    rng: np.random.Generator,
) -> tuple[list, np.ndarray, np.ndarray]:
    """Sample ``n_episodes`` (task, support, query) triples; support and query are disjoint rows."""
    chosen = rng.choice(len(tasks), size=n_episodes, replace=n_episodes > len(tasks))
    support = np.empty((n_episodes, n_support), dtype=np.int64)
    query = np.empty((n_episodes, n_query), dtype=np.int64)
    episode_tasks = []
    for e, t_idx in enumerate(chosen):
        task = tasks[t_idx]
        rows = rows_by_task[task]
        if len(rows) < n_support + n_query:
            raise ValueError(f"task {task!r} has {len(rows)} rows < N_S + N_Q = {n_support + n_query}")
        picked = rng.choice(rows, size=n_support + n_query, replace=False)
        support[e], query[e] = picked[:n_support], picked[n_support:]
        episode_tasks.append(task)
    return episode_tasks, support, query


def multitask_split(table: Table, params: dict, seed: int) -> dict:
    n_support, n_query = int(params["n_support"]), int(params.get("n_query", 30))
    min_size = int(params.get("min_task_size", n_support + n_query))
    if min_size < n_support + n_query:  # uqcal validate-config reports this before any job runs
        raise DataValidationError(f"split.min_task_size={min_size} < n_support + n_query = {n_support + n_query}")
    rows = task_rows(table)
    eligible = np.array(sorted(t for t, r in rows.items() if len(r) >= min_size), dtype=object)
    # After min_task_size: a constant task that the split drops anyway does not refuse the dataset.
    y = table.y
    problem = constant_task_problem(table.name, table.spec.get("task", "task"), {t: y[rows[t]] for t in eligible},
                                    min_size, len(rows))
    if problem:
        raise DataValidationError(problem)
    fractions = _fractions(params.get("task_fractions", [0.6, 0.2, 0.2]), "split.task_fractions")
    sizes = sorted((len(r) for r in rows.values()), reverse=True)
    check_partition(
        table.name, f"tasks (tasks with >= split.min_task_size = {min_size} rows, of {len(rows)}; the largest "
        f"have {sizes[:5]} rows)", len(eligible), fractions, 1,
        "Lower split.min_task_size (it must stay >= n_support + n_query), lower n_support / n_query, or use a "
        "dataset with more tasks.",
    )
    # The task split depends on the seed only, so every N_S setting shares it.
    train, val, test = _partition(eligible, fractions, _rng(table.name, "tasks", seed))

    def fixed_episodes(tasks: np.ndarray, per_task: int, stream: str) -> list[dict]:
        # One random stream each for val and test, so the validation protocol never changes the test episodes.
        episode_rng = _rng(table.name, stream, n_support, seed)
        episodes = []
        for task in tasks:
            for _ in range(per_task):
                _, s, q = sample_task_episodes(rows, [task], n_support, n_query, 1, episode_rng)
                episodes.append({"task": _plain(task), "support": s[0].tolist(), "query": q[0].tolist()})
        return episodes

    return {
        "tasks": {"train": [_plain(t) for t in train], "val": [_plain(t) for t in val],
                  "test": [_plain(t) for t in test]},
        "dropped_tasks": sorted(_plain(t) for t, r in rows.items() if len(r) < min_size),
        "n_support": n_support,
        "n_query": n_query,
        "val_episodes": fixed_episodes(val, int(params.get("val_episodes_per_task", 1)), "val_episodes"),
        "test_episodes": fixed_episodes(test, int(params.get("test_episodes_per_task", 1)), "test_episodes"),
    }


# ----------------------------------------------------------------------------------------- single task
def _standardisation(table: Table, train: np.ndarray) -> dict:
    X, y = table.X[train], table.y[train]
    x_mean, x_std = _mean_std(X)
    y_mean, y_std = _mean_std(y)
    return {
        "x_mean": x_mean.tolist(),
        "x_std": np.where(x_std > 0, x_std, 1.0).tolist(),  # constant columns stay unscaled
        "y_mean": float(y_mean),
        "y_std": float(y_std) if y_std > 0 else 1.0,
    }


def _mean_std(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations, overflow-safe: where the plain computation overflows (a value near
    1e308 squared), it is done again on the column divided by its largest magnitude, and scaled back."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean, std = values.mean(axis=0), values.std(axis=0)
        if np.all(np.isfinite(mean)) and np.all(np.isfinite(std)):
            return mean, std
        scale = np.max(np.abs(values), axis=0)
        scale = np.where((scale > 0) & np.isfinite(scale), scale, 1.0)
        scaled = values / scale
        return scaled.mean(axis=0) * scale, scaled.std(axis=0) * scale


def holdout_split(table: Table, params: dict, seed: int) -> dict:
    fixed = table.spec.get("fixed_split")
    n = len(table.frame)
    if fixed:  # e.g. YearPredictionMSD: the first n_train rows train, the rest test
        train = np.arange(int(fixed["n_train"]))
        test = np.arange(int(fixed["n_train"]), n)
    else:
        frac = float(params.get("test_fraction", 0.2))
        if not 0 < frac < 1:
            raise DataValidationError(f"test_fraction must be in (0, 1), got {frac}")
        perm = _rng(table.name, "holdout", seed).permutation(n)
        n_test = int(round(frac * n))
        if n_test < 1 or n - n_test < 2:
            raise DataValidationError(f"dataset {table.name!r}: {n} rows with test_fraction {frac} leave {n - n_test} "
                                      f"training / {n_test} test rows; a holdout split needs >= 2 and >= 1")
        test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    return {"train": train.tolist(), "test": test.tolist(), **_standardisation(table, train)}


def holdout_train_rows(rows: int, spec: dict, params: dict) -> int:
    """``holdout_split``'s training rows for a table of ``rows`` rows: the dataset's fixed split, else all but
    the test fraction."""
    fixed = spec.get("fixed_split")
    if fixed:
        return int(fixed["n_train"])
    return rows - int(round(float(params.get("test_fraction", 0.2)) * rows))


def kfold_train_rows(rows: int, spec: dict, params: dict) -> int:
    """``kfold_split``'s training rows for a table of ``rows`` rows: all but a fold (the longer folds' one row
    apart), or the dataset's fixed split."""
    if spec.get("fixed_split"):
        return holdout_train_rows(rows, spec, params)
    return rows - rows // int(params.get("folds", 5))


def kfold_split(table: Table, params: dict, seed: int) -> dict:
    """Fold ``seed % folds`` of repeat ``seed // folds`` of K-fold cross-validation.

    ``shuffle: false`` (default): scikit-learn's ``KFold(folds)`` on the rows in file order, as the QR
    authors ran it: contiguous test blocks, the same folds in every repeat (repeats then differ only in the
    seeds of training). ``shuffle: true``: rows are permuted first, with a new permutation per repeat.
    """
    from sklearn.model_selection import KFold

    folds = int(params.get("folds", 5))
    shuffle = params.get("shuffle", False)
    if not isinstance(shuffle, bool):
        raise DataValidationError(f"kfold split: shuffle must be true or false, got {shuffle!r}")
    if table.spec.get("fixed_split"):
        return {**holdout_split(table, params, seed), "repeat": 0, "fold": 0, "shuffle": False}
    if len(table.frame) < 2 * folds:
        raise DataValidationError(f"dataset {table.name!r}: {len(table.frame)} rows are too few for {folds}-fold "
                                  f"cross-validation (each fold needs >= 2 rows); lower `folds`")
    repeat, fold = divmod(seed, folds)
    state = int(_rng(table.name, "kfold", repeat).integers(2**31)) if shuffle else None
    splitter = KFold(n_splits=folds, shuffle=shuffle, random_state=state)
    train, test = list(splitter.split(np.arange(len(table.frame))))[fold]
    return {"train": train.tolist(), "test": test.tolist(), "repeat": repeat, "fold": fold, "shuffle": shuffle,
            **_standardisation(table, train)}


def train_val_test_split(table: Table, params: dict, seed: int, *, stream: str) -> dict:
    """One random train / validation / test partition per seed, shared by every method of a family.

    ``val_fraction`` and ``test_fraction`` are fractions of all rows. ``train`` is what every method fits on
    (standardisation statistics from it alone); ``val`` is held out from every method and fits the post-hoc
    recalibrations; ``holdout`` is the test part. ``test`` lists the validation rows first, then the test
    rows: the rows every method predicts (the families' methods predict ``split["test"]``), so that a
    recalibration reads its base run's validation predictions from the same file; the evaluator scores only the
    last ``len(holdout)`` rows (uqcal.metrics.evaluation.test_part). ``stream`` names the random stream (the
    family's: two families on the same dataset and seed then partition independently).
    """
    n = len(table.frame)
    test_fraction, val_fraction = float(params.get("test_fraction", 0.2)), float(params.get("val_fraction", 0.1))
    n_test, n_val = int(round(test_fraction * n)), int(round(val_fraction * n))
    if n_test < 1 or n_val < 2 or n - n_test - n_val < 2:
        raise DataValidationError(f"dataset {table.name!r}: {n} rows with test_fraction {test_fraction} and "
                                  f"val_fraction {val_fraction} leave {n - n_test - n_val} training / {n_val} "
                                  f"validation / {n_test} test rows; the split needs >= 2, >= 2 and >= 1")
    perm = _rng(table.name, stream, seed).permutation(n)
    test, val, train = np.sort(perm[:n_test]), np.sort(perm[n_test:n_test + n_val]), np.sort(perm[n_test + n_val:])
    return {"train": train.tolist(), "val": val.tolist(), "holdout": test.tolist(),
            "test": val.tolist() + test.tolist(), **_standardisation(table, train)}


# ----------------------------------------------------------------------------------------- few-shot
def class_rows(labels: np.ndarray) -> dict[str, np.ndarray]:
    order = np.argsort(labels, kind="stable")
    uniq, starts = np.unique(labels[order], return_index=True)
    bounds = list(starts) + [len(order)]
    return {str(c): order[bounds[i] : bounds[i + 1]] for i, c in enumerate(uniq)}


def sample_fewshot_episode(
    rows_by_class: dict[str, np.ndarray],
    classes: Sequence[str],
    n_way: int,
    k_shot: int,
    n_query: int,
    rng: np.random.Generator,
) -> dict:
    """One N-way K-shot episode. The label of a row is the index of its class in ``classes`` (class-major)."""
    if len(classes) < n_way:
        raise ValueError(f"need >= {n_way} classes for a {n_way}-way episode, have {len(classes)}")
    picked = [classes[i] for i in rng.choice(len(classes), size=n_way, replace=False)]
    support, query = [], []
    for c in picked:
        rows = rows_by_class[c]
        if len(rows) < k_shot + n_query:
            raise ValueError(f"class {c!r} has {len(rows)} examples < k_shot + n_query = {k_shot + n_query}")
        chosen = rng.choice(rows, size=k_shot + n_query, replace=False)
        support += chosen[:k_shot].tolist()
        query += chosen[k_shot:].tolist()
    return {"classes": picked, "support": support, "query": query}


def fewshot_split(table: Table, params: dict, seed: int) -> dict:
    n_way, k_shot = int(params["n_way"]), int(params["k_shot"])
    n_query_test = int(params.get("n_query_test", 15))
    labels = table.y
    rows = class_rows(labels)
    rng = _rng(table.name, "classes", seed)
    fractions = _fractions(params.get("class_fractions", [0.6, 0.2, 0.2]), "split.class_fractions")
    domain = table.domain
    min_rows = k_shot + max(n_query_test, int(params.get("n_query_train", 16)))
    usable = np.array(sorted(c for c, r in rows.items() if len(r) >= min_rows), dtype=object)
    class_domain = {c: (domain[rows[c][0]] if domain is not None else "all") for c in usable}
    group = table.group if params.get("group_disjoint", True) else None
    class_group = {c: (group[rows[c][0]] if group is not None else c) for c in usable}

    def split_by_group(classes: np.ndarray, fr: np.ndarray) -> list[np.ndarray]:
        groups = np.array(sorted({class_group[c] for c in classes}), dtype=object)
        if len(groups) >= 3:
            g_train, g_val, g_test = _partition(groups, fr, rng)
            return [np.array([c for c in classes if class_group[c] in set(g)], dtype=object)
                    for g in (g_train, g_val, g_test)]
        return _partition(classes, fr, rng)

    if domain is not None and set(class_domain.values()) >= {"train", "test"}:
        # Cross-domain (MD-BFSC's Omniglot->EMNIST, mini-ImageNet->CUB): train classes from the source domain,
        # test classes from the target domain. val_domain "target" (the authors' protocol): every source
        # class trains and the target classes split val : test as class_fractions[1] : [2]; "source": val
        # classes are held out of the source domain and the whole target domain is the test side.
        source = np.array([c for c in usable if class_domain[c] == "train"], dtype=object)
        target = np.array([c for c in usable if class_domain[c] == "test"], dtype=object)
        val_domain = params.get("val_domain", "target")
        if val_domain == "target":
            train = source
            fr = np.array([0.0, fractions[1], fractions[2]]) / (fractions[1] + fractions[2])
            _, val, test = split_by_group(target, fr)
        elif val_domain == "source":
            fr = np.array([fractions[0], fractions[1], 0.0]) / (fractions[0] + fractions[1])
            train, val, _ = split_by_group(source, fr)
            test = target
        else:
            raise ValueError(f"split.val_domain must be 'target' or 'source', got {val_domain!r}")
    else:
        train, val, test = split_by_group(usable, fractions)
    if min(len(train), len(val), len(test)) < n_way:
        raise DataValidationError(
            f"dataset {table.name!r}: {len(usable)} of {len(rows)} classes have >= k_shot + max(n_query_test, "
            f"n_query_train) = {min_rows} examples; split by class_fractions {[round(float(f), 3) for f in fractions]}"
            f"{' over script groups' if group is not None else ''} they give train {len(train)} / val {len(val)} / "
            f"test {len(test)} classes; every part needs at least n_way = {n_way}. Lower n_way, k_shot or the query "
            f"sizes{', set group_disjoint: false' if group is not None else ''}, or use a dataset with more classes."
        )
    ep_rng = _rng(table.name, "episodes", n_way, k_shot, seed)
    val_eps = [sample_fewshot_episode(rows, list(val), n_way, k_shot, n_query_test, ep_rng)
               for _ in range(int(params.get("n_val_episodes", 100)))]
    test_eps = [sample_fewshot_episode(rows, list(test), n_way, k_shot, n_query_test, ep_rng)
                for _ in range(int(params.get("n_test_episodes", 600)))]
    return {
        "classes": {"train": list(train), "val": list(val), "test": list(test)},
        "n_way": n_way,
        "k_shot": k_shot,
        "n_query_train": int(params.get("n_query_train", 16)),
        "n_query": n_query_test,
        "val_episodes": val_eps,
        "test_episodes": test_eps,
    }


# ----------------------------------------------------------------------------------------- BO
def initial_design_split(table: Table, params: dict, seed: int) -> dict:
    """Initial design shared by every BO method of a repeat (paired runs)."""
    frame = table.frame
    if not {"lower", "upper"} <= set(frame.columns):
        raise ValueError(f"objective {table.name!r}: raw table needs `lower` and `upper` columns")
    lower = frame["lower"].to_numpy(float)
    upper = frame["upper"].to_numpy(float)
    if params.get("initial_design") is not None:
        initial = np.asarray(params["initial_design"], dtype=float)
        if initial.ndim != 2 or initial.shape[1] != len(lower):
            raise ValueError(f"initial_design must be a list of {len(lower)}-dimensional points")
    else:
        n_init = int(params.get("n_init", 3))
        initial = _rng(table.name, "design", seed).uniform(lower, upper, size=(n_init, len(lower)))
    return {"objective": table.name, "initial_x": initial.tolist(), "bounds": [lower.tolist(), upper.tolist()]}


# ----------------------------------------------------------------------------------------- splitters
@dataclass(frozen=True)
class Splitter:
    """A split function with the parameters it reads: ``keys`` (JSON-schema properties of ``split:`` and of a
    setting, checked when the config loads) and ``problems`` (what a schema cannot say, e.g. N_S + N_Q <=
    min_task_size; ``(params, key) -> messages``). A family names its splitter (uqcal.methods.api.Family)."""

    split: Callable[[Table, dict, int], dict]
    keys: dict[str, Any] = field(default_factory=dict)
    problems: Callable[[dict, str], list[str]] = validate.no_split_problems
    # ``(rows, registry entry, params) -> training rows`` of one seed's split, from the table's size alone (cost
    # estimates: a family's ``work``); None: not stated
    train_rows: Callable[[int, dict, dict], int] | None = None

    def __call__(self, table: Table, params: dict, seed: int) -> dict:
        return self.split(table, params, seed)


_POSITIVE_INT = {"type": "integer", "minimum": 1}
_FRACTIONS3 = {"type": "array", "items": {"type": "number"}}  # three positive fractions summing to 1: problems
_UNIT_FRACTION = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}

MULTITASK = Splitter(multitask_split, {
    "n_support": _POSITIVE_INT,  # N_S
    "n_query": _POSITIVE_INT,  # N_Q (default 30)
    "min_task_size": _POSITIVE_INT,  # tasks with fewer rows are dropped (default N_S + N_Q)
    "task_fractions": _FRACTIONS3,  # train, val, test tasks
    "val_episodes_per_task": _POSITIVE_INT,
    "test_episodes_per_task": _POSITIVE_INT,
}, validate.multitask_split_problems)
HOLDOUT = Splitter(holdout_split, {"test_fraction": _UNIT_FRACTION}, validate.holdout_split_problems,
                   holdout_train_rows)
KFOLD = Splitter(kfold_split, {"folds": {"type": "integer", "minimum": 2}, "shuffle": {"type": "boolean"}},
                 validate.kfold_split_problems, kfold_train_rows)
FEWSHOT = Splitter(fewshot_split, {
    "n_way": {"type": "integer", "minimum": 2},
    "k_shot": _POSITIVE_INT,
    "n_query_test": _POSITIVE_INT,
    "n_query_train": _POSITIVE_INT,
    "n_val_episodes": _POSITIVE_INT,
    "n_test_episodes": _POSITIVE_INT,
    "class_fractions": _FRACTIONS3,
    "group_disjoint": {"type": "boolean"},
    "val_domain": {"enum": ["target", "source"]},
}, validate.fewshot_split_problems)
INITIAL_DESIGN = Splitter(initial_design_split, {
    "n_init": _POSITIVE_INT,
    "initial_design": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}, "minItems": 1},
}, validate.initial_design_split_problems)
TRAIN_VAL_TEST_KEYS = {"test_fraction": _UNIT_FRACTION, "val_fraction": _UNIT_FRACTION}

"""Splits are deterministic per seed and never overlap where they must not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from uqcal.data import Table
from uqcal.data.splits import (
    fewshot_split,
    holdout_split,
    initial_design_split,
    kfold_split,
    multitask_split,
    sample_fewshot_episode,
    sample_task_episodes,
)
from uqcal.data.validate import DataValidationError


def multitask_table(n_tasks=20, rows_per_task=70) -> Table:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "t": np.repeat(np.arange(n_tasks), rows_per_task),
        "x": rng.normal(size=n_tasks * rows_per_task),
        "y": rng.normal(size=n_tasks * rows_per_task),
    })
    # One small task must be dropped by min_task_size.
    frame = pd.concat([frame, pd.DataFrame({"t": 99, "x": [0.0] * 5, "y": [0.0] * 5})], ignore_index=True)
    return Table("mt", {"kind": "multitask_regression", "target": "y", "features": ["x"], "task": "t"}, frame)


def test_multitask_split_is_disjoint_and_deterministic():
    table = multitask_table()
    params = {"n_support": 10, "n_query": 30, "min_task_size": 60, "task_fractions": [0.6, 0.2, 0.2],
              "test_episodes_per_task": 2}
    a, b = multitask_split(table, params, 3), multitask_split(table, params, 3)
    assert a == b
    tasks = a["tasks"]
    assert not set(tasks["train"]) & set(tasks["val"]) and not set(tasks["train"]) & set(tasks["test"])
    assert not set(tasks["val"]) & set(tasks["test"])
    assert sorted(tasks["train"] + tasks["val"] + tasks["test"]) == list(range(20))
    assert a["dropped_tasks"] == [99]
    assert (len(tasks["train"]), len(tasks["val"]), len(tasks["test"])) == (12, 4, 4)
    task_of = table.frame["t"].to_numpy()
    assert len(a["test_episodes"]) == 8
    for ep in a["test_episodes"] + a["val_episodes"]:
        assert len(ep["support"]) == 10 and len(ep["query"]) == 30
        assert not set(ep["support"]) & set(ep["query"])
        assert set(task_of[ep["support"] + ep["query"]]) == {ep["task"]}
    assert {ep["task"] for ep in a["test_episodes"]} == set(tasks["test"])
    c = multitask_split(table, params, 4)
    assert c["tasks"] != a["tasks"]


def test_test_episodes_do_not_depend_on_the_number_of_validation_episodes():
    # metareg's stopping rule sets val_episodes_per_task; the meta-test episodes must stay the same.
    table = multitask_table()
    params = {"n_support": 10, "n_query": 30, "min_task_size": 60, "test_episodes_per_task": 2}
    one = multitask_split(table, {**params, "val_episodes_per_task": 1}, 2)
    ten = multitask_split(table, {**params, "val_episodes_per_task": 10}, 2)
    assert one["test_episodes"] == ten["test_episodes"]
    assert len(ten["val_episodes"]) == 10 * len(ten["tasks"]["val"])


def test_task_split_is_shared_across_support_sizes():
    table = multitask_table()
    base = {"n_query": 30, "min_task_size": 60}
    assert multitask_split(table, {**base, "n_support": 10}, 1)["tasks"] == \
        multitask_split(table, {**base, "n_support": 30}, 1)["tasks"]


def test_task_episode_sampler_disjoint():
    rows = {0: np.arange(0, 50), 1: np.arange(50, 100)}
    tasks, s, q = sample_task_episodes(rows, [0, 1], 10, 30, 16, np.random.default_rng(0))
    for t, si, qi in zip(tasks, s, q, strict=True):
        assert not set(si) & set(qi)
        assert set(si) | set(qi) <= set(rows[t])


def single_table(n=103) -> Table:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(3, 2, size=n), "y": rng.normal(size=n)})
    return Table("st", {"kind": "single_task_regression", "target": "y", "features": "auto"}, frame)


def test_holdout_split_partitions_and_stores_training_stats():
    table = single_table()
    split = holdout_split(table, {"test_fraction": 0.2}, 0)
    train, test = np.array(split["train"]), np.array(split["test"])
    assert len(test) == 21 and len(train) == 82 and not set(train) & set(test)
    np.testing.assert_allclose(split["x_mean"], table.X[train].mean(0))
    np.testing.assert_allclose(split["y_std"], table.y[train].std())
    assert holdout_split(table, {"test_fraction": 0.2}, 0) == split
    assert holdout_split(table, {"test_fraction": 0.2}, 1)["test"] != split["test"]


@pytest.mark.parametrize("shuffle", [False, True])
def test_kfold_seeds_map_to_repeats_and_folds(shuffle):
    table = single_table()
    folds = [kfold_split(table, {"folds": 5, "shuffle": shuffle}, k) for k in range(5)]
    tests = [set(f["test"]) for f in folds]
    assert set().union(*tests) == set(range(103))
    assert sum(len(t) for t in tests) == 103  # every row is tested exactly once per repeat
    assert [f["fold"] for f in folds] == [0, 1, 2, 3, 4] and {f["repeat"] for f in folds} == {0}
    second = kfold_split(table, {"folds": 5, "shuffle": shuffle}, 5)
    assert second["repeat"] == 1 and second["shuffle"] is shuffle
    if shuffle:  # a new permutation per repeat
        assert set(second["test"]) not in tests
    else:  # the QR authors' KFold(5): contiguous blocks in file order (sizes 21, 21, 21, 20, 20), every repeat
        sizes = [21, 21, 21, 20, 20]
        blocks = [list(range(a, a + n)) for a, n in zip(np.cumsum([0, *sizes[:-1]]), sizes, strict=True)]
        assert [f["test"] for f in folds] == blocks
        assert second["test"] == folds[0]["test"]


def test_kfold_default_is_contiguous_and_shuffle_is_validated():
    table = single_table()
    assert kfold_split(table, {"folds": 5}, 1)["test"] == list(range(21, 42))
    with pytest.raises(DataValidationError, match="shuffle"):
        kfold_split(table, {"folds": 5, "shuffle": "yes"}, 0)


def fewshot_table(domain=False) -> Table:
    rows = []
    for script in range(6):
        for c in range(8):
            for i in range(25):
                rows.append({"label": f"s{script}:c{c}", "script": f"s{script}", "px0": i,
                             "domain": "test" if domain and script >= 4 else "train"})
    frame = pd.DataFrame(rows)
    if not domain:
        frame = frame.drop(columns="domain")
    spec = {"kind": "fewshot_classification", "target": "label", "group": "script", "image_shape": [1, 1]}
    return Table("fs", spec, frame)


def test_fewshot_split_is_script_disjoint_and_episodes_stay_in_their_classes():
    table = fewshot_table()
    params = {"n_way": 5, "k_shot": 5, "n_query_test": 15, "n_val_episodes": 4, "n_test_episodes": 6,
              "class_fractions": [0.5, 0.25, 0.25]}
    split = fewshot_split(table, params, 0)
    assert split == fewshot_split(table, params, 0)
    cls = split["classes"]
    scripts = {k: {c.split(":")[0] for c in v} for k, v in cls.items()}
    assert not scripts["train"] & scripts["test"] and not scripts["train"] & scripts["val"]
    labels = table.frame["label"].to_numpy()
    for ep in split["test_episodes"]:
        assert set(ep["classes"]) <= set(cls["test"])
        assert set(labels[ep["support"] + ep["query"]]) <= set(cls["test"])
        assert not set(ep["support"]) & set(ep["query"])
        assert len(ep["support"]) == 25 and len(ep["query"]) == 75


def test_cross_domain_split_tests_only_on_the_target_domain():
    table = fewshot_table(domain=True)  # scripts s4, s5 are the target domain
    params = {"n_way": 5, "k_shot": 1, "n_val_episodes": 2, "n_test_episodes": 3}
    split = fewshot_split(table, params, 0)  # val_domain: target (the authors' protocol)
    cls = split["classes"]
    target = {c for c in table.frame["label"] if c[:2] in ("s4", "s5")}
    assert set(cls["test"]) | set(cls["val"]) == target and not set(cls["test"]) & set(cls["val"])
    assert len(cls["val"]) == len(cls["test"]) == 8  # class_fractions 0.2 : 0.2 of the 16 target classes
    assert set(cls["train"]) == set(table.frame["label"]) - target  # every source class trains
    source = fewshot_split(table, {**params, "val_domain": "source"}, 0)["classes"]
    assert set(source["test"]) == target
    assert not (set(source["train"]) | set(source["val"])) & target


def test_fewshot_episode_labels_are_class_major():
    rows = {"a": np.arange(0, 10), "b": np.arange(10, 20), "c": np.arange(20, 30)}
    ep = sample_fewshot_episode(rows, ["a", "b", "c"], 3, 2, 3, np.random.default_rng(0))
    for i, cls in enumerate(ep["classes"]):
        assert set(ep["support"][2 * i : 2 * i + 2]) <= set(rows[cls])
        assert set(ep["query"][3 * i : 3 * i + 3]) <= set(rows[cls])


def test_initial_design_inside_bounds_and_paired_by_seed():
    frame = pd.DataFrame({"lower": [-2.0, 0.0], "upper": [2.0, 1.0]})
    table = Table("obj", {"kind": "optimisation_objective"}, frame)
    a = initial_design_split(table, {"n_init": 4}, 7)
    x = np.array(a["initial_x"])
    assert x.shape == (4, 2) and np.all(x >= [-2, 0]) and np.all(x <= [2, 1])
    assert a == initial_design_split(table, {"n_init": 4}, 7)
    fixed = initial_design_split(table, {"initial_design": [[0.1, 0.2]]}, 7)
    assert fixed["initial_x"] == [[0.1, 0.2]]
    with pytest.raises(ValueError, match="initial_design"):
        initial_design_split(table, {"initial_design": [[0.1]]}, 7)


@pytest.mark.parametrize("rows", [97, 100, 442])
def test_the_training_rows_stated_without_the_data_are_the_splits(rows):
    """Splitter.train_rows (cost estimates) against the split functions on a table of that many rows."""
    from uqcal.data.splits import HOLDOUT, KFOLD

    spec = {"kind": "single_task_regression", "target": "y", "features": "auto"}
    frame = pd.DataFrame({"x": np.arange(rows, dtype=float), "y": np.arange(rows, dtype=float) ** 2})
    table = Table(name="t", spec=spec, frame=frame)
    for params in ({"test_fraction": 0.2}, {"test_fraction": 0.1}):
        assert HOLDOUT.train_rows(rows, spec, params) == len(HOLDOUT(table, params, 0)["train"])
    for folds in (5, 10):
        sizes = {len(KFOLD(table, {"folds": folds}, seed)["train"]) for seed in range(folds)}
        assert KFOLD.train_rows(rows, spec, {"folds": folds}) == max(sizes)  # the longer folds' one row apart
    fixed = {**spec, "fixed_split": {"n_train": 60}}
    table = Table(name="t", spec=fixed, frame=frame)
    assert HOLDOUT.train_rows(rows, fixed, {}) == KFOLD.train_rows(rows, fixed, {}) == len(HOLDOUT(table, {}, 0)["train"])

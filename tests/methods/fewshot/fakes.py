"""Synthetic few-shot data and a RunContext stand-in for the fewshot family's tests (no materialised data)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from tests.conftest import method_device
from uqcal.data.splits import class_rows, sample_fewshot_episode
from uqcal.methods.api import RunContext


def synthetic_glyphs(n_classes=24, per_class=24, size=28, n_groups=6, seed=0):
    """Each class = a fixed random blob pattern + pixel noise + a random shift; group = class % n_groups."""
    rng = np.random.default_rng(seed)
    images, labels, groups = [], [], []
    for c in range(n_classes):
        proto = (rng.random((size // 4, size // 4)) > 0.6).astype(np.float32)
        proto = np.kron(proto, np.ones((4, 4), dtype=np.float32))
        for _ in range(per_class):
            shifted = np.roll(proto, rng.integers(-2, 3, size=2), axis=(0, 1))
            images.append(np.clip(shifted + 0.3 * rng.standard_normal((size, size)), 0, 1).astype(np.float32))
            labels.append(f"c{c:03d}")
            groups.append(f"g{c % n_groups}")
    return SimpleNamespace(images=np.stack(images), y=np.array(labels, dtype=object), group=np.array(groups))


def synthetic_split(table, n_way=5, k_shot=1, n_query=5, n_val=3, n_test=4, seed=0):
    rows = class_rows(table.y.astype(str))
    group_of = {c: table.group[r[0]] for c, r in rows.items()}
    groups = sorted(set(group_of.values()))
    train_g, val_g, test_g = set(groups[:-2]), {groups[-2]}, {groups[-1]}
    # make val/test large enough for n_way: give them whole groups until they have n_way classes
    classes = sorted(rows)
    train = [c for c in classes if group_of[c] in train_g]
    val = [c for c in classes if group_of[c] in val_g]
    test = [c for c in classes if group_of[c] in test_g]
    rng = np.random.default_rng(seed)
    return {
        "classes": {"train": train, "val": val, "test": test},
        "n_way": n_way,
        "k_shot": k_shot,
        "n_query": n_query,
        "val_episodes": [
            sample_fewshot_episode(rows, val, n_way, k_shot, n_query, rng) for _ in range(n_val)
        ],
        "test_episodes": [
            sample_fewshot_episode(rows, test, n_way, k_shot, n_query, rng) for _ in range(n_test)
        ],
    }


class FakeContext(RunContext):
    """RunContext whose data and split come from memory; outputs go to a temp run_dir."""

    def __init__(self, table, split, params, run_dir: Path, method="md", depends_dir=None, n_query_train=5):
        super().__init__(
            family="fewshot",
            dataset="synthetic",
            setting="5w1s",
            method=method,
            seed=0,
            config={"torch_threads": 1},
            dataset_spec={},
            setting_params={},
            family_params={"split": {"n_query_train": n_query_train}},
            params=params,
            run_dir=run_dir,
            split_path=run_dir / "split.json",
            raw_path=run_dir / "raw.parquet",
            depends_dir=depends_dir,
            device=method_device(),
            log=logging.getLogger("fewshot-test"),
        )
        self._table, self._split = table, split

    def load_data(self):
        return self._table

    def load_split(self):
        return self._split

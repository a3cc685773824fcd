"""The fewshot family's estimator-protocol cases (tests/methods/test_protocol.py): every registered method, with
a small budget, meta-trained on a pool of base classes and predicting one 5-way 1-shot episode of new classes."""

from __future__ import annotations

import numpy as np

from tests.methods.protocol import Case, Problem
from uqcal.methods.api import get_entry, method_table

# A few episodes and Monte Carlo draws: the family's 18 cases together take seconds on one core.
SMALL = {
    "train_episodes": 2,
    "width": 8,
    "n_pred_samples": 20,
    "n_mc_samples": 16,
    "n_mc_samples_full": 200,
    "steps_test": 3,
    "n_convergence_episodes": 1,
    "convergence_steps": 2,
    "convergence_mc_samples": 50,
    "inner_steps_train": 2,
    "inner_steps_test": 2,
}
SIZE = 16  # the smallest image Conv4S's four 2x2 poolings take down to one pixel


def class_images(rng: np.random.Generator, n_classes: int, per_class: int, first_label: int):
    """Separable classes: each a fixed random 4x4-block pattern, every image of it shifted by up to a pixel
    and noised; labels first_label, first_label + 1, ..."""
    images, labels = [], []
    for c in range(n_classes):
        pattern = np.kron((rng.random((SIZE // 4, SIZE // 4)) > 0.5).astype(np.float32), np.ones((4, 4), np.float32))
        for _ in range(per_class):
            shifted = np.roll(pattern, rng.integers(-1, 2, size=2), axis=(0, 1))
            images.append(np.clip(shifted + 0.2 * rng.standard_normal((SIZE, SIZE)), 0, 1))
            labels.append(first_label + c)
    return np.stack(images).astype(np.float32), np.array(labels)


def episode(images, labels, rng, k_shot: int, n_query: int):
    """Support (k_shot a class) and query (n_query a class) rows of every class of (images, labels)."""
    support, query = [], []
    for c in np.unique(labels):
        rows = rng.permutation(np.flatnonzero(labels == c))
        support += rows[:k_shot].tolist()
        query += rows[k_shot:k_shot + n_query].tolist()
    return images[support], labels[support], images[query], labels[query]


def problem(rng: np.random.Generator) -> Problem:
    # fit's default episodes: 5-way 1-shot with 16 queries a class, so every base class needs 17 images
    X, y = class_images(rng, n_classes=6, per_class=17, first_label=0)
    X_val, y_val = class_images(rng, n_classes=5, per_class=5, first_label=10)
    validation = [episode(X_val, y_val, rng, k_shot=1, n_query=4) for _ in range(2)]
    X_new, y_new = class_images(rng, n_classes=5, per_class=5, first_label=100)
    X_support, y_support, X_query, y_query = episode(X_new, y_new, rng, k_shot=1, n_query=4)
    return Problem((X, y, validation), (X_support, y_support, X_query), y_query)


def make(name: str):
    entry = get_entry("fewshot", name)
    cls = entry.load_class()
    return lambda: cls({**{k: v for k, v in SMALL.items() if k in cls.defaults}, **entry.overrides}, random_state=0)


def cases() -> dict[str, Case]:
    return {name: Case(make(name), problem) for name in method_table("fewshot")}

"""A BO train job's work per seed (``Family.work``), in CPU seconds of one thread on the reference machine.

Cost estimates (``uqcal cost``, the progress line) scale a measured job's seconds by the ratio of two jobs' work.
One seed is ``n_init + budget`` objective evaluations and ``budget`` surrogate refits with an acquisition search:

    budget x BO_STEP + (n_init + budget) x evaluation

A synthetic objective's evaluation is free; a paper CNN objective (``source: {type: hpo, model: cnn}``) trains
the CNN ``epochs`` times over the training set and predicts the test set once (``uqcal.data.sources.hpo_paper``).
Upper bound: configurations evaluated twice (the shared initial design) are read from the cache. The LDA
objective has no measured unit cost here and counts as free (an under-estimate).
"""

from __future__ import annotations

# CPU seconds, one thread, this project's 2-core VM (2026-12-03). BO_STEP: the default's Forrester runs (records:
# 6.1 s a seed of `calibrated` for 15 steps, ~0.4 s a step). CNN_TRAIN_IMAGE: forward + backward + SGD step of
# small_cnn(192 filters, 384 units) (the middle of Table 1's space) per 32 x 32 image, batches of 64; a test
# image is a forward pass, ~1/3 of it.
BO_STEP = 0.4
CNN_TRAIN_IMAGE = 0.0127
# Training and test images of the datasets the CNN objective reads (the datasets' published sizes).
CNN_IMAGES = {"cifar10": (50_000, 10_000), "svhn": (73_257, 26_032)}


def evaluation_seconds(source: dict) -> float:
    """CPU seconds of one evaluation of the objective whose registry source is ``source``."""
    if source.get("type") != "hpo" or source.get("model") != "cnn":
        return 0.0
    options = source.get("options") or {}
    n_train, n_test = CNN_IMAGES.get(source.get("data"), (0, 0))
    n_train = min(n_train, int(options.get("train_size") or n_train))
    n_test = min(n_test, int(options.get("test_size") or n_test))
    return CNN_TRAIN_IMAGE * (int(options.get("epochs", 10)) * n_train + n_test / 3)


def work_per_seed(job: dict) -> float:
    """CPU seconds of one seed of the train job ``job`` (a payload) on the reference machine (module docstring)."""
    setting = job["setting_params"]
    budget, n_init = int(setting["budget"]), int(setting.get("n_init", 0))
    return budget * BO_STEP + (n_init + budget) * evaluation_seconds(job["dataset_spec"].get("source") or {})

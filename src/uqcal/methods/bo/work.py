"""A BO train job's work per seed (``Family.work``), in CPU seconds of one thread on the reference machine.

Cost estimates (``uqcal cost``, the progress line) scale a measured job's seconds by the ratio of two jobs' work.
One seed is ``n_init + budget`` objective evaluations and ``budget`` surrogate refits with an acquisition search:

    budget x BO_STEP[method] + (n_init + budget) x evaluation

A step's cost is the method's: random search refits nothing, the calibrated methods refit a recalibrator on
held-out PIT values at every step. With one figure for all methods, a method's measured cost per work on the
free synthetic objectives would also scale its CNN evaluations (random search's 0.02 s a step would cost its
paper CNN jobs at a fiftieth of their training). A synthetic objective's evaluation is free; a paper CNN
objective (``source: {type: hpo, model: cnn}``) trains the CNN ``epochs`` times over the training set and
predicts the test set once (``uqcal.data.sources.hpo_paper``). Upper bound: configurations evaluated twice (the
shared initial design) are read from the cache. The LDA objective has no measured unit cost here and counts as
free (an under-estimate).
"""

from __future__ import annotations

# CPU seconds, one thread, this project's 2-core VM (2026-12-03). BO_STEP: a step of each method on the default's
# Forrester runs, from the records of the default run of 2026-12-03 (config/reference_costs.yaml: a job's CPU
# seconds less its 3 s start-up, over 10 seeds x 15 steps): calibrated 73.6 s -> 0.47 s, uncalibrated
# 30.7 s -> 0.18 s, random 4.0 s -> 0.007 s; the calibrated variants (paper.yaml's ablations) as calibrated.
# CNN_TRAIN_IMAGE: forward + backward + SGD step of small_cnn(192 filters, 384 units) (the middle of Table 1's
# space) per 32 x 32 image, batches of 64; a test image is a forward pass, ~1/3 of it.
BO_STEP = {"random": 0.007, "uncalibrated": 0.18, "calibrated": 0.47}
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
    return budget * step_seconds(job.get("method", "")) + (n_init + budget) * evaluation_seconds(
        job["dataset_spec"].get("source") or {})


def step_seconds(method: str) -> float:
    """CPU seconds of one BO step of ``method`` besides the objective's evaluation (``BO_STEP``; a variant of the
    calibrated method, e.g. calibrated_fastloo, as calibrated)."""
    return BO_STEP.get(method, BO_STEP["calibrated"])

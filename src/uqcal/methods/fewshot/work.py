"""A fewshot train job's work per seed (``Family.work``), in CPU seconds of one idle thread on the reference machine.

Cost estimates (``uqcal cost``, the progress line) scale a measured job's seconds by the ratio of two jobs' work,
so only the ratios matter: what a paper-scale job of 40,000 episodes at 84 x 84 costs against a measured default
job of 2,700 episodes at 28 x 28. One seed is

    train_episodes x TRAIN_EPISODE x conv(train episode)
    + evaluated episodes x (EVAL_FORWARD x conv(test episode) + sampling)

where ``conv`` is the backbone's work on an episode against the reference one (5-way, 5 + 15 images a class,
28 x 28, width 32): pixels x width^2 x images; evaluated episodes are the validation checks
(``base.validation_checks``, each of ``n_val_check`` episodes), the validation set once more (the
recalibration) and the test episodes; ``sampling`` is the GP methods' Monte Carlo predictive of one episode
(marginal: ``n_mc_samples`` draws, or ``full_covariance``: ``n_mc_samples_full`` joint draws, the authors' code).
"""

from __future__ import annotations

from uqcal.methods.fewshot.base import per_run_params, validation_checks

# Measured with benchmarks/fewshot_speed.py --train-episodes 30 --test-episodes 3 (one thread, 2026-12-03, this
# project's 2-core VM under a load of ~8, so wall seconds ~13x an idle core's; their ratios hold): a 5-way 5-shot
# training episode of md (100 images at 28 x 28, width 32, 1.03 s); the backbone's forward part of an episode
# (forward ~ 1/3 of forward + backward); the predictive of one test episode of 5 x 15 queries (50 MD steps) with
# 256 marginal draws (0.58 s) and with 10,000 full-covariance draws (37.8 s), each less that forward part.
# IDLE_SCALE puts them in CPU seconds of an idle core: the default run's md job (config/config.yaml, record of
# 2026-12-03: 239.2 CPU s, 236.2 s past its 3 s start-up) has work 3,094.9 in the loaded units. Estimates only
# use ratios; the planner's one-seed-per-job split (uqcal.pipeline.plan) reads the seconds.
IDLE_SCALE = 236.2 / 3094.9
TRAIN_EPISODE = 1.03 * IDLE_SCALE
EVAL_FORWARD = TRAIN_EPISODE / 3
MARGINAL_256 = 0.58 * IDLE_SCALE - EVAL_FORWARD
FULL_COVARIANCE_10000 = 37.8 * IDLE_SCALE - EVAL_FORWARD
REFERENCE_IMAGES, REFERENCE_PIXELS, REFERENCE_WIDTH = 5 * (5 + 15), 28 * 28, 32
REFERENCE_QUERIES = 5 * 15


def _pixels(dataset_spec: dict) -> int:
    shape = dataset_spec.get("image_shape") or [dataset_spec.get("source", {}).get("image_size", 28)] * 2
    return int(shape[0]) * int(shape[1])


def work_per_seed(job: dict) -> float:
    """CPU seconds of one seed of the train job ``job`` (a payload) on the reference machine (module docstring)."""
    params = per_run_params(job["params"], job["dataset"], job["setting"])
    setting, split = job["setting_params"], job["family_params"]["split"]
    n_way, k_shot = int(setting["n_way"]), int(setting["k_shot"])
    backbone = _pixels(job["dataset_spec"]) / REFERENCE_PIXELS * (int(params.get("width", 64)) / REFERENCE_WIDTH) ** 2

    def conv(n_query: int) -> float:
        return backbone * n_way * (k_shot + n_query) / REFERENCE_IMAGES

    episodes = int(params.get("train_episodes", 0))
    checks = len(validation_checks(episodes, int(params.get("val_every", 0) or 0),
                                   int(params.get("val_sparse_every", 0)), int(params.get("val_dense_epochs", 0))))
    n_val = int(split.get("n_val_episodes", 0))
    evaluated = checks * min(int(params.get("n_val_check", n_val) or n_val), n_val) + n_val
    evaluated += int(split.get("n_test_episodes", 0))
    queries = n_way * int(split.get("n_query_test", 15)) / REFERENCE_QUERIES
    sampling = 0.0
    if params.get("sampling") == "full_covariance":  # joint draws over all queries: a Cholesky per episode
        sampling = FULL_COVARIANCE_10000 * int(params.get("n_mc_samples_full", 10000)) / 10000 * queries ** 2
    elif "n_mc_samples" in params:
        sampling = MARGINAL_256 * int(params["n_mc_samples"]) / 256 * queries
    return episodes * TRAIN_EPISODE * conv(int(split.get("n_query_train", 15))) + evaluated * (
        EVAL_FORWARD * conv(int(split.get("n_query_test", 15))) + sampling)

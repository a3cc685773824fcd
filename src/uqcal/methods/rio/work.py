"""A RIO train job's work per seed (``Family.work``), in CPU seconds of one thread on the reference machine.

Cost estimates (``uqcal cost``, the progress line) scale a measured job's seconds by the ratio of two jobs' work,
and the planner splits a job whose seeds' work passes ``job_shape.one_seed_per_job_over_hours``: a paper-scale
job on YearPredictionMSD's 463,715 training rows is not costed as a default one on concrete's 824. One seed:

- ``nn`` (``RioNetwork``): ``max_epochs`` epochs of minibatch steps on the rows left after the validation part,
  a step costing ``NN_STEP + batch x weights x NN_WEIGHT_ROW`` (an upper bound: early stopping ends most runs
  sooner, in the measured stand-ins as in the job; only the ratio is used);
- a GP method (``ResidualIOGP``): L-BFGS-B, ``max_iter`` iterations of a full-batch ELBO costing
  ``GP_EVAL + n x GP_ROW x (M^2 + M x kernel inputs)`` for M inducing points, or minibatch Adam (``optimizer:
  adam``, or ``minibatch_above`` rows and more), ``epochs`` x steps of ``GP_STEP + batch x GP_ROW x (...)``;
- ``marginal``: a mean and a standard deviation, ``MARGINAL``.

The training rows and features come from the dataset's size as materialised and the holdout split
(``Family.training_size``: ``table_shape``'s declared or packaged size, ``test_fraction`` or the dataset's
``fixed_split``); a dataset of unknown size states no work (its job is costed per seed, unscaled).
"""

from __future__ import annotations

import math

# CPU seconds, one thread, this project's 2-core VM (2026-12-04, benchmarks/work_constants.py): a RioNetwork
# RMSprop step (2 x 64 units, batches of 32 and 256, 8 and 90 features), of overhead and per weight and row; an
# SVGP ELBO evaluation with its gradient (L-BFGS-B's, scipy's share included; 1,000 to 20,000 rows), of overhead
# and per row and unit of M^2 + M x inputs; a minibatch Adam step of the SVGP (1,024 rows), of overhead.
# MARGINAL: a mean and a standard deviation, a small fixed cost.
NN_STEP = 5.0e-4
NN_WEIGHT_ROW = 2.0e-10
GP_EVAL = 3.0e-3
GP_STEP = 5.0e-3
GP_ROW = 1.5e-9
MARGINAL = 0.01


def network_seconds(n_train: int, features: int, params: dict) -> float:
    """One ``RioNetwork`` training's seconds (module docstring)."""
    hidden, depth, batch = int(params["hidden"]), int(params["depth"]), int(params["batch_size"])
    weights = (features + 1) * hidden + (depth - 1) * (hidden + 1) * hidden + hidden + 1
    n_fit = n_train - int(round(float(params["val_fraction"]) * n_train))
    steps = math.ceil(n_fit / batch)
    return int(params["max_epochs"]) * steps * (NN_STEP + min(batch, n_fit) * weights * NN_WEIGHT_ROW)


def gp_seconds(n_train: int, features: int, params: dict) -> float:
    """One ``ResidualIOGP`` fit's seconds (module docstring)."""
    m = int(params["n_inducing"])
    inputs = {"io": features + 1, "i": features, "o": 1}.get(str(params.get("kernel_inputs", "io")), features + 1)
    per_row = GP_ROW * (m * m + m * inputs)
    minibatch = params.get("optimizer") == "adam" or 0 < int(params.get("minibatch_above", 0) or 0) < n_train
    if minibatch:
        batch = min(int(params["batch_size"]), n_train)
        return int(params["epochs"]) * math.ceil(n_train / batch) * (GP_STEP + batch * per_row)
    return int(params["max_iter"]) * (GP_EVAL + n_train * per_row)


def work_per_seed(job: dict) -> float | None:
    """CPU seconds of one seed of the train job ``job`` (a payload) on the reference machine (module docstring);
    None where its dataset's size is unknown."""
    from uqcal.methods.api import get_entry, get_family
    from uqcal.methods.rio.holdout import apply_per_dataset

    size = get_family(job["family"]).training_size(job)
    if size is None:
        return None
    cls = get_entry(job["family"], job["method"]).load_class()
    params = apply_per_dataset(job["params"], job["dataset"], getattr(cls, "defaults", {}))
    if cls.__name__ == "RioNetwork":
        return network_seconds(*size, params)
    if cls.__name__ == "ResidualIOGP":
        return gp_seconds(*size, params)
    return MARGINAL

"""A qr train job's work per seed (``Family.work``), in CPU seconds of one thread on the reference machine.

Cost estimates (``uqcal cost``, the progress line) scale a measured job's seconds by the ratio of two jobs' work,
and the planner splits a job whose seeds' work passes ``job_shape.one_seed_per_job_over_hours``: a paper-scale
job on YearPredictionMSD's 463,715 training rows is not costed as a default one on concrete's 824. One seed of
a Gaussian network method (``GaussianNetMethod``: the deep ensembles and dropout VI, with or without the
quantile regulariser) trains ``n_members`` networks for ``epochs`` epochs of minibatch Adam steps, a step costing

    (QR_STEP + batch x weights x QR_WEIGHT_ROW) x (FGSM_FACTOR for the paper's real FGSM) + sort

where ``sort`` is the quantile regulariser's when ``lam`` > 0: ``QR_SORT_STEP + batch^2 x QR_SORT_PAIR`` for the
NeuralSort of the PIT values (a hard sort: ``batch x log2(batch)`` pairs); its prediction passes are left out.
A recalibration (``_iso``: isotonic on a trained base's outputs) is ``ISOTONIC``, ``marginal`` is ``MARGINAL``.

The training rows and features come from the dataset's size as materialised and the K-fold split
(``Family.training_size``: ``table_shape``'s declared or packaged size, ``folds - 1`` of ``folds``, or the dataset's
``fixed_split``); a dataset of unknown size states no work (its job is costed per seed, unscaled).
"""

from __future__ import annotations

import math

# CPU seconds, one thread, this project's 2-core VM (2026-12-04, benchmarks/work_constants.py, batches of 64 and
# 512): an Adam step of a HeteroscedasticMLP (2 x 128 units), of overhead and per weight and row; the NeuralSort
# entropy's overhead and its cost per pair of a minibatch's rows; the paper's real FGSM (a second forward and
# backward pass) as a multiple of the plain step at batch 512. ISOTONIC and MARGINAL: a small fixed cost.
QR_STEP = 7.0e-4
QR_WEIGHT_ROW = 1.0e-10
QR_SORT_STEP = 2.7e-4
QR_SORT_PAIR = 6.3e-9
FGSM_FACTOR = 2.5
ISOTONIC = 0.05
MARGINAL = 0.01


def network_seconds(n_train: int, features: int, params: dict) -> float:
    """One seed's training of its ``n_members`` networks, in seconds (module docstring)."""
    hidden, depth, batch = int(params["hidden"]), int(params["depth"]), int(params["batch_size"])
    weights = (features + 1) * hidden + (depth - 1) * (hidden + 1) * hidden + 2 * (hidden + 1)
    n_fit = n_train - int(float(params.get("calibration_fraction", 0.0)) * n_train)
    rows = min(batch, n_fit)
    step = (QR_STEP + rows * weights * QR_WEIGHT_ROW) * (FGSM_FACTOR if params.get("adversarial") == "fgsm" else 1.0)
    if float(params.get("lam", 0.0)) > 0:
        pairs = rows * rows if params.get("sort") == "neuralsort" else rows * math.log2(max(rows, 2))
        step += QR_SORT_STEP + pairs * QR_SORT_PAIR
    return int(params["n_members"]) * int(params["epochs"]) * math.ceil(n_fit / batch) * step


def work_per_seed(job: dict) -> float | None:
    """CPU seconds of one seed of the train job ``job`` (a payload) on the reference machine (module docstring);
    None where its dataset's size is unknown."""
    from uqcal.methods.api import get_entry, get_family
    from uqcal.methods.qr.gaussian_nets import GaussianNetMethod

    size = get_family(job["family"]).training_size(job)
    if size is None:
        return None
    cls = get_entry(job["family"], job["method"]).load_class()
    if issubclass(cls, GaussianNetMethod):
        return network_seconds(*size, job["params"])
    return ISOTONIC if get_entry(job["family"], job["method"]).depends_on else MARGINAL

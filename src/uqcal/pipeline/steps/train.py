"""`uqcal train` / `uqcal evaluate`: train and score every seed of one (family, dataset, setting, method).

One process runs the seeds one after another into results/<family>/<dataset>/<setting>/<method>/seed<k>/,
restoring seeds an interrupted run had finished and resuming long training from its checkpoint
(uqcal.core.resume). Where the config's ``job_shape`` runs each seed of a long method as a job of its own
(uqcal.pipeline.plan.one_seed_per_job), the process runs that seed: ``--spec`` or ``--config ... --seed k``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path

from uqcal.pipeline.locks import ancestry, orphaned, running
from uqcal.pipeline.plan import Job, TrainSeed, configured_job, train_seeds

LOG = logging.getLogger("uqcal")


def run(args) -> int:
    """Train and evaluate every seed of the job (or one ``--seed``), resuming what a crash interrupted."""
    key = (args.family, args.dataset, args.setting, args.method)
    if args.seed is not None and not getattr(args, "spec", None):
        seed_job = _seed_job(args, key)
        if seed_job is None:  # one seed, for people: not a pipeline job, so no record
            with imports_uncollected(args):
                seeds = train_seeds(configured_job(args.config, Job("train", key)), args.results_dir, args.data_dir,
                                    [args.seed])
            _train_seeds(args, seeds)
            return 0
        key = seed_job.key  # the config runs this seed as a job of its own (its DVC stage): recorded as one
    with running(args, "train", key) as spec:
        with imports_uncollected(args):
            seeds = train_seeds(spec["job"], args.results_dir, args.data_dir)
        _train_seeds(args, seeds)
    return 0


@contextlib.contextmanager
def imports_uncollected(args) -> Iterator[None]:
    """Load the job's method (its modules, data and contexts) with Python's cyclic garbage collector paused, then
    freeze what was loaded (``gc.freeze``) and collect as usual: in a train job's own process only
    (``args.own_process``, set by ``uqcal.cli.main``).

    Importing torch, torch._dynamo, gpytorch, scikit-learn and pandas creates ~700k objects the collector
    tracks, and while they load it traverses them again and again (six full collections): ~0.8 of the ~0.86 CPU s
    a train job spent collecting (docs/experiments/startup_gc.py). Frozen, they are left out of every later
    collection; what training creates is collected as before. No number changes (the e2e test compares a job's
    bytes with and without).
    """
    if not getattr(args, "own_process", False) or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _seed_job(args, key: tuple[str, ...]) -> Job | None:
    """The pipeline's job of ``--seed`` where the config runs each seed of this method as a job of its own
    (``job_shape``; uqcal.pipeline.plan.one_seed_per_job), else None."""
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.layout import RunLayout
    from uqcal.pipeline.plan import train_jobs

    config = load_config(args.config or "config/config.yaml", method_families=key[:1])
    job = Job("train", (*key, RunLayout.seed_dir_name(args.seed)))
    return job if job in train_jobs(config, *key) else None


def evaluate(args) -> int:
    """Recompute metrics.json of trained runs from their predictions and train stats."""
    job = configured_job(args.config, Job("train", (args.family, args.dataset, args.setting, args.method)))
    for one in train_seeds(job, args.results_dir, args.data_dir, None if args.seed is None else [args.seed]):
        evaluate_one(one.ctx, one.method)
    return 0


def _train_seeds(args, seeds: list[TrainSeed]) -> None:
    from uqcal.core.resume import RESUME_DIR, ResumeStore

    started_under = ancestry()
    stores, pending = [], []
    for one in seeds:
        ctx = one.ctx
        store = ResumeStore(Path(args.results_dir), ctx.run_dir, one.digest)
        stores.append(store)
        if store.restore(ctx.run_dir):
            LOG.info("seed %d: restored the outputs an interrupted run had finished (%s)", ctx.seed, store.path)
            continue
        store.prepare()
        ctx.resume_dir = store.path
        pending.append((one, store))
    batched = len(pending) > 1 and callable(getattr(pending[0][0].method, "train_batch", None))
    # A method that trains its seeds as one batched model (issue 53): one pass for every pending seed; each
    # seed's outputs equal its own run's within the tolerance the method states (see its train_batch).
    trained = train_batch(pending) if batched else None
    if trained is not None:
        for (one, store), predictions in zip(pending, trained, strict=True):
            if not args.no_evaluate:
                evaluate_one(one.ctx, one.method, predictions)
                store.keep(one.ctx.run_dir)
    else:  # seed by seed, each kept for a resumed run as soon as it is done
        for one, store in pending:
            predictions = train_one(one.ctx, one.method)
            if not args.no_evaluate:
                evaluate_one(one.ctx, one.method, predictions)
                store.keep(one.ctx.run_dir)
    if orphaned(started_under):
        # Snakemake (or DVC) was killed alone: it will run this job again, and has deleted, or will delete, its
        # outputs first. The finished seeds stay where that rerun restores them from.
        LOG.warning("the process that started this job is gone: the finished seeds stay in %s/%s for its rerun",
                    args.results_dir, RESUME_DIR)
        return
    for store in stores:  # the whole batch is done: nothing left to resume
        store.clear()


def train_batch(pending) -> list | None:
    """Train the pending seeds of one job in one call of their method's ``train_batch(ctxs)``; returns the
    predictions frame each seed saved, in order, or None where the method declined these seeds (it returned
    False, having saved nothing: their parameters, sizes or device do not batch) and they are to train one by
    one."""
    import gpytorch

    ctxs = [one.ctx for one, _ in pending]
    first = ctxs[0]
    first.log.info("train %s on %s/%s seeds %s as one batched model (device %s)", first.method, first.dataset,
                   first.setting, [c.seed for c in ctxs], first.device)
    start = time.perf_counter()
    with gpytorch.settings.debug(False):  # as in train_one
        if pending[0][0].method.train_batch(ctxs) is False:
            first.log.info("these seeds do not train as one batch: seed by seed")
            return None
    first.log.info("trained %d seeds in %.1f s", len(ctxs), time.perf_counter() - start)
    return [_check_outputs(ctx) for ctx in ctxs]


def _check_outputs(ctx):
    from uqcal.pipeline.layout import RunLayout

    outputs = (RunLayout.MODEL, RunLayout.PREDICTIONS, RunLayout.TRAIN_STATS)
    missing = [f for f in outputs if not (ctx.run_dir / f).exists()]
    if missing:
        raise SystemExit(f"method {ctx.method} did not write {missing} for seed {ctx.seed} "
                         "(must call ctx.save_outputs)")
    return ctx.saved_predictions


def train_one(ctx, method):
    """Train one seed; returns the predictions frame it saved (``ctx.saved_predictions``)."""
    ctx.log.info("train %s on %s/%s seed %d (device %s)", ctx.method, ctx.dataset, ctx.setting, ctx.seed, ctx.device)
    import gpytorch

    ctx.seed_everything()
    start = time.perf_counter()
    # gpytorch's debug mode (on by default) re-checks inputs and shapes at every model call; the pipeline's
    # inputs are validated at the boundary, and the checks cost ~15-20 % of a RIO L-BFGS fit (a public
    # setting: the arithmetic is the same, the RIO method tests check it).
    with gpytorch.settings.debug(False):
        method.train(ctx)
    ctx.log.info("trained in %.1f s", time.perf_counter() - start)
    return _check_outputs(ctx)


def evaluate_one(ctx, method, predictions=None) -> None:
    """Write the seed's metrics.json: of ``predictions`` (the frame its training has just saved), else of its
    predictions.parquet."""
    from uqcal.core.io import write_json
    from uqcal.pipeline.layout import RunLayout

    metrics = method.evaluate(ctx, predictions)
    bad = [k for k, v in metrics.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
    if bad:
        raise SystemExit(f"method {ctx.method}: non-numeric metrics {bad}")
    metrics = {k: float(v) for k, v in sorted(metrics.items())}
    nonfinite = [k for k, v in metrics.items() if not math.isfinite(v)]
    if nonfinite:
        ctx.log.warning("non-finite metrics: %s", nonfinite)
    write_json(ctx.run_dir / RunLayout.METRICS, {
        "family": ctx.family, "dataset": ctx.dataset, "setting": ctx.setting, "method": ctx.method,
        "seed": ctx.seed, "metrics": metrics,
    })
    ctx.log.info("metrics: %s", ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()))

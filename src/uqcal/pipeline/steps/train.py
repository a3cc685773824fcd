"""`uqcal train` / `uqcal evaluate`: train and score every seed of one (family, dataset, setting, method).

One process runs the seeds one after another into results/<family>/<dataset>/<setting>/<method>/seed<k>/,
restoring seeds an interrupted run had finished and resuming long training from its checkpoint
(uqcal.core.resume).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from uqcal.pipeline.jobs import running

LOG = logging.getLogger("uqcal")


def run(args) -> int:
    """Train and evaluate every seed of the job (or one ``--seed``), resuming what a crash interrupted."""
    if args.seed is not None:  # one seed, for people: not a pipeline job, so no record
        _train_seeds(args, [_single_seed_job(args)])
        return 0
    with running(args, "train", (args.family, args.dataset, args.setting, args.method)) as spec:
        from uqcal.pipeline.config import per_seed_jobs

        _train_seeds(args, per_seed_jobs(spec["job"]))
    return 0


def evaluate(args) -> int:
    """Recompute metrics.json of trained runs from their predictions and train stats."""
    from uqcal.pipeline.config import batch_job, load_config, per_seed_jobs

    if args.seed is not None:
        jobs = [_single_seed_job(args)]
    else:
        config = load_config(args.config or "config/config.yaml")
        jobs = per_seed_jobs(batch_job(config, args.family, args.dataset, args.setting, args.method))
    for one in jobs:
        ctx, method = run_context(one, args)
        evaluate_one(ctx, method)
    return 0


def _single_seed_job(args) -> dict:
    from uqcal.pipeline.config import Run, load_config, run_job

    config = load_config(args.config or "config/config.yaml")
    return run_job(config, Run(args.family, args.dataset, args.setting, args.method, args.seed))


def _train_seeds(args, jobs: list[dict]) -> None:
    from uqcal.core.resume import RESUME_DIR, ResumeStore
    from uqcal.pipeline.config import job_digest
    from uqcal.pipeline.jobs import ancestry, orphaned

    started_under = ancestry()
    stores = []
    for one in jobs:
        run_dir = Path(args.results_dir) / one["family"] / one["dataset"] / one["setting"] / one["method"]
        run_dir = run_dir / f"seed{one['seed']}"
        store = ResumeStore(Path(args.results_dir), run_dir, job_digest(one))
        stores.append(store)
        if store.restore(run_dir):
            LOG.info("seed %d: restored the outputs an interrupted run had finished (%s)", one["seed"], store.path)
            continue
        store.prepare()
        ctx, method = run_context(one, args, resume_dir=store.path)
        train_one(ctx, method)
        if not args.no_evaluate:
            evaluate_one(ctx, method)
            store.keep(run_dir)
    if orphaned(started_under):
        # Snakemake (or DVC) was killed alone: it will run this job again, and has deleted, or will delete, its
        # outputs first. The finished seeds stay where that rerun restores them from.
        LOG.warning("the process that started this job is gone: the finished seeds stay in %s/%s for its rerun",
                    args.results_dir, RESUME_DIR)
        return
    for store in stores:  # the whole batch is done: nothing left to resume
        store.clear()


def run_context(job: dict, args, resume_dir: Path | None = None):
    """RunContext and method instance for a single-seed job."""
    import torch

    from uqcal.core.device import resolve_device
    from uqcal.data import raw_paths
    from uqcal.methods.api import RunContext, get_entry, register_job_family

    register_job_family(job)
    run = (job["family"], job["dataset"], job["setting"], job["method"], job["seed"])
    run_dir = Path(args.results_dir) / "/".join(map(str, run[:4])) / f"seed{run[4]}"
    depends_dir = None
    if job.get("depends_on"):
        depends_dir = Path(args.results_dir) / "/".join(map(str, run[:3])) / job["depends_on"] / f"seed{run[4]}"
    torch.set_num_threads(int(job.get("torch_threads", 1)))
    ctx = RunContext(
        family=run[0], dataset=run[1], setting=run[2], method=run[3], seed=int(run[4]),
        config=job, dataset_spec=job["dataset_spec"], setting_params=job["setting_params"],
        family_params=job["family_params"], params=job["params"], run_dir=run_dir,
        split_path=Path(args.data_dir) / "splits" / run[0] / run[1] / run[2] / f"seed{run[4]}.json",
        raw_path=raw_paths(run[1], args.data_dir)[0], depends_dir=depends_dir,
        device=resolve_device(job.get("device", "auto")), log=logging.getLogger(f"uqcal.{run[3]}"),
        resume_dir=resume_dir,
    )
    method = get_entry(ctx.family, ctx.method).load_class()(ctx.params)
    return ctx, method


def train_one(ctx, method) -> None:
    ctx.log.info("train %s on %s/%s seed %d (device %s)", ctx.method, ctx.dataset, ctx.setting, ctx.seed, ctx.device)
    import gpytorch

    ctx.seed_everything()
    start = time.perf_counter()
    # gpytorch's debug mode (on by default) re-checks inputs and shapes at every model call; the pipeline's
    # inputs are validated at the boundary, and the checks cost ~15-20 % of a RIO L-BFGS fit (a public
    # setting: the arithmetic is the same, tests/test_rio_methods.py checks it).
    with gpytorch.settings.debug(False):
        method.train(ctx)
    ctx.log.info("trained in %.1f s", time.perf_counter() - start)
    missing = [f for f in ("model.pt", "predictions.parquet", "train_stats.json") if not (ctx.run_dir / f).exists()]
    if missing:
        raise SystemExit(f"method {ctx.method} did not write {missing} (must call ctx.save_outputs)")


def evaluate_one(ctx, method) -> None:
    from uqcal.core.io import write_json

    metrics = method.evaluate(ctx)
    bad = [k for k, v in metrics.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
    if bad:
        raise SystemExit(f"method {ctx.method}: non-numeric metrics {bad}")
    metrics = {k: float(v) for k, v in sorted(metrics.items())}
    nonfinite = [k for k, v in metrics.items() if not math.isfinite(v)]
    if nonfinite:
        ctx.log.warning("non-finite metrics: %s", nonfinite)
    write_json(ctx.run_dir / "metrics.json", {
        "family": ctx.family, "dataset": ctx.dataset, "setting": ctx.setting, "method": ctx.method,
        "seed": ctx.seed, "metrics": metrics,
    })
    ctx.log.info("metrics: %s", ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()))

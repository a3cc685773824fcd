"""The `uqcal` command line: one subcommand per pipeline step. Snakemake and DVC rules call only this.

Each step takes either ``--config FILE`` plus the wildcards (for people and DVC), or ``--job JSON`` with
the resolved slice of config the step depends on (for Snakemake, so that editing one method's parameter
reruns exactly that method's jobs).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import time
from pathlib import Path

LOG = logging.getLogger("uqcal")


def _setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _add_job_args(parser: argparse.ArgumentParser, *wildcards: str) -> None:
    parser.add_argument("--config", help="config file (default: config/config.yaml)")
    parser.add_argument("--job", help="resolved job JSON (as the Snakefile passes it)")
    for name in wildcards:
        parser.add_argument(f"--{name}", type=int if name == "seed" else str)


def _config(args):
    from uqcal.config import load_config

    return load_config(args.config or "config/config.yaml")


def _need(args, *names):
    missing = [n for n in names if getattr(args, n) is None]
    if missing:
        raise SystemExit(f"uqcal {args.command}: missing --{' --'.join(missing)} (or pass --job)")


# ------------------------------------------------------------------------------------------ steps
def cmd_materialise(args) -> int:
    from uqcal.data import materialise

    if args.job:
        job = json.loads(args.job)
        name, spec = job["dataset"], job["spec"]
    else:
        config = _config(args)
        name = args.dataset
        if name not in config["datasets"]:
            raise SystemExit(f"uqcal materialise: unknown dataset {name!r}; known: {', '.join(sorted(config['datasets']))}")
        spec = config["datasets"][name]
    path, record = materialise(name, spec, data_dir=args.data_dir)
    LOG.info("materialised %s: %d rows x %d columns -> %s", name, record["rows"], record["columns"], path)
    return 0


def cmd_split(args) -> int:
    from uqcal.config import per_seed_jobs, split_batch_job, split_job, split_path
    from uqcal.data import load_table, raw_paths
    from uqcal.io import write_json
    from uqcal.splits import make_split

    if args.job:
        job = json.loads(args.job)
    else:
        _need(args, "family", "dataset", "setting")
        config = _config(args)
        if args.seed is None:
            job = split_batch_job(config, args.family, args.dataset, args.setting)
        else:
            job = split_job(config, args.family, args.dataset, args.setting, args.seed)
    jobs = per_seed_jobs(job)
    if args.out and len(jobs) > 1:
        raise SystemExit("uqcal split: --out needs a single --seed")
    table = load_table(job["dataset"], spec=job["dataset_spec"], raw_path=raw_paths(job["dataset"], args.data_dir)[0])
    for one in jobs:
        split = make_split(one["family"], table, one["split_params"], one["seed"])
        out = Path(args.out or split_path(one["family"], one["dataset"], one["setting"], one["seed"]))
        write_json(out, split)
        LOG.info("split %s/%s/%s seed %d -> %s", one["family"], one["dataset"], one["setting"], one["seed"], out)
    return 0


def _job(args) -> dict:
    """The job JSON Snakemake passes, or the same job resolved from --config and the wildcards.

    Without --seed, the job covers every seed of the method (as the Snakefile's batched train rule does).
    """
    from uqcal.config import Run, batch_job, run_job

    if args.job:
        return json.loads(args.job)
    _need(args, "family", "dataset", "setting", "method")
    config = _config(args)
    if args.seed is None:
        return batch_job(config, args.family, args.dataset, args.setting, args.method)
    return run_job(config, Run(args.family, args.dataset, args.setting, args.method, args.seed))


def _run_context(job: dict, args, resume_dir: Path | None = None):
    """RunContext and method instance for a single-seed job."""
    import torch

    from uqcal.api import RunContext, get_entry
    from uqcal.data import raw_paths
    from uqcal.device import resolve_device

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


def _train_one(ctx, method) -> None:
    ctx.log.info("train %s on %s/%s seed %d (device %s)", ctx.method, ctx.dataset, ctx.setting, ctx.seed, ctx.device)
    ctx.seed_everything()
    start = time.perf_counter()
    method.train(ctx)
    ctx.log.info("trained in %.1f s", time.perf_counter() - start)
    missing = [f for f in ("model.pt", "predictions.parquet", "train_stats.json") if not (ctx.run_dir / f).exists()]
    if missing:
        raise SystemExit(f"method {ctx.method} did not write {missing} (must call ctx.save_outputs)")


def _evaluate_one(ctx, method) -> None:
    import math

    from uqcal.io import write_json

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


def cmd_train(args) -> int:
    """Train and evaluate every seed of the job in this process, resuming what a crash interrupted."""
    from uqcal.config import job_digest, per_seed_jobs
    from uqcal.resume import ResumeStore

    stores = []
    for one in per_seed_jobs(_job(args)):
        run_dir = Path(args.results_dir) / one["family"] / one["dataset"] / one["setting"] / one["method"]
        run_dir = run_dir / f"seed{one['seed']}"
        store = ResumeStore(Path(args.results_dir), run_dir, job_digest(one))
        stores.append(store)
        if store.restore(run_dir):
            LOG.info("seed %d: restored the outputs an interrupted run had finished (%s)", one["seed"], store.path)
            continue
        store.prepare()
        ctx, method = _run_context(one, args, resume_dir=store.path)
        _train_one(ctx, method)
        if not args.no_evaluate:
            _evaluate_one(ctx, method)
            store.keep(run_dir)
    for store in stores:  # the whole batch is done: nothing left to resume
        store.clear()
    return 0


def cmd_evaluate(args) -> int:
    from uqcal.config import per_seed_jobs

    for one in per_seed_jobs(_job(args)):
        ctx, method = _run_context(one, args)
        _evaluate_one(ctx, method)
    return 0


def cmd_aggregate(args) -> int:
    from uqcal.aggregate import aggregate_family

    if args.job:
        job = json.loads(args.job)
        family, fam = job["family"], job["family_config"]
    else:
        _need(args, "family")
        config = _config(args)
        family, fam = args.family, config["families"][args.family]
    out = Path(args.out or f"{args.results_dir}/{family}/summary.csv")
    summary = aggregate_family(family, fam, Path(args.results_dir), out)
    LOG.info("aggregated %d rows -> %s", len(summary), out)
    return 0


def cmd_report(args) -> int:
    from uqcal.config import load_config
    from uqcal.report.build import build_reports

    config_path = args.config or "config/config.yaml"
    config = load_config(config_path)
    build_reports(
        config=config, config_path=config_path, results_dir=Path(args.results_dir),
        out_dir=Path(args.out), data_dir=Path(args.data_dir), logs_dir=Path(args.logs_dir), jobs=args.jobs,
    )
    return 0


def cmd_dvc_sync(args) -> int:
    from uqcal.config import repo_root_for
    from uqcal.dvc import dvc_commit, write_dvc_yaml

    config_path = args.config or "config/config.yaml"
    root = repo_root_for(config_path)
    # dvc.yaml must name the config relative to the repository, or a clone elsewhere sees every stage changed.
    relative = Path(config_path).resolve()
    if relative.is_relative_to(root.resolve()):
        config_path = relative.relative_to(root.resolve()).as_posix()
    path = write_dvc_yaml(_config(args), config_path, root)
    LOG.info("wrote %s", path)
    if args.commit:
        dvc_commit(root)
        LOG.info("dvc commit done: outputs recorded in dvc.lock and the DVC cache")
    return 0


def cmd_restore_mtimes(args) -> int:
    from uqcal.dvc import restore_mtimes

    count = restore_mtimes(Path("."))
    LOG.info("set the modification times of %d artifacts in pipeline order", count)
    return 0


def cmd_validate(args) -> int:
    from uqcal.config import iter_runs

    config = _config(args)
    runs = list(iter_runs(config))
    print(f"{args.config or 'config/config.yaml'}: valid; {len(runs)} runs over "
          f"{len(config['families'])} families")
    return 0


def cmd_runs(args) -> int:
    from uqcal.config import iter_runs

    for run in iter_runs(_config(args), [args.family] if args.family else None):
        print(run.run_dir)
    return 0


# ------------------------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="uqcal", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--data-dir", default="data", help="data root (default: data)")
    parser.add_argument("--results-dir", default="results", help="results root (default: results)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("materialise", help="fetch/build one dataset into data/raw/<name>.parquet + .json",
                       description="Fetch (download, with checksum) or build one registry dataset and write "
                       "data/raw/<name>.parquet with its provenance record data/raw/<name>.json.")
    p.add_argument("dataset", nargs="?")
    p.add_argument("--config")
    p.add_argument("--job")
    p.set_defaults(func=cmd_materialise)

    p = sub.add_parser("split", help="make task splits / episode sets under data/splits/ (all seeds, or --seed)",
                       description="Write data/splits/<family>/<dataset>/<setting>/seed<k>.json: tasks, "
                       "folds, class splits or BO initial designs, deterministic given the seed.")
    _add_job_args(p, "family", "dataset", "setting", "seed")
    p.add_argument("--out")
    p.set_defaults(func=cmd_split)

    p = sub.add_parser("train", help="train and evaluate a method's runs (all seeds, or one with --seed)",
                       description="Train each seed of (family, dataset, setting, method) into "
                       "results/<family>/<dataset>/<setting>/<method>/seed<k>/ (model.pt, predictions.parquet, "
                       "train_stats.json) and score it (metrics.json). Seeds an interrupted run finished are "
                       "restored, and long training resumes from its last checkpoint (results/.resume/).")
    _add_job_args(p, "family", "dataset", "setting", "method", "seed")
    p.add_argument("--no-evaluate", action="store_true", help="train only; do not write metrics.json")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="recompute metrics.json for trained runs",
                       description="Recompute the family's metrics for trained runs (all seeds, or one with "
                       "--seed) from their predictions and train stats, and write metrics.json.")
    _add_job_args(p, "family", "dataset", "setting", "method", "seed")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("aggregate", help="aggregate a family's metrics.json files into summary.csv",
                       description="Write results/<family>/summary.csv (dataset,setting,method,metric,mean,std,n) "
                       "aggregated over seeds.")
    _add_job_args(p, "family")
    p.add_argument("--out")
    p.set_defaults(func=cmd_aggregate)

    p = sub.add_parser("report", help="write reports/ (HTML + Markdown tables, figures, provenance)",
                       description="Build reports/index.html and one page per family from results/.")
    p.add_argument("--config")
    p.add_argument("--out", default="reports")
    p.add_argument("--logs-dir", default="logs")
    p.add_argument("--jobs", type=int, default=1, help="families built in parallel (default: 1)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("dvc-sync", help="write dvc.yaml for a config (and `dvc commit` finished outputs)",
                       description="Generate dvc.yaml from the same run plan as the Snakefile; with --commit, "
                       "record the outputs of a finished run in dvc.lock and the DVC cache.")
    p.add_argument("--config")
    p.add_argument("--commit", action="store_true")
    p.set_defaults(func=cmd_dvc_sync)

    p = sub.add_parser("restore-mtimes", help="after `dvc pull`/`dvc checkout`: order artifact mtimes for Snakemake",
                       description="DVC checks files out at checkout time and in no particular order; this sets "
                       "the modification times of every dvc.yaml output in pipeline order, so that `snakemake -n` "
                       "sees pulled results as up to date instead of rerunning them.")
    p.set_defaults(func=cmd_restore_mtimes)

    p = sub.add_parser("validate-config", help="validate a config file and count its runs")
    p.add_argument("--config")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("worker", help="serve local jobs from one process with torch & co. preloaded",
                       description="Preload torch, gpytorch, botorch, pandas, scipy, scikit-learn and every "
                       "method, then fork one child per `uqcal` command that reaches it through --socket (the "
                       "Snakefile starts it for local runs and exports UQCAL_WORKER). Saves 3-6 s of import per "
                       "job; see uqcal/worker.py.")
    p.add_argument("--socket", required=True, help="Unix socket path to listen on")
    p.add_argument("--parent", type=int, help="stop when this process (the Snakemake run) is gone")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("runs", help="list the planned run directories")
    p.add_argument("--config")
    p.add_argument("--family")
    p.set_defaults(func=cmd_runs)
    return parser


def cmd_worker(args) -> int:
    from uqcal.worker import serve

    return serve(args.socket, parent_pid=args.parent)


_PIPELINE_STEPS = ("materialise", "split", "train", "evaluate", "aggregate", "report")


def _log_resources(command: str, started: float) -> None:
    # The job's own account: under the preload worker, Snakemake's benchmark files see only the thin client.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime
    LOG.info("uqcal %s: %.1f s wall, %.1f s CPU, peak RSS %.0f MB", command, time.perf_counter() - started, cpu,
             max(usage.ru_maxrss, children.ru_maxrss) / 1024)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] != "worker" and os.environ.get("UQCAL_WORKER"):
        from uqcal.worker import submit

        rc = submit(argv)
        if rc is not None:  # None: no worker reachable, run here
            return rc
    started = time.perf_counter()
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    from uqcal.config import ConfigError
    from uqcal.data.errors import DataSourceError

    try:
        return args.func(args)
    except (ConfigError, DataSourceError) as exc:
        print(f"uqcal {args.command}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.command in _PIPELINE_STEPS:
            _log_resources(args.command, started)


if __name__ == "__main__":
    sys.exit(main())

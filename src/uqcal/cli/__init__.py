"""The `uqcal` command line: one subcommand per pipeline step. Snakemake and DVC rules call only this.

A pipeline step takes either ``--spec FILE`` (the job's spec, written by the Snakefile: the resolved slice
of config it runs from and the code it depends on; see uqcal.pipeline.identity) or ``--config FILE`` plus the wildcards
(for DVC and people); both run the same job and leave the same record. This module imports no step: a
step's module (uqcal.pipeline.steps.<step>) is imported when that step runs, so a job pays for its own imports only.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import time

LOG = logging.getLogger("uqcal")

# command -> "module:function" under uqcal, imported only when the command runs (and written without the
# "uqcal." prefix so that uqcal.pipeline.identity, which reads import names off the source, does not count them as imports)
COMMANDS = {
    "materialise": "steps.materialise:run",
    "split": "steps.split:run",
    "train": "steps.train:run",
    "evaluate": "steps.train:evaluate",
    "aggregate": "steps.aggregate:run",
    "report": "steps.report:run",
    "dvc-sync": "commands:dvc_sync",
    "validate-config": "commands:validate_config",
    "runs": "commands:runs",
    "cost": "progress.cost:run",
}
_JOB_SERVER = "job_server"  # uqcal.cli.job_server, named so (see COMMANDS)
STEPS = ("materialise", "split", "train", "evaluate", "aggregate", "report")  # the pipeline's jobs


def _setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


DEFAULT_CONFIG = "config/config.yaml"
CONFIG_HELP = f"config file (default: {DEFAULT_CONFIG})"

# Help for the wildcards of a job: the names a config declares under families.<family>.
WILDCARD_HELP = {
    "family": "method family, a key of the config's `families` (metareg, rio, qr, fewshot, bo, or a plug-in)",
    "dataset": "dataset name: one of the family's `datasets` in the config",
    "setting": "setting name: a key of families.<family>.settings in the config",
    "method": "method name: a key of families.<family>.methods in the config",
    "seed": "one seed (0, 1, ...; default: every seed the config runs)",
}


class UsageError(Exception):
    """A command line that names something the config does not have (exit status 2, no traceback)."""


def _add_job_args(parser: argparse.ArgumentParser, *wildcards: str) -> None:
    parser.add_argument("--config", help=CONFIG_HELP)
    parser.add_argument("--spec", help="the job's spec file, as the Snakefile writes it (.uqcal/specs/...); replaces "
                        "--config and the names")
    for name in wildcards:
        parser.add_argument(f"--{name}", type=int if name == "seed" else str, help=WILDCARD_HELP[name])


def _need(args, *names) -> None:
    missing = [n for n in names if getattr(args, n) is None]
    if missing and not getattr(args, "spec", None):
        raise UsageError(f"missing --{' --'.join(missing)} (or pass --spec)")


# ------------------------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    from uqcal import __version__

    parser = argparse.ArgumentParser(prog="uqcal", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"uqcal {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages too")
    parser.add_argument("--data-dir", default="data", help="data root (default: data)")
    parser.add_argument("--results-dir", default="results", help="results root (default: results)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("materialise", help="fetch/build one dataset into data/raw/<name>.parquet + .json",
                       description="Fetch (download, with checksum) or build one registry dataset and write "
                       "data/raw/<name>.parquet with its provenance record data/raw/<name>.json.")
    p.add_argument("dataset", nargs="?", help="dataset name: an entry of the config's dataset registry "
                   "(config/datasets.yaml unless the config names others)")
    _add_job_args(p)

    p = sub.add_parser("split", help="make task splits / episode sets under data/splits/ (all seeds, or --seed)",
                       description="Write data/splits/<family>/<dataset>/<setting>/seed<k>.json: tasks, "
                       "folds, class splits or BO initial designs, deterministic given the seed.")
    _add_job_args(p, "family", "dataset", "setting", "seed")
    p.add_argument("--out", help="with --seed: write the split here (default: its place under data/splits/)")

    p = sub.add_parser("train", help="train and evaluate a method's runs (all seeds, or one with --seed)",
                       description="Train each seed of (family, dataset, setting, method) into "
                       "results/<family>/<dataset>/<setting>/<method>/seed<k>/ (model.pt, predictions.parquet, "
                       "train_stats.json) and score it (metrics.json). Seeds an interrupted run finished are "
                       "restored, and long training resumes from its last checkpoint (results/.resume/). With "
                       "--seed, the one seed; where the config runs each seed of the method as a job of its own "
                       "(job_shape), that is the pipeline's job, and it leaves its record.")
    _add_job_args(p, "family", "dataset", "setting", "method", "seed")
    p.add_argument("--no-evaluate", action="store_true", help="train only; do not write metrics.json")

    p = sub.add_parser("evaluate", help="recompute metrics.json for trained runs",
                       description="Recompute the family's metrics for trained runs (all seeds, or one with "
                       "--seed) from their predictions and train stats, and write metrics.json.")
    _add_job_args(p, "family", "dataset", "setting", "method", "seed")

    p = sub.add_parser("aggregate", help="aggregate a family's metrics.json files into runs.parquet and summary.csv",
                       description="Write results/<family>/runs.parquet (dataset,setting,method,seed,metric,value: "
                       "every run's numbers) and results/<family>/summary.csv (dataset,setting,method,metric,mean,"
                       "std,n) aggregated over seeds.")
    _add_job_args(p, "family")
    p.add_argument("--out", help="where summary.csv goes (runs.parquet beside it)")

    p = sub.add_parser("report", help="write reports/ (HTML + Markdown tables, figures, provenance)",
                       description="Build reports/index.html and one page per family from results/.")
    _add_job_args(p)
    p.add_argument("--out", default="reports", help="the report's directory (default: reports)")
    p.add_argument("--jobs", type=_positive_int, default=1, help="families built in parallel (default: 1)")

    p = sub.add_parser("dvc-sync", help="write dvc.yaml for a config (and `dvc commit` finished outputs)",
                       description="Generate dvc.yaml from the same run plan as the Snakefile; with --commit, "
                       "record the outputs of a finished run in dvc.lock and the DVC cache.")
    p.add_argument("--config", help=CONFIG_HELP)
    p.add_argument("--commit", action="store_true", help="also `dvc commit` the outputs of a finished run")

    p = sub.add_parser("validate-config", help="validate a config file and count its runs",
                       description="Check a config file (plain YAML, schema, datasets, method parameters) before "
                       "any job runs, and count the runs it plans.")
    p.add_argument("--config", help=CONFIG_HELP)

    p = sub.add_parser("runs", help="list the planned run directories",
                       description="Print the results directory of every run the config plans, one a line.")
    p.add_argument("--config", help=CONFIG_HELP)
    p.add_argument("--family", help="only this family's runs (a key of the config's `families`)")

    p = sub.add_parser("cost", help="estimate a config's CPU/GPU hours per family and its wall time",
                       description="Cost every job the config plans from this checkout's records and "
                       "config/reference_costs.yaml (paper-scale jobs scaled by their family's work per seed): "
                       "CPU and GPU hours per family, the longest job, the wall time on N cores and G GPUs.")
    p.add_argument("--config", help=CONFIG_HELP)
    p.add_argument("--cores", type=_positive_int, default=1, help="cores the run has (default: 1)")
    p.add_argument("--gpus", type=_non_negative_int, default=0,
                   help="GPUs the run has: jobs requesting one run there (default: 0)")
    p.add_argument("--json", action="store_true", help="print cpu_hours, gpu_hours, longest_job_hours, per_family "
                   "... as JSON")
    p.add_argument("--job-server", action="store_true", help="a local run as `snakemake --cores N` runs it here: "
                   "its train jobs forked from the job server, their start-up paid once (default: once a job, "
                   "as on a cluster)")
    return parser


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


_WILDCARDS = {"materialise": ("dataset",), "split": ("family", "dataset", "setting"),
              "train": ("family", "dataset", "setting", "method"), "evaluate": ("family", "dataset", "setting", "method"),
              "aggregate": ("family",), "report": ()}


def _check_command_line(args) -> None:
    """The names a command line gives, checked before the step starts (and before its resource log)."""
    if args.command in _WILDCARDS:
        _need(args, *_WILDCARDS[args.command])
    _check_names(args)
    if args.command in STEPS:
        _activate_numerics(args)


def _activate_numerics(args) -> None:
    """Pin the step's numerics (the config's ``numerics``; uqcal.core.numerics) before the step imports numpy
    or torch: the variables that choose their kernels are read when they load."""
    from uqcal.core.numerics import activate

    activate(numerics_mode(args))


def numerics_mode(args) -> str:
    """The numerics mode a step runs under: from the job's spec (written by the Snakefile with the job's
    identity) or the config file (DVC, people)."""
    from uqcal.core.numerics import DEFAULT_MODE, mode_of

    if getattr(args, "spec", None):
        import json

        with open(args.spec) as fh:
            return mode_of(json.load(fh)["params"].get("numerics", DEFAULT_MODE))  # identity.numerics_param
    from uqcal.pipeline.config.source import check_raw_config

    return check_raw_config(args.config or DEFAULT_CONFIG).get("numerics", DEFAULT_MODE)


def _run(args) -> int:
    module, _, function = COMMANDS[args.command].partition(":")
    return getattr(importlib.import_module(f"uqcal.pipeline.{module}"), function)(args)


def _check_names(args) -> None:
    """Refuse a family, dataset, setting or method the config does not declare, naming the ones it does.

    Checked on the raw config (plain YAML, no method imports: ~0.05 s) before the step loads it, so a typo
    is one line here instead of a KeyError deep in the step. A job run from its --spec was planned from the
    config and is not checked again.
    """
    if getattr(args, "spec", None) or not any(getattr(args, n, None) for n in ("family", "dataset")):
        return
    from uqcal.pipeline.config.registry import dataset_registry
    from uqcal.pipeline.config.source import check_raw_config, repo_root_for

    config_path = args.config or DEFAULT_CONFIG
    config = check_raw_config(config_path)
    if args.command == "materialise":
        _known("dataset", args.dataset, dataset_registry(config, repo_root_for(config_path)), config_path)
        return
    families = config.get("families") or {}
    _known("family", args.family, families, config_path)
    family = families[args.family] or {}
    for name, declared in (("dataset", "datasets"), ("setting", "settings"), ("method", "methods")):
        value = getattr(args, name, None)
        if value is not None and isinstance(family.get(declared), (dict, list)):
            _known(name, value, family[declared], f"{config_path}: families.{args.family}.{declared}")


def _known(what: str, value: str, declared, where: str) -> None:
    if value not in declared:
        raise UsageError(f"unknown {what} {value!r} (not in {where}); known: {', '.join(map(str, declared)) or 'none'}")


def _named_paths(args) -> set[str]:
    """The files the command line names, as given and resolved."""
    given = [getattr(args, name, None) for name in ("config", "spec")]
    return {form for path in given if path for form in (path, os.path.abspath(path))}


def _is_user_error(exc: BaseException, args) -> bool:
    """Whether ``exc`` means bad input (one line, exit status 2) rather than a bug (traceback, status 1).

    The project's own error classes are taken from the modules that define them only if the step imported
    them: importing uqcal.data just to name its error class would cost a bookkeeping step pandas' start-up.
    A FileNotFoundError counts only for a file the command line names (--config, --spec).
    """
    if isinstance(exc, UsageError):
        return True
    if isinstance(exc, FileNotFoundError):
        return exc.filename is not None and str(exc.filename) in _named_paths(args)
    for module, name in (("uqcal.pipeline.config.source", "ConfigError"), ("uqcal.data.errors", "DataSourceError"),
                         ("uqcal.pipeline.records", "JobError"), ("uqcal.methods.api", "ParameterError"),
                         ("uqcal.core.numerics", "NumericsError"),
                         ("uqcal.core.io", "UnsafeArtifactError")):  # a refused model file: its message says why
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(exc, cls):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    if argv is None and os.environ.get("UQCAL_JOB_SERVER") == "1":
        # A local run's step, forked from a process that has loaded its libraries (uqcal.cli.job_server); by
        # name, so that the server is no job's code dependency. None: this process runs the step itself.
        server = importlib.import_module(f"uqcal.cli.{_JOB_SERVER}")
        if server.serves(sys.argv[1:]) and (status := server.run_through_server(sys.argv[1:])) is not None:
            return status
    started = time.perf_counter()
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    args.started = started
    # Process-wide settings (the train step's collector while it imports, the exit without teardown) only where
    # uqcal is the process's program, never in a caller's process (tests, notebooks).
    args.own_process = argv is None
    _setup_logging(args.verbose)
    try:
        _check_command_line(args)
    except Exception as exc:
        return _report_user_error(exc, args)
    try:
        status = _run(args)
    except Exception as exc:
        return _report_user_error(exc, args)
    finally:
        if args.command in STEPS:
            from uqcal.pipeline.records import resource_usage

            usage = resource_usage(started)
            LOG.info("uqcal %s: %.1f s wall, %.1f s CPU, peak RSS %.0f MB", args.command, usage["wall_seconds"],
                     usage["cpu_seconds"], usage["max_rss_mb"])
    if args.own_process and not status and args.command in STEPS:
        exit_without_teardown()
    return status


def _report_user_error(exc: Exception, args) -> int:
    """Print a user's mistake as one line and return exit status 2; re-raise anything else (a bug). A pipeline
    step on an install without the extra it needs (the base install has no yaml, torch, Snakemake) says which."""
    from uqcal.core.lazy import EXTRA_OF_MODULE

    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").partition(".")[0] in EXTRA_OF_MODULE:
        extra = EXTRA_OF_MODULE[exc.name.partition(".")[0]]
        print(f"uqcal {args.command}: error: needs {exc.name!r}, which this install of uqcal leaves out: "
              f"pip install 'uqcal[{extra}]'", file=sys.stderr)
        return 2
    if not _is_user_error(exc, args):
        raise exc
    message = f"{exc.strerror}: {exc.filename}" if isinstance(exc, FileNotFoundError) else str(exc)
    print(f"uqcal {args.command}: error: {message}", file=sys.stderr)
    return 2


def exit_without_teardown() -> None:
    """End a pipeline step's process that has succeeded without Python's interpreter teardown.

    Finalising the modules a step has imported (torch, gpytorch, torch._dynamo's sympy, pandas, scikit-learn)
    costs 0.5-2 s of CPU per process (docs/experiments/process_teardown.py), and a default run starts ~115
    such processes. A step has written and renamed every output before it returns, so only the standard
    streams and the log handlers are left to flush.
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())

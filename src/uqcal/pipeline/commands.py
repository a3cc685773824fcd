"""`uqcal dvc-sync`, `uqcal validate-config`, `uqcal runs`: commands around the pipeline, not steps of it."""

from __future__ import annotations

import logging
from pathlib import Path

LOG = logging.getLogger("uqcal")


def dvc_sync(args) -> int:
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.config.source import repo_root_for
    from uqcal.pipeline.dvc import dvc_commit, write_dvc_yaml

    config_path = args.config or "config/config.yaml"
    root = repo_root_for(config_path)
    # dvc.yaml must name the config relative to the repository, or a clone elsewhere sees every stage changed.
    relative = Path(config_path).resolve()
    if relative.is_relative_to(root.resolve()):
        config_path = relative.relative_to(root.resolve()).as_posix()
    path = write_dvc_yaml(load_config(args.config or "config/config.yaml"), config_path, root)
    LOG.info("wrote %s", path)
    if args.commit:
        dvc_commit(root)
        LOG.info("dvc commit done: outputs recorded in dvc.lock and the DVC cache")
    return 0


def validate_config(args) -> int:
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.config.machine import device_problem
    from uqcal.pipeline.config.runs import iter_runs
    from uqcal.pipeline.config.source import ConfigError
    from uqcal.pipeline.report.build import load_spec
    from uqcal.pipeline.report.claim_runs import claim_runs_problems
    from uqcal.pipeline.report.spec_check import check_report_specs

    config = load_config(args.config or "config/config.yaml")
    check_report_specs(list(config["families"]))  # each family's report.yaml and margins, before any job
    if problem := device_problem(config["device"]):
        raise ConfigError(problem)
    runs = list(iter_runs(config))
    print(f"{args.config or 'config/config.yaml'}: valid; {len(runs)} runs over {len(config['families'])} families")
    # Rows that cannot reach the runs the config declares for their claim: known before any job runs.
    for problem in claim_runs_problems(config, {f: load_spec(f) for f in config["families"]}):
        print(f"warning: {problem}")
    return 0


def runs(args) -> int:
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.config.runs import iter_runs

    for run in iter_runs(load_config(args.config or "config/config.yaml"), [args.family] if args.family else None):
        print(run.run_dir)
    return 0

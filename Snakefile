# uqcal workflow: data -> splits -> train -> evaluate -> aggregate -> report.
# Rules are thin: every step is a `uqcal` subcommand. See README.md and docs/ARCHITECTURE.md.
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")

# Before anything else: each config file and every file it `extends`, read raw as plain YAML
# (uqcal.pipeline.config.source.check_raw_config). A YTE template (`__use_yte__`) is refused: its Python would run
# as Snakemake loads it. `make` checks the same before it starts Snakemake, which (for --configfile) has loaded the
# file by the time this runs. Snakemake reads the file alone: common.smk composes the files it extends.
import os

from uqcal.pipeline.config.source import ConfigError, check_raw_config, profile_problem

# A cluster profile given as --profile loses to workflow/profiles/default (threads, latency-wait, keep-going).
if workflow.is_main_process and (_problem := profile_problem(sys.argv, dict(os.environ))):
    raise WorkflowError(_problem)
for _raw_config in workflow.overwrite_configfiles or ["config/config.yaml"]:
    try:
        check_raw_config(_raw_config)
    except ConfigError as exc:
        raise WorkflowError(f"invalid configuration: {exc}")

# `configfile:` deep-merges with --configfile; load the default only when none is given, so that
# `--configfile config/smoke.yaml` means exactly that file.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


from uqcal.pipeline.progress.run import start_snakemake

PROGRESS = []  # the run's progress watcher, once onstart has started it


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        expand(SUMMARY, family=FAMILY_NAMES),
        "reports/index.html",
    default_target: True


# A progress line with an ETA from the jobs' recorded costs, and the report's path at the end (uqcal.pipeline.progress).
onstart:
    check_device()
    start_job_server()
    PROGRESS.append(start_snakemake(workflow, logger.info))


onerror:
    stop_job_server()
    for _progress in filter(None, PROGRESS):
        _progress.fail()


onsuccess:
    stop_job_server()
    # Keep DVC in step with what Snakemake produced: same plan, outputs committed to the DVC cache. A refused
    # commit (a file that is not what its job wrote) or any other DVC failure fails the run: exit status 1.
    if Path(".dvc").is_dir():
        try:
            shell("uqcal dvc-sync --config {CONFIG_FILE:q} --commit")
        except Exception:
            for _progress in filter(None, PROGRESS):
                _progress.fail()
            raise WorkflowError("the jobs finished, but `uqcal dvc-sync --commit` failed (its message is above): "
                                "nothing was committed to DVC, and the run fails")
    for _progress in filter(None, PROGRESS):
        _progress.finish()  # the run's last lines: its time, the report's path, the claims' headline

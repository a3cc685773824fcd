# uqcal workflow: data -> splits -> train -> evaluate -> aggregate -> report.
# Rules are thin: every step is a `uqcal` subcommand. See README.md and docs/ARCHITECTURE.md.
import os
import sys

from snakemake.utils import min_version

min_version("9.0")

# `configfile:` deep-merges with --configfile; load the default only when none is given, so that
# `--configfile config/smoke.yaml` means exactly that file.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        expand("results/{family}/summary.csv", family=FAMILY_NAMES),
        "reports/index.html",
    default_target: True


# Local runs: jobs fork from one `uqcal worker` that has torch, gpytorch, botorch, pandas, scipy and every
# method imported (uqcal/worker.py) instead of paying 3-6 s of imports each. Cluster jobs never see it.
_WORKER = {}


onstart:
    if UQ.get("preload_worker", True) and workflow.local_exec:
        from uqcal import worker

        _WORKER["process"], _WORKER["socket"] = worker.start("logs/worker.log")
        os.environ[worker.WORKER_ENV] = _WORKER["socket"]


def stop_worker():
    if _WORKER:
        from uqcal import worker

        os.environ.pop(worker.WORKER_ENV, None)
        worker.stop(_WORKER.pop("process"), _WORKER.pop("socket"))


onsuccess:
    # Keep DVC in step with what Snakemake produced: same plan, outputs committed to the DVC cache.
    # A DVC problem must not turn a finished run into a failed one: report it loudly instead.
    try:
        if Path(".dvc").is_dir():
            try:
                shell("uqcal dvc-sync --config {CONFIG_FILE:q} --commit")
            except Exception as exc:
                print(f"WARNING: results are complete, but `uqcal dvc-sync --commit` failed: {exc}", file=sys.stderr)
    finally:
        stop_worker()


onerror:
    stop_worker()

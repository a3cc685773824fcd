# Shared set-up: validate the config before any job runs, and build the run plan.
import json
from pathlib import Path

from snakemake.exceptions import WorkflowError

from uqcal.config import (
    ConfigError,
    Run,
    dataset_job,
    iter_runs,
    prepare_config,
    raw_dependencies,
    run_job,
    split_job,
)

CONFIG_FILE = (
    str(workflow.overwrite_configfiles[-1]) if workflow.overwrite_configfiles else "config/config.yaml"
)
try:
    UQ = prepare_config(config, Path(workflow.basedir))
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration in {CONFIG_FILE}: {exc}")

FAMILY_NAMES = list(UQ["families"])
RUNS = list(iter_runs(UQ))
RUNS_BY_FAMILY = {f: [r for r in RUNS if r.family == f] for f in FAMILY_NAMES}
DEPENDS = {}  # (family, method) -> method whose run directory it reuses
for _run in RUNS:
    _key = (_run.family, _run.method)
    if _key not in DEPENDS:
        DEPENDS[_key] = run_job(UQ, _run)["depends_on"]

RUN_DIR = "results/{family}/{dataset}/{setting}/{method}/seed{seed}"
TRAIN_OUTPUTS = ("model.pt", "predictions.parquet", "train_stats.json")


# Seconds-long bookkeeping runs on the submit host: a cluster job would spend longer queueing than running.
# Downloads (materialise) and the report are declared local in data.smk and report.smk.
localrules:
    split,
    aggregate,


wildcard_constraints:
    family="|".join(FAMILY_NAMES) or "none",
    dataset=r"[A-Za-z0-9_.+-]+",
    setting=r"[A-Za-z0-9_.+-]+",
    method=r"[A-Za-z0-9_.+-]+",
    seed=r"\d+",


def as_run(w):
    return Run(w.family, w.dataset, w.setting, w.method, int(w.seed))


def family_resource(family, key, default):
    return (UQ["families"][family].get("resources") or {}).get(key, default)


def job_json(job):
    return json.dumps(job, sort_keys=True, separators=(",", ":"))


def train_inputs(w):
    inputs = {
        "split": f"data/splits/{w.family}/{w.dataset}/{w.setting}/seed{w.seed}.json",
        "raw": f"data/raw/{w.dataset}.parquet",
    }
    dep = DEPENDS.get((w.family, w.method))
    if dep:
        base = f"results/{w.family}/{w.dataset}/{w.setting}/{dep}/seed{w.seed}"
        inputs["depends"] = [f"{base}/{name}" for name in TRAIN_OUTPUTS]
    return inputs

# Shared set-up: validate the config before any job runs, and build the run plan.
import json
import os
from pathlib import Path

from snakemake.exceptions import WorkflowError

from uqcal.config import (
    ConfigError,
    batch_job,
    dataset_job,
    iter_batches,
    prepare_config,
    raw_dependencies,
    split_batch_job,
)
from uqcal.api import get_entry
from uqcal.snakemake_fixes import single_reevaluation_timer

# Snakemake's scheduler otherwise grows one never-ending timer chain per job event (uqcal/snakemake_fixes.py).
single_reevaluation_timer()

CONFIG_FILE = (
    str(workflow.overwrite_configfiles[-1]) if workflow.overwrite_configfiles else "config/config.yaml"
)
if Path(CONFIG_FILE).resolve().is_relative_to(Path.cwd().resolve()):
    # Relative, so that a moved or cloned repository (and DVC) sees the same input path.
    CONFIG_FILE = Path(CONFIG_FILE).resolve().relative_to(Path.cwd().resolve()).as_posix()
try:
    UQ = prepare_config(config, Path(workflow.basedir))
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration in {CONFIG_FILE}: {exc}")

FAMILY_NAMES = list(UQ["families"])
BATCHES = list(iter_batches(UQ))
BATCHES_BY_FAMILY = {f: [b for b in BATCHES if b.family == f] for f in FAMILY_NAMES}
# (family, method) -> the method whose trained runs it builds on, if any
DEPENDS = {(f, m): get_entry(f, m).depends_on for f in FAMILY_NAMES for m in UQ["families"][f]["methods"]}
# Methods whose runs others build on (rio's network, qr's base models, fewshot's *_ts bases) start first,
# so the chains behind them are not left for the end of a run with cores idle.
UPSTREAM = {(f, dep) for (f, _), dep in DEPENDS.items() if dep}

METHOD_DIR = "results/{family}/{dataset}/{setting}/{method}"  # seed<k>/ folders inside
SPLIT_DIR = "data/splits/{family}/{dataset}/{setting}"  # seed<k>.json inside


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


def family_resource(family, key, default, dataset=None):
    """families.<family>.resources[key], overridden by resources.per_dataset.<dataset>[key]."""
    resources = UQ["families"][family].get("resources") or {}
    override = (resources.get("per_dataset") or {}).get(dataset) or {}
    return override.get(key, resources.get(key, default))


def job_json(job):
    return json.dumps(job, sort_keys=True, separators=(",", ":"))


def train_inputs(w):
    inputs = {
        "splits": SPLIT_DIR.format(family=w.family, dataset=w.dataset, setting=w.setting),
        "raw": f"data/raw/{w.dataset}.parquet",
    }
    dep = DEPENDS.get((w.family, w.method))
    if dep:  # a method built on another's trained runs (e.g. isotonic recalibration of DVI)
        inputs["depends"] = METHOD_DIR.format(family=w.family, dataset=w.dataset, setting=w.setting, method=dep)
    return inputs


# Report outputs are declared here (not in report.smk) because `snakemake --lint` wants functions
# in common files; see report.smk.
REPORT_TITLES = {
    "metareg": "metareg: Iwata & Kumagai",
    "rio": "rio: RIO (Qiu et al.)",
    "qr": "qr: quantile regularization",
    "fewshot": "fewshot: MD-BFSC (Ke et al.)",
    "bo": "bo: calibrated BO (Deshpande & Kuleshov)",
}


def _report_outputs():
    """Per family: its figures and its table fragments as report directories."""
    outputs = {}
    for family in FAMILY_NAMES:
        category = REPORT_TITLES.get(family, family)
        outputs[f"{family}_figures"] = report(
            directory(f"reports/{family}/figures"),
            patterns=["{figure}__{dataset}__{setting}.svg"],
            caption=f"../report/{family}.rst",
            category=category,
            subcategory="{dataset}",
            labels={"figure": "{figure}", "dataset": "{dataset}", "setting": "{setting}"},
        )
        outputs[f"{family}_tables"] = report(
            directory(f"reports/{family}/tables"),
            patterns=["{table}.html"],
            caption="../report/table.rst",
            category=category,
            subcategory="tables",
            labels={"table": "{table}"},
        )
    return outputs


# Local runs: jobs fork from one `uqcal worker` that has torch, gpytorch, botorch, pandas, scipy and every
# method imported (uqcal/worker.py) instead of paying 3-6 s of imports each. Cluster jobs never see it.
_WORKER = {}


def start_worker():
    if UQ.get("preload_worker", True) and workflow.local_exec:
        from uqcal import worker

        _WORKER["process"], _WORKER["socket"] = worker.start("logs/worker.log")
        os.environ[worker.WORKER_ENV] = _WORKER["socket"]


def stop_worker():
    if _WORKER:
        from uqcal import worker

        os.environ.pop(worker.WORKER_ENV, None)
        worker.stop(_WORKER.pop("process"), _WORKER.pop("socket"))

# Shared set-up: validate the config, build the run plan (uqcal.pipeline.plan), and write each job's spec
# (uqcal.pipeline.records).
import os
import sys
from functools import cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

from uqcal.pipeline import locks as L
from uqcal.pipeline import plan as P
from uqcal.pipeline import records as R
from uqcal.pipeline.config.load import prepare_config
from uqcal.pipeline.config.source import ConfigError, compose
from uqcal.pipeline.layout import RunLayout

CONFIG_FILE = (
    str(workflow.overwrite_configfiles[-1]) if workflow.overwrite_configfiles else "config/config.yaml"
)
if Path(CONFIG_FILE).resolve().is_relative_to(Path.cwd().resolve()):
    # Relative, so that a moved or cloned repository (and DVC) sees the same input path.
    CONFIG_FILE = Path(CONFIG_FILE).resolve().relative_to(Path.cwd().resolve()).as_posix()
try:
    # Snakemake read the config file alone: the files it `extends` are composed here, as every uqcal command
    # composes them (uqcal.pipeline.config.source), so that the workflow runs the config that uqcal validates.
    UQ = prepare_config(compose(CONFIG_FILE, config).data, Path(workflow.basedir))
except ConfigError as exc:
    raise WorkflowError(f"invalid configuration in {CONFIG_FILE}: {exc}")

FAMILY_NAMES = list(UQ["families"])
PLAN = P.plan(UQ)
JOBS = {(job.rule, job.key): job for job in PLAN}

# Who decides what is stale (docs/ARCHITECTURE.md): each job's record against what the job is made from
# now (uqcal.pipeline.records). A stale job's spec is dated now; current specs and records are dated 1970 and data
# inputs are ancient (job_inputs), so file dates from git, `dvc pull` or `dvc checkout` decide nothing,
# and `rerun-triggers: mtime` in the profiles keeps .snakemake/metadata (absent in a fresh clone) out too.
# One writer per checkout (uqcal.pipeline.locks.hold_checkout): the main Snakemake process takes the checkout
# before it writes a spec and keeps it until it ends; a second command here, a dry run too, is one line and exit 2.
# A cluster job's Snakemake (not the main process) writes no spec: the run that submitted it did.
if workflow.is_main_process:
    try:
        _CHECKOUT = L.hold_checkout(CONFIG_FILE, workflow.output_settings.dryrun)
    except L.CheckoutBusy as exc:
        print(f"uqcal: {exc}", file=sys.stderr, flush=True)
        os._exit(L.CHECKOUT_BUSY_EXIT)  # before Snakemake writes anything (its own metadata, locks or logs)
    for _job, _reason in R.refresh_specs(UQ, CONFIG_FILE, PLAN).items():
        logger.info(f"{_job.rule} {_job.name}: outputs out of date ({_reason})")
    # dvc.yaml in step with the config as composed now (`extends:`): its params name the file that sets each value
    # today, so that `dvc status` after `snakemake -n` sees an override of an inherited value as Snakemake does.
    if Path(".dvc").is_dir():
        from uqcal.pipeline.dvc import write_dvc_yaml

        write_dvc_yaml(UQ, CONFIG_FILE)

# Methods whose runs others build on (rio's network, qr's base models, fewshot's *_ts bases) start first,
# so the chains behind them are not left for the end of a run with cores idle.
UPSTREAM = {(job.key[0], up.key[3]) for job in PLAN if job.rule == "train"
            for up in P.upstream(UQ, job) if up.rule == "train"}

# The rules' outputs: uqcal.pipeline.layout's paths, with wildcards for the names.
_LAYOUT = RunLayout()
RAW_PARQUET, RAW_PROVENANCE = (path.as_posix() for path in _LAYOUT.raw_files("{dataset}"))
SPLIT_DIR = _LAYOUT.split_dir("{family}", "{dataset}", "{setting}").as_posix()  # seed<k>.json inside
METHOD_DIR = _LAYOUT.method_dir("{family}", "{dataset}", "{setting}", "{method}").as_posix()  # seed<k>/ inside
SEED_DIR = _LAYOUT.run_dir("{family}", "{dataset}", "{setting}", "{method}", "{seed}").as_posix()  # one seed's job
SUMMARY = _LAYOUT.summary("{family}").as_posix()
RUNS = _LAYOUT.runs("{family}").as_posix()


def start_job_server():
    """Local execution: the jobs' `uqcal` steps fork from one process that has loaded their libraries
    (uqcal.cli.job_server), instead of each importing them anew. Off with UQCAL_JOB_SERVER=0; never for a
    cluster executor, whose jobs run in allocations of their own."""
    if workflow.local_exec:
        os.environ.setdefault("UQCAL_JOB_SERVER", "1")


def stop_job_server():
    """The end of a run: its server writes its account (.uqcal/job-server/) and exits."""
    if os.environ.get("UQCAL_JOB_SERVER") == "1":
        from uqcal.cli.job_server import stop_server

        stop_server()


def check_device():
    """A CUDA device on a machine without one fails before any job starts, not in training (onstart: the
    executor is known then; a cluster run checks it in each job, on the node that has the GPU)."""
    from uqcal.pipeline.config.machine import device_problem

    if workflow.local_exec and (problem := device_problem(UQ["device"])):
        raise WorkflowError(f"invalid configuration in {CONFIG_FILE}: {problem}")


def record(rule, pattern):
    return f"{P.RECORDS}/{rule}/{pattern}.json"


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


# Local source files (a csv source's `path`) that are not there yet, e.g. config/paper.yaml's
# data/downloads/ahm.csv, which is placed by hand: a dry run names each as a missing input and plans on; a run
# stops on it in the job that reads it (Snakemake's MissingInputException names the file).
MISSING_LOCAL = {path: job for job in PLAN for path in P.local_files(UQ, job) if not Path(path).exists()}
if workflow.is_main_process and workflow.output_settings.dryrun:
    for _path, _job in MISSING_LOCAL.items():
        _note = UQ["datasets"][_job.key[0]].get("note")
        logger.warning(f"missing input: {_path} (datasets.{_job.key[0]}.source.path; a run needs it"
                       + (f": {_note})" if _note else ")"))


def job_inputs(rule):
    """A job's inputs: its spec, its upstream jobs' records and their artifacts.

    The artifacts (and local source files, P.local_files) are `ancient`: their dates never make a job stale (after `dvc pull` they are arbitrary).
    The spec's date says whether the job itself is stale; an upstream record links the job to an upstream
    job, so that when Snakemake reruns that job it reruns this one too. Records and current specs are
    dated 1970 (uqcal.pipeline.records.refresh_specs), so only a stale spec is ever newer than a job's outputs.
    """

    def inputs(w):
        key = tuple(w[name] for name in ("family", "dataset", "setting", "method") if name in w.keys())
        if "seed" in w.keys():  # a train job of one seed (train_seed): its key ends in the seed's folder name
            key += (_LAYOUT.seed_dir_name(w.seed),)
        job = JOBS[(rule, key)]
        _await_earlier_job(job)
        local = P.local_files(UQ, job)
        if workflow.output_settings.dryrun:  # reported once at start-up (MISSING_LOCAL), not a failed plan
            local = [path for path in local if path not in MISSING_LOCAL]
        return {
            "spec": job.spec_path,
            "records": [up.record_path for up in P.upstream(UQ, job)],
            "data": [ancient(path) for path in P.inputs(UQ, job) + local],
        }

    return inputs


@cache
def _await_earlier_job(job):
    """An earlier run's job (a killed Snakemake's orphan) still writing this job's outputs: wait for it here,
    before Snakemake deletes them to run the job (uqcal.pipeline.locks.await_earlier_job). Once per job."""
    if workflow.is_main_process:
        L.await_earlier_job(UQ, CONFIG_FILE, job, workflow.output_settings.dryrun, logger.warning)


@cache
def _train_resources(family, dataset, method):
    return P.resources(UQ, family, dataset, method)


def train_resource(w, key):
    """families.<f>.resources, overridden per dataset, then per method (uqcal.pipeline.plan.resources).

    Cached: Snakemake re-evaluates every waiting job's resources, threads and priority on each pass of its
    scheduling loop (thousands of passes in a default run; workflow/profiles/default/config.yaml), and the
    config does not change during a run.
    """
    return _train_resources(w.family, w.dataset, w.method).get(key)


# A partition in the config reaches sbatch (-p); without one, the rule declares none, so that
# `--default-resources slurm_partition=...` or `--set-resources train:slurm_partition=...` (and train_seed:) decide.
TRAIN_PARTITION = {}
_TRAIN_KEYS = [(job.key[0], job.key[1], job.key[3]) for job in PLAN if job.rule == "train"]
if any("slurm_partition" in P.resources(UQ, *key) for key in _TRAIN_KEYS):
    TRAIN_PARTITION["slurm_partition"] = lambda w: train_resource(w, "slurm_partition")


def _report_outputs():
    """Per family: its figures and its table fragments (directories the report fills)."""
    outputs = {}
    for family in FAMILY_NAMES:
        outputs[f"{family}_figures"] = directory(f"reports/{family}/figures")
        outputs[f"{family}_tables"] = directory(f"reports/{family}/tables")
    return outputs

# Training and evaluation, then aggregation.
#
# One train job = every seed of one (family, dataset, setting, method), in one process: `uqcal train`
# trains and scores each seed in turn into results/<family>/<dataset>/<setting>/<method>/seed<k>/.
# Why batch: the Python/torch start-up (~2-3 s CPU) is paid once per method rather than once per seed, and
# a cluster run submits hundreds of sbatch jobs instead of tens of thousands (issue 9, "Load"); declaring
# the method folder as one directory output also keeps `snakemake -n` on the paper protocols fast.
# Seeds that an interrupted job finished are restored on rerun, and long training resumes from its last
# checkpoint (uqcal.core.resume).
# Where the config's job_shape says a method's seeds together would run longer than a cluster job should
# (uqcal.pipeline.plan.one_seed_per_job), each seed is a job of its own instead: train_seed below.


rule train:
    input:
        unpack(job_inputs("train")),
    output:
        runs=directory(METHOD_DIR),
        record=record("train", "{family}/{dataset}/{setting}/{method}"),
    log:
        "logs/train/{family}/{dataset}/{setting}/{method}.log",
    conda:
        "../envs/uqcal.yaml"
    # families.<f>.resources -> resources.per_dataset.<d> -> resources.per_method.<m> (uqcal.pipeline.plan.resources);
    # cpus is the rule's threads, so sbatch gets --cpus-per-task (or --cpus-per-gpu with gpu > 0).
    threads: lambda w: train_resource(w, "cpus")
    # resources.priority (the longest jobs first, so that a run does not end on one long job with a core
    # idle), one more for a job other train jobs wait for.
    priority: lambda w: train_resource(w, "priority") + (1 if (w.family, w.method) in UPSTREAM else 0)
    resources:
        mem_mb=lambda w: train_resource(w, "mem_mb"),
        runtime=lambda w: train_resource(w, "runtime"),
        gpu=lambda w: train_resource(w, "gpu"),
        cpus_per_gpu=lambda w: train_resource(w, "cpus_per_gpu"),
        **TRAIN_PARTITION,
    shell:
        "uqcal train --spec {input.spec:q} 2>> {log:q}"


# One seed of a method whose seeds run as one job each (config `job_shape`): the same job in every other
# respect (its spec, resources, threads, priority and command), writing its seed's folder only. The aggregate
# reads the seeds' folders as it reads a whole method's. `--set-resources` names this rule as well as train.
use rule train as train_seed with:
    output:
        runs=directory(SEED_DIR),
        record=record("train", "{family}/{dataset}/{setting}/{method}/seed{seed}"),
    log:
        "logs/train/{family}/{dataset}/{setting}/{method}/seed{seed}.log",


rule aggregate:
    input:
        unpack(job_inputs("aggregate")),
    output:
        summary=SUMMARY,
        runs=RUNS,
        record=record("aggregate", "{family}"),
    log:
        "logs/aggregate/{family}.log",
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "uqcal aggregate --spec {input.spec:q} 2>> {log:q}"

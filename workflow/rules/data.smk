# Data: materialise registry datasets (downloads happen here, so it is a local rule) and make splits.
# Every step runs from its spec (.uqcal/specs/..., written by common.smk) and leaves a record
# (.uqcal/records/...): see uqcal/pipeline/records.py and docs/ARCHITECTURE.md, "Who decides what is stale".


localrules:
    materialise,


rule materialise:
    input:
        unpack(job_inputs("materialise")),
    output:
        parquet=RAW_PARQUET,
        provenance=RAW_PROVENANCE,
        record=record("materialise", "{dataset}"),
    log:
        "logs/materialise/{dataset}.log",
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    # Seconds of work that every train job waits for: first, so that no chain of train jobs starts late
    # (Snakemake does not pass a job's priority on to the jobs it depends on).
    priority: 10
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal materialise --spec {input.spec:q} 2>> {log:q}"


# All seeds of one (family, dataset, setting) in one job, into one folder (as training; see train.smk).
rule split:
    input:
        unpack(job_inputs("split")),
    output:
        split=directory(SPLIT_DIR),
        record=record("split", "{family}/{dataset}/{setting}"),
    log:
        "logs/split/{family}/{dataset}/{setting}.log",
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    priority: 10  # as materialise
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal split --spec {input.spec:q} 2>> {log:q}"

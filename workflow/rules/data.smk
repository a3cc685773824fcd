# Data: materialise registry datasets (downloads happen here, so it is a local rule) and make splits.


localrules:
    materialise,


rule materialise:
    input:
        lambda w: [f"data/raw/{d}.parquet" for d in raw_dependencies(UQ, w.dataset)],
    output:
        parquet="data/raw/{dataset}.parquet",
        provenance="data/raw/{dataset}.json",
    params:
        job=lambda w: job_json(dataset_job(UQ, w.dataset)),
    log:
        "logs/materialise/{dataset}.log",
    benchmark:
        "logs/bench/materialise/{dataset}.tsv"
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal materialise --job {params.job:q} 2> {log}"


# All seeds of one (family, dataset, setting) in one job, into one folder (as training; see train.smk).
rule split:
    input:
        "data/raw/{dataset}.parquet",
    output:
        directory(SPLIT_DIR),
    params:
        job=lambda w: job_json(split_batch_job(UQ, w.family, w.dataset, w.setting)),
    log:
        "logs/split/{family}/{dataset}/{setting}.log",
    benchmark:
        "logs/bench/split/{family}/{dataset}/{setting}.tsv"
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal split --job {params.job:q} 2> {log}"

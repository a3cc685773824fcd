# Training and evaluation of every (family, dataset, setting, method, seed) run, then aggregation.


rule train:
    input:
        unpack(train_inputs),
    output:
        model="results/{family}/{dataset}/{setting}/{method}/seed{seed}/model.pt",
        predictions="results/{family}/{dataset}/{setting}/{method}/seed{seed}/predictions.parquet",
        stats="results/{family}/{dataset}/{setting}/{method}/seed{seed}/train_stats.json",
    params:
        job=lambda w: job_json(run_job(UQ, as_run(w))),
    log:
        "logs/train/{family}/{dataset}/{setting}/{method}/seed{seed}.log",
    benchmark:
        "logs/bench/train/{family}/{dataset}/{setting}/{method}/seed{seed}.tsv"
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    resources:
        mem_mb=lambda w: family_resource(w.family, "mem_mb", 4000),
        runtime=lambda w: family_resource(w.family, "runtime", 60),
        gpu=lambda w: family_resource(w.family, "gpu", 0),
        cpus_per_gpu=lambda w: family_resource(w.family, "cpus_per_gpu", 4),
    shell:
        "uqcal train --job {params.job:q} 2> {log}"


rule evaluate:
    input:
        "results/{family}/{dataset}/{setting}/{method}/seed{seed}/model.pt",
        "results/{family}/{dataset}/{setting}/{method}/seed{seed}/predictions.parquet",
        "results/{family}/{dataset}/{setting}/{method}/seed{seed}/train_stats.json",
    output:
        "results/{family}/{dataset}/{setting}/{method}/seed{seed}/metrics.json",
    params:
        job=lambda w: job_json(run_job(UQ, as_run(w))),
    log:
        "logs/evaluate/{family}/{dataset}/{setting}/{method}/seed{seed}.log",
    benchmark:
        "logs/bench/evaluate/{family}/{dataset}/{setting}/{method}/seed{seed}.tsv"
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal evaluate --job {params.job:q} 2> {log}"


rule aggregate:
    input:
        lambda w: [f"{r.run_dir}/metrics.json" for r in RUNS_BY_FAMILY[w.family]],
    output:
        "results/{family}/summary.csv",
    params:
        job=lambda w: job_json({"family": w.family, "family_config": UQ["families"][w.family]}),
    log:
        "logs/aggregate/{family}.log",
    benchmark:
        "logs/bench/aggregate/{family}.tsv"
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "uqcal aggregate --job {params.job:q} 2> {log}"

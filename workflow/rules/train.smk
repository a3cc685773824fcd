# Training and evaluation of every (family, dataset, setting, method, seed) run, then aggregation.


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


rule train:
    input:
        unpack(train_inputs),
    output:
        model=RUN_DIR + "/model.pt",
        predictions=RUN_DIR + "/predictions.parquet",
        stats=RUN_DIR + "/train_stats.json",
    params:
        job=lambda w: job_json(run_job(UQ, as_run(w))),
    log:
        "logs/train/{family}/{dataset}/{setting}/{method}/seed{seed}.log",
    benchmark:
        "logs/bench/train/{family}/{dataset}/{setting}/{method}/seed{seed}.tsv"
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
        RUN_DIR + "/model.pt",
        RUN_DIR + "/predictions.parquet",
        RUN_DIR + "/train_stats.json",
    output:
        RUN_DIR + "/metrics.json",
    params:
        job=lambda w: job_json(run_job(UQ, as_run(w))),
    log:
        "logs/evaluate/{family}/{dataset}/{setting}/{method}/seed{seed}.log",
    benchmark:
        "logs/bench/evaluate/{family}/{dataset}/{setting}/{method}/seed{seed}.tsv"
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
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "uqcal aggregate --job {params.job:q} 2> {log}"

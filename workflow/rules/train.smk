# Training and evaluation, then aggregation.
#
# One train job = every seed of one (family, dataset, setting, method), in one process: `uqcal train`
# trains and scores each seed in turn into results/<family>/<dataset>/<setting>/<method>/seed<k>/.
# Why batch: the Python/torch start-up (~4 s CPU) is paid once per method rather than once per seed, and
# a cluster run submits hundreds of sbatch jobs instead of tens of thousands (issue 9, "Load"); declaring
# the method folder as one directory output also keeps `snakemake -n` on the paper protocols fast.
# Seeds that an interrupted job finished are restored on rerun, and long training resumes from its last
# checkpoint (uqcal.resume).


rule train:
    input:
        unpack(train_inputs),
    output:
        directory(METHOD_DIR),
    params:
        job=lambda w: job_json(batch_job(UQ, w.family, w.dataset, w.setting, w.method)),
    log:
        "logs/train/{family}/{dataset}/{setting}/{method}.log",
    benchmark:
        "logs/bench/train/{family}/{dataset}/{setting}/{method}.tsv"
    conda:
        "../envs/uqcal.yaml"
    threads: 1
    priority: lambda w: 1 if (w.family, w.method) in UPSTREAM else 0
    resources:
        mem_mb=lambda w: family_resource(w.family, "mem_mb", 4000, w.dataset),
        runtime=lambda w: family_resource(w.family, "runtime", 60, w.dataset),
        gpu=lambda w: family_resource(w.family, "gpu", 0, w.dataset),
        cpus_per_gpu=lambda w: family_resource(w.family, "cpus_per_gpu", 4, w.dataset),
    shell:
        "uqcal train --job {params.job:q} 2> {log}"


rule aggregate:
    input:
        lambda w: [b.method_dir for b in BATCHES_BY_FAMILY[w.family]],
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

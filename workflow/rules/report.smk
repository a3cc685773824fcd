# Reports: HTML + Markdown tables, figures and provenance under reports/ (uqcal.pipeline.report), from each
# family's results/<family>/runs.parquet and summary.csv (uqcal aggregate) and, for what is not a metric, the
# planned runs' folders (predictions, model.pt, train_stats.json): job_inputs lists both.
# One report system: reports/ (no `snakemake --report` captions).


localrules:
    report,


rule report:
    input:
        unpack(job_inputs("report")),
    output:
        index="reports/index.html",
        record=record("report", "report"),
        **_report_outputs(),
    log:
        "logs/report.log",
    conda:
        "../envs/uqcal.yaml"
    threads: 4  # families in parallel; Snakemake caps it at the cores it has
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal report --spec {input.spec:q} --jobs {threads} 2>> {log:q}"

# Reports: HTML + Markdown tables, figures and provenance under reports/ (uqcal.report).


localrules:
    report,


rule report:
    input:
        summaries=expand("results/{family}/summary.csv", family=FAMILY_NAMES),
        config=CONFIG_FILE,
    output:
        index="reports/index.html",
    params:
        config=CONFIG_FILE,
    log:
        "logs/report.log",
    benchmark:
        "logs/bench/report/report.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal report --config {params.config:q} --out reports 2> {log}"

# Reports: HTML + Markdown tables, figures and provenance under reports/ (uqcal.report).
# `snakemake --report report.html` embeds each family's figures (category = family, subcategory = dataset)
# and table fragments; captions live in workflow/report/.

report: "../report/workflow.rst"


localrules:
    report,


rule report:
    input:
        summaries=expand("results/{family}/summary.csv", family=FAMILY_NAMES),
        config=CONFIG_FILE,
    output:
        index="reports/index.html",
        **_report_outputs(),
    log:
        "logs/report.log",
    benchmark:
        "logs/bench/report/report.tsv"
    conda:
        "../envs/uqcal.yaml"
    threads: 4  # families in parallel; Snakemake caps it at the cores it has
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal report --config {input.config:q} --out reports --jobs {threads} 2> {log}"

# Reports: HTML + Markdown tables, figures and provenance under reports/ (uqcal.report).
# `snakemake --report report.html` embeds each family's figures (category = family, subcategory = dataset)
# and table fragments; captions live in workflow/report/.

report: "../report/workflow.rst"


REPORT_TITLES = {
    "metareg": "metareg: Iwata & Kumagai",
    "rio": "rio: RIO (Qiu et al.)",
    "qr": "qr: quantile regularization",
    "fewshot": "fewshot: MD-BFSC (Ke et al.)",
    "bo": "bo: calibrated BO (Deshpande & Kuleshov)",
}


def _report_outputs():
    """Per family: its figures and its table fragments as report directories."""
    outputs = {}
    for family in FAMILY_NAMES:
        category = REPORT_TITLES.get(family, family)
        outputs[f"{family}_figures"] = report(
            directory(f"reports/{family}/figures"),
            patterns=["{figure}__{dataset}__{setting}.svg"],
            caption=f"../report/{family}.rst",
            category=category,
            subcategory="{dataset}",
            labels={"figure": "{figure}", "dataset": "{dataset}", "setting": "{setting}"},
        )
        outputs[f"{family}_tables"] = report(
            directory(f"reports/{family}/tables"),
            patterns=["{table}.html"],
            caption="../report/table.rst",
            category=category,
            subcategory="tables",
            labels={"table": "{table}"},
        )
    return outputs


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
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "uqcal report --config {input.config:q} --out reports 2> {log}"

"""Self-contained HTML pages: inline CSS, no scripts, no network; images by relative path."""

from __future__ import annotations

import json
from html import escape

import pandas as pd

from uqcal.metrics import replication as R
from uqcal.pipeline.report.figures.base import Rendered, Skipped
from uqcal.pipeline.report.provenance import Provenance
from uqcal.pipeline.report.tables import fmt
from uqcal.pipeline.report.verdicts import LEGEND, NOT_RUN, VERDICTS, ClaimResult, Evidence

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;
 margin:1.5em auto;max-width:1280px;
 padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
nav a{margin-right:1em} table{border-collapse:collapse;font-size:.85em;margin:.4em 0}
th,td{border:1px solid #ccc;padding:.2em .45em;text-align:right;white-space:nowrap}
th{background:#f2f2f2;text-align:left}
.tablebox,.scroll{max-width:100%;overflow-x:auto} table.results td,table.results th,table.paperref td,table.paperref th
{white-space:normal;vertical-align:top} table.results th{text-align:center} th.rowhead{text-align:left !important;
font-weight:normal;background:#fafafa} .num{white-space:nowrap} span.standin{background:#fff7e0}
span.same{background:#eef7ee} span.paper{color:#555;font-size:.9em} span.within{color:#176117}
span.outside{color:#a11} p.metric{margin:.6em 0 0} ul.datanotes{font-size:.9em;color:#555}
figure{margin:1em 0} figcaption{font-size:.9em;margin-bottom:.3em} .note,.skip{color:#8a5a00}
.claims th{text-align:left} .claims td{text-align:left;white-space:normal;vertical-align:top}
.verdict{font-weight:bold}
.held{color:#176117} .notheld{color:#a11} .notrun{color:#777} .inconclusive{color:#8a5a00}
.bydata{font-weight:normal;font-size:.9em;white-space:nowrap}
table.evidence td{white-space:normal;text-align:right} td.rowdetail{text-align:left;color:#555;font-size:.9em}
.figs{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}
.figs figure{flex:0 1 auto;width:fit-content;max-width:100%;margin:0}
.figs figcaption{width:0;min-width:100%}
.figs img{max-width:100%;height:auto;border:1px solid #eee}
details{margin:.4em 0} summary{cursor:pointer;color:#225}
code{background:#f4f4f4;padding:0 .2em} ul.tablenotes{font-size:.85em;margin:.2em 0 0 1em}
td.fitfail{background:#fde8e8} span.fitfail{color:#a11;font-weight:bold} p.fitfail{color:#a11}
div.budget{border-left:4px solid #8a5a00;background:#fff8e6;padding:2px 12px;margin:8px 0}
"""


def page(title: str, body: str, nav: list[tuple[str, str]]) -> str:
    links = "".join(f'<a href="{escape(href)}">{escape(text)}</a>' for text, href in nav)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>\n<nav>{links}</nav>\n"
        f"<h1>{escape(title)}</h1>\n{body}\n</body></html>\n"
    )


_VERDICT_CLASS = {R.REPRODUCED: "held", R.REPRODUCED_SMALLER: "held", R.GENERALISES: "held",
                  R.CONTRADICTED: "notheld", R.DOES_NOT_GENERALISE: "notheld", R.SMALLER_THAN_PAPER: "notheld",
                  R.CONSISTENT: "inconclusive", R.UNDECIDED: "inconclusive"}


def verdict_class(verdict: str) -> str:
    return _VERDICT_CLASS.get(verdict, "notrun")


def _n(value) -> str:
    return "–" if value is None else fmt(value)


def _evidence_row(e: Evidence) -> str:
    """One row of a claim's evidence: ours beside the paper's, with the prediction interval and the tests."""
    t, o = e.test, e.outcome
    paper = "–"
    if t.paper_estimate is not None:
        paper = f"{fmt(t.paper_estimate)} ± {_n(t.paper_se)}"
    interval = "–" if o.get("pi_low") is None else f"[{fmt(o['pi_low'])}, {fmt(o['pi_high'])}]"
    d33 = "–" if o.get("d33") is None else f"{fmt(o['d33'])} (p {fmt(o['p_d33'])})"
    cells = [escape(e.label), f"{fmt(t.estimate)} ± {fmt(t.se)}", str(e.runs if e.runs is not None else "–"),
             f"{fmt(e.p_adjusted if e.p_adjusted is not None else t.p)}", paper, interval, d33,
             "–" if e.n80 is None else (f"{e.n80:,.0f}" if e.n80 != float("inf") else "∞"),
             f'<span class="{verdict_class(e.verdict)}">{escape(e.verdict or "")}</span>']
    return ("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
            f'<tr><td colspan="9" class="rowdetail">{escape(e.detail)}</td></tr>')


def _claim_details(res: ClaimResult) -> str:
    parts = []
    if res.evidence:
        head = ("<tr><th>row</th><th>ours ± se</th><th>runs</th><th>p (adj.)</th><th>paper ± se</th>"
                "<th>95 % prediction interval</th><th>d33 (p)</th><th>runs for 80 % power at the paper's effect</th>"
                "<th>verdict</th></tr>")
        parts.append(f'<table class="evidence">{head}{"".join(_evidence_row(e) for e in res.evidence)}</table>')
    for name, (verdict, summary) in res.by_data.items():
        parts.append(f"<p>{escape(name)}: <b>{escape(verdict)}</b>; {escape(summary)}</p>")
    runs = (f"{res.runs_declared} runs per row (declared in the config)" if res.runs_declared is not None
            else f"runs {res.runs_source}")
    parts.append(f"<p>{escape(runs)}; scope: {escape(str(res.scope or 'every_row'))}.</p>")
    if res.skipped:
        parts.append("<p>Rows not tested:</p><ul>" + "".join(f"<li>{escape(s)}</li>" for s in res.skipped)
                     + "</ul>")
    return "".join(parts)


def legend_html() -> str:
    items = "".join(f'<li><span class="{verdict_class(v)}"><b>{escape(v)}</b></span>: {escape(text)}</li>'
                    for v, text in LEGEND.items())
    return (f'<details class="legend"><summary>Legend: what the verdicts mean</summary><ul>{items}</ul>'
            '<p>Each row is one test at 5 %, Holm-adjusted within the claim where the claim counts rows; a tie '
            'never supports a claim. docs/verdicts.md gives the formulas and references.</p></details>')


def _scope_and_stability(res: ClaimResult) -> str:
    """The checklist line's scope (``decided_on``) and stability, where the claim has them (issue 47)."""
    parts = []
    if getattr(res, "decided_on", None):
        parts.append(f"decided on: {escape(res.decided_on)}")
    stab = getattr(res, "stability", None)
    if stab:
        text = f"stability: {stab['share']:.0%} of {stab['replications']} replications give this verdict"
        if stab.get("fragile"):
            needed = stab.get("n_stable_at_paper_effect")
            text = "<b>fragile</b>: " + text + (f"; {needed} runs per row at the paper's effect would make it stable"
                                                if needed else "")
        parts.append(text)
    return f"<br><small>{'; '.join(parts)}</small>" if parts else ""


def claims_html(results: list[ClaimResult]) -> str:
    if not results:
        return "<p>No claims are listed for this paper.</p>"
    rows, not_run = [], {}
    for res in results:
        if res.verdict == NOT_RUN:
            where = (f"{res.decided_by} runs them" if res.decided_by
                     else "their rows lack the runs a test needs (open for why)" if res.skipped
                     else "no config here runs their methods")
            not_run.setdefault(where, []).append(res)
            continue
        source = f" <small>({escape(res.source)})</small>" if res.source else ""
        others = "".join(f' <span class="bydata {verdict_class(v)}">({escape(name)}: {escape(v.replace("_", " "))})'
                         "</span>" for name, (v, _) in list(res.by_data.items())[1:])
        source += _scope_and_stability(res)
        rows.append(
            f'<tr id="claim-{escape(res.id)}"><td><details><summary>{escape(res.text)}{source}</summary>'
            f"{_claim_details(res)}</details></td>"
            f'<td class="verdict {verdict_class(res.verdict)}">{escape(res.verdict.replace("_", " "))}{others}</td></tr>'
        )
    declared = next((r.runs_source for r in results if r.runs_declared is not None), "")
    out = ([f"<p><b>Runs per claim</b>, fixed before any result: {escape(declared)}.</p>"] if declared else [])
    out += ['<p class="note">One line per claim; open it for its rows (ours ± se beside the paper\'s, the prediction '
            "interval and the tests).</p>", legend_html()]
    if rows:
        out.append('<table class="claims"><thead><tr><th>claim (open for the numbers behind it)</th><th>verdict</th>'
                   "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    for where, items in not_run.items():
        listed = "".join(f'<li id="claim-{escape(r.id)}">{escape(r.text)}'
                         + (f"<br><small>{escape('; '.join(r.skipped))}</small>" if r.skipped else "") + "</li>"
                         for r in items)
        out.append(f'<details class="notrun"><summary>{len(items)} claim{"s" if len(items) != 1 else ""} not run '
                   f"here: {escape(where)}</summary><ul>{listed}</ul></details>")
    return "".join(out)


def claims_count(results: list[ClaimResult]) -> str:
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    return ", ".join(f"{n} {v.replace('_', ' ')}" for v, n in counts.items() if n)


def figures_html(items: list, rel_prefix: str = "") -> str:
    if not items:
        return "<p>No figures are listed for this paper.</p>"
    out, skipped = ['<div class="figs">'], []
    for item in items:
        if isinstance(item, Rendered):
            svg, png = item.files.get("svg"), item.files.get("png")
            src = f"{rel_prefix}figures/{svg.name}" if svg else f"{rel_prefix}figures/{png.name}"
            alt_link = f' (<a href="{rel_prefix}figures/{png.name}">PNG</a>)' if png else ""
            out.append(
                f'<figure><img src="{escape(src)}" alt="{escape(item.title)}">'
                f"<figcaption><b>{escape(item.title)}</b>. {escape(item.caption)}{alt_link}</figcaption></figure>"  # noqa: E501
            )
        elif isinstance(item, Skipped):
            skipped.append(item)
    out.append("</div>")
    if skipped:
        out.append(
            "<ul>"
            + "".join(
                f'<li class="skip">Figure skipped: <b>{escape(s.title)}</b>: input missing ({escape(s.reason)}).</li>'
                for s in skipped
            )
            + "</ul>"
        )
    return "\n".join(out)


def _lock_row(prov: Provenance) -> str:
    """The environment lock's sha256 (each file) and whether the installed versions are the locked ones."""
    if not prov.lock:
        return ""
    files = ", ".join(f"<code>{escape(name)}</code> sha256 <code>{escape(digest)}</code>"
                      for name, digest in prov.lock.items())
    if prov.lock.get("requirements.lock") == "missing":
        state = "no lock file: versions not checked"
    elif prov.lock_mismatches:
        state = ("<b>installed versions differ from the lock</b>: "
                 + ", ".join(escape(m) for m in prov.lock_mismatches))
    else:
        state = "installed versions = the lock"
    return (f'<tr><th style="text-align:left">lock</th><td style="text-align:left;white-space:normal">{files}; '
            f"{state}</td></tr>")


def run_devices_html(devices: pd.DataFrame | None) -> str:
    """The device the family's runs trained on (their train_stats.json), one row per device."""
    if devices is None or devices.empty:
        return '<p class="note">No train_stats.json for this page: the runs\' device is unknown.</p>'
    rows = []
    for (device, name), group in devices.groupby(["device", "device_name"], sort=True):
        methods = ", ".join(f"{m} ({n})" for m, n in zip(group["method"], group["runs"], strict=True))
        rows.append(
            f'<tr><td style="text-align:left"><code>{escape(device)}</code></td><td style="text-align:left">'
            f'{escape(name)}</td><td>{int(group["runs"].sum())}</td>'
            f'<td style="text-align:left;white-space:normal">{escape(methods)}</td></tr>'
        )
    return (
        "<h3>Device of the runs (train_stats.json: device, device_name)</h3><table class=\"run-devices\"><thead>"
        "<tr><th>device</th><th>device name</th><th>runs</th><th>methods (runs)</th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table>"
    )


def provenance_html(prov: Provenance, family: str | None = None, datasets: list[str] | None = None,
                    devices: pd.DataFrame | None = None) -> str:
    """The provenance block; ``devices`` (``provenance.read_run_devices``) adds where the family's runs
    trained, which on a cluster is not the machine that built the report (the "report built on" row)."""
    dirty = {True: "dirty (uncommitted changes)", False: "clean", None: "unknown"}[prov.git_dirty]
    out = [
        "<table>",
        f'<tr><th style="text-align:left">config</th><td style="text-align:left"><code>{escape(prov.config_path)}</code> '  # noqa: E501
        f"sha256 <code>{escape(prov.config_sha256[:16])}</code></td></tr>",
        f'<tr><th style="text-align:left">git</th><td style="text-align:left"><code>{escape(prov.git_commit)}</code> '  # noqa: E501
        f"({escape(dirty)})</td></tr>",
        f'<tr><th style="text-align:left">report built on</th><td style="text-align:left">{escape(prov.device)}</td></tr>',  # noqa: E501
        f'<tr><th style="text-align:left">python</th><td style="text-align:left">{escape(prov.python)}</td></tr>',  # noqa: E501
        '<tr><th style="text-align:left">packages</th><td style="text-align:left;white-space:normal">'
        + ", ".join(f"{escape(k)} {escape(v)}" for k, v in prov.packages.items())
        + "</td></tr>",
        _lock_row(prov),
        "</table>",
    ]
    if family is not None:
        out.append(run_devices_html(devices))
    bench = prov.benchmarks
    if family is not None and not bench.empty:
        bench = bench[bench["job"].str.contains(family, regex=False) | bench["rule"].str.contains(family, regex=False)]
    if bench.empty:
        out.append('<p class="note">No job records (.uqcal/records/&lt;rule&gt;/...) for this page.</p>')
    else:
        per_rule = (
            bench.groupby("rule")
            .agg(jobs=("seconds", "size"), total_s=("seconds", "sum"), max_s=("seconds", "max"),
                 cpu_s=("cpu_seconds", "sum"), rss_mb=("max_rss_mb", "max"))
            .reset_index()
        )
        out.append(
            "<h3>Time and memory per rule (as each job measured itself: its record in .uqcal/records)"
            "</h3><table><thead><tr><th>rule</th><th>jobs</th><th>total wall s</th><th>max wall s</th>"
            "<th>total CPU s</th><th>peak RSS MB</th></tr></thead><tbody>"
        )
        out.extend(
            f'<tr><td style="text-align:left">{escape(r.rule)}</td><td>{r.jobs}</td><td>{r.total_s:.1f}</td>'
            f"<td>{r.max_s:.1f}</td><td>{r.cpu_s:.1f}</td><td>{r.rss_mb:.0f}</td></tr>"
            for r in per_rule.itertuples(index=False)
        )
        out.append("</tbody></table>")
    records = prov.datasets if datasets is None else {k: v for k, v in prov.datasets.items() if k in datasets}
    if datasets is not None:
        missing = [d for d in datasets if d not in records]
    else:
        missing = []
    if records:
        out.append("<h3>Dataset provenance (data/raw/&lt;name&gt;.json)</h3>")
        for name, record in records.items():
            out.append(
                f"<details><summary>{escape(name)}</summary><pre>{escape(json.dumps(record, indent=2, sort_keys=True))}"  # noqa: E501
                "</pre></details>"
            )
    if missing:
        out.append(f'<p class="note">No provenance record for: {escape(", ".join(missing))}.</p>')
    return "\n".join(out)

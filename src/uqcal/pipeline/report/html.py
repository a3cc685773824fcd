"""Self-contained HTML pages: inline CSS, no scripts, no network; images by relative path."""

from __future__ import annotations

import json
import math
from html import escape

import pandas as pd

from uqcal.metrics import replication as R
from uqcal.pipeline.report import narrative as N
from uqcal.pipeline.report.figures.base import Rendered, Skipped
from uqcal.pipeline.report.numbers import decimals_for, fmt_at, fmt_num, fmt_p, fmt_se
from uqcal.pipeline.report.provenance import Provenance
from uqcal.pipeline.report.verdicts import ClaimResult, Evidence

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;
 margin:1em auto;max-width:1280px;padding:0 1em;color:#222;line-height:1.4;overflow-wrap:break-word}
main{display:block;min-width:0}
.skip-link{position:absolute;left:-9999px;top:0;background:#fff;padding:.3em .6em;border:2px solid #0072B2}
.skip-link:focus{left:.5em;z-index:10}
h1{font-size:1.5em;margin:.2em 0} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.4em;font-size:1.25em}
h3{font-size:1.05em} nav{display:flex;flex-wrap:wrap;gap:.2em 1em} p.lead{margin:.3em 0}
table{border-collapse:collapse;font-size:.85em;margin:.4em 0}
caption{text-align:left;font-size:.9em;color:#444;padding:.2em 0;caption-side:top}
th,td{border:1px solid #ccc;padding:.2em .45em;text-align:right;white-space:nowrap}
th{background:#f2f2f2;text-align:left}
.tablebox,.scroll{max-width:100%;overflow-x:auto} table.results td,table.results th,table.paperref td,table.paperref th
{white-space:normal;vertical-align:top} table.results th{text-align:center} th.rowhead{text-align:left !important;
font-weight:normal;background:#fafafa} .num{white-space:nowrap} span.standin{background:#fff7e0}
span.same{background:#eef7ee} span.paper{color:#444;font-size:.9em} span.within{color:#176117}
span.better{color:#0b5a8a} span.worse{color:#8c3b00} p.metric{margin:.6em 0 0} ul.datanotes{font-size:.9em;color:#444}
figure{margin:1em 0} figcaption{font-size:.9em;margin-bottom:.3em} .note,.skip{color:#6b4500}
table.kv td,table.kv th{white-space:normal;text-align:left;vertical-align:top}
.verdict{font-weight:bold}
.held{color:#176117} .notheld{color:#a11} .notrun{color:#595959} .inconclusive{color:#6b4500}
.badge{display:inline-block;border-radius:3px;padding:0 .35em;color:#000;font-weight:600;white-space:nowrap;
 font-size:.9em;border:1px solid #444}
ol.claimlist{padding-left:1.4em;margin:.3em 0} ol.claimlist li{margin:.35em 0}
.claimtext{font-weight:600} .why{display:block;color:#333;font-size:.92em}
.fragile{font-size:.85em;border:1px dashed #6b4500;color:#6b4500;border-radius:3px;padding:0 .3em}
.bydata{font-weight:normal;font-size:.9em}
table.evidence td{white-space:normal;text-align:right} td.rowdetail{text-align:left;color:#444;font-size:.9em}
dl.legend{display:grid;grid-template-columns:max-content 1fr;gap:.2em .8em;font-size:.9em;margin:.3em 0}
dl.legend dd{margin:0}
.figs{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}
.figs figure{flex:0 1 auto;width:fit-content;max-width:100%;margin:0}
.figs figcaption{width:0;min-width:100%}
.figscroll{max-width:100%;overflow-x:auto}
.figs img{max-width:100%;height:auto;border:1px solid #eee}
details{margin:.4em 0} summary{cursor:pointer;color:#225}
code{background:#f4f4f4;padding:0 .2em;overflow-wrap:anywhere} ul.tablenotes{font-size:.85em;margin:.2em 0 0 1em}
td.fitfail{background:#fde8e8} span.fitfail{color:#a11;font-weight:bold} p.fitfail{color:#a11}
div.budget{border-left:4px solid #8a5a00;background:#fff8e6;padding:2px 12px;margin:8px 0}
div.summary{border-left:4px solid #0072B2;background:#f3f8fc;padding:.3em .9em;margin:.5em 0}
div.summary p{margin:.25em 0} div.summary h2{margin:.3em 0 .2em;font-size:1.1em;border:0}
@media (max-width:600px){body{padding:0 .5em;margin:.5em auto} h1{font-size:1.25em} table{font-size:.8em}
 dl.legend{grid-template-columns:1fr} dl.legend dd{margin:0 0 .3em .5em}}
"""


def page(title: str, body: str, nav: list[tuple[str, str]]) -> str:
    """A static page: a skip link to the main content, the navigation, the title and the body."""
    links = "".join(f'<a href="{escape(href)}">{escape(text)}</a>' for text, href in nav)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
        f'<a class="skip-link" href="#main">Skip to content</a>\n<nav aria-label="reports">{links}</nav>\n'
        f'<main id="main">\n<h1>{escape(title)}</h1>\n{body}\n</main>\n</body></html>\n'
    )


_VERDICT_CLASS = {R.REPRODUCED: "held", R.REPRODUCED_SMALLER: "held", R.GENERALISES: "held",
                  R.CONTRADICTED: "notheld", R.DOES_NOT_GENERALISE: "notheld", R.SMALLER_THAN_PAPER: "notheld",
                  R.CONSISTENT: "inconclusive", R.UNDECIDED: "inconclusive"}


def verdict_class(verdict: str) -> str:
    return _VERDICT_CLASS.get(verdict, "notrun")


def badge(key: str) -> str:
    """A verdict badge: icon and words on the verdict's colour, its definition on hover."""
    d = N.DISPLAYS[key]
    return (f'<span class="badge v-{escape(key)}" style="background:{d.colour}" title="{escape(d.definition)}">'
            f'<span aria-hidden="true">{d.icon}</span> {escape(d.label)}</span>')


def _evidence_row(e: Evidence) -> str:
    """One row of a claim's evidence: ours beside the paper's, with the prediction interval and the tests."""
    t, o = e.test, e.outcome
    paper = "–"
    if t.paper_estimate is not None:
        paper = fmt_se(t.paper_estimate, t.paper_se) if t.paper_se else fmt_num(t.paper_estimate)
    digits = decimals_for(t.se) if t.se else 3
    interval = "–" if o.get("pi_low") is None else f"[{fmt_at(o['pi_low'], digits)}, {fmt_at(o['pi_high'], digits)}]"
    d33 = "–" if o.get("d33") is None else f"{fmt_num(o['d33'])} ({fmt_p(o['p_d33'])})"
    p = e.p_adjusted if e.p_adjusted is not None else t.p
    key = e.verdict if e.verdict in N.DISPLAYS else R.NOT_RUN
    key = N.BETTER if N.row_is_better(e) else key
    cells = [escape(e.label), fmt_se(t.estimate, t.se), str(e.runs if e.runs is not None else "–"),
             fmt_p(p).removeprefix("p = "), paper, interval, d33,
             "–" if e.n80 is None else (f"{e.n80:,.0f}" if e.n80 != float("inf") else "∞"), badge(key)]
    return ("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
            f'<tr><td colspan="9" class="rowdetail">{escape(e.detail)}</td></tr>')


def _claim_details(res: ClaimResult) -> str:
    parts = []
    if res.evidence:
        head = ("<tr><th>row</th><th>ours ± se</th><th>runs</th><th>p (adj.)</th><th>paper ± se</th>"
                "<th>95 % prediction interval</th><th>d33 (p)</th><th>runs for 80 % power at the paper's effect</th>"
                "<th>verdict</th></tr>")
        parts.append(f'<div class="tablebox"><table class="evidence"><caption>The tests behind “{escape(res.id)}”, '
                     f"one row each</caption>{head}{''.join(_evidence_row(e) for e in res.evidence)}</table></div>")
    for name, (verdict, summary) in res.by_data.items():
        parts.append(f"<p>{escape(name)}: <b>{escape(N.DISPLAYS.get(verdict, N.DISPLAYS[R.NOT_RUN]).label)}</b>; "
                     f"{escape(summary)}</p>")
    runs = (f"{res.runs_declared} runs per row (declared in the config)" if res.runs_declared is not None
            else f"runs {res.runs_source}")
    parts.append(f"<p>{escape(runs)}; scope: {escape(str(res.scope or 'every_row'))}.</p>")
    if N.stability_text(res):
        parts.append(f"<p>Stability: {escape(N.stability_text(res))}.</p>")
    if res.skipped:
        parts.append("<p>Rows not tested:</p><ul>" + "".join(f"<li>{escape(s)}</li>" for s in res.skipped)
                     + "</ul>")
    return "".join(parts)


def legend_html() -> str:
    """The open legend: each verdict's badge and its plain-words definition."""
    items = "".join(f"<dt>{badge(key)}</dt><dd>{escape(N.DISPLAYS[key].definition)}</dd>"
                    for key in N.DISPLAY_ORDER)
    return (f'<dl class="legend" aria-label="what the verdicts mean">{items}</dl>'
            '<p class="note">Each row is one test at 5 %, Holm-adjusted within the claim where the claim counts rows; '
            "a tie never supports a claim. docs/verdicts.md gives the formulas and references.</p>")


def claim_line(res: ClaimResult, href: str = "", details: bool = True) -> str:
    """One claim: its badge, its words (a link to its anchor when ``href``), and why, with the numbers."""
    key = N.display_key(res)
    text = escape(res.text)
    if href:
        text = f'<a href="{escape(href)}">{text}</a>'
    source = f" <small>({escape(res.source)})</small>" if res.source else ""
    fragile = (f' <span class="fragile" title="{escape(N.stability_text(res))}">fragile</span>'
               if N.is_fragile(res) else "")
    data = N.claim_data(res)
    why = escape(N.claim_reason(res)) + (f" — {escape(data)}" if data else "")
    others = "".join(f' <span class="bydata">({escape(name)}: '
                     f"{escape(N.DISPLAYS.get(v, N.DISPLAYS[R.NOT_RUN]).label.lower())})</span>"
                     for name, (v, _) in list(res.by_data.items())[1:])
    stability = N.stability_text(res)
    stability = f' <small class="stability">(stability: {escape(stability)})</small>' if stability else ""
    line = (f"{badge(key)}{fragile} <span class=\"claimtext\">{text}</span>{source}"
            f'<span class="why">{why}{others}{stability}</span>')
    if details and (res.evidence or res.skipped):
        line += f"<details><summary>the numbers behind it</summary>{_claim_details(res)}</details>"
    return line


def claims_html(results: list[ClaimResult]) -> str:
    """The checklist: one line per claim (badge, claim, why), the paper's claims first, then our own checks
    (``ours``), the legend open below."""
    if not results:
        return "<p>No claims are listed for this paper.</p>"
    papers = [r for r in results if not getattr(r, "ours", False)]
    ours = [r for r in results if getattr(r, "ours", False)]
    out = []
    if papers:
        out.append('<ol class="claimlist">' + "".join(f'<li id="claim-{escape(r.id)}">{claim_line(r)}</li>'
                                                       for r in papers) + "</ol>")
    if ours:
        out.append("<h3>Our checks (not claims of the paper)</h3>")
        out.append('<ol class="claimlist">' + "".join(f'<li id="claim-{escape(r.id)}">{claim_line(r)}</li>'
                                                       for r in ours) + "</ol>")
    declared = next((r.runs_source for r in results if r.runs_declared is not None), "")
    if declared:
        out.append(f"<p><b>Runs per claim</b>, fixed before any result: {escape(declared)}.</p>")
    out.append("<h3>What the verdicts mean</h3>")
    out.append(legend_html())
    return "".join(out)


def claims_count(results: list[ClaimResult]) -> str:
    papers = [r for r in results if not getattr(r, "ours", False)]
    ours = len(results) - len(papers)
    return N.counts_text(papers) + (f"; {ours} of our checks" if ours else "")


def figure_min_width(item: Rendered) -> int | None:
    """The narrowest width (CSS px) at which the figure's smallest text is still MIN_TEXT_PX: below it the figure
    scrolls sideways in its box instead of shrinking (a phone), so its text stays legible."""
    min_px, width = getattr(item, "min_text_px", None), item.width_px
    if not min_px or not width:
        return None
    return min(width, math.ceil(width * MIN_TEXT_PX / min_px))


MIN_TEXT_PX = 8.0


def figures_html(items: list, rel_prefix: str = "") -> str:
    """Figures as PNG, each in a box that scrolls rather than shrink its text below MIN_TEXT_PX; the SVG is linked
    where it was written (small enough)."""
    if not items:
        return "<p>No figures are listed for this paper.</p>"
    out, skipped = ['<div class="figs">'], []
    for item in items:
        if isinstance(item, Rendered):
            svg, png = item.files.get("svg"), item.files.get("png")
            src = f"{rel_prefix}figures/{png.name}" if png else f"{rel_prefix}figures/{svg.name}"
            alt_link = f' (<a href="{rel_prefix}figures/{svg.name}">SVG</a>)' if svg and png else ""
            min_width = figure_min_width(item)
            style = f' style="min-width:{min_width}px"' if min_width else ""
            size = f' width="{item.width_px}"' if item.width_px else ""
            out.append(
                f'<figure id="fig-{escape(item.stem)}"><figcaption><b>{escape(item.title)}</b>. '
                f"{escape(item.caption)}{alt_link}</figcaption>"
                f'<div class="figscroll"><img src="{escape(src)}" alt="{escape(item.alt_text())}"{size}{style}>'
                "</div></figure>"
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
        "<h3>Device of the runs (train_stats.json: device, device_name)</h3><div class=\"tablebox\">"
        "<table class=\"run-devices\"><caption>Where the runs trained</caption><thead>"
        "<tr><th>device</th><th>device name</th><th>runs</th><th>methods (runs)</th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table></div>"
    )


def _plugin_rows(prov: Provenance) -> list[str]:
    """One row per plug-in family: its package, folder, files' sha256 and the files git does not track."""
    rows = []
    for name, plugin in getattr(prov, "plugins", {}).items():
        untracked = plugin["untracked"]
        state = (f"untracked: {', '.join(untracked[:5])}{' ...' if len(untracked) > 5 else ''}" if untracked
                 else "tracked")
        rows.append(f'<tr><th style="text-align:left">plug-in {escape(name)}</th><td style="text-align:left">'
                    f"<code>{escape(plugin['package'])}</code> in <code>{escape(plugin['folder'])}</code>, sha256 "
                    f"<code>{escape(plugin['sha256'][:16])}</code> ({escape(state)})</td></tr>")
    return rows


def provenance_html(prov: Provenance, family: str | None = None, datasets: list[str] | None = None,
                    devices: pd.DataFrame | None = None) -> str:
    """The provenance block; ``devices`` (``provenance.read_run_devices``) adds where the family's runs
    trained, which on a cluster is not the machine that built the report (the "report built on" row)."""
    dirty = {True: "dirty (uncommitted changes)", False: "clean", None: "unknown"}[prov.git_dirty]
    out = [
        '<div class="tablebox"><table class="kv"><caption>Where and how this report was built</caption>',
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
        *_plugin_rows(prov),
        "</table></div>",
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
            "</h3><div class=\"tablebox\"><table><caption>Per rule: jobs, wall and CPU time (s), peak memory (MB)"
            "</caption><thead><tr><th>rule</th><th>jobs</th><th>total wall (s)</th><th>max wall (s)</th>"
            "<th>total CPU (s)</th><th>peak RSS (MB)</th></tr></thead><tbody>"
        )
        out.extend(
            f'<tr><td style="text-align:left">{escape(r.rule)}</td><td>{r.jobs}</td><td>{r.total_s:.1f}</td>'
            f"<td>{r.max_s:.1f}</td><td>{r.cpu_s:.1f}</td><td>{r.rss_mb:.0f}</td></tr>"
            for r in per_rule.itertuples(index=False)
        )
        out.append("</tbody></table></div>")
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

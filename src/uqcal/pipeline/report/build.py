"""Build ``reports/``: an index page and one page per family (claims first, then tables beside the paper's
numbers, figures and provenance), Markdown tables, SVG/PNG figures, and DVC metrics/plots files.

The report is the config's own: it covers the config's families only, and reads exactly the runs the config
plans (its datasets, settings, methods and seeds), so runs that other configs left in ``results/`` never reach a
table, claim or figure. Its numbers are what ``uqcal aggregate`` wrote (``results/<family>/runs.parquet`` and
``summary.csv``); the planned runs' own folders give what is not a metric (``uqcal.pipeline.report.results``)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import pandas as pd
import yaml

from uqcal.core.io import write_json, write_text
from uqcal.methods.api import get_family
from uqcal.pipeline.config.load import register_families
from uqcal.pipeline.config.registry import dataset_registry
from uqcal.pipeline.layout import RunLayout
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference, load_reference, relate_dataset
from uqcal.pipeline.report import html as H
from uqcal.pipeline.report import narrative as N
from uqcal.pipeline.report.claims import evaluate_claims
from uqcal.pipeline.report.figures import build_figure
from uqcal.pipeline.report.figures.base import FigureContext, Rendered, pit_values
from uqcal.pipeline.report.markdown import report_markdown
from uqcal.pipeline.report.provenance import Provenance, collect, read_run_devices
from uqcal.pipeline.report.results import RunFiles, load_tables, with_ece_floors
from uqcal.pipeline.report.tables import FAILURE_MARK, BuiltTable, build_table, fit_failure_counts, to_html, to_markdown
from uqcal.pipeline.report.verdicts import NOT_RUN, ClaimContext, ClaimResult

log = logging.getLogger("uqcal.pipeline.report")

SPEC_KEYS = {"title", "paper", "summary", "tables", "claims", "method_names", "figures", "dvc_plots",
             "ece_floors", "leaderboard"}


def load_spec(family: str, spec_dir: Path | None = None) -> dict:
    """Declarative page spec (``report.yaml`` in the family's package), validated at the top level."""
    if spec_dir is not None:
        text = (Path(spec_dir) / f"{family}.yaml").read_text()
    else:
        text = get_family(family).report_spec_path.read_text()
    spec = yaml.safe_load(text) or {}
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise ValueError(f"report spec '{family}': unknown keys {sorted(unknown)}; allowed {sorted(SPEC_KEYS)}")
    for section in ("tables", "claims", "figures"):
        ids = [entry.get("id") for entry in spec.get(section) or []]
        if None in ids or len(ids) != len(set(ids)):
            raise ValueError(f"report spec '{family}': every {section} entry needs a unique 'id' (got {ids})")
    return spec


def planned_runs(config: dict, family: str) -> dict[tuple[str, str, str], list[int]]:
    """(dataset, setting, method) -> seeds that the config plans for ``family``."""
    from uqcal.pipeline.config.runs import iter_runs

    plan: dict[tuple[str, str, str], list[int]] = {}
    for run in iter_runs(config, [family]):
        plan.setdefault((run.dataset, run.setting, run.method), []).append(run.seed)
    return plan


def load_fit_failures(files: RunFiles, runs: pd.DataFrame) -> pd.DataFrame:
    """(dataset, setting, method, seed, fit_failures), one row per planned run: the count from its train_stats.json
    (the shared convention), else from its metrics (which carry train_stats' numbers), else 0."""
    logged = {}
    if not runs.empty:
        for rec in runs[runs["metric"] == "fit_failures"].itertuples(index=False):
            logged[(rec.dataset, str(rec.setting), rec.method, int(rec.seed))] = float(rec.value)
    rows = []
    for key in files.runs():
        value = logged.get(key, 0.0)
        found = files.train_stats(*key).get("fit_failures")
        if isinstance(found, (int, float)) and not isinstance(found, bool):
            value = float(found)
        rows.append((*key, value))
    return pd.DataFrame(rows, columns=["dataset", "setting", "method", "seed", "fit_failures"])


@dataclass
class FamilyReport:
    family: str
    spec: dict
    summary: pd.DataFrame
    claims: list[ClaimResult]
    tables: list[BuiltTable]
    figures: list
    datasets: list[str]
    n_runs: int
    reference: Reference
    failures: pd.DataFrame | None = None
    devices: pd.DataFrame | None = None  # where the runs trained (provenance.read_run_devices)
    leaderboard_html: str = ""  # a leaderboard section (uqcal.pipeline.report.leaderboard)
    budget_notes: list[str] = field(default_factory=list)  # the config's report.budget_notes.<family>
    paper_figures: list = field(default_factory=list)  # ours against the paper, one per paper table
    relations: dict[str, DatasetRelation] = field(default_factory=dict)  # dataset -> how it relates to the paper
    notes: dict = field(default_factory=dict)  # the family's deviations.yaml (narrative.load_family_notes)
    hyperparameters: list[tuple[str, str]] = field(default_factory=list)  # (what, value) from the resolved config
    config: dict = field(default_factory=dict)  # the run config (resources per job)


def _metrics_json(summary: pd.DataFrame, metrics: list[str] | None = None) -> dict:
    """Nested {dataset: {setting: {method: {metric: mean}}}} for ``dvc metrics show`` (the spec's
    ``summary`` metrics only, so the table stays readable; all metrics when the spec lists none)."""
    out: dict = {}
    if metrics:
        summary = summary[summary["metric"].isin(metrics)]
    for rec in summary.itertuples(index=False):
        if pd.isna(rec.mean):
            continue
        out.setdefault(rec.dataset, {}).setdefault(str(rec.setting), {}).setdefault(rec.method, {})[rec.metric] = round(
            float(rec.mean), 6
        )
    return out


def paper_comparison_figures(tables: list[BuiltTable], out_dir: Path, names: dict[str, str]) -> list:
    """One figure per table that has published numbers: ours beside the paper's (figures.paper)."""
    import matplotlib.pyplot as plt

    from uqcal.pipeline.report.figures.paper import build_paper_comparison

    try:
        return [drawn for table in tables if (drawn := build_paper_comparison(table, out_dir, names)) is not None]
    finally:
        plt.close("all")


def figure_checks(figures: list) -> list[dict]:
    """What the text-overlap check found in each drawn figure, its natural width and its smallest text's height in
    px at that width (the browser test reads them)."""
    return [{"stem": f.stem, "title": f.title, "width_px": f.width_px, "min_text_px": f.min_text_px,
             "overlaps": f.overlaps} for f in figures if isinstance(f, Rendered)]


def _dvc_plot_data(spec: dict, files: RunFiles, out_dir: Path) -> list[Path]:
    """Per-series CSVs under ``reports/<family>/plots/<plot>/`` for ``dvc plots show`` (see dvc_plots
    in spec)."""
    written = []
    for plot in spec.get("dvc_plots") or []:
        for dataset, setting in files.settings():
            for method in files.methods(dataset, setting):
                filename = plot.get("file", RunLayout.PREDICTIONS)
                frame = files.load_predictions(dataset, setting, method, filename)
                if frame is None:
                    continue
                if plot["kind"] == "curve" and {plot["x"], plot["y"]} <= set(frame.columns):
                    last = frame.groupby(["seed", plot["x"]])[plot["y"]].last().reset_index()
                    data = last.groupby(plot["x"])[plot["y"]].mean().reset_index()
                elif plot["kind"] == "calibration":
                    pit = pit_values(frame)
                    if pit is None:
                        continue
                    levels = [i / 20 for i in range(21)]
                    data = pd.DataFrame({"p": levels, "observed": [float((pit <= p).mean()) for p in levels]})
                else:
                    continue
                path = out_dir / "plots" / plot["id"] / f"{dataset}__{setting}__{method}.csv"
                write_text(path, data.to_csv(index=False))
                written.append(path)
    return written


def build_family(
    family: str,
    spec: dict,
    config: dict,
    registry: dict,
    results_dir: Path,
    out_dir: Path,
) -> FamilyReport:
    fam_out = out_dir / family
    plan = planned_runs(config, family)
    files = RunFiles(Path(results_dir), family, plan)
    summary, runs = load_tables(results_dir, family, plan)
    summary = with_ece_floors(summary.astype({"setting": str}), spec.get("ece_floors"))
    if not runs.empty:
        runs = runs.astype({"setting": str})
    reference = load_reference(family)
    datasets = list(dict.fromkeys(list(summary["dataset"]) + list(runs["dataset"] if not runs.empty else [])))
    relations: dict[str, DatasetRelation] = {d: relate_dataset(d, registry, reference, family=family)
                                             for d in datasets}
    failures = load_fit_failures(files, runs)
    names = {**reference.method_names, **(spec.get("method_names") or {})}
    report_cfg = config.get("report") or {}
    claim_runs = (report_cfg.get("claim_runs") or {}).get(family)
    runs_source = f"declared in the config (report.claim_runs.{family}): {report_cfg.get('claim_runs_reason', '')}"
    ctx = ClaimContext(family, summary, runs, reference, relations, files, claim_runs, runs_source.rstrip(": "))
    claims = evaluate_claims(spec.get("claims") or [], ctx)
    tables = []
    for table_spec in spec.get("tables") or []:
        table = build_table(table_spec, summary, runs, reference, relations, failures)
        tables.append(table)
        write_text(fam_out / "tables" / f"{table.id}.md", to_markdown(table, names))
        write_text(fam_out / "tables" / f"{table.id}.html", to_html(table, names))
    for sub in ("figures", "tables"):  # always present: Snakemake declares them as directory outputs
        (fam_out / sub).mkdir(parents=True, exist_ok=True)
    paper_figures = paper_comparison_figures(tables, fam_out / "figures", names)
    fig_ctx = FigureContext(family, config, summary, files, fam_out / "figures", names)
    figures = []
    for fig_spec in spec.get("figures") or []:
        figures.extend(build_figure(fig_spec, fig_ctx))
    leaderboard_html = ""
    if spec.get("leaderboard"):
        from uqcal.pipeline.report.leaderboard import build_leaderboard

        leaderboard_html = build_leaderboard(spec["leaderboard"], runs, files, fam_out, names).html
    write_json(fam_out / "figure_checks.json", figure_checks(paper_figures + figures))
    write_json(fam_out / "metrics.json", _metrics_json(summary, spec.get("summary")))
    write_json(fam_out / "claims.json", [c.as_dict() for c in claims])
    _dvc_plot_data(spec, files, fam_out)
    n_runs = int(runs.groupby(["dataset", "setting", "method", "seed"]).ngroups) if not runs.empty else 0
    budget_notes = list(((config.get("report") or {}).get("budget_notes") or {}).get(family) or [])
    paper_figures, figures = drop_duplicate_figures(paper_figures, figures)
    return FamilyReport(family, spec, summary, claims, tables, figures, datasets, n_runs, reference, failures,
                        read_run_devices(files), leaderboard_html, budget_notes, paper_figures, relations,
                        N.load_family_notes(family), N.hyperparameters(config, family), config)


def drop_duplicate_figures(*groups: list) -> tuple[list, ...]:
    """Each drawing once: a figure whose PNG is byte-identical to an earlier one is left out, and the one kept
    names it in its caption."""
    import hashlib

    seen: dict[str, Rendered] = {}
    kept_groups = []
    for group in groups:
        kept = []
        for item in group:
            png = item.files.get("png") if isinstance(item, Rendered) else None
            digest = hashlib.sha256(Path(png).read_bytes()).hexdigest() if png and Path(png).exists() else None
            if digest is not None and digest in seen:
                first = seen[digest]
                first.caption = f"{first.caption} (The same drawing serves for: {item.title}.)".strip()
                continue
            if digest is not None:
                seen[digest] = item
            kept.append(item)
        kept_groups.append(kept)
    return tuple(kept_groups)


def _build_family_task(task: tuple) -> FamilyReport:
    log.info("report: building %s", task[0])
    return build_family(*task)


def _nav(prefix: str, families) -> list[tuple[str, str]]:
    return [("Index", f"{prefix}index.html")] + [(f, f"{prefix}{f}/index.html") for f in families]


def _links_html(notes: dict) -> str:
    links = notes.get("links") or {}
    out = []
    for key, label in (("paper", "paper"), ("code", "authors' code"), ("data", "data")):
        value = links.get(key)
        if not value:
            continue
        text = escape(str(value))
        out.append(f'{label}: <a href="{text}">{text}</a>' if str(value).startswith("https://") else f"{label}: {text}")
    return " · ".join(out)


def scope_text(rep: FamilyReport) -> str:
    """Which claims, on which data, at which n."""
    claims = rep.claims
    run = [c for c in claims if c.verdict != NOT_RUN]
    relations = [relate for relate in rep.relations.values()] if rep.relations else []
    same = [r.label() for r in relations if r.kind == "same"]
    stand = [r.label() for r in relations if r.kind == "stand_in"]
    other = [r.ours for r in relations if r.kind not in ("same", "stand_in")]
    data = []
    if same:
        data.append("the paper's own data: " + ", ".join(same))
    if stand:
        data.append("stand-ins: " + ", ".join(stand))
    if other:
        data.append("data of our own: " + ", ".join(other))
    ns = sorted({c.runs_declared for c in run if c.runs_declared is not None})
    n_text = (f"n = {ns[0]} runs per claim" if len(ns) == 1 else f"n = {ns[0]}–{ns[-1]} runs per claim" if ns
              else "the runs each claim's rows share")
    sources = list(dict.fromkeys(c.source.split(",")[0] for c in claims if c.source))
    text = (f"{len(claims)} claims of the paper" + (f" ({', '.join(sources)})" if sources else "")
            + f"; {len(run)} decided here, at {n_text}, fixed in the config before any result. "
            + ("Data: " + "; ".join(data) if data else "No data was run"))
    not_run = len(claims) - len(run)
    if not_run:
        configs = sorted({str(c.config) for c in claims
                          if c.verdict == NOT_RUN and c.config})
        text += f"; {not_run} not run here" + (f" (run by {', '.join(configs)})" if configs else "")
    return text + "."


def methodology_html(rep: FamilyReport, names: dict[str, str]) -> str:
    out = ["<h2 id=\"methodology\">Methodology</h2>", "<h3>Datasets and stand-ins</h3>"]
    items = [f"<li>{escape(r.label())}" + (f": {escape(r.note)}" if r.note else "") + "</li>"
             for r in (rep.relations or {}).values()]
    out.append(f"<ul>{''.join(items)}</ul>" if items else "<p>No data was run.</p>")
    data_notes = list(dict.fromkeys(note for table in rep.tables for note in table.data_notes))
    if data_notes:
        out.append('<ul class="datanotes">' + "".join(f"<li>{escape(note)}</li>" for note in data_notes) + "</ul>")
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rep.hyperparameters)
    out.append("<h3>Hyperparameters (the resolved config)</h3>"
               f'<div class="tablebox"><table class="kv"><caption>What this run used, from the config after '
               f"defaults and overrides</caption><tbody>{rows}</tbody></table></div>")
    deviations = (rep.notes or {}).get("deviations") or []
    out.append("<h3>Deviations from the paper and from the authors' code</h3>")
    if deviations:
        origin = {"paper": "the paper", "code": "the authors' code", "both": "paper and code"}
        body = "".join(f"<tr><td>{escape(d['what'])}</td><td>{escape(origin[d['from']])}</td>"
                       f"<td>{escape(d['ours'])}</td><td>{escape(d['reason'])}</td></tr>" for d in deviations)
        out.append('<div class="tablebox"><table class="kv"><caption>Each deviation and its reason '
                   f"(src/uqcal/methods/{escape(rep.family)}/deviations.yaml)</caption><thead><tr><th>what</th>"
                   f"<th>differs from</th><th>ours</th><th>why</th></tr></thead><tbody>{body}</tbody></table></div>")
    else:
        out.append(f"<p>None recorded (src/uqcal/methods/{escape(rep.family)}/deviations.yaml).</p>")
    if rep.budget_notes:  # the config's own words on where its budget cuts something short
        items = "".join(f"<li>{escape(note)}</li>" for note in rep.budget_notes)
        out.append(f'<div class="budget"><p><b>Where this config\'s budget falls short of the paper\'s:</b></p>'
                   f"<ul>{items}</ul></div>")
    failed = {key: counts for key, counts in fit_failure_counts(rep.failures).items() if counts[0]}
    if failed:
        cells = "; ".join(f"{'/'.join(key)}: {k} of {n}" for key, (k, n) in sorted(failed.items()))
        out.append(
            f'<p class="fitfail"><b>{FAILURE_MARK} Failed fits</b> in {sum(k for k, _ in failed.values())} runs '
            f"(fit_failures &gt; 0 in train_stats.json; the job logged a warning naming each run): "
            f"{escape(cells)}. Table cells built on them are marked {FAILURE_MARK} k/n.</p>"
        )
    return "\n".join(out)


def compute_html(compute: N.Compute) -> str:
    rows = [("jobs measured", str(compute.jobs)), ("wall time, all jobs", N.hours(compute.wall_h)),
            ("CPU time", N.hours(compute.cpu_h)), ("GPU time (training jobs on a GPU)", N.hours(compute.gpu_h)),
            ("cores per job (config)", compute.cores_per_job),
            ("peak memory of a job", f"{compute.peak_rss_mb:.0f} MB" if compute.peak_rss_mb else "not recorded"),
            ("machines (train_stats.json)", "; ".join(compute.machines or []) or "not recorded")]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return ('<h2 id="compute">Compute</h2><div class="tablebox"><table class="kv"><caption>What this family\'s '
            "jobs measured themselves (job records in .uqcal/records); per rule under Provenance</caption>"
            f"<tbody>{body}</tbody></table></div>")


def easy_hard_html(notes: dict) -> str:
    out = ['<h2 id="easy-hard">What was easy and what was hard</h2>']
    for key, title in (("easy", "Easy"), ("hard", "Hard")):
        items = (notes or {}).get(key) or []
        out.append(f"<h3>{title}</h3>" + ("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>"
                                          if items else "<p>Nothing recorded.</p>"))
    return "".join(out)


MAX_BECAUSE = 3  # 'because' lines in the summary box: the rest are in the checklist just below


def family_page(rep: FamilyReport, prov: Provenance, reference: Reference, families) -> str:
    spec = rep.spec
    names = {**reference.method_names, **(spec.get("method_names") or {})}
    links = _links_html(rep.notes)
    body = [f'<p class="lead"><b>Paper:</b> {escape(spec.get("paper", reference.paper))}'
            + (f"<br><small>{links}</small>" if links else "") + "</p>"]
    if rep.summary.empty:
        body.append(
            '<p class="notrun"><b>This family was not run</b>: no results/'
            f"{escape(rep.family)}/runs.parquet (uqcal aggregate writes it). Claims below are "
            "marked 'not run'; the paper's numbers are shown for reference.</p>"
        )
    summary = N.summary_paragraph(rep.claims)
    because = summary[1:1 + MAX_BECAUSE]
    more = len(summary) - 1 - len(because)
    body.append('<div class="summary">'
                f'<h2 id="scope">Scope of reproducibility</h2><p>{escape(scope_text(rep))} '
                f"{rep.n_runs} runs in all.</p>"
                f'<h2 id="summary">Summary</h2><p><b>{escape(summary[0])}</b></p>'
                + "".join(f"<p>{escape(line)}</p>" for line in because)
                + (f"<p>… and {more} more below.</p>" if more > 0 else "") + "</div>")
    body.append(f'<h2 id="claims">Claims checklist ({escape(H.claims_count(rep.claims))})</h2>')
    body.append(H.claims_html(rep.claims))
    body.append(methodology_html(rep, names))
    body.append(compute_html(N.compute_spent(prov.benchmarks, rep.family, rep.devices, rep.config)))
    body.append(easy_hard_html(rep.notes))
    body.append('<h2 id="results">Results</h2>')
    if rep.paper_figures:
        body.append("<h3>Ours against the paper</h3>")
        body.append(H.figures_html(rep.paper_figures))
    if rep.leaderboard_html:
        body.append("<h3>Leaderboard</h3>")
        body.append(rep.leaderboard_html)
    body.append("<h2>Tables</h2>")
    for table in rep.tables:
        links = f'<p><small>Markdown: <a href="tables/{escape(table.id)}.md">tables/{escape(table.id)}.md</a></small></p>'  # noqa: E501
        body.append(f"{to_html(table, names, data_notes=False)}{links}")
    body.append("<h2>Figures</h2>")
    body.append(H.figures_html(rep.figures))
    body.append("<h2>Provenance</h2>")
    body.append(H.provenance_html(prov, rep.family, rep.datasets, rep.devices))
    body.append(
        f'<p><small>Machine-readable: <a href="metrics.json">metrics.json</a>, '
        f'<a href="claims.json">claims.json</a>; printable: <a href="REPORT.md">REPORT.md</a>. Published numbers: '
        f"<code>{escape(published_numbers_path(reference))}</code>.</small></p>"
    )
    return H.page(spec.get("title", rep.family), "\n".join(body), _nav("../", families))


def published_numbers_path(reference: Reference) -> str:
    """The published numbers' file, relative to the source tree (never the building machine's absolute path)."""
    if not reference.path:
        return "none"
    path = Path(reference.path)
    for root in (Path.cwd(), Path(__file__).resolve().parents[4]):
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return "/".join(path.parts[-3:])


def index_page(reports: list[FamilyReport], prov: Provenance, title: str) -> str:
    every = [c for rep in reports for c in rep.claims]
    body = [
        "<p>What was reproduced, how close it came, and on what data: one reproduction report per paper, each "
        "opening with its scope, a summary and the claims checklist.</p>",
        f'<div class="summary"><p><b>Overall: {escape(N.summary_sentence(every))}</b></p>'
        f"<p>{escape(H.claims_count(every))} across {len(reports)} papers.</p></div>",
    ]
    for rep in reports:
        status = ("not run" if rep.summary.empty else
                  f"{rep.n_runs} runs on {', '.join(rep.datasets)}")
        body.append(f'<h2 id="{escape(rep.family)}"><a href="{escape(rep.family)}/index.html">'
                    f"{escape(rep.spec.get('title', rep.family))}</a></h2>")
        body.append(f'<p class="lead">{escape(rep.spec.get("paper", ""))}. <b>{escape(N.summary_sentence(rep.claims))}'
                    f"</b> <small>({escape(status)})</small></p>")
        run = [c for c in rep.claims if c.verdict != NOT_RUN]
        not_run = [c for c in rep.claims if c.verdict == NOT_RUN]
        for group, wrap in ((run, None), (not_run, f"{len(not_run)} claims not run in this configuration")):
            if not group:
                continue
            items = '<ol class="claimlist">' + "".join(
                f"<li>{H.claim_line(c, href=f'{rep.family}/index.html#claim-{c.id}', details=False)}</li>"
                for c in group) + "</ol>"
            body.append(f"<details><summary>{escape(wrap)}</summary>{items}</details>" if wrap else items)
    body += ["<h2>What the verdicts mean</h2>", H.legend_html(), "<h2>Provenance</h2>", H.provenance_html(prov)]
    return H.page(title, "\n".join(body), _nav("", [r.family for r in reports]))


def report_families(config: dict, families: list[str] | None = None) -> list[str]:
    """The families a config's report covers: those it runs (or the asked-for subset of them), in the
    config's order; a family the config does not run has no page (it is not 'not run', it is not asked)."""
    planned = list(config.get("families") or {})
    if families is None:
        wanted = (config.get("report") or {}).get("families")
        return [f for f in planned if f in wanted] if wanted else planned
    absent = [f for f in families if f not in planned]
    if absent:
        raise ValueError(f"report families {absent} are not in the config (it runs {planned})")
    return [f for f in planned if f in families]


def config_datasets(config: dict, families: list[str]) -> list[str]:
    """The datasets the families run, with the datasets composite ones are built from."""
    names: dict[str, None] = {}
    registry = config.get("datasets") or {}
    for family in families:
        for dataset in config["families"][family]["datasets"]:
            source = (registry.get(dataset) or {}).get("source") or {}
            for member in ([source.get("train"), source.get("test")] if source.get("type") == "composite" else []):
                names.setdefault(member, None)
            names.setdefault(dataset, None)
    return list(names)


def planned_jobs(config: dict, families: list[str]) -> list[str]:
    """``<rule>/<job>`` names of the config's Snakemake jobs, as their benchmark files are named."""
    jobs = [f"materialise/{d}" for d in config_datasets(config, families)] + ["report/report"]
    for family in families:
        jobs.append(f"aggregate/{family}")
        splits = set()
        for dataset, setting, method in planned_runs(config, family):
            splits.add(f"split/{family}/{dataset}/{setting}")
            jobs.append(f"train/{family}/{dataset}/{setting}/{method}")
        jobs += sorted(splits)
    return jobs


def build_reports(
    config: dict,
    config_path: str,
    results_dir: Path,
    out_dir: Path,
    data_dir: Path,
    records_dir: Path,
    families: list[str] | None = None,
    spec_dir: Path | None = None,
    jobs: int = 1,
) -> Path:
    """Write ``out_dir/index.html`` and ``out_dir/<family>/...``; return the index path."""
    results_dir, out_dir, data_dir, records_dir = map(Path, (results_dir, out_dir, data_dir, records_dir))
    base = Path.cwd()
    register_families(config)  # plug-in families (families.<name>.package) are found in this process too
    families = report_families(config, families)
    registry = dataset_registry(config, base)
    prov = collect(config_path, base, records_dir, data_dir, datasets=config_datasets(config, families),
                   jobs=planned_jobs(config, families))
    prov.config_path = display_path(prov.config_path)
    tasks = [(family, load_spec(family, spec_dir), config, registry, results_dir, out_dir)
             for family in families]
    if jobs > 1 and len(tasks) > 1:
        # Families are independent; at the end of a run nothing else needs the cores.
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
            reports = list(pool.map(_build_family_task, tasks))
    else:
        reports = [_build_family_task(task) for task in tasks]
    roots = [Path.cwd(), results_dir, out_dir, data_dir, records_dir]
    for rep in reports:
        write_text(out_dir / rep.family / "index.html",
                   strip_local_paths(family_page(rep, prov, rep.reference, families), roots))
        printable = report_markdown(rep, prov, scope_text(rep), published_numbers_path(rep.reference))
        write_text(out_dir / rep.family / "REPORT.md", strip_local_paths(printable, roots))
    title = (config.get("report") or {}).get("title", "uqcal reports")
    index = out_dir / "index.html"
    write_text(index, strip_local_paths(index_page(reports, prov, title), roots))
    # The paper's claims and our own checks (a claim's ``ours``) apart: the end-of-run headline counts the papers'.
    write_json(out_dir / "claims_summary.json",
               {r.family: {c.id: c.verdict for c in r.claims if not c.ours} for r in reports})
    write_json(out_dir / "checks_summary.json",
               {r.family: {c.id: c.verdict for c in r.claims if c.ours} for r in reports})
    return index


def display_path(path: str | Path) -> str:
    """A path as a reader of the report may see it: relative to the working directory, else its last two parts
    (never the building machine's absolute path)."""
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return "/".join(path.parts[-2:])


def strip_local_paths(text: str, roots: list[Path]) -> str:
    """The page with the building machine's folders made relative: no absolute local path reaches a reader
    (dataset records and library messages carry them)."""
    for root in sorted({str(Path(r).resolve()) for r in roots}, key=len, reverse=True):
        if root != "/":
            text = text.replace(root + "/", "").replace(root, ".")
    return text


def add_report_subparser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("report", help="build reports/ from results/ (HTML, Markdown, figures)")
    parser.add_argument("--configfile", "--config", dest="configfile", default="config/config.yaml")
    parser.add_argument("--results", default="results")
    parser.add_argument("--out", default="reports")
    parser.add_argument("--data", default="data")
    parser.add_argument("--records", default=".uqcal/records")
    parser.add_argument("--families", nargs="*", default=None)
    parser.set_defaults(func=main_report)
    return parser


def main_report(args) -> int:
    try:  # the validated, registry-merged config when the spine's loader is present
        from uqcal.pipeline.config.load import load_config

        config = load_config(args.configfile)
    except ImportError:
        config = yaml.safe_load(Path(args.configfile).read_text()) or {}
    index = build_reports(
        config,
        args.configfile,
        Path(args.results),
        Path(args.out),
        Path(args.data),
        Path(args.records),
        families=args.families,
    )
    print(index)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m uqcal.pipeline.report.build")
    sub = parser.add_subparsers(dest="command", required=True)
    add_report_subparser(sub)
    import sys

    args = parser.parse_args(["report", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())

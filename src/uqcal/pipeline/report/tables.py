"""Paper-layout tables: rows = (dataset, setting), columns = methods, our mean ± std over seeds, bold where
not significantly different from the row's best by a paired test at 5 %, the paper's value alongside."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from uqcal.metrics.stats import PAIRED_TESTS, paired_pvalue
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference
from uqcal.pipeline.report.numbers import fmt_se

TESTS = PAIRED_TESTS

# A table none of whose methods ran: which configs hold what the default's 30-minute budget leaves out.
NOT_RUN = ("this config does not run it (config/extended.yaml, config/paper.yaml and the other run configs "
           "hold what the default run's budget leaves out: README.md, \"Configs\").")


def significance_marks(values: dict[int, float], reference: dict[int, float], alpha: float = 0.05) -> str:
    """RIO Table 1's marks: † if a paired t-test, ‡ if a Wilcoxon signed-rank test over the shared seeds
    says the method differs from the reference method at level alpha."""
    shared = sorted(set(values) & set(reference))
    if len(shared) < 2:
        return ""
    a, b = [values[s] for s in shared], [reference[s] for s in shared]
    return "".join(symbol for symbol, test in (("†", "ttest"), ("‡", "wilcoxon")) if paired_pvalue(a, b, test) < alpha)


def not_worse_than_best(
    per_seed: dict[str, dict[int, float]],
    lower_is_better: bool = True,
    test: str = "ttest",
    alpha: float = 0.05,
) -> tuple[str | None, set[str]]:
    """The best method by mean and every method a paired test (over shared seeds) cannot tell apart from it.

    A method sharing fewer than two seeds with the best cannot be tested and is not marked.
    """
    means = {m: float(np.mean(list(v.values()))) for m, v in per_seed.items() if v}
    if not means:
        return None, set()
    best = (min if lower_is_better else max)(means, key=means.get)
    marked = {best}
    for method, values in per_seed.items():
        if method == best or not values:
            continue
        shared = sorted(set(values) & set(per_seed[best]))
        if len(shared) < 2:
            continue
        p = paired_pvalue([values[s] for s in shared], [per_seed[best][s] for s in shared], test)
        if p >= alpha:
            marked.add(method)
    return best, marked


@dataclass
class Cell:
    mean: float | None = None
    std: float | None = None
    n: int = 0
    bold: bool = False
    paper: dict | None = None  # reference record
    verdict: str = ""  # within | outside | no spread | stand-in | ""
    marks: str = ""  # "†" / "‡": differs from the marks_against method (paired t-test / Wilcoxon, 5 %)
    failed_runs: int = 0  # runs of this cell whose fit failed (fit_failures > 0 in train_stats.json)
    checked_runs: int = 0  # runs of this cell


@dataclass
class Row:
    dataset: str
    setting: str
    relation: DatasetRelation
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)  # (metric, method) -> Cell


@dataclass
class BuiltTable:
    id: str
    title: str
    caption: str
    metrics: list[str]
    methods: list[str]
    rows: list[Row]
    lower_is_better: dict[str, bool]
    targets: dict[str, float]
    test: str
    paper_table: dict | None
    paper_methods: dict[str, set[str]]  # metric -> methods with any paper value in this table
    not_run: list[str]
    notes: list[str]  # what this table's numbers mean (failed fits, runs per method)
    marks_against: str | None = None
    failed_cells: int = 0  # cells with a failed fit (marked ⚠)
    data_notes: list[str] = field(default_factory=list)  # stand-in / same-data notes: the page shows them once


# Columns that describe a fit rather than score it: no "best" among them, so no bold.
DIAGNOSTICS = {"gp_iterations", "gp_converged", "fit_failures", "jitter_escalations", "jitter_max", "n_query",
               "n_query_pooled", "fit_seconds", "train_seconds", "epochs_run", "noise_var"}
# Units for the column headers (a metric not listed is unitless or a share).
UNITS = {"rmse": "target units", "mse": "target units²", "crps": "target units", "nlpd": "nats", "nll": "nats",
         "fit_seconds": "s", "train_seconds": "s", "predict_seconds": "s", "ce": "×100, sum over levels",
         "acc": "share", "cov95": "share", "cov90": "share", "cov68": "share", "gp_converged": "share",
         "fit_failures": "share", "noise_var": "target units²"}

FAILURE_MARK = "⚠"
FAILURE_NOTE = (f"{FAILURE_MARK} k/n: k of the n runs behind the cell had a failed fit (fit_failures > 0 in their "
                "train_stats.json: the optimiser reported a non-finite loss, a Cholesky failure after jitter, or an "
                "abnormal stop). Their numbers are included as they came out.")


def fit_failure_counts(failures: pd.DataFrame | None) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(dataset, setting, method) -> (runs with fit_failures > 0, runs)."""
    if failures is None or failures.empty:
        return {}
    grouped = failures.assign(failed=failures["fit_failures"] > 0).groupby(["dataset", "setting", "method"])
    return {key: (int(g["failed"].sum()), len(g)) for key, g in grouped}


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if float(value).is_integer() and abs(value) < 1e15:  # counts (iterations, runs) read as counts
        return str(int(value))
    magnitude = abs(value)
    if magnitude != 0 and (magnitude >= 1e4 or magnitude < 1e-3):
        return f"{value:.2e}"
    return f"{value:.{digits}f}"


def spread_verdict(ours: float, paper: dict, relation: DatasetRelation, lower_is_better: bool | None = None) -> str:
    """Same dataset: is our mean within the paper's mean ± reported spread, and if not, on which side: 'better'
    or 'worse' in the metric's direction (a better-than-published number is never marked as a failure), plain
    'outside' for a metric with no direction. Stand-in: not comparable."""
    if relation.kind != "same":
        return "stand-in"
    if paper.get("std") is None:
        return "no spread"
    gap = ours - float(paper["mean"])
    if abs(gap) <= float(paper["std"]):
        return "within"
    if lower_is_better is None:
        return "outside"
    return "better" if (gap < 0) == lower_is_better else "worse"


def build_table(
    spec: dict,
    summary: pd.DataFrame,
    runs: pd.DataFrame,
    reference: Reference,
    relations: dict[str, DatasetRelation],
    failures: pd.DataFrame | None = None,
) -> BuiltTable:
    """One table from its spec entry (id, title, metric(s), methods, lower_is_better, test, paper_table).

    ``failures`` (dataset, setting, method, seed, fit_failures), one row per run that reported a count,
    marks the cells with a failed fit."""
    failure_counts = fit_failure_counts(failures)
    metrics = list(spec.get("metrics") or [spec["metric"]])
    test = spec.get("test", "ttest")
    if test not in TESTS:
        raise ValueError(f"table {spec.get('id')!r}: test must be one of {TESTS}, got {test!r}")
    lib = spec.get("lower_is_better", True)
    lower = {m: (lib[m] if isinstance(lib, dict) else bool(lib)) for m in metrics}
    alpha = float(spec.get("alpha", 0.05))
    # metrics with a nominal value (interval coverage): best = closest to it, tested on |value − target|
    targets = {m: float(t) for m, t in (spec.get("target") or {}).items() if m in metrics}
    paper_units = {m: float(f) for m, f in (spec.get("paper_units") or {}).items()}
    lower.update({m: True for m in targets})
    ours_all = summary
    ours = summary[summary["metric"].isin(metrics)]
    if spec.get("settings"):
        ours = ours[ours["setting"].isin([str(s) for s in spec["settings"]])]
    if spec.get("datasets"):
        ours = ours[ours["dataset"].isin(spec["datasets"])]
    spec_methods = list(spec.get("methods") or [])
    present = list(dict.fromkeys(ours["method"]))
    methods = [m for m in spec_methods if m in present] + [
        m for m in present if m not in spec_methods and not spec.get("only_listed_methods")
    ]
    not_run = [m for m in spec_methods if m not in present]
    paper_table = reference.tables.get(spec.get("paper_table", ""))
    relevant = runs[runs["metric"].isin(metrics)] if not runs.empty else runs
    rows: list[Row] = []
    if not methods:  # none of the table's methods ran: the table is 'not run', not a row of blanks
        ours = ours.iloc[0:0]
    for (dataset, setting), block in ours.groupby(["dataset", "setting"], sort=False):
        relation = relations.get(dataset) or DatasetRelation(dataset, None, "none")
        row = Row(dataset, str(setting), relation)
        for metric in metrics:
            per_seed: dict[str, dict[int, float]] = {}
            if not relevant.empty:
                sel = relevant[
                    (relevant["dataset"] == dataset)
                    & (relevant["setting"] == setting)
                    & (relevant["metric"] == metric)
                    & relevant["method"].isin(methods)
                ]
                for method, group in sel.groupby("method"):
                    shift = targets.get(metric)
                    if shift is not None:
                        group = group.assign(value=(group["value"] - shift).abs())
                    per_seed[method] = dict(zip(group["seed"].astype(int), group["value"].astype(float), strict=False))
            _, marked = not_worse_than_best(per_seed, lower[metric], test, alpha)
            against = spec.get("marks_against")
            for method in methods:
                hit = block[(block["metric"] == metric) & (block["method"] == method)]
                cell = Cell()
                if not hit.empty:
                    rec = hit.iloc[0]
                    cell.mean = float(rec["mean"])
                    cell.std = None if pd.isna(rec["std"]) else float(rec["std"])
                    cell.n = int(rec["n"]) if not pd.isna(rec["n"]) else 0
                    cell.bold = method in marked and metric not in DIAGNOSTICS
                    if against and method != against and against in per_seed and method in per_seed:
                        cell.marks = significance_marks(per_seed[method], per_seed[against], alpha)
                    cell.failed_runs, cell.checked_runs = failure_counts.get((dataset, str(setting), method), (0, 0))
                if paper_table is not None and relation.paper is not None:
                    cell.paper = reference.value(paper_table["id"], relation.paper, str(setting), method, metric)
                    factor = paper_units.get(metric)  # e.g. the paper prints % where we store fractions
                    if cell.paper is not None and factor is not None:
                        std = cell.paper.get("std")
                        cell.paper = {
                            **cell.paper,
                            "mean": float(cell.paper["mean"]) * factor,
                            "std": None if std is None else float(std) * factor,
                        }
                    if cell.paper is not None and cell.mean is not None:
                        cell.verdict = spread_verdict(cell.mean, cell.paper, relation,
                                                      None if metric in targets else lower[metric])
                row.cells[(metric, method)] = cell
        rows.append(row)
    paper_methods: dict[str, set[str]] = {m: set() for m in metrics}
    for row in rows:
        for (metric, method), cell in row.cells.items():
            if cell.paper is not None:
                paper_methods[metric].add(method)
    notes, data_notes = [], []
    stand_ins = {r.dataset: r.relation for r in rows if r.relation.kind == "stand_in"}
    for name, rel in stand_ins.items():
        target = f"the paper's {rel.paper}" if rel.paper else "a paper dataset"
        data_notes.append(
            f"Stand-in: our dataset '{name}' stands in for {target} ({rel.note}); "
            "paper values beside it are for a different dataset and are not comparable."
        )
    failed_cells = sum(1 for r in rows for c in r.cells.values() if c.failed_runs)
    if failed_cells:
        notes.insert(0, FAILURE_NOTE)
    notes.extend(run_count_notes(rows))
    for name, rel in {r.dataset: r.relation for r in rows if r.relation.kind == "same"}.items():
        data_notes.append(
            f"Same data: our '{name}' is the paper's '{rel.paper}'; 'within' means our mean lies "
            "inside the paper's mean ± reported std."
        )
    return BuiltTable(
        id=spec["id"],
        title=spec.get("title", spec["id"]),
        caption=fill_caption(spec.get("caption", paper_table["caption"] if paper_table else ""), ours_all, rows),
        metrics=metrics,
        methods=methods,
        rows=rows,
        lower_is_better=lower,
        targets=targets,
        test=test,
        paper_table=paper_table,
        paper_methods=paper_methods,
        not_run=not_run,
        notes=notes,
        marks_against=spec.get("marks_against"),
        failed_cells=failed_cells,
        data_notes=data_notes,
    )


def run_count_notes(rows: list[Row]) -> list[str]:
    """One note per row whose methods ran different numbers of seeds (a config's per-method ``seeds``)."""
    notes = []
    for row in rows:
        counts: dict[str, int] = {}
        for (_, method), cell in row.cells.items():
            if cell.mean is not None and cell.n:
                counts[method] = max(counts.get(method, 0), cell.n)
        if len(set(counts.values())) > 1:
            listed = ", ".join(f"{method} {n}" for method, n in counts.items())
            notes.append(f"{row.dataset} / {row.setting}: runs per method differ ({listed}). Each mean is over its "
                         "method's own runs; bold and the paired tests use the seeds both methods share.")
    return notes


def _failure_text(cell: Cell) -> str:
    return f" {FAILURE_MARK} {cell.failed_runs}/{cell.checked_runs}" if cell.failed_runs else ""


def fill_caption(caption: str, summary: pd.DataFrame, rows: list[Row]) -> str:
    """Replace ``{value:<metric>}`` by that metric's mean over the table's rows (a range if they differ),
    so a caption can state e.g. the real number of test episodes per run instead of the paper's."""
    import re

    def value(match: re.Match) -> str:
        keys = {(r.dataset, r.setting) for r in rows}
        sel = summary[(summary["metric"] == match.group(1))]
        sel = sel[[(d, str(s)) in keys for d, s in zip(sel["dataset"], sel["setting"], strict=False)]]
        if sel.empty:
            return "?"
        lo, hi = float(sel["mean"].min()), float(sel["mean"].max())
        return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"

    return re.sub(r"\{value:([A-Za-z0-9_]+)\}", value, caption)


def _cell_text(cell: Cell) -> str:
    if cell.mean is None:
        return "–"
    return fmt_se(cell.mean, cell.std if cell.n != 1 else None) + cell.marks


def _paper_value(cell: Cell) -> str:
    std = cell.paper.get("std")
    return fmt_se(float(cell.paper["mean"]), None if std is None else float(std))


SPREAD_WORDS = {"within": "within its spread", "better": "better, beyond its spread",
                "worse": "worse, beyond its spread", "outside": "beyond its spread"}


def _paper_text(cell: Cell) -> str:
    if cell.paper is None:
        return "–"
    text = _paper_value(cell)
    return f"{text} ({SPREAD_WORDS.get(cell.verdict, cell.verdict)})" if cell.verdict else text


def _marks_note(table: BuiltTable, names: dict[str, str]) -> str:
    against = names.get(table.marks_against, table.marks_against)
    return (f"† / ‡: the difference from {against} is significant at 5 % by a paired t-test / Wilcoxon "
            "signed-rank test over seeds (as in the paper's Table 1).")


def _headers(table: BuiltTable, names: dict[str, str]) -> list[tuple[str, str, str]]:
    """(metric, method, kind) per column; kind is 'ours' or 'paper'."""
    cols = []
    for metric in table.metrics:
        for method in table.methods:
            cols.append((metric, method, "ours"))
            if method in table.paper_methods[metric]:
                cols.append((metric, method, "paper"))
    return cols


def metric_header(table: BuiltTable, metric: str) -> str:
    """'rmse (target units) ↓': the metric, its unit and which way is better."""
    unit = f" ({UNITS[metric]})" if metric in UNITS else ""
    return f"{metric}{unit} {_direction(table, metric)}"


def _direction(table: BuiltTable, metric: str) -> str:
    if metric in table.targets:
        return f"→ {table.targets[metric]:g}"
    return "↓" if table.lower_is_better[metric] else "↑"


def to_markdown(table: BuiltTable, names: dict[str, str] | None = None) -> str:
    names = names or {}
    cols = _headers(table, names)
    multi = len(table.metrics) > 1
    head = ["dataset", "setting"] + [
        (f"{metric_header(table, metric)} " if multi or True else "")
        + names.get(method, method)
        + (" (paper)" if kind == "paper" else "")
        for metric, method, kind in cols
    ]
    lines = [f"### {table.title}", "", table.caption, ""]
    if not table.rows:
        lines.append(f"_No results for this table: {NOT_RUN}_")
    else:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for row in table.rows:
            cells = [row.relation.label(), row.setting]
            for metric, method, kind in cols:
                cell = row.cells[(metric, method)]
                if kind == "paper":
                    cells.append(_paper_text(cell))
                else:
                    text = _cell_text(cell)
                    cells.append((f"**{text}**" if cell.bold and cell.mean is not None else text) + _failure_text(cell))
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    lines.append(
        f"Mean ± std over seeds. Bold: not significantly different from the row's best "
        f"(paired {table.test} over seeds, 5 %)."
    )
    if table.marks_against:
        lines.append(f"- {_marks_note(table, names)}")
    for note in table.notes + table.data_notes:
        lines.append(f"- {note}")
    if table.not_run:
        lines.append(f"- Not run: {', '.join(table.not_run)}.")
    return "\n".join(lines) + "\n"


MAX_COLUMNS = 6  # value columns per table box: at the page's 1,280 px, six stacked "ours / paper" cells fit


def _grid(corner: str, row_heads: list[str], col_heads: list[str], cell, table_class: str = "results",
          caption: str = "") -> list[str]:
    """HTML table boxes of a rows x columns grid, the columns split into boxes of at most MAX_COLUMNS so that
    no box is wider than the page's column; ``cell(i, j)`` gives the ``<td>`` of row i, column j; ``caption``
    (escaped HTML) names each box's table."""
    out = []
    parts = -(-max(len(col_heads), 1) // MAX_COLUMNS)
    for start in range(0, max(len(col_heads), 1), MAX_COLUMNS):
        cols = range(start, min(start + MAX_COLUMNS, len(col_heads)))
        part = f" (part {start // MAX_COLUMNS + 1} of {parts})" if parts > 1 else ""
        cap = f"<caption>{caption}{part}</caption>" if caption else ""
        head = "".join(f"<th>{col_heads[j]}</th>" for j in cols)
        body = "".join(f'<tr><th class="rowhead">{row_heads[i]}</th>{"".join(cell(i, j) for j in cols)}</tr>'
                       for i in range(len(row_heads)))
        out.append(f'<div class="tablebox"><table class="{table_class}">{cap}<thead><tr><th>{corner}</th>{head}</tr>'
                   f"</thead><tbody>{body}</tbody></table></div>")
    return out


def _cell_html(cell: Cell) -> str:
    """Our mean ± std (bold: tied with the row's best), with the paper's value and its verdict below it."""
    esc = html.escape
    if cell.mean is None and cell.paper is None:
        return "<td>–</td>"
    ours = f'<span class="num">{esc(_cell_text(cell))}</span>'
    if cell.bold and cell.mean is not None:
        ours = f"<b>{ours}</b>"
    title = f' title="n={cell.n}"' if cell.mean is not None else ""
    klass = ""
    if cell.failed_runs:
        title = (f' title="n={cell.n}; {cell.failed_runs} of {cell.checked_runs} runs had a failed fit '
                 '(fit_failures &gt; 0)"')
        ours += f' <span class="fitfail">{esc(_failure_text(cell).strip())}</span>'
        klass = ' class="fitfail"'
    if cell.paper is not None:
        paper = _paper_value(cell)
        verdict = f" ({esc(SPREAD_WORDS.get(cell.verdict, cell.verdict))})" if cell.verdict else ""
        ours += (f'<br><span class="paper {esc(cell.verdict.replace(" ", "-"))}">paper <span class="num">'
                 f"{esc(paper)}</span>{verdict}</span>")
    return f"<td{title}{klass}>{ours}</td>"


def to_html(table: BuiltTable, names: dict[str, str] | None = None, data_notes: bool = True) -> str:
    """One table box per metric (and per MAX_COLUMNS columns), the paper's value under ours in each cell; methods
    as rows where there are more methods than datasets, so that a table grows down the page, not across it.
    ``data_notes=False`` leaves the stand-in / same-data notes to the page, which shows them once."""
    names = names or {}
    esc = html.escape
    out = [
        f'<figure class="table" id="table-{esc(table.id)}">',
        f"<figcaption><b>{esc(table.title)}</b>"
        + (f" (paper: {esc(table.paper_table['table'])})" if table.paper_table else "")
        + f". {esc(table.caption)}</figcaption>",
    ]
    if not table.rows:
        out.append(f'<p class="notrun">No results for this table: {esc(NOT_RUN)}</p>')
    else:
        keys = [f'<span class="{ {"same": "same", "stand_in": "standin"}.get(r.relation.kind, "")}">'
                f"{esc(r.relation.label())}</span> / {esc(r.setting)}" for r in table.rows]
        methods = [esc(names.get(m, m)) for m in table.methods]
        methods_as_rows = len(table.methods) > len(table.rows)
        for metric in table.metrics:
            corner = esc(metric_header(table, metric))
            caption = f"{esc(table.title)}: {corner}, ours (mean ± std over runs) with the paper's value below"
            if methods_as_rows:
                out += _grid(corner, methods, keys,
                             lambda i, j, metric=metric: _cell_html(table.rows[j].cells[(metric, table.methods[i])]),
                             caption=caption)
            else:
                out += _grid(corner, keys, methods,
                             lambda i, j, metric=metric: _cell_html(table.rows[i].cells[(metric, table.methods[j])]),
                             caption=caption)
    out.append('<ul class="tablenotes">')
    out.append(
        "<li>Mean ± std over seeds; the paper's mean ± its reported spread below ours, marked within / better / "
        "worse against that spread (the claims above judge by the narrower replication prediction interval). "
        + ("" if set(table.metrics) <= DIAGNOSTICS else
           f"<b>Bold</b>: not significantly different from the best (paired {esc(table.test)} across seeds, 5 %); "
           "diagnostic columns (iterations, convergence, failures, times) are never bold.")
        + "</li>"
    )
    if table.marks_against:
        out.append(f"<li>{esc(_marks_note(table, names))}</li>")
    out.extend(f"<li>{esc(note)}</li>" for note in table.notes + (table.data_notes if data_notes else []))
    if table.not_run:
        out.append(f'<li class="notrun">Not run: {esc(", ".join(table.not_run))}.</li>')
    out.append("</ul>")
    if table.paper_table:
        out.append(paper_table_html(table.paper_table, names))
    out.append("</figure>")
    return "\n".join(out)


def paper_table_html(paper_table: dict, names: dict[str, str]) -> str:
    """The published table as transcribed (collapsed), so it is visible even where we did not run: one table per
    metric, methods as rows."""
    esc = html.escape
    frame = pd.DataFrame(paper_table["records"])
    frame["value"] = [
        fmt_se(float(m), None if s is None or pd.isna(s) else float(s))
        for m, s in zip(frame["mean"], frame.get("std", [None] * len(frame)), strict=False)
    ]
    frame["key"] = [f"{d} / {s}" for d, s in zip(frame["dataset"], frame["setting"], strict=True)]
    out = [f"<details><summary>Published {esc(paper_table['table'])} as transcribed</summary>"]
    for metric, part in frame.groupby("metric", sort=False):
        wide = part.pivot_table(index="method", columns="key", values="value", aggfunc="first", sort=False)
        wide = wide.reindex(index=list(dict.fromkeys(part["method"])), columns=list(dict.fromkeys(part["key"])))
        out += _grid(esc(str(metric)), [esc(names.get(m, m)) for m in wide.index], [esc(c) for c in wide.columns],
                     lambda i, j, wide=wide: f'<td><span class="num">{esc("" if pd.isna(v := wide.iat[i, j]) else v)}'
                                             "</span></td>", table_class="paperref",
                     caption=f"{esc(paper_table['table'])} as published: {esc(str(metric))}")
    if paper_table.get("note"):
        out.append(f'<p class="note">{esc(paper_table["note"])}</p>')
    out.append("</details>")
    return "\n".join(out)

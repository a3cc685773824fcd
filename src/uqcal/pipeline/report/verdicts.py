"""What claims are made of: evidence rows with their numbers, the context a check reads, and how rows combine into
a claim's verdict. The check kinds (``claims`` lists them) all build on it; a comparison row's test under the
claim's hypothesis, at the reference's margin where it has one, is made here once (``hypothesis_test``,
``paired_row``).

A row is one test: our estimate with its standard error, degrees of freedom, runs and p-value, and on the paper's
own data the paper's estimate and standard error, the prediction interval, the small-telescopes test and the runs
that would detect the paper's effect. Its verdict follows ``uqcal.metrics.replication.row_verdict``. A claim's
rows are split by data: the paper's own data with a published number (replication verdicts), and rows without one
(stand-ins, or a paper that prints no number: direction verdicts). Where the claim's scope counts rows, the rows'
p-values are Holm-adjusted within each group first. The claim's verdict is that of its paper rows where it has
any, else that of its other rows; both are kept in ``by_data``. docs/verdicts.md explains the scheme.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import special, stats

from uqcal.metrics import replication as R
from uqcal.metrics.stats import holm_adjust, paired_pvalue, runs_for_power
from uqcal.pipeline.paper_numbers import DatasetRelation, Reference
from uqcal.pipeline.report.results import RunFiles
from uqcal.pipeline.report.tables import fmt

VERDICTS = R.VERDICTS
# Stability of a verdict: replications drawn per claim (a fixed seed from the claim's id); below this share of
# replications giving the same verdict, the verdict is fragile (REPLICATION-STATISTICS Sec. 10).
STABILITY_REPLICATIONS = 200
FRAGILE_BELOW = 0.8
NOT_RUN = R.NOT_RUN
PAPER_DATA, NO_PAPER_NUMBER, STAND_INS = "paper's data", "paper's data, no published number", "stand-ins"
GROUPS = (PAPER_DATA, NO_PAPER_NUMBER, STAND_INS)
# One line per verdict, for the report's legend and docs/verdicts.md.
LEGEND = {
    R.REPRODUCED: "significant in the paper's direction, inside the replication prediction interval",
    R.REPRODUCED_SMALLER: "significant in the paper's direction, below the prediction interval (a smaller effect)",
    R.CONSISTENT: "not significant, inside the prediction interval, the small-telescopes d33 not rejected: "
                  "underpowered (the row names the runs that would decide it)",
    R.SMALLER_THAN_PAPER: "not significant and d33 rejected: smaller than the paper could have detected",
    R.CONTRADICTED: "significant against the claim, or outside the prediction interval",
    R.GENERALISES: "no paper number (stand-in data): significant in the claim's direction",
    R.DOES_NOT_GENERALISE: "no paper number: significant against the claim",
    R.UNDECIDED: "no paper number: not significant",
    R.NOT_RUN: "this config does not run it; the named config does",
}


@dataclass
class Evidence:
    """One row behind a verdict: a label, a sentence for the reader and the numbers of its test (``test``), or for a
    row that could not be tested (``test`` None, e.g. too few runs) only the sentence."""

    label: str
    detail: str
    dataset: str | None = None
    setting: str | None = None
    test: R.RowTest | None = None
    test_name: str = ""
    n: int | None = None          # the test's sample size (pairs, episodes, curves)
    runs: int | None = None       # runs (seeds) per method behind the row
    n80: float | None = None      # runs for 80 % power at the paper's effect, at our scatter
    group: str = STAND_INS
    p_adjusted: float | None = None
    outcome: dict = field(default_factory=dict)  # row_verdict's numbers and verdict

    @property
    def verdict(self) -> str | None:
        return self.outcome.get("verdict")

    def as_dict(self) -> dict:
        t = self.test
        out = {"label": self.label, "dataset": self.dataset, "setting": self.setting, "data": self.group,
               "verdict": self.verdict, "detail": self.detail, "test": self.test_name, "n": self.n,
               "runs": self.runs}
        if t is not None:
            out.update({"hypothesis": t.hypothesis, "direction": t.direction, "estimate": _num(t.estimate),
                        "se": _num(t.se), "df": _num(t.df), "p": _num(t.p), "p_adjusted": _num(self.p_adjusted),
                        "margin": _num(t.margin), "paper_estimate": _num(t.paper_estimate),
                        "paper_se": _num(t.paper_se), "paper_df": _num(t.paper_df),
                        "n80_at_paper_effect": _num(self.n80)})
            out.update({k: _num(v) if k != "side" else v for k, v in self.outcome.items() if k != "verdict"})
        return out


def _num(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else (None if math.isnan(value) else ("inf" if value > 0 else "-inf"))


@dataclass
class ClaimResult:
    id: str
    text: str
    verdict: str
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    source: str = ""
    by_data: dict[str, tuple[str, str]] = field(default_factory=dict)  # group -> (verdict, summary)
    runs_declared: int | None = None
    runs_source: str = ""
    scope: object = None
    skipped: list[str] = field(default_factory=list)  # rows that could not be tested, and why
    ours: bool = False  # a check the paper does not make (listed apart from the paper's claims)
    decided_on: str | None = None  # the scope in plain words: datasets of the paper's, folds, units
    stability: dict | None = None  # share of replications at the same n giving the same verdict (stability())
    config: str | None = None  # not run: the config file that runs it (None: no config of uqcal can)
    needs: str | None = None  # not run: what running it needs, in plain words (downloads, CPU / GPU hours)

    def as_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "source": self.source, "verdict": self.verdict,
                "summary": self.summary, "scope": self.scope, "runs_declared": self.runs_declared,
                "runs_source": self.runs_source, "ours": self.ours, "decided_on": self.decided_on,
                "stability": self.stability,
                "by_data": {name: {"verdict": v, "summary": s} for name, (v, s) in self.by_data.items()},
                "evidence": [e.as_dict() for e in self.evidence], "rows_not_tested": self.skipped,
                **({"config": self.config, "needs": self.needs} if self.verdict == NOT_RUN else {})}


@dataclass
class ClaimContext:
    family: str
    summary: pd.DataFrame
    runs: pd.DataFrame
    reference: Reference
    relations: dict[str, DatasetRelation]
    files: RunFiles | None = None  # the family's planned runs, for claims on what is not a metric
    claim_runs: dict | None = None  # the run config's report.claim_runs[family]: {claim id | default: n}
    claim_runs_source: str = ""

    def declared_runs(self, claim_id: str) -> int | None:
        runs = self.claim_runs or {}
        value = runs.get(claim_id, runs.get("default"))
        return None if value is None else int(value)

    def paper_relation(self, dataset: str) -> DatasetRelation | None:
        """The dataset's relation when it is the paper's own data, else None."""
        relation = self.relations.get(dataset)
        return relation if relation is not None and relation.kind == "same" else None


def _filter(frame: pd.DataFrame, check: dict) -> pd.DataFrame:
    if frame.empty:
        return frame
    if check.get("datasets"):
        frame = frame[frame["dataset"].isin(check["datasets"])]
    if check.get("settings"):
        frame = frame[frame["setting"].astype(str).isin([str(s) for s in check["settings"]])]
    return frame


def _means(ctx: ClaimContext, check: dict, metric: str) -> pd.DataFrame:
    """Wide table of means: index (dataset, setting), columns methods (only to list the rows and methods; the
    tests recompute their means over the declared runs)."""
    frame = _filter(ctx.summary[ctx.summary["metric"] == metric], check)
    if frame.empty:
        return pd.DataFrame()
    return frame.pivot_table(index=["dataset", "setting"], columns="method", values="mean", aggfunc="first", sort=False)


def _per_seed(ctx: ClaimContext, check: dict, metric: str) -> dict[tuple[str, str, str], dict[int, float]]:
    """(dataset, setting, method) -> {seed: value} from the per-run metrics."""
    if ctx.runs.empty:
        return {}
    frame = _filter(ctx.runs[ctx.runs["metric"] == metric], check)
    out: dict[tuple[str, str, str], dict[int, float]] = {}
    for (dataset, setting, method), group in frame.groupby(["dataset", "setting", "method"], sort=False):
        out[(dataset, str(setting), method)] = dict(zip(group["seed"].astype(int), group["value"], strict=False))
    return out


def margin_for(claim: dict, ctx: ClaimContext, comparator_mean: float) -> tuple[float, str]:
    """The non-inferiority margin the reference declares for this claim (absolute, or ``relative`` to the
    comparator's mean) and its reason; a claim that needs one and has none is a configuration error."""
    spec = ctx.reference.margins.get(claim["id"])
    if not spec:
        raise ValueError(f"a 'not worse' / 'best or tied' claim needs a margin: add margins.{claim['id']} "
                         f"(margin or relative, and its reason) to {ctx.reference.path or 'its paper_numbers.yaml'}")
    if "margin" in spec:
        return float(spec["margin"]), f"margin {fmt(float(spec['margin']))}"
    relative = float(spec["relative"])
    return relative * abs(comparator_mean), f"margin {relative:.0%} of {fmt(comparator_mean)}"


def hypothesis_test(claim: dict, ctx: ClaimContext, accept: str, estimate: float, se: float, df, p: float,
                    direction: int, comparator_mean: float, d=None, paper=None) -> tuple[R.RowTest, str, bool]:
    """A row's test under the claim's hypothesis, ``accept``: superiority (``better``: ``p`` as given), or
    non-inferiority (``not_worse``) or equivalence (``equivalent``) at the margin the reference declares for the
    claim (:func:`margin_for`, relative to ``comparator_mean`` where it is relative). Returns the test (with the
    paper's numbers where ``paper`` is given), the margin's text ('' for superiority) and whether the row's paired
    differences ``d`` had no spread, so that exact sign tests replaced the t-based p-values."""
    margin, margin_text, p_against = None, "", None
    hypothesis = "superiority"
    if accept == "not_worse":
        hypothesis = "noninferiority"
        margin, margin_text = margin_for(claim, ctx, comparator_mean)
        p, p_against = R.noninferiority_pvalues(direction * estimate, se, df, margin)
    elif accept == "equivalent":
        hypothesis = "equivalence"
        margin, margin_text = margin_for(claim, ctx, comparator_mean)
        p, p_against = R.equivalence_pvalues(estimate, se, df, margin)
    no_spread = bool(hypothesis != "superiority" and not se > 0 and d is not None and len(d))
    if no_spread:
        # No spread: the t-based tests would give p = 0 at any n; the exact one-sided sign tests of the
        # differences shifted by the margin give 1 / 2^n where every run is inside it.
        if hypothesis == "noninferiority":
            p, p_against = R.sign_test_pvalues(direction * np.asarray(d, float) + margin)[1:]
        else:
            (p_low, beyond_low), (p_high, beyond_high) = (R.sign_test_pvalues(np.asarray(d, float) + margin)[1:],
                                                          R.sign_test_pvalues(margin - np.asarray(d, float))[1:])
            p, p_against = max(p_low, p_high), min(beyond_low, beyond_high)
    paper_est = None if paper is None else paper.mean
    paper_se = None if paper is None else paper.se
    row_test = R.RowTest(hypothesis, estimate, se, df, p, direction, margin, p_against, paper_est, paper_se,
                         None if paper is None else paper.df)
    return row_test, margin_text, no_spread


def paired_numbers(d: np.ndarray, test: str) -> tuple[float, float, float, float, str]:
    """(estimate, se, df, two-sided p, note) of paired differences ``d``: t (or Wilcoxon) p; a difference without
    spread is reported as identical or constant, with the sign test's p."""
    n = d.size
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0 or np.allclose(d, d[0], rtol=1e-12, atol=0.0):
        note = "identical in every run" if d[0] == 0 else "the same difference in every run (sign test)"
        return mean, 0.0, n - 1, R.sign_test_pvalues(d)[0], note
    se = sd / math.sqrt(n)
    # the t-test's p from the row's own numbers (stats.paired_pvalue calls differences below 1e-8 in absolute value
    # identical, p = 1, whatever the metric's scale)
    p = R.two_sided_pvalue(mean, se, n - 1) if test == "ttest" else paired_pvalue(d, np.zeros_like(d), test)
    return mean, se, n - 1, p, ""


def paired_row(claim, ctx, label, dataset, setting, d, test, direction, accept, comparator_mean, paper, test_name,
               blocks: int = 1, numbers=None, n_runs=None, describe="") -> Evidence:
    """One comparison row from its paired differences ``d`` (or ready ``numbers``: estimate, se, df, p, note), tested
    under the claim's hypothesis (:func:`hypothesis_test`), with the paper's difference where ``paper`` gives it. A
    run without a finite value (a failed fit's NaN or inf) leaves the row untested: its numbers would be NaN, which
    no test can read."""
    if d is not None and not np.all(np.isfinite(d)):
        bad = int((~np.isfinite(np.asarray(d, float))).sum())
        return Evidence(label, f"{bad} of {len(d)} paired runs have no finite value, so the row is not tested",
                        dataset, str(setting))
    estimate, se, df, p, note = numbers if numbers is not None else paired_numbers(d, test)
    row_test, margin_text, no_spread = hypothesis_test(claim, ctx, accept, estimate, se, df, p, direction,
                                                       comparator_mean, d, paper)
    if no_spread:
        note = note or "no spread (sign test)"
    hypothesis, p, paper_est = row_test.hypothesis, row_test.p, row_test.paper_estimate
    sd = se * math.sqrt(len(d)) if d is not None else None
    n80 = None  # runs for 80 % power at the paper's effect: a superiority row's question only
    if paper_est is not None and hypothesis == "superiority" and sd is not None:
        n80 = runs_for_power(paper_est, sd, test=test, blocks=blocks)
    parts = [describe, f"diff {fmt(estimate)} ± {fmt(se)} (se), {test_name} p = {fmt(p)}"
             + (f" ({margin_text}: {hypothesis})" if margin_text else "") + (f"; {note}" if note else "")]
    if paper is not None:
        parts.append(f"paper {fmt(paper.mean)}" + (f" ± {fmt(paper.se)} (se: {paper.se_basis})" if paper.se is not None
                                                   else " (no ± printed)"))
    runs = n_runs if n_runs is not None else (None if d is None else len(d))
    return Evidence(label, "; ".join(p for p in parts if p), dataset, str(setting), row_test, test_name,
                    None if d is None else len(d), runs, n80)


# The fewest runs at which a row's test can reach alpha = .05 (REPLICATION-STATISTICS Sec. 10): a t test needs 3
# (df 2; at df 1 only |t| > 12.7 would); an exact sign test needs 6 pairs (2 / 2^5 = .0625).
MIN_RUNS_T = 3
MIN_RUNS_SIGN = 6


def declared_seeds(seed_sets: list, declared: int | None,
                   minimum: int = MIN_RUNS_T) -> tuple[list[int] | None, str]:
    """The seeds a row's test uses: the first ``declared`` seeds that every method ran (runs are fixed in the
    config before results exist, the same for every row of a claim), or all shared seeds when the config declares
    none. None, with the reason, when a row has fewer than the declared runs, or when the declared runs are fewer
    than the test needs (``minimum``: a t test below 3 runs cannot reach alpha = .05)."""
    shared = sorted(set.intersection(*(set(s) for s in seed_sets))) if seed_sets else []
    if declared is not None and declared < minimum:
        return None, f"{declared} declared run{'s' if declared != 1 else ''} (the test needs {minimum})"
    if declared is None:
        return (shared, "") if len(shared) >= minimum else (None, f"{len(shared)} shared runs (the test needs {minimum})")
    if len(shared) < declared:
        return None, f"{len(shared)} shared runs of the {declared} declared"
    return shared[:declared], ""


def group_of(ctx: ClaimContext, dataset: str | None, test: R.RowTest | None) -> str:
    if dataset is None or ctx.paper_relation(dataset) is None:
        return STAND_INS
    has_number = test is not None and test.paper_estimate is not None and test.paper_se is not None
    return PAPER_DATA if has_number else NO_PAPER_NUMBER


def _row_verdicts(rows: list[R.RowTest], scope, alpha: float) -> tuple[list[float], list[dict]]:
    """Holm-adjust (where the scope counts rows) and decide each row: (adjusted p-values, row_verdict outcomes)."""
    pvalues = [t.p for t in rows]
    holm = R.scope_counts_rows(scope) and len(rows) > 1
    adjusted = holm_adjust(pvalues) if holm else pvalues
    # a margin row's test against the claim (beyond the margin) is adjusted the same way
    against = [t.p_against for t in rows]
    if holm and all(p is not None for p in against):
        against = holm_adjust(against)
    outcomes = []
    for test, p_adj, p_against in zip(rows, adjusted, against, strict=True):
        test = test if p_against is None else replace(test, p_against=float(p_against))
        outcomes.append(R.row_verdict(test, float(p_adj), alpha))
    return [float(p) for p in adjusted], outcomes


def _decide(rows: list[Evidence], scope, alpha: float) -> tuple[str, str]:
    """Holm-adjust (where the scope counts rows) and decide each row, then the group's verdict and summary."""
    adjusted, outcomes = _row_verdicts([e.test for e in rows], scope, alpha)
    for row, p_adj, outcome in zip(rows, adjusted, outcomes, strict=True):
        row.p_adjusted, row.outcome = p_adj, outcome
    verdicts = [r.verdict for r in rows]
    verdict = R.combine_verdicts(verdicts, scope)
    need = R.required_rows(scope, len(rows))
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in R.VERDICTS if v in verdicts)
    holm = "; Holm-adjusted within the claim" if R.scope_counts_rows(scope) and len(rows) > 1 else ""
    return verdict, f"{len(rows)} rows ({counts}); {need} must hold{holm}"


class _T:
    """The t distribution's sf and cdf at a fixed df (scipy.special: no frozen-distribution overhead)."""

    def __init__(self, df: float):
        self.df = float(df)

    def sf(self, x):
        return special.stdtr(self.df, -np.asarray(x, float))

    def cdf(self, x):
        return special.stdtr(self.df, np.asarray(x, float))


def _redrawn_pvalues(test: R.RowTest, estimates: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The row's p (and p against, for a margin row) at redrawn estimates, by the t (normal without a df) that its
    test uses; a row without spread keeps its p (its estimate is not redrawn)."""
    normal = test.df is None or not math.isfinite(test.df)
    dist = stats.norm if normal else _T(test.df)
    if not test.se > 0:
        return np.full(estimates.shape, test.p), (None if test.p_against is None
                                                  else np.full(estimates.shape, test.p_against))
    if test.hypothesis == "noninferiority":
        t_stat = (test.direction * estimates + test.margin) / test.se
        return dist.sf(t_stat), dist.cdf(t_stat)
    if test.hypothesis == "equivalence":
        low, high = (estimates + test.margin) / test.se, (test.margin - estimates) / test.se
        return np.maximum(dist.sf(low), dist.sf(high)), np.minimum(dist.cdf(low), dist.cdf(high))
    return 2 * dist.sf(np.abs(estimates) / test.se), None


def _runs_for_stable(row: Evidence, alpha: float) -> float | None:
    """Runs per row for 80 % power at the paper's effect (what makes the row's verdict come out the same in 80 % of
    replications where the paper's effect is true): the row's n80 for superiority; for a margin row, the one-sided
    test of non-inferiority at the paper's effect plus the margin."""
    t = row.test
    if row.n80 is not None:
        return row.n80
    if t.paper_estimate is None or t.hypothesis not in ("noninferiority", "equivalence") or not t.se > 0 or not row.n:
        return None
    distance = (t.margin - abs(t.paper_estimate) if t.hypothesis == "equivalence"
                else t.direction * t.paper_estimate + t.margin)
    if distance <= 0:
        return None  # the paper's own effect is beyond the margin: no n makes the row hold
    sd = t.se * math.sqrt(row.n)
    return float(math.ceil(((stats.norm.ppf(1 - alpha) + stats.norm.ppf(0.8)) * sd / distance) ** 2))


def stability(claim_id: str, rows: list[Evidence], scope, verdict: str, alpha: float = R.ALPHA,
              replications: int = STABILITY_REPLICATIONS) -> dict:
    """The share of replications at the same n that give the claim's verdict: a parametric draw of each row's
    estimate from its t (our estimate, our se, our df; the se kept), the row's p recomputed from the draw, then the
    same decision path (Holm, row verdicts, the scope). Deterministic: the draws' seed is the claim id's CRC32.
    Fragile below 80 %, with the runs per row that would make it stable at the paper's effect."""
    rng = np.random.default_rng(zlib.crc32(claim_id.encode()))
    tests = [r.test for r in rows]
    draws = []
    for t in tests:
        noise = (rng.standard_normal(replications) if t.df is None or not math.isfinite(t.df)
                 else rng.standard_t(max(float(t.df), 1e-9), replications))
        estimates = t.estimate + (t.se if t.se > 0 else 0.0) * noise
        p, p_against = _redrawn_pvalues(t, estimates)
        draws.append((estimates, p, p_against))
    same = 0
    for k in range(replications):
        redrawn = [replace(t, estimate=float(e[k]), p=float(p[k]),
                           p_against=None if pa is None else float(pa[k]))
                   for t, (e, p, pa) in zip(tests, draws, strict=True)]
        _, outcomes = _row_verdicts(redrawn, scope, alpha)
        same += R.combine_verdicts([o["verdict"] for o in outcomes], scope) == verdict
    share = same / replications
    fragile = share < FRAGILE_BELOW
    needed = [n for n in (_runs_for_stable(r, alpha) for r in rows) if n is not None and math.isfinite(n)]
    runs = max((r.n or 0 for r in rows), default=0)
    # runs that would make it stable at the paper's effect; none where the rows already have them (then ours, not
    # the sample size, sits near a threshold) or where no row has a paper effect
    stable_at = int(max(needed)) if fragile and needed and max(needed) > runs else None
    return {"share": round(share, 3), "replications": replications, "method": "parametric draw",
            "fragile": fragile, "n_stable_at_paper_effect": stable_at}


def _named_datasets(claim: dict, ctx: ClaimContext) -> list[str]:
    """The paper's datasets the claim speaks of: those its ``datasets`` filter maps to, else those of its paper
    tables, else every dataset of the paper's reference."""
    check = claim["check"]
    if check.get("datasets"):
        named = [ctx.relations[d].paper for d in check["datasets"] if d in ctx.relations and ctx.relations[d].paper]
        return list(dict.fromkeys(named)) or list(check["datasets"])
    tables = check.get("paper_table") or []
    tables = [tables] if isinstance(tables, str) else list(tables)
    names: dict[str, None] = {}
    for table in tables:
        if table in ctx.reference.tables:
            names.update(dict.fromkeys(ctx.reference.paper_datasets(table)))
    return list(names) or (ctx.reference.paper_datasets() if ctx.reference.tables else [])


def decided_on(claim: dict, ctx: ClaimContext, rows: list[Evidence], note: str = "") -> str:
    """The claim's scope in plain words (REPLICATION-STATISTICS Sec. 10): which of the datasets the paper names it
    was decided on, which stand-ins, the settings, and the unit and number of runs."""
    datasets = list(dict.fromkeys(r.dataset for r in rows if r.dataset))
    same = [(d, ctx.relations[d].paper) for d in datasets if ctx.paper_relation(d) is not None]
    stand_ins = [ctx.relations[d].label() for d in datasets
                 if d in ctx.relations and ctx.relations[d].kind == "stand_in"]
    other = [d for d in datasets if ctx.paper_relation(d) is None and d not in
             {s for s in datasets if s in ctx.relations and ctx.relations[s].kind == "stand_in"}]
    named = _named_datasets(claim, ctx)
    parts = []
    if same:
        ours = ", ".join(d if d == p else f"{d} = {p}" for d, p in same)
        covered = len({p for _, p in same} & set(named)) if named else len(same)
        if named and covered >= len(named):
            parts.append(f"on {'the' if len(named) == 1 else 'all ' + str(len(named))} dataset"
                         f"{'s' if len(named) != 1 else ''} the paper names ({ours})")
        elif named:
            parts.append(f"on {covered} of the {len(named)} datasets the paper names ({ours}); the others need "
                         "config/paper.yaml and downloads")
        else:
            parts.append(f"on the paper's data ({ours})")
    elif named:
        parts.append(f"on none of the {len(named)} datasets the paper names")
    if stand_ins:
        parts.append(f"stand-ins: {', '.join(stand_ins)}")
    if other:
        parts.append(f"ours: {', '.join(other)}")
    settings = list(dict.fromkeys(str(r.setting) for r in rows if r.setting is not None))
    if settings:
        parts.append(f"setting{'s' if len(settings) > 1 else ''} {', '.join(settings)}")
    runs = sorted({r.runs for r in rows if r.runs is not None})
    if claim["check"].get("kind") == "episode_paired":
        episodes = sorted({r.n for r in rows if r.n is not None})
        parts.append(f"{'/'.join(map(str, runs))} trained model{'s' if runs != [1] else ''} per method, "
                     f"{'/'.join(map(str, episodes))} (model, test episode) pairs (episodes are pseudo-replicates of "
                     "a model: the variance between training seeds is in no error bar unless models >= 3)")
    elif runs:
        parts.append(f"{'/'.join(map(str, runs))} runs per row")
    if note:
        parts.append(note)
    return "; ".join(parts) if parts else "no rows"


def main_verdict(ctx: ClaimContext, rows: list[Evidence], scope, alpha: float = R.ALPHA) -> str:
    """The verdict ``finish`` gives these rows (their main data group's), without a ClaimResult: a second reading
    of the same rows (e.g. folds as random) goes through the same decision."""
    groups: dict[str, list[Evidence]] = {}
    for row in rows:
        groups.setdefault(group_of(ctx, row.dataset, row.test), []).append(row)
    main = next((name for name in GROUPS if name in groups), None)
    return NOT_RUN if main is None else _decide(groups[main], scope, alpha)[0]


def finish(claim: dict, ctx: ClaimContext, evidence: list[Evidence], what: str, alpha: float = R.ALPHA,
           skipped: list[str] | None = None, scope_note: str = "") -> ClaimResult:
    """The claim's result from its rows: each row's group and verdict, each group's verdict under the claim's scope,
    and the claim's verdict (its paper rows' where it has any), with its scope in words (``decided_on``, plus
    ``scope_note``) and its stability."""
    scope = claim["check"].get("scope")
    R.required_rows(scope, 1)  # an unknown scope fails here, with its name
    declared = ctx.declared_runs(claim["id"])
    result = ClaimResult(claim["id"], claim["text"], NOT_RUN, "", [], claim.get("source", ""), runs_declared=declared,
                         runs_source=ctx.claim_runs_source if declared is not None else "not declared in the config",
                         scope=scope, skipped=list(skipped or []))
    tested = [e for e in evidence if e.test is not None]
    result.skipped += [f"{e.label}: {e.detail}" for e in evidence if e.test is None]
    if not tested:
        why = (f"no row could be tested ({len(result.skipped)}: {result.skipped[0]})" if result.skipped
               else what)
        result.summary = f"not run: {why}"  # claims.evaluate_claim adds the config that runs it and its needs
        return result
    groups: dict[str, list[Evidence]] = {}
    for row in tested:
        row.group = group_of(ctx, row.dataset, row.test)
        groups.setdefault(row.group, []).append(row)
    for name in GROUPS:
        if name in groups:
            result.by_data[name] = _decide(groups[name], scope, alpha)
    main = next(name for name in GROUPS if name in groups)
    result.verdict, summary = result.by_data[main]
    result.summary = f"{main}: {summary}"
    result.evidence = tested
    result.decided_on = decided_on(claim, ctx, tested, scope_note)
    result.stability = stability(claim["id"], groups[main], scope, result.verdict, alpha)
    return result

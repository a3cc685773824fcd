"""What claims are made of: verdicts, evidence rows, the context a check reads, and how rows combine into a
verdict (scopes). ``claims`` (the check kinds) and ``episode_claims`` (episode-paired tests) both build on it,
so neither imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from uqcal.metrics.stats import stouffer
from uqcal.pipeline.reference import DatasetRelation, Reference
from uqcal.pipeline.report.tables import fmt

HELD, NOT_HELD, INCONCLUSIVE, NOT_RUN = "held", "not held", "inconclusive", "not run"
VERDICTS = (HELD, NOT_HELD, INCONCLUSIVE, NOT_RUN)
PAPER_DATA, STAND_INS = "paper's data", "stand-ins"


@dataclass
class Evidence:
    """One row behind a verdict. ``ok``: the row supports the claim. ``outcome``: a paired row's better / tie
    / worse (None for rows decided without a test). ``pvalue_one_sided``: in the claimed direction."""

    label: str
    detail: str
    ok: bool
    outcome: str | None = None
    dataset: str | None = None
    pvalue_one_sided: float | None = None

    @property
    def mark(self) -> str:
        return "✓" if self.ok else ("=" if self.outcome == "tie" else "✗")

    def as_dict(self) -> dict:
        return {"label": self.label, "detail": self.detail, "ok": self.ok, "outcome": self.outcome,
                "dataset": self.dataset}


@dataclass
class ClaimResult:
    id: str
    text: str
    verdict: str
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    source: str = ""
    by_data: dict[str, tuple[str, str]] = field(default_factory=dict)  # PAPER_DATA / STAND_INS -> (verdict, summary)


@dataclass
class ClaimContext:
    family: str
    summary: pd.DataFrame
    runs: pd.DataFrame
    reference: Reference
    relations: dict[str, DatasetRelation]
    results_dir: Path | None = None


def _filter(frame: pd.DataFrame, check: dict) -> pd.DataFrame:
    if frame.empty:
        return frame
    if check.get("datasets"):
        frame = frame[frame["dataset"].isin(check["datasets"])]
    if check.get("settings"):
        frame = frame[frame["setting"].astype(str).isin([str(s) for s in check["settings"]])]
    return frame


def _means(ctx: ClaimContext, check: dict, metric: str) -> pd.DataFrame:
    """Wide table of means: index (dataset, setting), columns methods."""
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


def _required(scope, n: int) -> int:
    """Rows that must support a claim for it to hold."""
    if scope in (None, "every_row"):
        return n
    if scope == "majority":
        return n // 2 + 1
    if scope == "any_row":
        return 1
    if isinstance(scope, dict) and "at_least" in scope:
        return max(1, math.ceil(float(scope["at_least"]) * n - 1e-9))
    raise ValueError(f"unknown claim scope {scope!r}; use every_row, majority, any_row, pooled or {{at_least: f}}")


def _combine(evidence: list[Evidence], check: dict) -> tuple[str, str]:
    """Verdict and summary of a set of rows under the check's scope (module docstring)."""
    scope = check.get("scope")
    n = len(evidence)
    support = sum(e.ok for e in evidence)
    ties = sum((not e.ok) and e.outcome == "tie" for e in evidence)
    summary = f"{support} of {n} rows hold" + (f" ({ties} tied: not significant)" if ties else "")
    pvalues = [e.pvalue_one_sided for e in evidence if e.pvalue_one_sided is not None]
    pooled = stouffer(pvalues) if pvalues and (scope == "pooled" or check.get("pooled")) else None
    if pooled is not None:
        summary += f"; pooled over {len(pvalues)} rows (Stouffer, one-sided) p = {fmt(pooled)}"
    if scope == "pooled":
        if pooled is None:
            raise ValueError("scope 'pooled' needs paired rows (a per-run test); this check has none")
        alpha = float(check.get("alpha", 0.05))
        against = stouffer([1 - p for p in pvalues])
        verdict = HELD if pooled < alpha else (NOT_HELD if against < alpha else INCONCLUSIVE)
        return verdict, summary
    need = _required(scope, n)
    verdict = HELD if support >= need else (NOT_HELD if support + ties < need else INCONCLUSIVE)
    return verdict, summary


def _group_of(row: Evidence, relations: dict[str, DatasetRelation]) -> str:
    relation = relations.get(row.dataset) if row.dataset is not None else None
    return PAPER_DATA if relation is not None and relation.kind == "same" else STAND_INS


def _as_evidence(item) -> Evidence:
    if isinstance(item, Evidence):
        return item
    label, detail, ok = item
    return Evidence(label, detail, bool(ok), dataset=label.split(" / ")[0])


def _finish(claim: dict, evidence: list, total_rows: int, what: str) -> ClaimResult:
    rows = [_as_evidence(e) for e in evidence]
    if not rows:
        return ClaimResult(claim["id"], claim["text"], NOT_RUN, f"not run: {what}", [], claim.get("source", ""))
    verdict, summary = _combine(rows, claim["check"])
    if total_rows > len(rows):
        summary += f" ({total_rows - len(rows)} rows lack a needed method)"
    return ClaimResult(claim["id"], claim["text"], verdict, summary, rows, claim.get("source", ""))


def _split_by_data(result: ClaimResult, claim: dict, relations: dict[str, DatasetRelation]) -> None:
    """The verdict on the paper's own data and on stand-ins, each under the claim's scope."""
    if result.verdict == NOT_RUN:
        return
    groups: dict[str, list[Evidence]] = {}
    for row in result.evidence:
        groups.setdefault(_group_of(row, relations), []).append(row)
    for name in (PAPER_DATA, STAND_INS):
        if name in groups:
            try:
                result.by_data[name] = _combine(groups[name], claim["check"])
            except ValueError:
                continue

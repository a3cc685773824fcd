"""Headline claims as checkable statements, decided on our results as replication science (docs/verdicts.md).

A claim's ``check`` is a small declarative expression (see ``KINDS``). Every kind turns each (dataset, setting)
row into one test with numbers (``verdicts.Evidence``): our estimate, its standard error, df, runs and p-value,
and on the paper's own data the paper's estimate and standard error (the family's ``paper_numbers.yaml``: the
table's ``uncertainty`` block says what its ± is). ``verdicts.finish`` then decides each row and the claim.

Runs are fixed in advance: every row of a claim uses the first n seeds that all its methods ran, n declared in the
run config (``report.claim_runs``); a row with fewer runs is not tested and is listed as such.

Hypotheses:
- ``less_than`` / ``greater_than`` / ``fold_blocked_compare`` / ``censored_steps`` / ``episode_paired`` (require
  better): superiority of a over b, paired over runs (``test: ttest | wilcoxon``; fold-blocked t for fixed folds);
- ``accept: not_worse`` (``require: not_worse``), ``best`` / ``best_among``: non-inferiority at the margin the
  reference declares for the claim (``margins.<claim id>``, with its reason); "best or tied with the best" is
  non-inferiority to the best of the other methods, on the seeds all of them ran;
- ``within_paper_spread`` / ``within_paper_repeat_spread``: our mean against the paper's, judged by the prediction
  interval alone (consistent inside it, contradicted outside, saying on which side);
- ``monotone`` (Welch t per step), ``spearman`` (Fisher z), ``effect_contrast`` (Welch), ``stats_curve_greater``
  (paired over curves).

``paper_rows: bold`` keeps, on the paper's data, only the rows the paper marks as a difference by its own rule
(QR: the two mean ± std intervals do not overlap); the others are listed as not claimed by the paper.

The kinds live by what they test: ``comparison_claims`` (paired comparisons, margins, effect contrasts),
``paper_claims`` (our value against the paper's), ``trend_claims`` (monotone, spearman, logged curves) and
``episode_claims`` (paired over test episodes); this module is their table and evaluates a spec's claims.
"""

from __future__ import annotations

from uqcal.pipeline.report.comparison_claims import (
    check_best,
    check_best_among,
    check_censored_steps,
    check_effect_contrast,
    check_fold_blocked_compare,
    check_greater_than,
    check_less_than,
)
from uqcal.pipeline.report.episode_claims import check_episode_paired
from uqcal.pipeline.report.paper_claims import check_within_paper_repeat_spread, check_within_paper_spread
from uqcal.pipeline.report.trend_claims import check_monotone, check_spearman, check_stats_curve_greater
from uqcal.pipeline.report.verdicts import ClaimContext, ClaimResult

__all__ = ["KINDS", "evaluate_claim", "evaluate_claims"]


KINDS = {
    "best_among": check_best_among,
    "stats_curve_greater": check_stats_curve_greater,
    "episode_paired": check_episode_paired,
    "less_than": check_less_than,
    "greater_than": check_greater_than,
    "best": check_best,
    "within_paper_spread": check_within_paper_spread,
    "monotone": check_monotone,
    "spearman": check_spearman,
    "within_paper_repeat_spread": check_within_paper_repeat_spread,
    "effect_contrast": check_effect_contrast,
    "fold_blocked_compare": check_fold_blocked_compare,
    "censored_steps": check_censored_steps,
}


def evaluate_claim(claim: dict, ctx: ClaimContext) -> ClaimResult:
    for key in ("id", "text", "check"):
        if key not in claim:
            raise ValueError(f"claim {claim.get('id', '?')!r} in spec '{ctx.family}' lacks '{key}'")
    kind = claim["check"].get("kind")
    if kind not in KINDS:
        raise ValueError(f"claims.{claim['id']}.check.kind: unknown kind {kind!r}; known: {sorted(KINDS)}")
    try:
        return KINDS[kind](claim, ctx)
    except KeyError as err:
        raise ValueError(f"claims.{claim['id']}.check: missing key {err}") from err
    except ValueError as err:
        raise ValueError(f"claims.{claim['id']}.check: {err}") from err


def evaluate_claims(claims: list[dict], ctx: ClaimContext) -> list[ClaimResult]:
    results = [evaluate_claim(claim, ctx) for claim in claims]
    by_id = {r.id: r for r in results}
    for result in results:
        # a claim on the paper's fixed folds names the verdict of its shuffled-folds companion (<id>_shuffled)
        companion = by_id.get(f"{result.id}_shuffled")
        if result.decided_on and companion is not None:
            result.decided_on += f"; with shuffled folds ({companion.id}): {companion.verdict.replace('_', ' ')}"
    return results

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
- ``against_nominal``: one method's metric against a nominal value (coverage against its level), a one-sample
  test (``nominal_claims``), superiority or non-inferiority / equivalence at the reference's margin;
- ``monotone`` (Welch t per step), ``spearman`` (Fisher z), ``effect_contrast`` (Welch), ``stats_curve_greater``
  (paired over curves).

``paper_rows: bold`` keeps, on the paper's data, only the rows the paper marks as a difference by its own rule
(QR: the two mean ± std intervals do not overlap); the others are listed as not claimed by the paper.

- ``versus_value`` (a method's metric against a fixed value), ``relative_reduction`` (a at least a stated fraction
  below b, paired): superiority on the row's paired differences.

The kinds live by what they test: ``comparison_claims`` (paired comparisons, margins, effect contrasts),
``paper_claims`` (our value against the paper's), ``trend_claims`` (monotone, spearman, logged curves),
``episode_claims`` (paired over test episodes) and ``threshold_claims`` (a size the paper names); this module is
their table and evaluates a spec's claims.

A claim's keys (``CLAIM_KEYS``): ``id``, ``text``, ``source``, ``check``; ``ours: true`` for a check the paper does
not make (the report lists it under "Our checks", apart from the paper's claims); ``config`` (the config file that
runs it) and ``needs`` (what running it needs: downloads, CPU / GPU hours) for a claim the default config does not
run. A claim without ``check`` names what uqcal lacks to test it (a method, a dataset, an experiment) in ``needs``:
it is not run in any config.
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
from uqcal.pipeline.report.nominal_claims import check_against_nominal
from uqcal.pipeline.report.paper_claims import check_within_paper_repeat_spread, check_within_paper_spread
from uqcal.pipeline.report.threshold_claims import check_relative_reduction, check_versus_value
from uqcal.pipeline.report.trend_claims import check_monotone, check_spearman, check_stats_curve_greater
from uqcal.pipeline.report.verdicts import NOT_RUN, ClaimContext, ClaimResult

__all__ = ["CLAIM_KEYS", "KINDS", "evaluate_claim", "evaluate_claims"]

CLAIM_KEYS = {"id", "text", "source", "check", "ours", "config", "needs"}


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
    "versus_value": check_versus_value,
    "relative_reduction": check_relative_reduction,
    "against_nominal": check_against_nominal,
}


def evaluate_claim(claim: dict, ctx: ClaimContext) -> ClaimResult:
    for key in ("id", "text"):
        if key not in claim:
            raise ValueError(f"claim {claim.get('id', '?')!r} in spec '{ctx.family}' lacks '{key}'")
    unknown = sorted(set(claim) - CLAIM_KEYS)
    if unknown:
        raise ValueError(f"claims.{claim['id']}: unknown keys {unknown}; allowed {sorted(CLAIM_KEYS)}")
    if "check" not in claim:
        if not str(claim.get("needs") or "").strip():
            raise ValueError(f"claims.{claim['id']}: a claim without 'check' needs 'needs' (what testing it needs)")
        result = ClaimResult(claim["id"], claim["text"], NOT_RUN, "not run: uqcal has no run that tests it", [],
                             claim.get("source", ""))
    else:
        result = _run_check(claim, ctx)
    result.ours = bool(claim.get("ours", False))
    if result.verdict == NOT_RUN and not (result.config or result.needs):  # a check may name them itself
        result.config, result.needs = claim.get("config"), claim.get("needs")
        result.summary += (f"; {result.config} runs it" if result.config else "") + (
            f"; needs: {result.needs}" if result.needs else "")
    return result


def _run_check(claim: dict, ctx: ClaimContext) -> ClaimResult:
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

"""Replication statistics: is a paper's effect reproduced by ours? (docs/verdicts.md)

Notation: the paper's effect ``theta_p`` with standard error ``se_p``, ours ``theta_r`` with ``se_r``. Effects are
signed differences ``a - b``; a claim's ``direction`` is -1 when it says a < b and +1 when it says a > b, so the
*aligned* effect ``direction * (a - b)`` is positive when the data support the claim.

- :func:`paper_standard_error`: the paper's printed ± as a standard error (std with ddof 0 or 1, a standard
  error, or a 95 % CI half-width), Sec. 1 of the replication-statistics reference.
- :func:`prediction_interval`: Patil, Peng & Leek (2016), theta_p ± 1.96 sqrt(se_p^2 + se_r^2).
- :func:`d33` and :func:`small_telescopes_pvalue`: Simonsohn (2015), the effect the paper had 33 % power to detect
  and the one-sided test of ours against it.
- :func:`noninferiority_pvalues`: the one-sided tests of a margin (Lakens 2017); two of them at -margin and
  +margin are TOST.
- Runs for 80 % power at the *paper's* effect: ``uqcal.metrics.stats.runs_for_power`` (never at our own observed
  effect, which adds nothing to the p-value: Hoenig & Heisey 2001).
- :func:`row_verdict` and :func:`combine_verdicts`: the verdicts, in the order of precedence of the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05

# Verdicts of a row, or a claim, on the paper's own data (where the paper prints a number with its spread).
REPRODUCED = "reproduced"
REPRODUCED_SMALLER = "reproduced_smaller"
CONSISTENT = "consistent"
SMALLER_THAN_PAPER = "smaller_than_paper"
CONTRADICTED = "contradicted"
# Verdicts where the paper has no number: stand-in data, or a paper that prints none for its own data.
GENERALISES = "generalises"
DOES_NOT_GENERALISE = "does_not_generalise"
UNDECIDED = "undecided"
NOT_RUN = "not_run"
PAPER_VERDICTS = (REPRODUCED, REPRODUCED_SMALLER, CONSISTENT, SMALLER_THAN_PAPER, CONTRADICTED)
DIRECTION_VERDICTS = (GENERALISES, DOES_NOT_GENERALISE, UNDECIDED)
VERDICTS = (*PAPER_VERDICTS, *DIRECTION_VERDICTS, NOT_RUN)
# A claim that needs every row takes its worst row: this order, worst first.
_WORST_FIRST = (CONTRADICTED, SMALLER_THAN_PAPER, CONSISTENT, REPRODUCED_SMALLER, REPRODUCED,
                DOES_NOT_GENERALISE, UNDECIDED, GENERALISES)
SPREAD_KINDS = ("std", "se", "ci95")


def paper_standard_error(spread: float | None, kind: str, n: int | None, ddof: int | None = None) -> float | None:
    """The standard error of a paper's mean from the ± it prints.

    ``kind``: ``std`` (a standard deviation over ``n`` runs with ``ddof`` 0, numpy's default, or 1), ``se`` (printed
    as is) or ``ci95`` (a 95 % t interval's half-width over ``n`` runs). None when the paper gives no ± or no n. A
    std whose ddof is unknown is read as ddof 0, the reading with the larger se (a wider interval).
    """
    if spread is None or (isinstance(spread, float) and math.isnan(spread)):
        return None
    spread = float(spread)
    if spread < 0:
        raise ValueError(f"spread: a ± cannot be negative, got {spread}")
    if kind == "se":
        return spread
    if n is None or n < 2:
        return None
    if kind == "std":
        # ddof 0 underestimates the sd by sqrt((n - 1) / n); an unknown ddof is read as 0, the larger se.
        sd = spread * math.sqrt(n / (n - 1)) if ddof in (0, None) else spread
        return sd / math.sqrt(n)
    if kind == "ci95":
        return spread / float(stats.t.ppf(0.975, n - 1))
    raise ValueError(f"kind: expected one of {SPREAD_KINDS}, got {kind!r}")


def difference_standard_error(se_a: float | None, se_b: float | None) -> float | None:
    """sqrt(se_a^2 + se_b^2): the se of a difference of two means printed separately. Runs on the same splits are
    positively correlated, so this overstates the se of the paired difference (a wider interval, never a
    narrower one)."""
    if se_a is None or se_b is None:
        return None
    return math.hypot(se_a, se_b)


def prediction_interval(theta_p: float, se_p: float, se_r: float, level: float = 0.95) -> tuple[float, float]:
    """Patil, Peng & Leek (2016): where a replication's estimate falls with probability ``level`` when both studies
    estimate the same effect: theta_p ± z sqrt(se_p^2 + se_r^2)."""
    half = float(stats.norm.ppf(0.5 + level / 2)) * math.hypot(se_p, se_r)
    return theta_p - half, theta_p + half


def prediction_interval_power(bias: float, se_p: float, se_r: float, level: float = 0.95) -> float:
    """The probability that our estimate falls outside the prediction interval when it is biased by ``bias`` from
    the paper's (the interval's power against that bias, at the paper's printed estimate): with
    s = sqrt(se_p^2 + se_r^2) and half-width z s, P(Z > (z s - bias) / se_r) + P(Z < (-z s - bias) / se_r)."""
    half = float(stats.norm.ppf(0.5 + level / 2)) * math.hypot(se_p, se_r)
    return float(stats.norm.sf((half - bias) / se_r) + stats.norm.cdf((-half - bias) / se_r))


def _quantile(q: float, df: float | None) -> float:
    return float(stats.norm.ppf(q)) if df is None or not math.isfinite(df) else float(stats.t.ppf(q, df))


def d33(se_p: float, df_p: float | None = None, alpha: float = ALPHA) -> float:
    """Simonsohn (2015): the (aligned, positive) effect that the paper's two-sided test at ``alpha`` had 33 % power
    to detect, (q(1 - alpha/2) + q(.33)) se_p: 1.52 se_p under the normal approximation, t quantiles with the
    paper's df when it is small."""
    return (_quantile(1 - alpha / 2, df_p) + _quantile(0.33, df_p)) * se_p


def small_telescopes_pvalue(aligned_r: float, se_r: float, d33_value: float, df_r: float | None = None) -> float:
    """One-sided p of H0: theta = d33 against H1: theta < d33 with our aligned estimate (Simonsohn 2015). A small p
    says the true effect, if any, is smaller than the paper could have detected. NaN without a spread."""
    if se_r is None or not se_r > 0:
        return float("nan") if aligned_r == d33_value else (0.0 if aligned_r < d33_value else 1.0)
    t_stat = (aligned_r - d33_value) / se_r
    return float(stats.norm.cdf(t_stat) if df_r is None or not math.isfinite(df_r) else stats.t.cdf(t_stat, df_r))


def noninferiority_pvalues(aligned: float, se: float, df: float | None, margin: float) -> tuple[float, float]:
    """The two one-sided tests at a margin, on the aligned effect (positive favours the claim's method):

    - ``p_noninferior``: H0 aligned <= -margin (worse by at least the margin) against H1 aligned > -margin;
    - ``p_inferior``: H0 aligned >= -margin against H1 aligned < -margin (worse by more than the margin).

    Equivalence (TOST) at the margin is max(p_noninferior, the same test at +margin in the other direction)."""
    if margin < 0:
        raise ValueError(f"margin: expected a non-negative margin, got {margin}")
    if not se > 0:
        shifted = aligned + margin
        return (0.0, 1.0) if shifted > 0 else ((1.0, 0.0) if shifted < 0 else (1.0, 1.0))
    t_stat = (aligned + margin) / se
    dist = stats.norm if df is None or not math.isfinite(df) else stats.t(df)
    return float(dist.sf(t_stat)), float(dist.cdf(t_stat))


def equivalence_pvalues(estimate: float, se: float, df: float | None, margin: float) -> tuple[float, float]:
    """TOST (Schuirmann 1987; Lakens 2017) of |estimate| < margin: ``p_equivalent`` = the larger p of the two
    one-sided tests (equivalent when it is below alpha: the 1 - 2 alpha interval lies inside (-margin, margin)), and
    ``p_beyond`` = the smaller p of the tests that the effect lies beyond the margin on one side."""
    p_low, beyond_low = noninferiority_pvalues(estimate, se, df, margin)
    p_high, beyond_high = noninferiority_pvalues(-estimate, se, df, margin)
    return max(p_low, p_high), min(beyond_low, beyond_high)


def two_sided_pvalue(estimate: float, se: float, df: float | None) -> float:
    """Two-sided p of estimate / se (t with ``df``, normal when df is None)."""
    if not se > 0:
        return 1.0 if estimate == 0 else 0.0
    t_stat = abs(estimate) / se
    return float(2 * (stats.norm.sf(t_stat) if df is None or not math.isfinite(df) else stats.t.sf(t_stat, df)))


@dataclass(frozen=True)
class RowTest:
    """The numbers a row's verdict is decided from (all effects signed a - b; ``direction`` as the module says).

    ``hypothesis``: ``superiority`` (a beats b), ``noninferiority`` (a not worse than b by more than ``margin``),
    ``equivalence`` (|a - b| < ``margin``, TOST) or ``match`` (our value equals the paper's: only the prediction
    interval decides). ``p`` is two-sided for
    superiority and match rows and the non-inferiority p for non-inferiority rows; ``p_adjusted`` the Holm-adjusted
    p where the claim's scope counts rows (else equal to ``p``)."""

    hypothesis: str
    estimate: float
    se: float
    df: float | None
    p: float
    direction: int = -1
    margin: float | None = None
    p_against: float | None = None  # non-inferiority: p of "worse by more than the margin"
    paper_estimate: float | None = None
    paper_se: float | None = None
    paper_df: float | None = None


def row_verdict(test: RowTest, p_adjusted: float | None = None, alpha: float = ALPHA) -> dict:
    """A row's verdict and the numbers behind it (REPLICATION-STATISTICS Sec. 9), as a dict of JSON-ready values:
    ``verdict``, ``pi_low``, ``pi_high``, ``d33``, ``p_d33``, ``side`` (where ours falls against the paper's
    interval: inside / below / above, or None).

    With a paper number and se: significant against the claim -> contradicted; significant for it -> reproduced
    (inside or above the interval) or reproduced_smaller (below it); not significant -> smaller_than_paper when
    d33 is rejected, contradicted when ours is outside the interval, else consistent. Without one: generalises /
    does_not_generalise / undecided by the significance and sign alone. A ``match`` row is consistent inside the
    interval and contradicted outside it. A non-inferiority row holds when non-inferiority is significant and is
    against the claim when inferiority by more than the margin is."""
    p = test.p if p_adjusted is None else p_adjusted
    s = test.direction
    aligned = s * test.estimate
    out = {"pi_low": None, "pi_high": None, "d33": None, "p_d33": None, "side": None}
    has_paper = test.paper_estimate is not None and test.paper_se is not None and math.isfinite(test.paper_se)
    if has_paper:
        low, high = prediction_interval(test.paper_estimate, test.paper_se, test.se)
        out["pi_low"], out["pi_high"] = low, high
        aligned_low, aligned_high = sorted((s * low, s * high))
        out["side"] = "inside" if aligned_low <= aligned <= aligned_high else ("below" if aligned < aligned_low
                                                                               else "above")
    if test.hypothesis == "match":
        if not has_paper:
            raise ValueError("a match row needs the paper's value and its standard error")
        out["verdict"] = CONSISTENT if out["side"] == "inside" else CONTRADICTED
        return out
    if test.hypothesis in ("noninferiority", "equivalence"):
        against = test.p_against if test.p_against is not None else 1.0
        holds, fails = p < alpha, against < alpha
        if not has_paper:
            out["verdict"] = GENERALISES if holds else (DOES_NOT_GENERALISE if fails else UNDECIDED)
        elif fails or out["side"] != "inside":
            out["verdict"] = CONTRADICTED
        else:
            out["verdict"] = REPRODUCED if holds else CONSISTENT
        return out
    if test.hypothesis != "superiority":
        raise ValueError(f"hypothesis: expected superiority, noninferiority, equivalence or match, got "
                         f"{test.hypothesis!r}")
    significant = p < alpha
    if not has_paper:
        out["verdict"] = (UNDECIDED if not significant or aligned == 0
                          else (GENERALISES if aligned > 0 else DOES_NOT_GENERALISE))
        return out
    out["d33"] = s * d33(test.paper_se, test.paper_df, alpha)
    out["p_d33"] = small_telescopes_pvalue(aligned, test.se, abs(out["d33"]), test.df)
    if significant and aligned < 0:
        out["verdict"] = CONTRADICTED
    elif significant:
        out["verdict"] = REPRODUCED_SMALLER if out["side"] == "below" else REPRODUCED
    elif out["p_d33"] < alpha:
        out["verdict"] = SMALLER_THAN_PAPER
    elif out["side"] != "inside":
        out["verdict"] = CONTRADICTED
    else:
        out["verdict"] = CONSISTENT
    return out


def required_rows(scope, n: int) -> int:
    """Rows that must hold under a claim's scope: ``every_row`` (default), ``majority`` (more than half),
    ``any_row``, or ``{at_least: f}`` (a fraction of the rows, rounded up)."""
    if scope in (None, "every_row"):
        return n
    if scope == "majority":
        return n // 2 + 1
    if scope == "any_row":
        return 1
    if isinstance(scope, dict) and "at_least" in scope:
        return max(1, math.ceil(float(scope["at_least"]) * n - 1e-9))
    raise ValueError(f"unknown claim scope {scope!r}; use every_row, majority, any_row or {{at_least: f}}")


def scope_counts_rows(scope) -> bool:
    """Whether a claim's verdict counts rows (majority, at least k, any): then its rows' p-values are Holm-adjusted
    within the claim. A claim that needs every row is an intersection-union test and needs no adjustment."""
    return scope not in (None, "every_row")


def combine_verdicts(verdicts: list[str], scope) -> str:
    """One claim's verdict from its rows' (all on the paper's data, or all without a paper number) under its scope.

    Every row: the worst row's verdict. Counting scopes: reproduced when enough rows are reproduced (or reproduced
    with a smaller effect: reproduced_smaller); when too few rows can still hold, contradicted if the contradicted
    rows alone make it impossible, else smaller_than_paper; otherwise consistent. Without paper numbers the same
    with generalises / does_not_generalise / undecided."""
    if not verdicts:
        return NOT_RUN
    n, need = len(verdicts), required_rows(scope, len(verdicts))
    if not scope_counts_rows(scope) or need == n:
        return min(verdicts, key=_WORST_FIRST.index)
    count = {v: verdicts.count(v) for v in set(verdicts)}
    if all(v in DIRECTION_VERDICTS for v in verdicts):
        if count.get(GENERALISES, 0) >= need:
            return GENERALISES
        if count.get(GENERALISES, 0) + count.get(UNDECIDED, 0) < need:
            return DOES_NOT_GENERALISE
        return UNDECIDED
    if count.get(REPRODUCED, 0) >= need:
        return REPRODUCED
    holding = count.get(REPRODUCED, 0) + count.get(REPRODUCED_SMALLER, 0)
    if holding >= need:
        return REPRODUCED_SMALLER
    if holding + count.get(CONSISTENT, 0) < need:
        return CONTRADICTED if count.get(CONTRADICTED, 0) > n - need else SMALLER_THAN_PAPER
    return CONSISTENT


def sign_test_pvalues(x) -> tuple[float, float, float]:
    """Exact sign tests of ``x`` (zeros dropped): (two-sided p, p of H1 "x > 0", p of H1 "x < 0"); (1, 1, 1) when
    every value is zero. Where paired differences have no spread the t-test is undefined; what remains is how many
    runs went each way: n equal non-zero differences give 2 / 2^n two-sided, never 0 at any n."""
    x = np.asarray(x, float)
    nonzero = x[x != 0]
    if nonzero.size == 0:
        return 1.0, 1.0, 1.0
    k, n = int((nonzero > 0).sum()), int(nonzero.size)
    return tuple(float(stats.binomtest(k, n, alternative=side).pvalue) for side in ("two-sided", "greater", "less"))

"""Replication statistics: is a paper's effect reproduced by ours? (docs/verdicts.md)

Notation: the paper's effect ``theta_p`` with standard error ``se_p``, ours ``theta_r`` with ``se_r``. Effects are
signed differences ``a - b``; a claim's ``direction`` is -1 when it says a < b and +1 when it says a > b, so the
*aligned* effect ``direction * (a - b)`` is positive when the data support the claim.

- :func:`paper_standard_error`: the paper's printed ± as a standard error (std with ddof 0 or 1, a standard
  error, or a 95 % CI half-width), Sec. 1 of the replication-statistics reference.
- :func:`prediction_interval`: Patil, Peng & Leek (2016), theta_p ± t sqrt(se_p^2 + se_r^2), t the .975 quantile
  at the Welch-Satterthwaite df of the two standard errors (:func:`welch_satterthwaite_df`; 1.96 only when both
  rest on many runs: with SEs from 2-4 df, z leaves an exact reproduction outside 12-13 % of the time).
- :func:`d33` and :func:`small_telescopes_pvalue`: Simonsohn (2015), the effect the paper had 33 % power to detect
  (exact, from the noncentral t at the paper's df) and the one-sided test of ours against it.
- :func:`noninferiority_pvalues`: the one-sided tests of a margin (Lakens 2017); two of them at -margin and
  +margin are TOST.
- Runs for 80 % power at the *paper's* effect: ``uqcal.metrics.stats.runs_for_power`` (never at our own observed
  effect, which adds nothing to the p-value: Hoenig & Heisey 2001).
- :func:`row_verdict` and :func:`combine_verdicts`: the verdicts, in the order of precedence of the reference.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

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


def welch_satterthwaite_df(se_a, df_a: float | None, se_b, df_b: float | None):
    """Welch-Satterthwaite df of sqrt(se_a^2 + se_b^2): (se_a^2 + se_b^2)^2 / (se_a^4 / df_a + se_b^4 / df_b). A
    df of None (or inf) is infinite: a known se, or one from many runs; None when both are. The standard errors may
    be arrays (simulations); the dfs are numbers."""
    finite = [df is not None and math.isfinite(df) for df in (df_a, df_b)]
    if not any(finite):
        return None
    if any(f and df <= 0 for f, df in zip(finite, (df_a, df_b), strict=True)):
        raise ValueError(f"df: degrees of freedom must be positive, got {df_a}, {df_b}")
    if np.ndim(se_a) == 0 and np.ndim(se_b) == 0:  # one row: plain floats (the report's path, called per draw)
        var_a, var_b = float(se_a) ** 2, float(se_b) ** 2
        denominator = (var_a**2 / df_a if finite[0] else 0.0) + (var_b**2 / df_b if finite[1] else 0.0)
        return (var_a + var_b) ** 2 / denominator if denominator > 0 else None
    var_a, var_b = np.square(se_a), np.square(se_b)
    denominator = (var_a**2 / df_a if finite[0] else 0.0) + (var_b**2 / df_b if finite[1] else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, (var_a + var_b) ** 2 / np.where(denominator > 0, denominator, 1.0),
                      np.inf)
    if np.ndim(df) == 0:
        df = float(df)
        return None if not math.isfinite(df) else df
    return df


def prediction_interval(theta_p, se_p, se_r, level: float = 0.95, df_p: float | None = None,
                        df_r: float | None = None):
    """Patil, Peng & Leek (2016): where a replication's estimate falls with probability ``level`` when both studies
    estimate the same effect: theta_p ± t sqrt(se_p^2 + se_r^2), t at the Welch-Satterthwaite df of the two
    standard errors (the normal quantile when neither has a df). Floats, or arrays where the inputs are arrays."""
    if np.ndim(se_p) == 0 and np.ndim(se_r) == 0 and np.ndim(theta_p) == 0:
        half = _half_width(float(se_p), float(se_r), level, df_p, df_r)
        return float(theta_p - half), float(theta_p + half)
    df = welch_satterthwaite_df(se_p, df_p, se_r, df_r)
    q = 0.5 + level / 2
    quantile = special.ndtri(q) if df is None else special.stdtrit(df, q)
    half = quantile * np.hypot(se_p, se_r)
    if np.ndim(half) == 0:
        return float(theta_p - half), float(theta_p + half)
    return theta_p - half, theta_p + half


@functools.lru_cache(maxsize=4096)
def _half_width(se_p: float, se_r: float, level: float, df_p: float | None, df_r: float | None) -> float:
    # one row's half-width: the same in every stability draw of the row (its se's are kept), so cached
    return _quantile(0.5 + level / 2, welch_satterthwaite_df(se_p, df_p, se_r, df_r)) * math.hypot(se_p, se_r)


def prediction_interval_power(bias: float, se_p: float, se_r: float, level: float = 0.95, df_p: float | None = None,
                              df_r: float | None = None) -> float:
    """The probability that our estimate falls outside the prediction interval when it is biased by ``bias`` from
    the paper's (the interval's power against that bias, at the paper's printed estimate and both standard errors
    taken as known): with s = sqrt(se_p^2 + se_r^2) and half-width t s (t as in :func:`prediction_interval`),
    P(Z > (t s - bias) / se_r) + P(Z < (-t s - bias) / se_r)."""
    low, high = prediction_interval(0.0, se_p, se_r, level, df_p, df_r)
    return float(stats.norm.sf((high - bias) / se_r) + stats.norm.cdf((low - bias) / se_r))


def _quantile(q: float, df: float | None) -> float:
    # scipy.special's t and normal functions: the distributions' own, without the frozen-distribution overhead
    # (stability draws call these thousands of times per report)
    return float(special.ndtri(q)) if df is None or not math.isfinite(df) else float(special.stdtrit(df, q))


def _cdf(x: float, df: float | None) -> float:
    return float(special.ndtr(x)) if df is None or not math.isfinite(df) else float(special.stdtr(df, x))


def d33(se_p: float, df_p: float | None = None, alpha: float = ALPHA, power: float = 0.33) -> float:
    """Simonsohn (2015): the (aligned, positive) effect that the paper's two-sided test at ``alpha`` had 33 % power
    to detect. Normal: (z(1 - alpha/2) + z(.33)) se_p = 1.52 se_p. At the paper's df the exact value solves
    P(|T'| > t(1 - alpha/2, df)) = .33 for the noncentral t T' (the quantile sum t(.975) + t(.33) overstates it, by
    16 % at 4 df and 42 % at 2)."""
    return _d33_unit(None if df_p is None or not math.isfinite(df_p) else float(df_p), alpha, power) * se_p


@functools.lru_cache(maxsize=1024)
def _d33_unit(df: float | None, alpha: float, power: float) -> float:
    if df is None:
        return _quantile(1 - alpha / 2, None) + _quantile(power, None)
    crit = float(stats.t.ppf(1 - alpha / 2, df))

    def shortfall(delta: float) -> float:
        return float(stats.nct.sf(crit, df, delta) + stats.nct.cdf(-crit, df, delta)) - power

    # at delta = crit the test's power is near one half (> .33): the root lies below it
    return optimize.brentq(shortfall, 0.0, crit + 1.0, xtol=1e-10)


def small_telescopes_pvalue(aligned_r: float, se_r: float, d33_value: float, df_r: float | None = None) -> float:
    """One-sided p of H0: theta = d33 against H1: theta < d33 with our aligned estimate (Simonsohn 2015). A small p
    says the true effect, if any, is smaller than the paper could have detected. NaN without a spread."""
    if se_r is None or not se_r > 0:
        return float("nan") if aligned_r == d33_value else (0.0 if aligned_r < d33_value else 1.0)
    t_stat = (aligned_r - d33_value) / se_r
    return _cdf(t_stat, df_r)


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
    return _cdf(-t_stat, df), _cdf(t_stat, df)


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
    return 2 * _cdf(-t_stat, df)


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


def paper_supports(test: RowTest) -> bool | None:
    """Whether the paper's own estimate on this row goes the claim's way (aligned > 0; for an equivalence row,
    inside the margin); None without a paper estimate. Where it goes against the claim, the row carries no
    small-telescopes test: d33 is the effect the paper could detect *for* the claim (REPLICATION-STATISTICS
    Sec. 10)."""
    if test.paper_estimate is None:
        return None
    if test.hypothesis == "equivalence":
        return test.margin is not None and abs(test.paper_estimate) < test.margin
    if test.hypothesis == "noninferiority":
        return test.margin is not None and test.direction * test.paper_estimate > -test.margin
    return test.direction * test.paper_estimate > 0


def row_verdict(test: RowTest, p_adjusted: float | None = None, alpha: float = ALPHA) -> dict:
    """A row's verdict and the numbers behind it (REPLICATION-STATISTICS Sec. 9), as a dict of JSON-ready values:
    ``verdict``, ``pi_low``, ``pi_high``, ``d33``, ``p_d33``, ``side`` (where ours falls against the paper's
    interval: inside / below / above, in the claim's direction, or None).

    With a paper number and se: significant against the claim -> contradicted; significant for it -> reproduced
    (inside or above the interval) or reproduced_smaller (below it); not significant -> smaller_than_paper when
    d33 is rejected (only where the paper's own effect supports the claim), contradicted when ours is outside the
    interval on the claim's unfavourable side, else consistent. A result beyond the interval on the favourable side
    (better than the paper's) never contradicts the claim. Without a paper se (the paper prints no ±):
    generalises / does_not_generalise / undecided by the significance and sign alone. A ``match`` row is
    consistent inside the interval and contradicted outside it. A non-inferiority (equivalence) row holds when
    non-inferiority (equivalence) is significant and is against the claim when the effect is significantly beyond
    the margin. The interval uses t at the Welch-Satterthwaite df of both standard errors."""
    p = test.p if p_adjusted is None else p_adjusted
    s = test.direction
    aligned = s * test.estimate
    out = {"pi_low": None, "pi_high": None, "d33": None, "p_d33": None, "side": None}
    has_paper = (test.paper_estimate is not None and test.paper_se is not None and math.isfinite(test.paper_se)
                 and test.paper_se >= 0)
    if has_paper:
        low, high = prediction_interval(test.paper_estimate, test.paper_se, test.se, df_p=test.paper_df,
                                        df_r=test.df)
        out["pi_low"], out["pi_high"] = low, high
        if test.hypothesis == "equivalence":
            # favourable = towards no difference: "above" is closer to zero than the interval
            inside = low <= test.estimate <= high
            closer = abs(test.estimate) < min(abs(low), abs(high)) and low * high > 0
            out["side"] = "inside" if inside else ("above" if closer else "below")
        else:
            aligned_low, aligned_high = sorted((s * low, s * high))
            out["side"] = ("inside" if aligned_low <= aligned <= aligned_high
                           else ("below" if aligned < aligned_low else "above"))
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
        elif fails:
            out["verdict"] = CONTRADICTED
        elif holds:
            out["verdict"] = REPRODUCED_SMALLER if out["side"] == "below" else REPRODUCED
        else:
            out["verdict"] = CONTRADICTED if out["side"] == "below" else CONSISTENT
        return out
    if test.hypothesis != "superiority":
        raise ValueError(f"hypothesis: expected superiority, noninferiority, equivalence or match, got "
                         f"{test.hypothesis!r}")
    significant = p < alpha
    if not has_paper:
        out["verdict"] = (UNDECIDED if not significant or aligned == 0
                          else (GENERALISES if aligned > 0 else DOES_NOT_GENERALISE))
        return out
    if paper_supports(test) and test.paper_se > 0:
        out["d33"] = s * d33(test.paper_se, test.paper_df, alpha)
        out["p_d33"] = small_telescopes_pvalue(aligned, test.se, abs(out["d33"]), test.df)
    if significant and aligned < 0:
        out["verdict"] = CONTRADICTED
    elif significant:
        out["verdict"] = REPRODUCED_SMALLER if out["side"] == "below" else REPRODUCED
    elif out["p_d33"] is not None and out["p_d33"] < alpha:
        out["verdict"] = SMALLER_THAN_PAPER
    elif out["side"] == "below":
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

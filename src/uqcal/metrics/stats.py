"""Statistics for result tables: paired tests across seeds/splits, "tied with the best", summaries.

How the papers mark their tables:
- Iwata & Kumagai (Tables 1-5): bold = not significantly different at the 5 % level from the best
  method by a paired t-test -> :func:`best_and_ties` with ``test="ttest"``.
- RIO (Table 1): daggers = significantly different from RIO by paired t-test / Wilcoxon; bold = best
  entries significantly better than all others under at least one test -> :func:`significantly_best`.
- RIO (Table 2): Spearman correlation between RMSE and noise variance -> :func:`spearman`.

:func:`paired_comparison` compares two methods over shared seeds: a paired test, a three-way outcome (better /
tie / worse at level alpha), a confidence interval on the mean difference and the test's power (docs/experiments/ use
it). The report's claims decide with ``uqcal.metrics.replication`` and take from here the tests themselves, the
fold-blocked test, Holm's adjustment and :func:`runs_for_power` (runs for 80 % power at the paper's effect).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

_TESTS = ("ttest", "wilcoxon")
PAIRED_TESTS = _TESTS
# Pitman asymptotic relative efficiency of the Wilcoxon signed-rank test to the t-test for normal differences
# (3 / pi): the Wilcoxon test needs about n / 0.955 pairs for the power the t-test has with n.
WILCOXON_ARE = 3.0 / np.pi


def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"a: expected a 1-D array, got shape {x.shape}")
    if y.ndim != 1:
        raise ValueError(f"b: expected a 1-D array, got shape {y.shape}")
    if x.shape != y.shape:
        raise ValueError(f"a, b: paired samples need equal lengths, got {x.shape[0]} and {y.shape[0]}")
    if x.shape[0] < 2:
        raise ValueError(f"a, b: a paired test needs at least 2 pairs, got {x.shape[0]}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("a, b: contain non-finite values")
    return x, y


def paired_ttest(a, b) -> tuple[float, float]:
    """Two-sided paired t-test (scipy.stats.ttest_rel) -> (statistic, pvalue).

    Degenerate differences: all zero -> (0.0, 1.0); constant and non-zero -> (+-inf, 0.0), the limit
    of the t statistic as the spread of the differences goes to 0.
    """
    x, y = _paired(a, b)
    d = x - y
    if np.allclose(d, d[0], rtol=1e-12, atol=0.0):  # scipy's t is nan/unstable for constant d
        if d[0] == 0:
            return 0.0, 1.0
        return float(np.sign(d[0]) * np.inf), 0.0
    result = stats.ttest_rel(x, y)
    return float(result.statistic), float(result.pvalue)


def wilcoxon_test(a, b) -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank test (scipy.stats.wilcoxon) -> (statistic, pvalue).

    All differences zero -> (0.0, 1.0) (scipy would raise).
    """
    x, y = _paired(a, b)
    if np.all(x == y):
        return 0.0, 1.0
    result = stats.wilcoxon(x, y)
    return float(result.statistic), float(result.pvalue)


def _test_pvalue(test: str, a: np.ndarray, b: np.ndarray) -> float:
    if test == "ttest":
        return paired_ttest(a, b)[1]
    return wilcoxon_test(a, b)[1]


def paired_pvalue(a: np.ndarray, b: np.ndarray, test: str = "ttest") -> float:
    """Two-sided p-value of a paired test on matched seeds; 1.0 when the pairs are identical."""
    if test not in _TESTS:
        raise ValueError(f"test must be one of {_TESTS}, got {test!r}")
    a, b = np.asarray(a, float), np.asarray(b, float)
    diff = a - b
    if len(diff) < 2 or np.allclose(diff, 0.0):
        return 1.0
    if np.allclose(diff, diff[0]):  # a constant non-zero shift: no variance, the difference is certain
        return 0.0
    if test == "ttest":
        p = stats.ttest_rel(a, b).pvalue
    elif len(diff) <= 13 and _has_zeros_or_ties(diff):
        p = _wilcoxon_sign_flip_pvalue(diff)
    else:
        p = stats.wilcoxon(a, b).pvalue
    return 1.0 if math.isnan(p) else float(p)


def _has_zeros_or_ties(diff: np.ndarray) -> bool:
    nonzero = diff[diff != 0]
    return len(nonzero) < len(diff) or len(np.unique(np.abs(nonzero))) < len(nonzero)


def _wilcoxon_sign_flip_pvalue(diff: np.ndarray) -> float:
    """What ``scipy.stats.wilcoxon(method="auto")`` computes for n <= 13 with zeros or ties -- the exact
    sign-flip permutation test of R+ (zeros dropped, average ranks) -- with the statistic vectorised.

    scipy's wilcoxon evaluates its statistic once per sign flip (2^n Python calls, ~0.4 s per test); the
    report runs hundreds of these, so the same exact test goes through scipy's own ``permutation_test`` with
    a vectorised statistic. Same p-values (tests/pipeline/report/test_tables.py compares against scipy's wilcoxon).
    """
    nonzero = diff != 0
    ranks = np.zeros_like(diff)
    ranks[nonzero] = stats.rankdata(np.abs(diff[nonzero]))

    def r_plus(flipped, axis=-1):
        return np.sum((flipped > 0) * ranks, axis=axis)

    return stats.permutation_test((diff,), r_plus, permutation_type="samples", vectorized=True,
                                  alternative="two-sided").pvalue


def _to_series(name: str, values) -> pd.Series:
    if isinstance(values, pd.Series):
        series = values.astype(np.float64)
    else:
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim != 1:
            raise ValueError(f"samples[{name!r}]: expected a 1-D array, got shape {arr.shape}")
        series = pd.Series(arr)
    if series.index.has_duplicates:
        raise ValueError(f"samples[{name!r}]: duplicate index labels; cannot pair")
    return series


def _prepare(samples: Mapping[str, object]) -> dict[str, pd.Series]:
    if not isinstance(samples, Mapping) or len(samples) == 0:
        raise ValueError("samples: expected a non-empty mapping method -> values")
    series = {str(k): _to_series(str(k), v) for k, v in samples.items()}
    plain = [k for k, v in samples.items() if not isinstance(v, pd.Series)]
    lengths = {len(series[str(k)]) for k in plain}
    if len(lengths) > 1:
        raise ValueError(
            "samples: plain arrays are paired by position and must have equal lengths "
            f"(got {sorted(lengths)}); pass pandas Series indexed by seed to pair by label"
        )
    return series


def _pair(a: pd.Series, b: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Values of a and b at the labels both share, dropping pairs with a NaN."""
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    return joined["a"].to_numpy(), joined["b"].to_numpy()


def best_and_ties(
    samples: Mapping[str, object],
    lower_is_better: bool = True,
    alpha: float = 0.05,
    test: str = "ttest",
) -> set[str]:
    """The best method by mean plus every method not significantly different from it.

    ``samples`` maps method -> per-seed (per-split) values. Plain arrays are paired by position;
    pandas Series are paired by index label (e.g. seed), so missing runs are allowed. NaN values are
    dropped pairwise. A method with fewer than 2 pairs with the best cannot be tested and is kept only
    if its mean equals the best mean. Ties in the best mean are all returned. Methods without any
    finite value are never returned.
    """
    if test not in _TESTS:
        raise ValueError(f"test: expected one of {_TESTS}, got {test!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: expected a value in (0, 1), got {alpha}")
    series = _prepare(samples)
    means = {k: float(v.mean()) for k, v in series.items() if v.notna().any()}
    if not means:
        return set()
    sign = 1.0 if lower_is_better else -1.0
    best_value = min(sign * m for m in means.values())
    best_methods = {k for k, m in means.items() if sign * m == best_value}
    best = sorted(best_methods)[0]
    result = set(best_methods)
    for name in means:
        if name in result:
            continue
        a, b = _pair(series[name], series[best])
        if len(a) < 2:
            continue  # not testable; its mean differs from the best, so it is not a tie
        if _test_pvalue(test, a, b) >= alpha:
            result.add(name)
    return result


def significantly_best(
    samples: Mapping[str, object],
    lower_is_better: bool = True,
    alpha: float = 0.05,
    tests: tuple[str, ...] = ("ttest", "wilcoxon"),
) -> set[str]:
    """RIO's bolding: methods whose mean beats every other method's and whose difference from each
    other method is significant under at least one of ``tests`` (paired as in :func:`best_and_ties`).
    Several methods can qualify only if they are tied in mean (ties allowed, as RIO says)."""
    for t in tests:
        if t not in _TESTS:
            raise ValueError(f"tests: unknown test {t!r}; expected a subset of {_TESTS}")
    series = _prepare(samples)
    means = {k: float(v.mean()) for k, v in series.items() if v.notna().any()}
    sign = 1.0 if lower_is_better else -1.0
    winners = set()
    for name, mean in means.items():
        beats_all = True
        for other, other_mean in means.items():
            if other == name:
                continue
            if sign * mean > sign * other_mean:
                beats_all = False
                break
            if sign * mean == sign * other_mean:
                continue  # tied in mean: ties are allowed
            a, b = _pair(series[name], series[other])
            if len(a) < 2 or not any(_test_pvalue(t, a, b) < alpha for t in tests):
                beats_all = False
                break
        if beats_all:
            winners.add(name)
    return winners


def holm_adjust(pvalues) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values, in the input order.

    With p_(1) <= ... <= p_(m): adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)). Rejecting where the
    adjusted value is <= alpha controls the family-wise error rate at alpha (the same as statsmodels'
    ``multipletests(method="holm")``)."""
    p = np.asarray(pvalues, float).ravel()
    if p.size and (np.any(~np.isfinite(p)) or p.min() < 0 or p.max() > 1):
        raise ValueError("p-values must be finite and in [0, 1]")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def average_ranks(scores: pd.DataFrame, lower_is_better: bool = True) -> pd.Series:
    """Mean rank of each column (method) over the rows (datasets): rank 1 is the best value in a row, tied
    values share their average rank (Demsar 2006, Sec. 3.2.2). Rows with a missing value are dropped."""
    complete = scores.dropna(axis=0, how="any")
    if complete.empty:
        raise ValueError("average_ranks: no row has a value for every method")
    ranks = complete.rank(axis=1, method="average", ascending=lower_is_better)
    return ranks.mean(axis=0)


def friedman_pvalue(scores: pd.DataFrame, lower_is_better: bool = True) -> float:
    """Friedman's test of equal mean ranks over the rows (scipy's chi-square form); NaN with < 2 rows or
    < 3 methods (scipy needs three)."""
    complete = scores.dropna(axis=0, how="any")
    if len(complete) < 2 or complete.shape[1] < 3:
        return math.nan
    values = complete.to_numpy(float) * (1.0 if lower_is_better else -1.0)
    if np.all(values == values[:, :1]):
        return 1.0
    return float(stats.friedmanchisquare(*values.T).pvalue)


def nemenyi_critical_difference(k: int, n: int, alpha: float = 0.05) -> float:
    """Critical difference of mean ranks for the Nemenyi test of k methods on n datasets (Demsar 2006,
    Eq. 4): CD = q_alpha sqrt(k (k + 1) / (6 n)), q_alpha the studentised range quantile over sqrt 2."""
    if k < 2 or n < 1:
        raise ValueError(f"nemenyi_critical_difference needs k >= 2 methods and n >= 1 datasets, got {k}, {n}")
    q_alpha = stats.studentized_range.ppf(1.0 - alpha, k, np.inf) / math.sqrt(2.0)
    return float(q_alpha * math.sqrt(k * (k + 1) / (6.0 * n)))


def spearman(a, b) -> tuple[float, float]:
    """Spearman rank correlation (scipy.stats.spearmanr) -> (rho, two-sided p-value)."""
    x, y = _paired(a, b)
    result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def mean_std_n(values) -> tuple[float, float, int]:
    """(mean, sample std with ddof=1 (0.0 when n = 1), n) over the non-NaN values.

    No values -> (nan, nan, 0).
    """
    arr = np.asarray(values, dtype=np.float64).ravel()
    arr = arr[~np.isnan(arr)]
    n = int(arr.size)
    if n == 0:
        return float("nan"), float("nan"), 0
    std = float(np.std(arr, ddof=1)) if n > 1 else 0.0
    return float(np.mean(arr)), std, n


def standard_error(values) -> float:
    """std (ddof=1) / sqrt(n) over non-NaN values (Deshpande & Kuleshov plot mean +- s.e.)."""
    _, std, n = mean_std_n(values)
    return std / np.sqrt(n) if n > 0 else float("nan")


def bootstrap_ci(
    values,
    statistic: Callable[[np.ndarray], float] = np.mean,
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``statistic`` (scipy.stats.bootstrap)."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size < 2 or not np.all(np.isfinite(arr)):
        raise ValueError(f"values: need at least 2 finite values, got {arr.size} ({arr.tolist()[:5]})")
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level: expected a value in (0, 1), got {confidence_level}")
    if np.all(arr == arr[0]):
        value = float(statistic(arr))
        return value, value
    kwargs = dict(
        confidence_level=confidence_level, n_resamples=n_resamples, method="percentile", vectorized=False
    )
    try:
        result = stats.bootstrap((arr,), statistic, rng=np.random.default_rng(seed), **kwargs)
    except TypeError:  # scipy < 1.15 names the generator random_state
        result = stats.bootstrap((arr,), statistic, random_state=np.random.default_rng(seed), **kwargs)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


# ------------------------------------------------------------------------------ paired claims and power
@dataclass(frozen=True)
class PairedComparison:
    """Method a against method b on shared seeds: d = a - b.

    ``outcome`` is in the claimed direction (``direction`` = -1 claims a < b, +1 claims a > b):
    ``better`` (significant at alpha, in the claimed direction), ``worse`` (significant, against it) or
    ``tie`` (not significant). ``ci`` is the t interval of the mean difference at 1 - alpha. ``mde`` is the
    smallest |mean difference| the test detects with 80 % power at this n and spread (paired t; for the
    Wilcoxon test scaled by its efficiency ``WILCOXON_ARE``); ``n_needed`` the pairs needed for 80 % power
    at the observed mean difference (None when it is zero, inf when the spread is zero).
    """

    test: str
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    sd_diff: float
    ci: tuple[float, float]
    pvalue: float
    pvalue_one_sided: float  # in the claimed direction
    outcome: str
    mde: float
    n_needed: float | None

    def describe(self, metric: str, a: str, b: str) -> str:
        sign = "<" if self.mean_diff < 0 else (">" if self.mean_diff > 0 else "=")
        need = (
            "" if self.n_needed is None else (f", n for 80 % power {self.n_needed:.0f}" if np.isfinite(self.n_needed)
                                              else "")
        )
        return (
            f"{metric}({a}) {_fmt(self.mean_a)} {sign} {metric}({b}) {_fmt(self.mean_b)}; "
            f"diff {_fmt(self.mean_diff)} [{_fmt(self.ci[0])}, {_fmt(self.ci[1])}], "
            f"{_TEST_NAMES[self.test]} p = {_fmt(self.pvalue)}, n = {self.n}; "
            f"detectable at 80 % power: |diff| >= {_fmt(self.mde)}{need}"
        )


_TEST_NAMES = {"ttest": "paired t", "wilcoxon": "Wilcoxon"}
OUTCOMES = ("better", "tie", "worse")


def _fmt(value: float) -> str:
    if value is None or not np.isfinite(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"


def paired_t_power(effect: float, n: int, alpha: float = 0.05, blocks: int = 1) -> float:
    """Power of the two-sided paired t-test at standardised effect ``effect`` = mean / sd of differences,
    from the noncentral t distribution (df = n - blocks, noncentrality effect * sqrt(n)); ``blocks`` > 1 is the
    fold-blocked test (:func:`fold_blocked_test`, sd the within-fold scatter)."""
    if n <= blocks:
        return float("nan")
    df = n - blocks
    crit = stats.t.ppf(1 - alpha / 2, df)
    nc = abs(effect) * np.sqrt(n)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def minimum_detectable_effect(n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest standardised effect (mean / sd of the differences) that the two-sided paired t-test detects
    with the given power at n pairs (bisection on :func:`paired_t_power`)."""
    if n < 2:
        return float("inf")
    lo, hi = 0.0, 1.0
    while paired_t_power(hi, n, alpha) < power:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if paired_t_power(mid, n, alpha) < power else (lo, mid)
    return hi


def pairs_for_power(effect: float, alpha: float = 0.05, power: float = 0.8, n_max: int = 100_000,
                    blocks: int = 1) -> float:
    """Pairs the two-sided paired t-test needs for the given power at standardised effect ``effect``;
    inf when even ``n_max`` pairs do not reach it (or the effect is zero). ``blocks`` as in
    :func:`paired_t_power`."""
    if effect == 0 or not np.isfinite(effect):
        return float("inf") if effect == 0 else float(blocks + 1)
    if paired_t_power(effect, n_max, alpha, blocks) < power:
        return float("inf")
    lo, hi = blocks + 1, n_max  # power increases with n: bisection on the integers
    if paired_t_power(effect, lo, alpha, blocks) >= power:
        return float(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if paired_t_power(effect, mid, alpha, blocks) < power else (lo, mid)
    return float(hi)


def runs_for_power(diff: float, sd: float, alpha: float = 0.05, test: str = "ttest", blocks: int = 1) -> float | None:
    """Runs (pairs) a paired test needs for 80 % power at mean difference ``diff`` when the differences scatter
    with standard deviation ``sd``: :func:`pairs_for_power` at the standardised effect diff / sd, divided by
    the Wilcoxon test's efficiency for ``test: wilcoxon``. ``blocks`` > 1 is the fold-blocked test (df = n -
    blocks; ``sd`` the within-fold scatter). None for a zero difference (no n detects it); the fewest runs
    the test can use when the differences do not scatter."""
    if diff == 0 or not np.isfinite(diff):
        return None
    if sd == 0:
        return float(blocks + 1)
    efficiency = 1.0 if test == "ttest" else WILCOXON_ARE
    needed = pairs_for_power(diff / sd, alpha, blocks=blocks) / efficiency
    return float(np.ceil(needed)) if np.isfinite(needed) else needed


def paired_comparison(a, b, test: str = "ttest", alpha: float = 0.05, direction: int = -1) -> PairedComparison:
    """Paired test of a against b (equal-length arrays, matched by position), outcome in ``direction``
    (-1: the claim is a < b; +1: a > b). See :class:`PairedComparison`."""
    if test not in _TESTS:
        raise ValueError(f"test: expected one of {_TESTS}, got {test!r}")
    if direction not in (-1, 1):
        raise ValueError(f"direction: expected -1 (a < b) or +1 (a > b), got {direction!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: expected a value in (0, 1), got {alpha}")
    x, y = _paired(a, b)
    d = x - y
    n = len(d)
    mean_d, sd_d = float(d.mean()), float(d.std(ddof=1))
    p = paired_pvalue(x, y, test)
    along = np.sign(mean_d) == direction
    p_one = p / 2 if along else 1 - p / 2
    if mean_d == 0:
        p_one = 0.5
    outcome = "tie" if p >= alpha or mean_d == 0 else ("better" if along else "worse")
    if sd_d > 0:
        interval = stats.ttest_rel(x, y).confidence_interval(1 - alpha)
        ci = (float(interval.low), float(interval.high))
    else:  # every pair differs by the same amount: no spread, the difference is certain
        ci = (mean_d, mean_d)
    efficiency = 1.0 if test == "ttest" else WILCOXON_ARE
    # An effective sample of n * ARE pairs gives the Wilcoxon test's power (asymptotically, normal differences).
    n_eff = max(2, int(round(n * efficiency)))
    mde = minimum_detectable_effect(n_eff, alpha) * sd_d
    n_needed = runs_for_power(mean_d, sd_d, alpha, test)
    return PairedComparison(
        test, n, float(x.mean()), float(y.mean()), mean_d, sd_d, ci, p, float(p_one),
        outcome, float(mde), n_needed,
    )


def stouffer(pvalues_one_sided) -> float:
    """Stouffer's combined one-sided p-value, equal weights (scipy.stats.combine_pvalues). Pools per-row
    paired tests of one claim across rows whose metrics are on different scales."""
    p = np.clip(np.asarray(pvalues_one_sided, dtype=np.float64), 1e-300, 1 - 1e-16)
    if p.size == 0:
        raise ValueError("pvalues_one_sided: need at least one p-value")
    return float(stats.combine_pvalues(p, method="stouffer").pvalue)


def episode_ttest_pvalue(a, b) -> float:
    """Two-sided paired t-test p-value (scipy.stats.ttest_rel) over many pairs, e.g. test episodes
    (``uqcal.pipeline.report.episode_claims``): fewer than 2 pairs or no difference -> 1.0 (nothing to test, or
    identical); the same non-zero difference on every pair -> 0.0 (no variance: the difference is certain).
    Unlike :func:`paired_ttest` it does not validate its input (non-finite values give scipy's nan)."""
    va, vb = np.asarray(a), np.asarray(b)
    diff = va - vb
    n = diff.size
    if n < 2 or not np.any(diff):
        return 1.0
    if np.all(diff == diff[0]):
        return 0.0
    return float(stats.ttest_rel(va, vb).pvalue)


def fold_blocked_test(diffs: dict[int, float], folds: int, alpha: float = 0.05) -> dict:
    """Paired t-test of per-seed differences when the K folds are FIXED (the same rows in every repeat; seed k
    = fold k % folds): fold effects are part of the design, not noise, so each difference is compared with its
    fold's mean (randomised block design, fold = block). se = sqrt(s_within^2 / n), df = n - #folds."""
    seeds = sorted(diffs)
    d = np.array([diffs[s] for s in seeds], float)
    fold = np.array([s % folds for s in seeds])
    blocks = np.unique(fold)
    df = d.size - blocks.size
    if df < 1:
        raise ValueError(f"fold-blocked test needs repeated folds: {d.size} runs over {blocks.size} folds")
    residual = d - np.array([d[fold == f].mean() for f in fold])
    se = float(np.sqrt((residual**2).sum() / df / d.size))
    mean = float(d.mean())
    if se == 0:
        p_two = 0.0 if mean != 0 else 1.0
        t_stat = math.copysign(math.inf, mean) if mean != 0 else 0.0
    else:
        t_stat = mean / se
        p_two = float(2 * stats.t.sf(abs(t_stat), df))
    half = float(stats.t.ppf(1 - alpha / 2, df)) * se
    mde = (float(stats.t.ppf(1 - alpha / 2, df)) + float(stats.t.ppf(0.8, df))) * se
    return {"mean": mean, "se": se, "df": df, "t": t_stat, "p_two": p_two, "ci": (mean - half, mean + half),
            "mde": mde}


def logrank_pvalue(xa: np.ndarray, ra: np.ndarray, xb: np.ndarray, rb: np.ndarray) -> float:
    """Two-sided log-rank p-value of two samples of right-censored times (reached = 0: censored)."""
    if np.isnan(ra).any() or np.isnan(rb).any() or not (ra.any() or rb.any()):
        return float("nan")  # no reached flags, or no run reached the target: no event to compare
    data_a = stats.CensoredData(uncensored=xa[ra > 0], right=xa[ra == 0])
    data_b = stats.CensoredData(uncensored=xb[rb > 0], right=xb[rb == 0])
    return float(stats.logrank(data_a, data_b).pvalue)

"""Statistics for result tables: paired tests across seeds/splits, "tied with the best", summaries.

How the papers mark their tables:
- Iwata & Kumagai (Tables 1-5): bold = not significantly different at the 5 % level from the best
  method by a paired t-test -> :func:`best_and_ties` with ``test="ttest"``.
- RIO (Table 1): daggers = significantly different from RIO by paired t-test / Wilcoxon; bold = best
  entries significantly better than all others under at least one test -> :func:`significantly_best`.
- RIO (Table 2): Spearman correlation between RMSE and noise variance -> :func:`spearman`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
from scipy import stats

_TESTS = ("ttest", "wilcoxon")


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

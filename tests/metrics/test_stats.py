"""uqcal.metrics.stats against hand-computed statistics and scipy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from uqcal.metrics import stats as S


def test_paired_ttest_hand():
    # d = 1 2 3 4: mean 2.5, sd = sqrt((2.25 + .25 + .25 + 2.25) / 3) = sqrt(5/3), se = sd / 2
    # t = 2.5 / (sqrt(5/3) / 2) = 3.872983; two-sided p = 2 * P(T_3 > t)
    t, p = S.paired_ttest([1, 2, 3, 4], [0, 0, 0, 0])
    assert t == pytest.approx(2.5 / (math.sqrt(5 / 3) / 2))
    assert p == pytest.approx(2 * sps.t.sf(3.872983346207417, df=3))


def test_paired_ttest_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=10), rng.normal(0.5, size=10)
    ref = sps.ttest_rel(a, b)
    assert S.paired_ttest(a, b) == pytest.approx((ref.statistic, ref.pvalue))


def test_paired_ttest_degenerate():
    assert S.paired_ttest([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == (0.0, 1.0)
    t, p = S.paired_ttest([2.0, 3.0, 4.0], [1.0, 2.0, 3.0])
    assert t == np.inf and p == 0.0


def test_wilcoxon_hand():
    # d = 1 2 3 -4 5: ranks of |d| = 1..5; negative rank sum 4, positive 11 -> W = 4
    # exact two-sided p: subsets of {1..5} with rank sum <= 4: {}, {1}, {2}, {3}, {4}, {1,2}, {1,3}
    # -> 7 of 32 -> p = 2 * 7/32 = 0.4375
    w, p = S.wilcoxon_test([1, 2, 3, -4, 5], [0, 0, 0, 0, 0])
    assert w == pytest.approx(4.0)
    assert p == pytest.approx(0.4375)


def test_wilcoxon_matches_scipy_and_zero_case():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=12), rng.normal(0.3, size=12)
    ref = sps.wilcoxon(a, b)
    assert S.wilcoxon_test(a, b) == pytest.approx((ref.statistic, ref.pvalue))
    assert S.wilcoxon_test([1.0, 2.0], [1.0, 2.0]) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("a", "b", "name"),
    [([1.0, 2.0], [1.0], "a, b"), ([1.0], [1.0], "a, b"), ([[1.0, 2.0]], [1.0, 2.0], "a"),
     ([1.0, np.nan], [1.0, 2.0], "a, b")],
)
def test_paired_tests_validate(a, b, name):
    with pytest.raises(ValueError, match=name):
        S.paired_ttest(a, b)
    with pytest.raises(ValueError, match=name):
        S.wilcoxon_test(a, b)


def _samples():
    rng = np.random.default_rng(5)
    base = rng.normal(0.0, 1.0, size=10)  # shared split difficulty -> pairing matters
    return {
        "best": base + 1.00,
        "close": base + 1.00 + rng.normal(0.0, 0.3, size=10),  # not distinguishable from best
        "worse": base + 2.00 + rng.normal(0.0, 0.1, size=10),  # consistently 1.0 higher
    }


def test_best_and_ties_lower_is_better():
    samples = _samples()
    # brute-force reference: the best mean, then a ttest_rel against it for every other method
    means = {k: np.mean(v) for k, v in samples.items()}
    best = min(means, key=means.get)
    expected = {best} | {
        k for k, v in samples.items() if k != best and sps.ttest_rel(v, samples[best]).pvalue >= 0.05
    }
    result = S.best_and_ties(samples)
    assert result == expected
    assert "worse" not in result and best in result


def test_best_and_ties_higher_is_better_and_wilcoxon():
    samples = {k: -v for k, v in _samples().items()}
    # negating the values and flipping the direction gives the same answer
    assert S.best_and_ties(samples, lower_is_better=False, test="wilcoxon") == S.best_and_ties(
        _samples(), test="wilcoxon"
    )
    assert "worse" not in S.best_and_ties(samples, lower_is_better=False, test="wilcoxon")
    assert S.best_and_ties(samples, lower_is_better=True, test="wilcoxon") == {"worse"}


def test_best_and_ties_series_pair_by_seed_and_untestable():
    best = pd.Series([1.0, 1.1, 0.9, 1.0], index=[0, 1, 2, 3])
    worse = pd.Series([3.0, 3.2, 2.9], index=[1, 2, 3])  # seed 0 missing: paired on 1..3
    single = pd.Series([1.5], index=[0])  # one pair with best: untestable, mean differs -> excluded
    tied_single = pd.Series([1.0], index=[7])  # no pair, but its mean equals the best mean -> kept
    result = S.best_and_ties({"best": best, "worse": worse, "single": single, "tied": tied_single})
    assert result == {"best", "tied"}


def test_best_and_ties_nan_and_errors():
    result = S.best_and_ties({"a": [1.0, 1.0, np.nan], "b": [np.nan, np.nan, np.nan]})
    assert result == {"a"}
    with pytest.raises(ValueError, match="samples"):
        S.best_and_ties({"a": [1.0, 2.0], "b": [1.0]})
    with pytest.raises(ValueError, match="test"):
        S.best_and_ties({"a": [1.0, 2.0]}, test="anova")
    with pytest.raises(ValueError, match="samples"):
        S.best_and_ties({})


def test_significantly_best():
    samples = _samples()
    assert S.significantly_best(samples) == set()  # "close" is not separable from "best"
    del samples["close"]
    assert S.significantly_best(samples) == {"best"}
    assert S.significantly_best(samples, lower_is_better=False) == {"worse"}


def test_spearman():
    assert S.spearman([1, 2, 3, 4], [10, 20, 25, 100])[0] == pytest.approx(1.0)
    assert S.spearman([1, 2, 3, 4], [4, 3, 2, 1])[0] == pytest.approx(-1.0)
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2.0, 1.0, 4.0, 3.0, 6.0, 5.0]
    ref = sps.spearmanr(a, b)
    assert S.spearman(a, b) == pytest.approx((ref.statistic, ref.pvalue))
    # rank differences all 1 -> rho = 1 - 6 * 6 / (6 * 35) = 1 - 36/210 = 0.828571
    assert S.spearman(a, b)[0] == pytest.approx(1 - 36 / 210)


def test_mean_std_n():
    # [1, 2, 3, 4]: mean 2.5, std ddof=1 = sqrt(5/3)
    assert S.mean_std_n([1, 2, 3, 4]) == pytest.approx((2.5, math.sqrt(5 / 3), 4))
    assert S.mean_std_n([5.0]) == (5.0, 0.0, 1)
    assert S.mean_std_n([1.0, np.nan, 3.0]) == pytest.approx((2.0, math.sqrt(2.0), 2))
    mean, std, n = S.mean_std_n([])
    assert n == 0 and math.isnan(mean) and math.isnan(std)
    # s.e. = sqrt(5/3) / 2
    assert S.standard_error([1, 2, 3, 4]) == pytest.approx(math.sqrt(5 / 3) / 2)


def test_bootstrap_ci():
    rng = np.random.default_rng(2)
    values = rng.normal(10.0, 1.0, size=40)
    lo, hi = S.bootstrap_ci(values, n_resamples=500, seed=0)
    assert lo < values.mean() < hi
    # percentile interval of a mean is about mean +- 1.96 s / sqrt(n)
    half = 1.96 * values.std(ddof=1) / math.sqrt(40)
    assert hi - lo == pytest.approx(2 * half, rel=0.25)
    assert S.bootstrap_ci(values, n_resamples=500, seed=0) == (lo, hi)  # deterministic
    assert S.bootstrap_ci([3.0, 3.0, 3.0]) == (3.0, 3.0)
    with pytest.raises(ValueError, match="values"):
        S.bootstrap_ci([1.0])


# ------------------------------------------------------------------------------ power of paired tests
@pytest.mark.parametrize("effect, n", [(0.5, 20), (0.8, 10), (0.3, 40)])
def test_paired_t_power_matches_simulation(effect, n):
    """Independent reference: the rejection rate of scipy's paired t-test on simulated normal differences.
    20,000 replicates give a Monte Carlo standard error of at most 0.0036; allow 4 of them."""
    rng = np.random.default_rng(1)
    diffs = rng.normal(effect, 1.0, size=(20_000, n))
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / np.sqrt(n))
    rejected = np.mean(2 * sps.t.sf(np.abs(t), n - 1) < 0.05)
    assert S.paired_t_power(effect, n) == pytest.approx(rejected, abs=4 * 0.0036)


def test_power_inverses_agree_with_published_sample_sizes():
    # Cohen's medium effect d = 0.5, two-sided alpha 5 %, 80 % power: 34 pairs (G*Power; Cohen 1988, Table 2.4.1
    # gives n = 33 for the normal approximation, the noncentral t needs one more).
    assert S.pairs_for_power(0.5) == 34
    assert S.paired_t_power(0.5, 33) < 0.8 <= S.paired_t_power(0.5, 34)
    mde = S.minimum_detectable_effect(10)
    assert S.paired_t_power(mde, 10) == pytest.approx(0.8, abs=1e-6)
    assert S.minimum_detectable_effect(40) < mde  # more pairs detect smaller effects
    assert S.pairs_for_power(0.0) == np.inf


def test_runs_for_power_at_a_given_difference():
    # Cohen's d = 0.5 needs 34 pairs (above): a difference of 1 with differences scattering by 2 is that effect.
    assert S.runs_for_power(1.0, 2.0) == 34 and S.runs_for_power(-1.0, 2.0) == 34
    assert S.runs_for_power(1.0, 2.0, test="wilcoxon") == np.ceil(34 / (3 / np.pi))
    assert S.runs_for_power(0.0, 1.0) is None and S.runs_for_power(1.0, 0.0) == 2.0
    # Fold-blocked, 5 fixed folds: df = n - 5. The smallest n whose power, from scipy's noncentral t with that
    # df, reaches 80 %; the lost degrees of freedom cost runs when few runs are needed.
    def power(n, effect):
        crit = sps.t.ppf(0.975, n - 5)
        return sps.nct.sf(crit, n - 5, effect * np.sqrt(n)) + sps.nct.cdf(-crit, n - 5, effect * np.sqrt(n))

    for diff, paired in ((1.0, 34), (3.0, 6)):
        needed = S.runs_for_power(diff, 2.0, blocks=5)
        assert power(needed, diff / 2.0) >= 0.8 > power(needed - 1, diff / 2.0)
        assert needed >= paired and S.runs_for_power(diff, 2.0) == paired
    assert S.runs_for_power(3.0, 2.0, blocks=5) > 6


def test_paired_comparison_outcomes_interval_and_power():
    rng = np.random.default_rng(3)
    b = rng.normal(10.0, 1.0, 12)
    a = b - 0.8 + rng.normal(0, 0.3, 12)  # a clearly lower
    res = S.paired_comparison(a, b, "ttest", 0.05, direction=-1)
    ref = sps.ttest_rel(a, b)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-12) and res.outcome == "better"
    low, high = ref.confidence_interval(0.95)
    assert res.ci == pytest.approx((low, high), rel=1e-12)
    assert res.mde == pytest.approx(S.minimum_detectable_effect(12) * np.std(a - b, ddof=1), rel=1e-9)
    assert res.pvalue_one_sided == pytest.approx(ref.pvalue / 2, rel=1e-12)
    assert S.paired_comparison(a, b, "ttest", 0.05, direction=+1).outcome == "worse"
    tie = S.paired_comparison(b + np.tile([0.1, -0.1], 6), b, "ttest")  # mean difference exactly 0
    assert tie.outcome == "tie" and tie.pvalue == pytest.approx(1.0) and tie.n_needed is None
    small = S.paired_comparison(b + np.tile([0.1, -0.1], 6) + 0.01, b, "ttest")  # d = 0.01 / 0.104
    assert small.outcome == "tie" and small.n_needed == S.pairs_for_power(0.01 / np.std(np.tile([0.1, -0.1], 6), ddof=1))
    wil = S.paired_comparison(a, b, "wilcoxon")
    # the Wilcoxon test needs n / (3 / pi) pairs for the t-test's power on normal differences
    assert wil.n_needed == np.ceil(S.pairs_for_power(np.mean(a - b) / np.std(a - b, ddof=1)) / (3 / np.pi))
    with pytest.raises(ValueError, match="direction"):
        S.paired_comparison(a, b, direction=0)


def test_stouffer_is_scipys():
    p = [0.01, 0.2, 0.5, 0.9]
    assert S.stouffer(p) == pytest.approx(sps.combine_pvalues(p, method="stouffer").pvalue, rel=1e-12)
    with pytest.raises(ValueError):
        S.stouffer([])

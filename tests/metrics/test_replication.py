"""Replication statistics (uqcal.metrics.replication): each formula and verdict rule on hand-computed cases, the
one-sided tests and Holm against statsmodels, and simulations of exact and biased reproductions."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import DescrStatsW, ttost_paired

from uqcal.metrics import replication as R
from uqcal.metrics.stats import holm_adjust


def test_paper_standard_error_reads_each_kind_of_spread():
    # std with ddof 0 over 3 repeats (QR's save_stats): sd = 2 sqrt(3/2), se = sd / sqrt(3) = 2 / sqrt(2)
    assert R.paper_standard_error(2.0, "std", 3, ddof=0) == pytest.approx(2 / math.sqrt(2))
    assert R.paper_standard_error(0.5, "std", 100, ddof=1) == pytest.approx(0.05)
    assert R.paper_standard_error(0.5, "std", 100, ddof=None) == pytest.approx(0.5 * math.sqrt(100 / 99) / 10)
    assert R.paper_standard_error(0.7, "se", None) == 0.7
    assert R.paper_standard_error(stats.t.ppf(0.975, 9), "ci95", 10) == pytest.approx(1.0)
    assert R.paper_standard_error(None, "std", 10) is None
    assert R.paper_standard_error(1.0, "std", None) is None
    with pytest.raises(ValueError, match="kind"):
        R.paper_standard_error(1.0, "iqr", 10)
    assert R.difference_standard_error(3.0, 4.0) == pytest.approx(5.0)


def test_prediction_interval_and_d33_by_hand():
    low, high = R.prediction_interval(1.0, 0.3, 0.4)
    assert (low, high) == pytest.approx((1 - 1.959964 * 0.5, 1 + 1.959964 * 0.5), abs=1e-6)
    assert R.d33(1.0) == pytest.approx(1.959964 + stats.norm.ppf(0.33), abs=1e-6)  # Simonsohn's 1.52
    assert R.d33(1.0) == pytest.approx(1.52, abs=0.005)
    # at the paper's df: the exact 33 %-power effect of the two-sided t test, by the noncentral t's definition
    for df in (2, 4, 10):
        delta, crit = R.d33(1.0, df_p=df), stats.t.ppf(0.975, df)
        assert stats.nct.sf(crit, df, delta) + stats.nct.cdf(-crit, df, delta) == pytest.approx(0.33, abs=1e-8)
    # the quantile sum t(.975) + t(.33) overstates it by 16 % at 4 df (the finding)
    assert (stats.t.ppf(0.975, 4) + stats.t.ppf(0.33, 4)) / R.d33(1.0, df_p=4) == pytest.approx(1.164, abs=0.002)
    assert R.d33(1.0, df_p=10_000) == pytest.approx(R.d33(1.0), abs=2e-3)
    # the interval's t at the Welch-Satterthwaite df: se 1 with 2 df and se 1 with 4 df: (1 + 1)^2 / (1/2 + 1/4)
    df = (1 + 1) ** 2 / (1 / 2 + 1 / 4)
    assert R.welch_satterthwaite_df(1.0, 2, 1.0, 4) == pytest.approx(df)
    low, high = R.prediction_interval(0.0, 1.0, 1.0, df_p=2, df_r=4)
    assert high == pytest.approx(stats.t.ppf(0.975, df) * math.sqrt(2))
    assert R.welch_satterthwaite_df(1.0, None, 2.0, None) is None
    # one-sided p of ours (aligned 0.2, se 1) against d33 = 1.52
    assert R.small_telescopes_pvalue(0.2, 1.0, 1.52) == pytest.approx(stats.norm.cdf(-1.32))


def _row(estimate, se, paper=None, paper_se=None, hypothesis="superiority", direction=-1, margin=None):
    p = R.two_sided_pvalue(estimate, se, None)
    p_against = None
    if hypothesis == "noninferiority":
        p, p_against = R.noninferiority_pvalues(direction * estimate, se, None, margin)
    test = R.RowTest(hypothesis, estimate, se, None, p, direction, margin, p_against, paper, paper_se)
    return R.row_verdict(test)


@pytest.mark.parametrize(("estimate", "se", "verdict"), [
    (-2.5, 1.0, R.REPRODUCED),             # significant, inside [-3 -/+ 2.77]
    (-0.5, 0.1, R.REPRODUCED_SMALLER),     # significant, below the interval [-4.97, -1.03]
    (-6.0, 0.2, R.REPRODUCED),             # significant and above the interval: a larger effect
    (1.0, 0.3, R.CONTRADICTED),            # significant against the claim
    (-0.4, 1.0, R.CONSISTENT),             # not significant, inside [-5.77, -0.23], d33 not rejected (p .13)
    (0.0, 1.0, R.CONTRADICTED),            # not significant, outside the interval, d33 not rejected (p .064)
    (-0.1, 0.5, R.SMALLER_THAN_PAPER),     # not significant, d33 rejected: p = Phi((0.1 - 1.52) / 0.5) = .0023
])
def test_row_verdicts_on_the_papers_data(estimate, se, verdict):
    # the paper: a - b = -3 with se 1 (the claim: a < b)
    out = _row(estimate, se, paper=-3.0, paper_se=1.0)
    assert out["verdict"] == verdict
    assert out["pi_low"] == pytest.approx(-3 - 1.959964 * math.hypot(1, se), abs=1e-6)
    assert out["d33"] == pytest.approx(-R.d33(1.0))  # in the claim's direction


def test_row_verdicts_without_a_paper_number_and_for_margins_and_matches():
    assert _row(-1.0, 0.3)["verdict"] == R.GENERALISES
    assert _row(1.0, 0.3)["verdict"] == R.DOES_NOT_GENERALISE
    assert _row(-0.3, 0.3)["verdict"] == R.UNDECIDED
    # non-inferiority at margin 0.5 (a worse by 0.1 ± 0.1): significant; by 0.45 ± 0.2: undecided; by 1 ± 0.1: fails
    assert _row(0.1, 0.1, hypothesis="noninferiority", margin=0.5)["verdict"] == R.GENERALISES
    assert _row(0.45, 0.2, hypothesis="noninferiority", margin=0.5)["verdict"] == R.UNDECIDED
    assert _row(1.0, 0.1, hypothesis="noninferiority", margin=0.5)["verdict"] == R.DOES_NOT_GENERALISE
    # a value against the paper's: 6.5 ± 0.1 vs 6.87 ± 0.039 (Table 1's SVGP: std 0.39 over 100 runs)
    inside = R.row_verdict(R.RowTest("match", 6.8, 0.1, 9, 0.5, paper_estimate=6.87, paper_se=0.039))
    outside = R.row_verdict(R.RowTest("match", 6.5, 0.1, 9, 0.001, paper_estimate=6.87, paper_se=0.039))
    assert (inside["verdict"], inside["side"]) == (R.CONSISTENT, "inside")
    assert (outside["verdict"], outside["side"]) == (R.CONTRADICTED, "above")  # aligned: lower is better
    with pytest.raises(ValueError, match="match row"):
        R.row_verdict(R.RowTest("match", 6.5, 0.1, 9, 0.5))


def test_a_tie_never_supports_a_claim():
    for verdicts, scope in ([[R.CONSISTENT, R.REPRODUCED], None], [[R.UNDECIDED, R.GENERALISES], "every_row"]):
        assert R.combine_verdicts(verdicts, scope) in (R.CONSISTENT, R.UNDECIDED)


def test_combine_verdicts_under_each_scope():
    every = [R.REPRODUCED, R.REPRODUCED_SMALLER, R.REPRODUCED]
    assert R.combine_verdicts(every, "every_row") == R.REPRODUCED_SMALLER
    assert R.combine_verdicts([*every, R.CONTRADICTED], None) == R.CONTRADICTED
    # majority of 5 needs 3
    assert R.combine_verdicts([R.REPRODUCED] * 3 + [R.CONTRADICTED] * 2, "majority") == R.REPRODUCED
    assert R.combine_verdicts([R.REPRODUCED, R.REPRODUCED_SMALLER, R.REPRODUCED_SMALLER, R.CONSISTENT,
                               R.CONSISTENT], "majority") == R.REPRODUCED_SMALLER
    assert R.combine_verdicts([R.REPRODUCED, R.CONSISTENT, R.CONSISTENT, R.CONTRADICTED, R.CONTRADICTED],
                              "majority") == R.CONSISTENT
    assert R.combine_verdicts([R.REPRODUCED, R.CONSISTENT, R.CONTRADICTED, R.CONTRADICTED, R.CONTRADICTED],
                              "majority") == R.CONTRADICTED
    assert R.combine_verdicts([R.REPRODUCED, R.CONSISTENT, R.SMALLER_THAN_PAPER, R.SMALLER_THAN_PAPER,
                               R.CONTRADICTED], "majority") == R.SMALLER_THAN_PAPER
    assert R.combine_verdicts([R.GENERALISES, R.UNDECIDED, R.UNDECIDED], {"at_least": 0.6}) == R.UNDECIDED
    assert R.combine_verdicts([R.GENERALISES, R.DOES_NOT_GENERALISE, R.DOES_NOT_GENERALISE],
                              {"at_least": 0.6}) == R.DOES_NOT_GENERALISE
    assert R.combine_verdicts([R.GENERALISES, R.UNDECIDED], "any_row") == R.GENERALISES
    assert R.combine_verdicts([], "majority") == R.NOT_RUN
    with pytest.raises(ValueError, match="scope"):
        R.combine_verdicts([R.REPRODUCED], "most")


def test_noninferiority_and_tost_match_statsmodels():
    rng = np.random.default_rng(3)
    for shift, margin in ((0.05, 0.3), (0.25, 0.3), (-0.4, 0.3), (0.0, 0.1)):
        a = rng.normal(1.0 + shift, 0.5, 12)
        b = rng.normal(1.0, 0.5, 12) + 0.8 * (a - 1.0)  # paired, correlated
        d = a - b
        se, df = d.std(ddof=1) / math.sqrt(d.size), d.size - 1
        # "a not worse than b by more than margin", lower is better: aligned = -(a - b); H1: mean(d) < margin
        p_ni, p_inf = R.noninferiority_pvalues(-d.mean(), se, df, margin)
        _, p_sm, _ = DescrStatsW(d).ttest_mean(value=margin, alternative="smaller")
        assert p_ni == pytest.approx(p_sm, rel=1e-9)
        assert p_inf == pytest.approx(1 - p_sm, rel=1e-9)
        p_eq, _ = R.equivalence_pvalues(d.mean(), se, df, margin)
        assert p_eq == pytest.approx(ttost_paired(a, b, -margin, margin)[0], rel=1e-9)


def test_holm_matches_statsmodels():
    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 12):
        p = rng.uniform(0, 0.2, m)
        np.testing.assert_allclose(holm_adjust(p), multipletests(p, method="holm")[1], rtol=1e-12)


def test_prediction_interval_power_by_hand():
    # se_p = se_r = 1, bias 2 sqrt(2): P(Z > 2.772 - 2.828) + P(Z < -5.6) = Phi(0.0566)
    assert R.prediction_interval_power(2 * math.sqrt(2), 1.0, 1.0) == pytest.approx(
        stats.norm.cdf(2 * math.sqrt(2) - 1.959964 * math.sqrt(2)) + stats.norm.cdf(-5.6), abs=1e-4)
    assert R.prediction_interval_power(0.0, 1.0, 1.0) == pytest.approx(2 * stats.norm.sf(1.959964 * math.sqrt(2)))


def _simulate(theta_p, se_p, se_r, bias, draws, rng):
    verdicts = []
    for theta_r in rng.normal(theta_p + bias, se_r, draws):
        test = R.RowTest("superiority", -theta_r, se_r, None, R.two_sided_pvalue(theta_r, se_r, None), -1,
                         paper_estimate=-theta_p, paper_se=se_p)
        verdicts.append(R.row_verdict(test)["verdict"])
    return np.array(verdicts)


def _exact_reproductions(df_p, df_r, se_r, draws, rng, effect=3.0):
    """Both studies estimate the same effect (paper se 1): each estimate and its *estimated* se, the se drawn
    as sigma sqrt(chi2_df / df) at the study's real df (QR's ± rests on 3 repeats: df 2; a difference, up to 4)."""
    theta_p, theta_r = rng.normal(effect, 1.0, draws), rng.normal(effect, se_r, draws)
    est_se_p = np.sqrt(rng.chisquare(df_p, draws) / df_p)
    est_se_r = se_r * np.sqrt(rng.chisquare(df_r, draws) / df_r)
    return theta_p, est_se_p, theta_r, est_se_r


# df of the paper's and our estimate: QR's 3 repeats (2), a difference of two such means (up to 4), and both
@pytest.mark.parametrize(("df_p", "df_r"), [(2, 2), (3, 3), (4, 4), (2, 4), (4, 2)])
@pytest.mark.parametrize("se_r", [0.5, 1.0, 2.0])
def test_prediction_interval_covers_exact_reproductions_at_few_df(df_p, df_r, se_r):
    draws = 20_000
    rng = np.random.default_rng(1000 * df_p + 100 * df_r + int(10 * se_r))
    theta_p, est_se_p, theta_r, est_se_r = _exact_reproductions(df_p, df_r, se_r, draws, rng)
    low, high = R.prediction_interval(theta_p, est_se_p, est_se_r, df_p=df_p, df_r=df_r)
    coverage = np.mean((low <= theta_r) & (theta_r <= high))
    # >= 95 % up to Monte Carlo error and the Welch-Satterthwaite approximation's slack (Welch's test is slightly
    # liberal, by < 1 point, where the estimate with fewer df has the larger se: 94.3 % at df 2 against 4)
    assert coverage >= 0.95 - 0.0075
    # the old rule, z = 1.96 whatever the df, leaves 8.5-14 % of exact reproductions outside: this test fails on it
    old_half = 1.959964 * np.hypot(est_se_p, est_se_r)
    assert np.mean(np.abs(theta_r - theta_p) <= old_half) < 0.925


@pytest.mark.parametrize(("df_p", "df_r"), [(2, 2), (4, 4), (2, 4)])
@pytest.mark.parametrize("se_r", [0.5, 1.0, 2.0])
def test_exact_reproductions_with_estimated_ses_are_rarely_contradicted(df_p, df_r, se_r):
    # the verdicts of exact reproductions (paper effect 3 of its se): the interval is two-sided, but only the
    # unfavourable side (and significance against the claim) contradicts, so contradicted stays below 2.5 %
    # plus Monte Carlo error; smaller_than_paper is the small-telescopes test's own error (at most its 5 % where
    # the paper's drawn se puts d33 near the true effect)
    draws = 3000
    rng = np.random.default_rng(7 * df_p + 11 * df_r + int(10 * se_r))
    verdicts = []
    for tp, sp, tr, sr in zip(*_exact_reproductions(df_p, df_r, se_r, draws, rng), strict=True):
        test = R.RowTest("superiority", -tr, sr, df_r, R.two_sided_pvalue(tr, sr, df_r), -1, paper_estimate=-tp,
                         paper_se=sp, paper_df=df_p)
        verdicts.append(R.row_verdict(test)["verdict"])
    verdicts = np.array(verdicts)
    tolerance = 3 * math.sqrt(0.025 * 0.975 / draws)
    assert np.mean(verdicts == R.CONTRADICTED) <= 0.025 + tolerance
    assert np.mean(verdicts == R.SMALLER_THAN_PAPER) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / draws)


@pytest.mark.parametrize("ratio", [2.0, 3.0, 5.0])       # the paper's effect in its own se: significant effects
@pytest.mark.parametrize("se_r", [0.5, 1.0, 2.0])        # our se against the paper's (se_p = 1)
def test_exact_reproductions_are_reproduced_or_consistent(ratio, se_r):
    # known standard errors (many runs on both sides): the normal limit of the rule
    verdicts = _simulate(ratio, 1.0, se_r, 0.0, 2000, np.random.default_rng(int(10 * ratio + 100 * se_r)))
    share = np.isin(verdicts, [R.REPRODUCED, R.CONSISTENT]).mean()
    assert share >= 0.95


def test_a_two_se_bias_is_contradicted_at_the_designed_power():
    # the paper: effect 3 with se 1; ours se 1, biased towards zero by 2 sqrt(se_p^2 + se_r^2) = 2.83 (true 0.17).
    # By hand, the verdict is a function of theta_r: contradicted below -1.96 (significant against) and between
    # d33 - 1.645 = -0.125 and the interval's lower end 3 - 2.772 = 0.228; smaller_than_paper in [-1.96, -0.125).
    theta_p, bias = 3.0, -2 * math.sqrt(2)
    mean = theta_p + bias
    d33_cut = R.d33(1.0) - stats.norm.ppf(0.95)
    pi_low = theta_p - 1.959964 * math.sqrt(2)
    designed = stats.norm.cdf(-1.959964 - mean) + stats.norm.cdf(pi_low - mean) - stats.norm.cdf(d33_cut - mean)
    assert designed == pytest.approx(0.156, abs=0.002)
    verdicts = _simulate(theta_p, 1.0, 1.0, bias, 8000, np.random.default_rng(7))
    observed = (verdicts == R.CONTRADICTED).mean()
    assert observed == pytest.approx(designed, abs=4 * math.sqrt(designed * (1 - designed) / 8000))
    # and the interval itself, judging our value against the paper's (match rows), has the stated power
    matches = [R.row_verdict(R.RowTest("match", x, 1.0, None, 1.0, paper_estimate=theta_p, paper_se=1.0))["verdict"]
               for x in np.random.default_rng(8).normal(theta_p + bias, 1.0, 8000)]
    power = R.prediction_interval_power(bias, 1.0, 1.0)
    tolerance = 4 * math.sqrt(power * (1 - power) / 8000)
    assert np.mean(np.array(matches) == R.CONTRADICTED) == pytest.approx(power, abs=tolerance)


def test_sign_tests_by_hand():
    # five equal positive differences: 2 / 2^5 two-sided, 1 / 2^5 for "x > 0", 1 for "x < 0"
    assert R.sign_test_pvalues([0.3] * 5) == pytest.approx((0.0625, 0.03125, 1.0))
    assert R.sign_test_pvalues([0.0, 0.0]) == (1.0, 1.0, 1.0)
    # zeros dropped: 2 of 3 positive; P(K >= 2) = 4 / 8, P(K <= 2) = 7 / 8
    assert R.sign_test_pvalues([1.0, -1.0, 2.0, 0.0]) == pytest.approx((1.0, 0.5, 0.875))


def test_a_result_better_than_the_papers_never_contradicts_a_margin_claim():
    # qr_nll_cost_de's shape: "QR does not raise the NLL by more than 0.04" (lower is better, direction -1); the
    # paper's QR - base is +0.02 ± 0.01, ours -0.5 ± 0.05: non-inferior (p ~ 0), far beyond the interval on the
    # favourable side -> reproduced (the old rule called it contradicted)
    p, p_against = R.noninferiority_pvalues(0.5, 0.05, 8, 0.04)
    test = R.RowTest("noninferiority", -0.5, 0.05, 8, p, -1, 0.04, p_against, 0.02, 0.01, 4)
    out = R.row_verdict(test)
    assert (out["side"], out["verdict"]) == ("above", R.REPRODUCED)
    # worse than the paper beyond the interval but still inside the margin: reproduced_smaller
    p, p_against = R.noninferiority_pvalues(-0.03, 0.001, 8, 0.04)
    worse = R.row_verdict(R.RowTest("noninferiority", 0.03, 0.001, 8, p, -1, 0.04, p_against, -0.2, 0.01, 4))
    assert (worse["side"], worse["verdict"]) == ("below", R.REPRODUCED_SMALLER)
    # not significant, outside on the unfavourable side: contradicted; on the favourable side: consistent
    p, p_against = R.noninferiority_pvalues(-0.035, 0.01, 8, 0.04)
    assert R.row_verdict(R.RowTest("noninferiority", 0.035, 0.01, 8, p, -1, 0.04, p_against, -0.3, 0.01,
                                   4))["verdict"] == R.CONTRADICTED
    # equivalence: closer to no difference than the paper's interval is the favourable side
    p, p_against = R.equivalence_pvalues(0.0, 0.01, 8, 0.1)
    closer = R.row_verdict(R.RowTest("equivalence", 0.0, 0.01, 8, p, -1, 0.1, p_against, 0.08, 0.005, 4))
    assert (closer["side"], closer["verdict"]) == ("above", R.REPRODUCED)


def test_no_small_telescopes_where_the_papers_effect_opposes_the_claim():
    # the claim: a < b; the paper's own row has a - b = +0.5 ± 0.3 (against the claim); ours -0.01 ± 0.05 is
    # not significant and would reject a d33 of 1.5 x 0.3: without the rule it would be smaller_than_paper
    test = R.RowTest("superiority", -0.01, 0.05, 9, R.two_sided_pvalue(-0.01, 0.05, 9), -1, paper_estimate=0.5,
                     paper_se=0.3, paper_df=4)
    out = R.row_verdict(test)
    assert out["d33"] is None and out["p_d33"] is None
    assert out["verdict"] == R.CONSISTENT  # favourable side of the paper's interval: never contradicted
    assert R.paper_supports(test) is False
    assert R.paper_supports(replace(test, paper_estimate=-0.5)) is True

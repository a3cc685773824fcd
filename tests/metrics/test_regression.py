"""Regression metrics against hand-computed cases, scipy, brute force and numerical integration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from uqcal import metrics as M
from uqcal.metrics import regression as R


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ----------------------------------------------------------------------------- MSE / RMSE
def test_mse_rmse_hand():
    # errors 0, 1, -2 -> squares 0, 1, 4 -> mean 5/3
    assert M.mse([1, 2, 3], [1, 1, 5]) == pytest.approx(5 / 3)
    assert M.rmse([1, 2, 3], [1, 1, 5]) == pytest.approx(math.sqrt(5 / 3))


def test_mse_scalar_mean_broadcasts():
    # y = [0, 2], mean 1 -> errors -1, 1 -> mse 1
    assert M.mse([0.0, 2.0], 1.0) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- density / PIT
def test_gaussian_logpdf_hand_and_scipy(rng):
    # N(0 | 0, 1): -0.5 * log(2 pi) = -0.9189385332046727
    assert M.gaussian_logpdf([0.0], [0.0], [1.0])[0] == pytest.approx(-0.9189385332046727)
    # N(3 | 1, 2^2): z = 1 -> -0.5 - log 2 - 0.5 log(2 pi)
    assert M.gaussian_logpdf([3.0], [1.0], [2.0])[0] == pytest.approx(-0.5 - math.log(2) - 0.9189385332046727)
    y, mu, sd = rng.normal(size=50), rng.normal(size=50), rng.uniform(0.1, 3, size=50)
    np.testing.assert_allclose(M.gaussian_logpdf(y, mu, sd), stats.norm.logpdf(y, mu, sd), rtol=1e-12)


def test_gaussian_nlpd_matches_scipy(rng):
    y, mu, sd = rng.normal(size=40), rng.normal(size=40), rng.uniform(0.2, 2, size=40)
    assert M.gaussian_nlpd(y, mu, sd) == pytest.approx(-np.mean(stats.norm.logpdf(y, mu, sd)), rel=1e-12)


def test_nlpd_from_logpdf():
    # -(-1 - 3) / 2 = 2
    assert M.nlpd_from_logpdf([-1.0, -3.0]) == pytest.approx(2.0)
    assert M.nlpd_from_logpdf([-1.0, -np.inf]) == np.inf  # zero density -> infinite NLPD
    with pytest.raises(ValueError, match="logpdf"):
        M.nlpd_from_logpdf([np.nan, 1.0])
    with pytest.raises(ValueError, match="logpdf"):
        M.nlpd_from_logpdf(np.zeros((2, 2)))


def test_gaussian_pit(rng):
    assert M.gaussian_pit([2.0], [2.0], [5.0])[0] == pytest.approx(0.5)
    y, mu, sd = rng.normal(size=30), rng.normal(size=30), rng.uniform(0.2, 2, size=30)
    np.testing.assert_allclose(M.gaussian_pit(y, mu, sd), stats.norm.cdf(y, mu, sd), rtol=1e-12)


# ----------------------------------------------------------------------------- Iwata & Kumagai ECE / TE
def test_ece_levels_constant():
    np.testing.assert_array_equal(M.ECE_LEVELS, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])


def test_ece_iwata_hand():
    # pit = .05 .15 .25 .35; p_hat(.1)=1/4, (.2)=2/4, (.3)=3/4, (.4..0.9)=1
    # |p - p_hat| = .15 .30 .45 .60 .50 .40 .30 .20 .10 -> sum 3.0 -> mean 3/9
    assert M.ece_iwata([0.05, 0.15, 0.25, 0.35]) == pytest.approx(1 / 3)


def test_ece_iwata_counts_equality_as_below():
    # p_hat(0.1) = mean([.1 <= .1, .5 <= .1]) = 0.5 ; p_hat(0.5) = 1
    # (|0.1 - 0.5| + |0.5 - 1|) / 2 = 0.45
    assert M.ece_iwata([0.1, 0.5], levels=[0.1, 0.5]) == pytest.approx(0.45)


def test_ece_iwata_brute_force_loop(rng):
    pit = rng.beta(2.0, 0.7, size=137)
    expected = 0.0
    for p in M.ECE_LEVELS:
        count = 0
        for c in pit:
            if c <= p:
                count += 1
        expected += abs(p - count / len(pit))
    assert M.ece_iwata(pit) == pytest.approx(expected / 9)


def test_ece_from_quantiles_matches_pit_form(rng):
    # Gaussian predictive: quantile h^{-1}(p|x) = mu + sd * Phi^{-1}(p); y <= q_p <=> PIT <= p.
    n = 300
    y, mu, sd = rng.normal(size=n), rng.normal(scale=0.5, size=n), rng.uniform(0.3, 2.0, size=n)
    quantiles = {p: mu + sd * stats.norm.ppf(p) for p in M.ECE_LEVELS}
    from_q = M.ece_from_quantiles(y, quantiles)
    from_pit = M.ece_iwata(M.gaussian_pit(y, mu, sd))
    assert from_q == pytest.approx(from_pit, abs=1e-12)
    assert from_q > 0.0


def test_ece_from_quantiles_hand():
    # y = 0, 1, 2, 3; q_0.5 = 1.5 everywhere -> p_hat = 2/4 -> |0.5 - 0.5| = 0
    # q_0.9 = 0.5 everywhere -> p_hat = 1/4 -> |0.9 - 0.25| = 0.65; mean (0 + 0.65) / 2 = 0.325
    y = np.array([0.0, 1.0, 2.0, 3.0])
    q = {0.5: np.full(4, 1.5), 0.9: np.full(4, 0.5)}
    assert M.ece_from_quantiles(y, q) == pytest.approx(0.325)


def test_ece_uniform_pit_goes_to_zero(rng):
    small = np.mean([M.ece_iwata(rng.uniform(size=100)) for _ in range(20)])
    large = M.ece_iwata(rng.uniform(size=200_000))
    assert large < 0.005
    assert large < small


def test_ece_floor_of_a_calibrated_predictive_on_30_query_points(rng):
    # The report's ECE caption: with N_Q = 30 a perfectly calibrated predictive (uniform PIT) still scores
    # E|p_hat - p| averaged over P, p_hat ~ Binomial(30, p) / 30; exact expectation 0.0606 (scipy binom).
    k = np.arange(31)
    exact = np.mean([(stats.binom.pmf(k, 30, p) * np.abs(k / 30 - p)).sum() for p in R.ECE_LEVELS])
    assert exact == pytest.approx(0.0606, abs=5e-4)
    simulated = np.mean([M.ece_iwata(rng.uniform(size=30)) for _ in range(20_000)])
    assert simulated == pytest.approx(exact, abs=1.5e-3)


def test_ece_floor_matches_exact_expectations():
    # One point: p_hat(p) = 1{u <= p} with u uniform, so E|p_hat - p| = p(1-p) + (1-p)p = 2p(1-p);
    # sum over P = .1..9 of p(1-p) = 1.65 -> mean over the 9 levels 2 * 1.65 / 9 = 0.36667 (by hand).
    floor1, se1 = M.ece_floor(1, n_sim=20_000)
    assert se1 < 0.002
    assert floor1 == pytest.approx(2 * 1.65 / 9, abs=4 * se1)
    # N_Q = 30 and the 360 / 900 pooled counts of the default run: exact binomial expectation (scipy).
    for n in (30, 360, 900):
        k = np.arange(n + 1)
        exact = np.mean([(stats.binom.pmf(k, n, p) * np.abs(k / n - p)).sum() for p in R.ECE_LEVELS])
        floor, se = M.ece_floor(n)
        assert 0 < se < 0.001
        assert floor == pytest.approx(exact, abs=4 * se)
    # Deterministic given the seed; a different seed moves it by a few standard errors at most.
    assert M.ece_floor(30) == M.ece_floor(30)
    assert M.ece_floor(30, seed=1)[0] != M.ece_floor(30)[0]
    with pytest.raises(ValueError, match="n_points"):
        M.ece_floor(0)


def test_ece_known_miscalibration_limit(rng):
    # pit = sqrt(U) has CDF p^2 -> ECE -> mean_p |p - p^2| = sum p(1-p) / 9
    # p(1-p): .09 .16 .21 .24 .25 .24 .21 .16 .09 -> 1.65 -> 1.65 / 9 = 0.18333
    pit = np.sqrt(rng.uniform(size=200_000))
    assert M.ece_iwata(pit) == pytest.approx(1.65 / 9, abs=0.004)


def test_total_error():
    # (MSE 2.0 + ECE 0.1) / 2 = 1.05
    assert M.total_error(2.0, 0.1) == pytest.approx(1.05)
    with pytest.raises(ValueError, match="ece_value"):
        M.total_error(1.0, float("nan"))


# ----------------------------------------------------------------------------- QR CE
def test_ce_qr_hand():
    # p = .1..1.0; p_hat - p = .15 .30 .45 .60 .50 .40 .30 .20 .10 0
    # squares: .0225 .09 .2025 .36 .25 .16 .09 .04 .01 0 -> 1.225 -> x100 = 122.5
    pit = [0.05, 0.15, 0.25, 0.35]
    assert M.ce_qr(pit) == pytest.approx(122.5)
    assert M.ce_qr(pit, reduction="mean") == pytest.approx(12.25)  # Eq. (8): divided by M = 10


def test_ce_qr_known_miscalibration_limit(rng):
    # p_hat = p^2 -> sum p^2 (1-p)^2 over p=.1..1: .0081 .0256 .0441 .0576 .0625 .0576 .0441 .0256 .0081 0
    # = 0.3333 -> x100 = 33.33
    pit = np.sqrt(rng.uniform(size=200_000))
    assert M.ce_qr(pit) == pytest.approx(33.33, abs=0.5)


def test_ce_qr_bad_reduction():
    with pytest.raises(ValueError, match="reduction"):
        M.ce_qr([0.5], reduction="median")


# ----------------------------------------------------------------------------- calibration score
def test_calibration_score_hand():
    # levels .25 .5 .75, pit .1 .2 .6 .9 -> p_hat .5 .5 .75
    # (.25-.5)^2 + 0 + 0 = 0.0625; weights 2,1,1 -> 0.125
    pit = [0.1, 0.2, 0.6, 0.9]
    assert M.calibration_score(pit, levels=[0.25, 0.5, 0.75]) == pytest.approx(0.0625)
    assert M.calibration_score(pit, levels=[0.25, 0.5, 0.75], weights=[2, 1, 1]) == pytest.approx(0.125)


def test_calibration_score_default_levels_brute(rng):
    pit = rng.uniform(size=77) ** 1.5
    levels = [0.05 * j for j in range(1, 20)]
    expected = sum((p - sum(c <= p for c in pit) / len(pit)) ** 2 for p in levels)
    assert M.calibration_score(pit) == pytest.approx(expected)


# ----------------------------------------------------------------------------- coverage
def test_interval_coverage_hand():
    # 0 in [-1, 1] yes; 1 in [1.5, 2] no; 2 in [2, 2] yes (closed); 3 in [0, 2] no -> 0.5
    assert M.interval_coverage([0, 1, 2, 3], [-1, 1.5, 2, 0], [1, 2, 2, 2]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="lower"):
        M.interval_coverage([0.0], [1.0], [0.0])


def test_gaussian_interval_coverage_exact_vs_rounded_z():
    # exact z(0.95) = 1.959964 < 1.96: the point at 1.96 sd is outside, inside with RIO's z = 1.96
    y = np.array([1.96, 0.0, 1.0])
    assert M.gaussian_interval_coverage(y, 0.0, 1.0, 0.95) == pytest.approx(2 / 3)
    assert M.gaussian_interval_coverage(y, 0.0, 1.0, 0.95, z=M.ROUNDED_Z[0.95]) == pytest.approx(1.0)
    # 68 %: exact z = 0.994458 -> y = 0.997 outside; RIO z = 1.0 -> inside
    assert M.gaussian_interval_coverage([0.997], 0.0, 1.0, 0.68) == 0.0
    assert M.gaussian_interval_coverage([0.997], 0.0, 1.0, 0.68, z=M.ROUNDED_Z[0.68]) == 1.0


def test_gaussian_interval_coverage_large_sample(rng):
    n = 100_000
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.normal(size=n)
    for level in (0.95, 0.9, 0.68):
        assert M.gaussian_interval_coverage(y, mu, sd, level) == pytest.approx(level, abs=0.005)


# ----------------------------------------------------------------------------- sharpness
def test_sharpness_hand():
    std = [1.0, 2.0, 3.0]
    assert M.sharpness(std) == pytest.approx(14 / 3)  # (1 + 4 + 9) / 3, Kuleshov et al. (2018)
    assert M.sharpness(std, statistic="rms_std") == pytest.approx(math.sqrt(14 / 3))
    assert M.sharpness(std, statistic="mean_std") == pytest.approx(2.0)
    with pytest.raises(ValueError, match="statistic"):
        M.sharpness(std, statistic="iqr")


# ----------------------------------------------------------------------------- CRPS
def _crps_by_integration(y: float, mu: float, sd: float) -> float:
    # CRPS = int (F(x) - 1{x >= y})^2 dx, split at y
    below, _ = integrate.quad(lambda x: stats.norm.cdf(x, mu, sd) ** 2, -np.inf, y)
    above, _ = integrate.quad(lambda x: stats.norm.sf(x, mu, sd) ** 2, y, np.inf)
    return below + above


def test_gaussian_crps_hand():
    # y = mean: sd * (2 phi(0) - 1/sqrt(pi)) = sd * (0.7978845608 - 0.5641895835) = 0.2336949773 sd
    assert M.gaussian_crps([1.0], [1.0], [2.0]) == pytest.approx(2 * 0.2336949773)


def test_gaussian_crps_matches_numerical_integration(rng):
    y, mu, sd = rng.normal(size=6) * 2, rng.normal(size=6), rng.uniform(0.3, 2.0, size=6)
    pointwise = M.gaussian_crps_pointwise(y, mu, sd)
    for i in range(6):
        assert pointwise[i] == pytest.approx(_crps_by_integration(y[i], mu[i], sd[i]), rel=1e-6)
    assert M.gaussian_crps(y, mu, sd) == pytest.approx(np.mean(pointwise))


def test_crps_from_samples_hand_and_brute(rng):
    # samples {0, 1}, y = 0: E|X-y| = 0.5, E|X-X'| = (0 + 1 + 1 + 0) / 4 = 0.5 -> 0.5 - 0.25 = 0.25
    assert M.crps_from_samples([0.0], [[0.0, 1.0]]) == pytest.approx(0.25)
    y = rng.normal(size=4)
    samples = rng.normal(size=(4, 25))
    brute = np.mean(
        [
            np.mean(np.abs(samples[i] - y[i]))
            - 0.5 * np.mean(np.abs(samples[i][:, None] - samples[i][None, :]))
            for i in range(4)
        ]
    )
    assert M.crps_from_samples(y, samples) == pytest.approx(brute, rel=1e-12)


def test_crps_from_samples_and_quantiles_approach_closed_form(rng):
    n = 20
    y, mu, sd = rng.normal(size=n), rng.normal(size=n), rng.uniform(0.5, 1.5, size=n)
    exact = M.gaussian_crps(y, mu, sd)
    samples = mu[:, None] + sd[:, None] * rng.normal(size=(n, 20_000))
    assert M.crps_from_samples(y, samples) == pytest.approx(exact, rel=0.02)
    levels = (np.arange(999) + 0.5) / 999  # midpoints of 999 equal cells
    quantiles = mu[:, None] + sd[:, None] * stats.norm.ppf(levels)[None, :]
    assert M.crps_from_quantiles(y, levels, quantiles) == pytest.approx(exact, rel=5e-3)


# ----------------------------------------------------------------------------- bundles
def test_regression_metrics_gaussian_consistent(rng):
    n = 200
    y, mu, sd = rng.normal(size=n), rng.normal(scale=0.3, size=n), rng.uniform(0.5, 1.5, size=n)
    out = M.regression_metrics_gaussian(y, mu, sd)
    assert set(out) == {
        "mse", "rmse", "nlpd", "ece", "te", "ce", "cal_score", "cov95", "cov90", "cov68", "sharpness", "crps",
    }
    pit = stats.norm.cdf(y, mu, sd)
    assert out["mse"] == pytest.approx(np.mean((y - mu) ** 2))
    assert out["nlpd"] == pytest.approx(-np.mean(stats.norm.logpdf(y, mu, sd)))
    assert out["ece"] == pytest.approx(M.ece_iwata(pit))
    assert out["te"] == pytest.approx((out["mse"] + out["ece"]) / 2)
    assert out["ce"] == pytest.approx(M.ce_qr(pit))
    assert out["cov95"] == pytest.approx(np.mean(np.abs(y - mu) <= stats.norm.ppf(0.975) * sd))
    assert out["sharpness"] == pytest.approx(np.mean(sd**2))
    rio = M.regression_metrics_gaussian(y, mu, sd, rounded_z=True)
    assert rio["cov90"] == pytest.approx(np.mean(np.abs(y - mu) <= 1.65 * sd))
    assert all(isinstance(v, float) for v in out.values())


def test_regression_metrics_general_matches_gaussian(rng):
    n = 150
    y, mu, sd = rng.normal(size=n), rng.normal(scale=0.3, size=n), rng.uniform(0.5, 1.5, size=n)
    quantiles = {
        col: mu + sd * stats.norm.ppf(float(col[1:]))
        for col in ("q0.025", "q0.05", "q0.16", "q0.84", "q0.95", "q0.975")
    }
    general = M.regression_metrics_general(
        y,
        mu,
        stats.norm.cdf(y, mu, sd),
        stats.norm.logpdf(y, mu, sd),
        std=sd,
        quantiles=quantiles,
        crps=M.gaussian_crps_pointwise(y, mu, sd),
    )
    gaussian = M.regression_metrics_gaussian(y, mu, sd)
    # q0.16/q0.84 is the z = 0.9945 interval, i.e. exactly the 68 % central interval
    for key, value in gaussian.items():
        assert general[key] == pytest.approx(value, rel=1e-9), key
    partial = M.regression_metrics_general(y, mu, stats.norm.cdf(y, mu, sd), stats.norm.logpdf(y, mu, sd))
    assert "cov95" not in partial and "sharpness" not in partial and "crps" not in partial


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: M.mse(np.zeros((2, 2)), np.zeros((2, 2))), "y"),
        (lambda: M.mse([1.0, 2.0], [1.0]), "mean"),
        (lambda: M.mse([], []), "y"),
        (lambda: M.mse([1.0, np.nan], [1.0, 1.0]), "y"),
        (lambda: M.gaussian_nlpd([1.0], [1.0], [0.0]), "std"),
        (lambda: M.gaussian_nlpd([1.0], [1.0], [-1.0]), "std"),
        (lambda: M.gaussian_pit([1.0, 2.0], [1.0, 2.0], [1.0]), "std"),
        (lambda: M.ece_iwata([0.2, 1.5]), "pit"),
        (lambda: M.ece_iwata([0.2], levels=[0.5, 0.3]), "levels"),
        (lambda: M.ece_iwata([0.2], levels=[1.5]), "levels"),
        (lambda: M.ece_from_quantiles([1.0], {}), "quantiles"),
        (lambda: M.ece_from_quantiles([1.0, 2.0], {0.5: [1.0]}), "quantiles"),
        (lambda: M.ece_from_quantiles([1.0], {1.5: [1.0]}), "quantiles"),
        (lambda: M.calibration_score([0.5], levels=[0.5], weights=[1.0, 2.0]), "weights"),
        (lambda: M.gaussian_interval_coverage([0.0], 0.0, 1.0, 1.2), "level"),
        (lambda: M.gaussian_interval_coverage([0.0], 0.0, 1.0, 0.9, z=-1.0), "z"),
        (lambda: M.crps_from_samples([0.0, 1.0], np.zeros((3, 4))), "samples"),
        (lambda: M.crps_from_quantiles([0.0], [0.5], np.zeros((1, 2))), "quantiles"),
        (lambda: M.regression_metrics_general([0.0], [0.0], [0.5, 0.5], [0.0]), "pit"),
    ],
)
def test_bad_inputs_raise_naming_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_internal_constants_match_papers():
    np.testing.assert_allclose(R.CE_QR_LEVELS, np.arange(1, 11) / 10)
    np.testing.assert_allclose(R.CAL_SCORE_LEVELS, np.arange(1, 20) * 0.05)
    assert R.ROUNDED_Z == {0.95: 1.96, 0.90: 1.65, 0.68: 1.0}


def test_mean_over_groups_hand():
    # group a: y 0, 2 vs mean 1, 1 -> mse 1 ; group b: y 5 vs 3 -> mse 4 ; unweighted mean 2.5
    # (pooled mse would be (1 + 1 + 4) / 3 = 2)
    y, mean, groups = [0.0, 5.0, 2.0], [1.0, 3.0, 1.0], ["a", "b", "a"]
    assert M.mean_over_groups(M.mse, groups, y, mean) == pytest.approx(2.5)
    # kwargs are passed through: ECE of each group's PIT at a single level 0.5
    # group a pit .2 .7 -> p_hat .5 -> 0 ; group b pit .3 -> p_hat 1 -> .5 ; mean .25
    pit = [0.2, 0.3, 0.7]
    assert M.mean_over_groups(M.ece_iwata, groups, pit, levels=[0.5]) == pytest.approx(0.25)
    with pytest.raises(ValueError, match=r"arrays\[1\]"):
        M.mean_over_groups(M.mse, groups, y, [1.0])

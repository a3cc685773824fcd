"""The fewshot recalibrations (temperature_scaling.py) against independent references and known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from uqcal.methods.fewshot.temperature_scaling import (
    AUTHORS_GRID,
    Recalibration,
    calibration_errors,
    fit_authors,
    fit_nll_temperature,
    sharpen,
    sharpened_confidence,
    tempered_mean_probs,
)
from uqcal.metrics.classification import classification_ece, classification_mce

torch.set_num_threads(1)


def mc_logits(n_points, n_samples, seed, spread=2.0, n_classes=5, dtype=torch.float64):
    """Samples f_s = mu + spread * eps of a GP-like predictive: (S, M, C)."""
    gen = torch.Generator().manual_seed(seed)
    mu = torch.randn(n_points, n_classes, generator=gen, dtype=dtype)
    return mu + spread * torch.randn(n_samples, n_points, n_classes, generator=gen, dtype=dtype)


def draw_labels(probs: torch.Tensor, seed: int) -> torch.Tensor:
    return torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(seed)).squeeze(1)


def test_authors_grid_is_calibrate_py_grid():
    # torch.cat((torch.arange(0.05, 0.35, 0.005), torch.arange(1, 2, 0.005)))
    reference = torch.cat((torch.arange(0.05, 0.35, 0.005), torch.arange(1, 2, 0.005))).numpy()
    assert AUTHORS_GRID.shape == reference.shape == (260,)
    np.testing.assert_allclose(AUTHORS_GRID, reference, atol=1e-6)  # float32 steps in torch's arange


def test_vectorised_ece_mce_match_the_metrics_module():
    """calibration_errors over many temperatures at once equals uqcal.metrics' ECE/MCE (15 bins) computed on
    the explicitly sharpened probabilities, one temperature at a time. float64 throughout: the same sums in
    another order, so equal to rounding (1e-12)."""
    samples = mc_logits(400, 30, seed=1)
    labels = draw_labels(tempered_mean_probs(samples, 1.0), seed=2)
    pbar = tempered_mean_probs(samples, 0.3)
    temps = torch.tensor([0.05, 0.2, 0.7, 1.0, 1.9], dtype=torch.float64)
    correct = pbar.argmax(1) == labels
    ece, mce = calibration_errors(sharpened_confidence(pbar, temps), correct)
    for k, t in enumerate(temps):
        probs = sharpen(pbar, float(t)).numpy()
        assert ece[k].item() == pytest.approx(classification_ece(probs, labels.numpy()), abs=1e-12)
        assert mce[k].item() == pytest.approx(classification_mce(probs, labels.numpy()), abs=1e-12)


def test_grid_search_finds_the_brute_force_minimum():
    """Independent reference: every (T_lik, T_ece) pair of a small grid scored with uqcal.metrics on
    explicitly recalibrated probabilities; the search returns a pair with the minimal ECE (MCE), the first
    one in calibrate.py's (T_lik, T_ece) order."""
    grid = np.array([0.05, 0.1, 0.3, 1.0, 1.5, 1.995])
    episodes = [mc_logits(75, 40, seed=s) for s in range(4)]
    truth = [sharpen(tempered_mean_probs(e, 0.5), 1.2) for e in episodes]
    labels = [draw_labels(p, seed=10 + i) for i, p in enumerate(truth)]
    found = fit_authors(episodes, labels, grid)
    y = torch.cat(labels).numpy()
    for name, metric in (("ece", classification_ece), ("mce", classification_mce)):
        scores = [
            (metric(torch.cat([sharpen(tempered_mean_probs(e, t_lik), t_ece) for e in episodes]).numpy(), y),
             t_lik, t_ece)
            for t_lik in grid for t_ece in grid
        ]
        best = min(scores, key=lambda s: s[0])  # min() keeps the first of equal scores
        assert found[name].val_error == pytest.approx(best[0], abs=1e-12)
        assert (found[name].t_lik, found[name].t_ece) == (best[1], best[2])


def test_two_temperatures_recover_a_known_calibration_one_cannot():
    """Hand-made MC logits whose calibrated predictive is known: labels are drawn from p ∝ p̄^{1/0.2}
    (T_lik = 1, T_ece = 0.2, both on the grid), i.e. the averaged softmax is strongly under-confident.
    ECE sees only bin averages of the top-class confidence, so several pairs calibrate equally well (the pair
    and the per-point probabilities are not identified); the check is the calibrated answer itself: on a
    second, independent draw of labels from the truth the recalibrated predictive is calibrated (ECE at the
    level of the sampling noise of 3,000 labels, ~0.015), as the true probabilities are. Tempering only the
    samples (T_ece = 1, the former `*_ts`) cannot get there: the MC average of softmax(f / T) tends to the vote
    fractions as T -> 0."""
    samples = mc_logits(3000, 20, seed=3, spread=2.5, dtype=torch.float32)  # float32, as the models' logits
    truth = sharpen(tempered_mean_probs(samples.double(), 1.0), 0.2)
    labels, fresh = draw_labels(truth, seed=4), draw_labels(truth, seed=5)
    found = fit_authors([samples], [labels])["ece"]
    recalibrated = sharpen(tempered_mean_probs(samples.double(), found.t_lik), found.t_ece)
    assert found.val_error <= classification_ece(truth.numpy(), labels.numpy()) + 1e-6  # it is the minimum
    held_out = classification_ece(recalibrated.numpy(), fresh.numpy())
    assert held_out < 0.035 and classification_ece(truth.numpy(), fresh.numpy()) < 0.035
    raw = classification_ece(tempered_mean_probs(samples.double(), 1.0).numpy(), fresh.numpy())
    only_samples = min(
        calibration_errors(pbar.max(1).values, pbar.argmax(1) == fresh)[0].item()
        for pbar in (tempered_mean_probs(samples.double(), float(t)) for t in AUTHORS_GRID)
    )
    assert raw > 0.15 and only_samples > 3 * held_out


def test_nll_temperature_recovers_a_known_temperature():
    samples = mc_logits(3000, 30, seed=5)
    t_true = 0.4
    labels = draw_labels(sharpen(tempered_mean_probs(samples, 1.0), t_true), seed=6)
    t, before, after = fit_nll_temperature([samples[:, :1500], samples[:, 1500:]], [labels[:1500], labels[1500:]])
    # the MLE of T from 3,000 labels: a few per cent of sampling error
    assert t == pytest.approx(t_true, rel=0.08)
    assert after < before


def test_recalibration_reports_log_temperatures_and_warns_on_a_bound():
    """A predictive so under-confident that even T = 0.01 on log p̄ is not enough: the NLL temperature sits
    on its lower bound and a warning says so; the stats carry log T and the bounds."""
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(1, 1000, 5, generator=gen) * 1e-4  # p̄ ~ uniform
    labels = logits[0].argmax(1)  # yet the argmax is always right
    recal = Recalibration.fit([logits], [labels])
    stats = recal.stats()
    assert stats["nllts_t"] == pytest.approx(0.01, rel=1e-3)
    assert stats["nllts_log_t"] == pytest.approx(math.log(stats["nllts_t"]))
    assert stats["ts_grid_bounds"] == [0.05, 1.995] and stats["nllts_bounds"] == [0.01, 100.0]
    assert any("NLL temperature" in w for w in recal.warnings())
    assert any("grid bound" in w for w in recal.warnings())
    assert stats["recalibration_on_bound"] == len(recal.warnings())
    # a calibrated predictive needs no temperature at a bound
    samples = mc_logits(1500, 10, seed=8, dtype=torch.float32)
    fine = Recalibration.fit([samples], [draw_labels(tempered_mean_probs(samples.double(), 1.0), seed=9)])
    assert not any("NLL" in w for w in fine.warnings()) and fine.nll_t == pytest.approx(1.0, rel=0.2)

"""The quantile regulariser: spacing-entropy estimator, sorting, guards (independent references)."""

import math

import numpy as np
import pytest
import torch

from uqcal.methods.qr.entropy import (
    QuantileRegularizer,
    gaussian_nll,
    gaussian_pit,
    neural_sort,
    spacing_entropy,
    spacing_k,
)
from uqcal.methods.qr.metrics import ce_percent

torch.set_num_threads(1)


def numpy_spacing_entropy(c: np.ndarray, k: int) -> float:
    """Learned-Miller (2003) Eq. 8 written out as a loop, as a reference."""
    c = np.sort(c)
    n = c.size
    terms = [math.log((n + 1) / k * (c[i + k] - c[i])) for i in range(n - k)]
    return sum(terms) / (n - k)


def test_matches_direct_numpy_implementation():
    rng = np.random.default_rng(0)
    c = rng.beta(2.0, 5.0, size=300)
    for k in (1, 7, int(round(math.sqrt(300)))):
        ours = spacing_entropy(torch.tensor(c, dtype=torch.float64), k=k).item()
        assert ours == pytest.approx(numpy_spacing_entropy(c, k), rel=1e-10, abs=1e-12)


def test_uniform_entropy_tends_to_zero():
    # KL(U || U) = 0 = -H(U); the sqrt(n)-spacing estimator is consistent, with a negative bias that shrinks.
    rng = np.random.default_rng(1)
    estimates = {}
    for n in (50, 500, 20000):
        estimates[n] = np.mean([spacing_entropy(torch.tensor(rng.uniform(size=n))).item() for _ in range(5)])
    assert estimates[50] < estimates[500] < estimates[20000] <= 0.01
    assert abs(estimates[20000]) < 0.02
    assert abs(estimates[50]) > 0.05


def test_concentrated_samples_are_strongly_negative():
    rng = np.random.default_rng(2)
    concentrated = torch.tensor(rng.uniform(0.45, 0.55, size=1000))  # true H = log(0.1) = -2.30
    estimate = spacing_entropy(concentrated).item()
    assert estimate < -2.0
    assert estimate == pytest.approx(math.log(0.1), abs=0.15)


def test_gradients_finite_and_nonzero_under_ties():
    pit = torch.tensor([0.2, 0.2, 0.2, 0.5, 0.5, 1.0, 1.0, 1.0, 0.7, 0.1], dtype=torch.float64,
                       requires_grad=True)
    entropy = spacing_entropy(pit, k=1)
    assert torch.isfinite(entropy)
    entropy.backward()
    assert torch.all(torch.isfinite(pit.grad))
    # The floor must not hide gradients: tied values still get a (large) push apart.
    assert pit.grad[:3].abs().max() > 0
    assert pit.grad[5:8].abs().max() > 0


def test_batch_smaller_than_k_plus_one_shrinks_k():
    assert spacing_k(3, k=5) == 2
    assert spacing_k(100) == 10 and spacing_k(100, k_multiplier=3.0) == 30
    pit = torch.tensor([0.1, 0.5, 0.9], requires_grad=True)
    value = spacing_entropy(pit, k=5)
    assert value.item() == pytest.approx(numpy_spacing_entropy(np.array([0.1, 0.5, 0.9]), 2), rel=1e-6)
    value.backward()
    assert torch.all(torch.isfinite(pit.grad))
    with pytest.raises(ValueError, match="at least 2"):
        spacing_entropy(torch.tensor([0.3]))
    assert QuantileRegularizer(1.0).penalty(torch.tensor([0.3])).item() == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_neuralsort_on_random_pits_is_a_sort_blurred_at_the_scale_of_tau(seed):
    """What NeuralSort (Grover et al. 2019, the authors' tau = 1e-3) does to 512 random PITs, vs torch.sort.

    Output i is a softmax-weighted mix of the values around the i-th order statistic; a neighbour at distance
    d has a logit gap >= d / tau (the NeuralSort objective has slope magnitude >= 1 in the value), so it shifts
    the output by at most d exp(-d / tau) <= tau / e. With the two neighbours on opposite sides and farther
    ones damped by the growing slope, every output lies within tau of the exact order statistic: the tolerance.
    Mean spacings at n = 512 (~2e-3) are only about 2 tau, so the blur is not negligible: the entropy estimate
    moves little (the log-spacings average it out: |dH| < 1e-3) but its gradient with respect to the PITs moves
    by 10-25 % (relative L2 norm; measured 15-16 %), while still pointing the same way (cosine > 0.95).
    float64 throughout; at tau = 1e-6 the deviation shrinks in proportion (<= tau again)."""
    generator = torch.Generator().manual_seed(seed)
    pit = torch.rand(512, generator=generator, dtype=torch.float64)
    exact = torch.sort(pit).values
    for tau in (1e-3, 1e-6):
        deviation = (neural_sort(pit, tau=tau) - exact).abs().max().item()
        assert deviation <= tau
    assert (neural_sort(pit, tau=1e-3) - exact).abs().max().item() > 1e-5  # a blur, not an exact sort
    grads, entropies = [], []
    for sort in ("hard", "neuralsort"):
        values = pit.clone().requires_grad_(True)
        entropy = spacing_entropy(values, sort=sort, tau=1e-3)
        (grad,) = torch.autograd.grad(entropy, values)
        grads.append(grad)
        entropies.append(entropy.item())
    assert entropies[1] == pytest.approx(entropies[0], abs=1e-3)
    hard, relaxed = grads
    relative = ((relaxed - hard).norm() / hard.norm()).item()
    cosine = (hard @ relaxed / (hard.norm() * relaxed.norm())).item()
    assert 0.10 < relative < 0.25 and cosine > 0.95


def test_neuralsort_has_finite_gradients_and_sorts_well_separated_values_exactly():
    """Values 0.0155 apart (>> tau = 1e-3): the neighbour weights are exp(-15.5) ~ 2e-7, so the relaxed sort
    equals the hard sort to within 0.0155 * 2 * 2e-7 < 1e-8."""
    rng = np.random.default_rng(3)
    values = torch.tensor(rng.permutation(np.linspace(0.01, 0.99, 64)), requires_grad=True)
    relaxed = neural_sort(values, tau=1e-3)
    assert torch.allclose(relaxed, torch.sort(values).values, atol=1e-8)
    soft = spacing_entropy(values, sort="neuralsort", tau=1e-3)
    assert soft.item() == pytest.approx(spacing_entropy(values, sort="hard").item(), abs=1e-6)
    soft.backward()
    assert torch.all(torch.isfinite(values.grad)) and values.grad.abs().sum() > 0


def test_regulariser_pushes_overconfident_model_towards_calibration():
    # y ~ N(0, 1) forecast with sigma = 0.3: PITs pile up at 0 and 1; -H decreases when sigma grows.
    rng = np.random.default_rng(4)
    y = torch.tensor(rng.normal(size=512))
    log_sigma = torch.tensor(math.log(0.3), dtype=torch.float64, requires_grad=True)
    regulariser = QuantileRegularizer(lam=1.0)
    penalty = regulariser.penalty(gaussian_pit(y, torch.zeros_like(y), log_sigma.exp().expand_as(y)))
    penalty.backward()
    assert log_sigma.grad < 0
    # lam = 0 is the plain Gaussian NLL, which matches torch's GaussianNLLLoss (full=True).
    mean, std = torch.zeros_like(y), torch.full_like(y, 0.3)
    reference = torch.nn.GaussianNLLLoss(full=True)(mean, y, std**2)
    assert QuantileRegularizer(0.0).loss(y, mean, std).item() == pytest.approx(reference.item(), rel=1e-9)
    assert gaussian_nll(y, mean, std).item() == pytest.approx(reference.item(), rel=1e-9)


def test_invalid_arguments_name_the_problem():
    with pytest.raises(ValueError, match="sort"):
        spacing_entropy(torch.rand(10), sort="bubble")
    with pytest.raises(ValueError, match="lam"):
        QuantileRegularizer(-1.0)
    with pytest.raises(ValueError, match="1-d"):
        spacing_entropy(torch.rand(3, 3))


def test_ce_hand_computed():
    # Levels 0.1..1.0: PITs at the bin centres hit every level exactly -> 0.
    assert ce_percent(np.arange(0.05, 1.0, 0.1)) == pytest.approx(0.0, abs=1e-12)
    # All mass at 0.05: frequency 1 at every level -> 100 * sum (1 - p)^2 = 100 * 2.85.
    assert ce_percent(np.full(7, 0.05)) == pytest.approx(285.0)
    # Two points 0.25 and 0.75: frequencies 0,0,.5,.5,.5,.5,.5,1,1,1.
    freq = np.array([0, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 1, 1, 1])
    levels = np.arange(1, 11) / 10
    assert ce_percent(np.array([0.25, 0.75])) == pytest.approx(100 * np.sum((freq - levels) ** 2))

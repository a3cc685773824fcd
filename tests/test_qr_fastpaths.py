"""The qr family's CPU shortcuts give the same numbers, bit for bit, as the code they replace.

Reference: ``train_member(..., reference=True)`` (torch.optim.Adam, the PIT always computed, FGSM's two
separate backward passes). The shared optimiser itself is checked against torch.optim.Adam in tests/test_optim.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uqcal.calibration_entropy import QuantileRegularizer
from uqcal.methods.qr.gaussian_nets import HeteroscedasticMLP, train_member

torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("adversarial", "lam", "dropout", "sort"),
    [
        ("fgsm", 0.0, 0.0, "hard"),  # de: one clean backward
        ("fgsm", 5.0, 0.0, "hard"),  # de_qr
        ("none", 0.0, 0.5, "hard"),  # dvi
        ("none", 1.0, 0.5, "neuralsort"),  # dvi_qr with the relaxed sort
        ("fgsm_authors", 0.0, 0.0, "hard"),
        ("fgsm", 0.0, 0.5, "hard"),  # FGSM through dropout: the same random masks in the same order
    ],
)
def test_train_member_shortcuts_are_bit_identical(adversarial, lam, dropout, sort):
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(150, 4)), dtype=torch.float32)
    y = torch.as_tensor(np.sin(X[:, 0].numpy()) + 0.3 * rng.normal(size=150), dtype=torch.float32)
    eps = 0.01 * (X.max(0).values - X.min(0).values)
    params = {"lr": 1e-2, "batch_size": 64, "epochs": 6, "adversarial": adversarial}  # last batch: 22 rows
    runs = []
    for reference in (False, True):
        torch.manual_seed(3)  # initial weights and dropout masks
        net = HeteroscedasticMLP(4, hidden=32, depth=2, dropout=dropout)
        last = train_member(net, X, y, params, QuantileRegularizer(lam, sort=sort), torch.Generator().manual_seed(4),
                            eps, reference=reference)  # fmt: skip
        runs.append((torch.cat([p.detach().reshape(-1) for p in net.parameters()]), last, torch.rand(3)))
    (fast, fast_last, fast_rng), (ref, ref_last, ref_rng) = runs
    assert torch.equal(fast, ref)
    assert fast_last == ref_last
    assert torch.equal(fast_rng, ref_rng)  # the global random stream was used identically

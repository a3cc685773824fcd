"""Output heads of the neural baselines: SQR (pinball), NG (Gaussian likelihood), BD (MC dropout).

A head turns a network ``forward(x) -> raw`` into a training loss and into a predictive's parameters. The same
head serves the single-task (sqr, ng, bd), MAML (msqr, mng, mbd) and pooled (asqr, ang, abd) methods.
``loss`` and ``raw_prediction`` work on one task (they run under torch.func.vmap); ``summarise`` is
batched over tasks, (B, Q, K) -> the standardised outputs ``predictive.from_standardised`` reads: ``mean`` and
``std`` (B, Q), or SQR's ``quantiles`` (B, Q, K) at ``levels`` (K,).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

PINBALL_LEVELS = tuple(round(0.1 * i, 1) for i in range(1, 10))  # Sec. 5.2: p in {0.1, ..., 0.9}


class GaussianHead:
    """NG: mean and std = softplus(raw) + 1e-3, trained by the Gaussian likelihood."""

    name = "ng"
    dropout = 0.0

    def input_dim(self, n_features: int) -> int:
        return n_features

    output_dim = 2

    def _mean_std(self, raw):
        return raw[..., 0], F.softplus(raw[..., 1]) + 1e-3

    def loss(self, forward, x, y):
        mean, std = self._mean_std(forward(x))
        return (torch.log(std) + 0.5 * ((y - mean) / std) ** 2).mean() + 0.5 * math.log(2 * math.pi)

    def raw_prediction(self, forward, x):
        mean, std = self._mean_std(forward(x))
        return torch.stack([mean, std], -1)

    def summarise(self, raw):
        return {"mean": raw[..., 0], "std": raw[..., 1]}


class DropoutHead:
    """BD: MSE-trained net with dropout 0.3; predictive mean/std over 30 dropout samples (Sec. 5.2)."""

    name = "bd"
    output_dim = 1

    def __init__(self, dropout: float = 0.3, samples: int = 30):
        self.dropout, self.samples = dropout, samples

    def input_dim(self, n_features: int) -> int:
        return n_features

    def loss(self, forward, x, y):
        return ((forward(x)[..., 0] - y) ** 2).mean()

    def raw_prediction(self, forward, x):
        return torch.stack([forward(x)[..., 0] for _ in range(self.samples)], -1)

    def summarise(self, raw):
        return {"mean": raw.mean(-1), "std": raw.std(-1).clamp_min(1e-6)}


class QuantileHead:
    """SQR (Tagasovska & Lopez-Paz): the net takes (x, p) and outputs the p-quantile; pinball loss over
    p in {0.1..0.9}. Prediction evaluates a grid of levels and sorts them (monotone rearrangement); the CDF
    is linear between them with exponential tails beyond the grid's ends (GridQuantilePredictive)."""

    name = "sqr"
    dropout = 0.0
    output_dim = 1

    def __init__(self, grid_size: int = 199):
        # Not a module buffer: kept on the CPU and moved to the input's device and dtype where used.
        self.grid = torch.arange(1, grid_size + 1, dtype=torch.float64, device="cpu") / (grid_size + 1)

    def input_dim(self, n_features: int) -> int:
        return n_features + 1

    def _quantiles(self, forward, x, levels):
        n, k = x.shape[0], levels.shape[0]
        inputs = torch.cat(
            [x.unsqueeze(1).expand(n, k, x.shape[-1]), levels.view(1, k, 1).expand(n, k, 1)], -1
        )
        return forward(inputs.reshape(n * k, -1))[..., 0].reshape(n, k)

    def loss(self, forward, x, y):
        levels = torch.tensor(PINBALL_LEVELS, dtype=x.dtype, device=x.device)
        error = y.unsqueeze(-1) - self._quantiles(forward, x, levels)
        return torch.maximum(levels * error, (levels - 1) * error).mean()

    def raw_prediction(self, forward, x):
        return self._quantiles(forward, x, self.grid.to(dtype=x.dtype, device=x.device))

    def summarise(self, raw):
        """The grid's quantiles, sorted (rearrangement: a monotone quantile function) and made strictly
        increasing; the CDF between and beyond them is predictive.GridQuantilePredictive's."""
        q = raw.sort(-1).values
        q = q + 1e-8 * torch.arange(q.shape[-1], dtype=q.dtype, device=q.device)
        return {"quantiles": q, "levels": self.grid}


HEADS = ("sqr", "ng", "bd")


def make_head(kind: str, dropout: float = 0.3, samples: int = 30):
    if kind == "ng":
        return GaussianHead()
    if kind == "bd":
        return DropoutHead(dropout, samples)
    if kind == "sqr":
        return QuantileHead()
    raise ValueError(f"head must be one of {list(HEADS)}, got {kind!r}")

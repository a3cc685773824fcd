"""Output heads of the neural baselines: SQR (pinball), NG (Gaussian likelihood), BD (MC dropout).

A head turns a network ``forward(x) -> raw`` into a training loss and into prediction columns. The same
head serves the single-task (sqr, ng, bd), MAML (msqr, mng, mbd) and pooled (asqr, ang, abd) methods.
``loss`` and ``raw_prediction`` work on one task (they run under torch.func.vmap); ``summarise`` is
batched over tasks, (B, Q, K) -> columns (B, Q).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from uqcal.methods.metareg.episodes import QUANTILE_LEVELS

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

    def summarise(self, raw, y):
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

    def summarise(self, raw, y):
        return {"mean": raw.mean(-1), "std": raw.std(-1).clamp_min(1e-6)}


class QuantileHead:
    """SQR (Tagasovska & Lopez-Paz): the net takes (x, p) and outputs the p-quantile; pinball loss over
    p in {0.1..0.9}. Prediction evaluates a grid of levels, sorts them (monotone rearrangement) and reads
    the CDF at y by linear interpolation, with exponential tails beyond the grid's ends."""

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

    def summarise(self, raw, y):
        grid = self.grid.to(dtype=raw.dtype, device=raw.device)
        q = raw.sort(-1).values  # rearrangement: a monotone quantile function
        q = q + 1e-8 * torch.arange(q.shape[-1], dtype=q.dtype, device=q.device)  # strictly increasing
        columns = {"mean": _interp(torch.full_like(y, 0.5), grid, q)}
        for level in QUANTILE_LEVELS:
            columns[f"q{level}"] = _interp(torch.full_like(y, level), grid, q)
        # CDF at y: piecewise linear between grid quantiles, exponential tails outside.
        p_lo, p_hi = grid[0], grid[-1]
        middle = q[..., q.shape[-1] // 2]
        left_scale = ((middle - q[..., 0]) / math.log(0.5 / float(p_lo))).clamp_min(1e-3)
        right_scale = ((q[..., -1] - middle) / math.log(0.5 / (1 - float(p_hi)))).clamp_min(1e-3)
        idx = torch.searchsorted(q.contiguous(), y.unsqueeze(-1).contiguous()).squeeze(-1)
        inner = idx.clamp(1, q.shape[-1] - 1)
        q0 = q.gather(-1, (inner - 1).unsqueeze(-1)).squeeze(-1)
        q1 = q.gather(-1, inner.unsqueeze(-1)).squeeze(-1)
        p0, p1 = grid[inner - 1], grid[inner]
        slope = (p1 - p0) / (q1 - q0)
        pit = p0 + slope * (y - q0)
        logpdf = torch.log(slope)
        below, above = idx == 0, idx == q.shape[-1]
        # log of the tail CDFs, written in log space so far tails stay finite
        log_tail_lo = math.log(float(p_lo)) + (y - q[..., 0]) / left_scale
        log_tail_hi = math.log(1 - float(p_hi)) - (y - q[..., -1]) / right_scale
        pit = torch.where(below, log_tail_lo.exp(), torch.where(above, 1 - log_tail_hi.exp(), pit))
        logpdf = torch.where(
            below,
            log_tail_lo - torch.log(left_scale),
            torch.where(above, log_tail_hi - torch.log(right_scale), logpdf),
        )
        columns["pit"], columns["logpdf"] = pit.clamp(0, 1), logpdf
        columns["crps"] = 2.0 * (((y.unsqueeze(-1) <= q).to(q.dtype) - grid) * (q - y.unsqueeze(-1))).mean(-1)
        columns["std"] = q.std(-1, unbiased=False)
        return columns


def _interp(level, grid, q):
    """Quantile at ``level`` (B, Q) by linear interpolation of the grid quantiles q (B, Q, K)."""
    idx = (
        torch.searchsorted(grid, level.reshape(-1).contiguous())
        .reshape(level.shape)
        .clamp(1, grid.shape[0] - 1)
    )
    g0, g1 = grid[idx - 1], grid[idx]
    q0 = q.gather(-1, (idx - 1).unsqueeze(-1)).squeeze(-1)
    q1 = q.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
    return q0 + (q1 - q0) * (level - g0) / (g1 - g0)


def make_head(kind: str, dropout: float = 0.3, samples: int = 30):
    if kind == "ng":
        return GaussianHead()
    if kind == "bd":
        return DropoutHead(dropout, samples)
    if kind == "sqr":
        return QuantileHead()
    raise ValueError(f"head must be sqr, ng or bd, got {kind!r}")

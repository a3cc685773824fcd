"""Small network builders shared by every method family."""

from __future__ import annotations

from torch import nn


def mlp(
    in_dim: int,
    out_dim: int,
    hidden: int = 64,
    depth: int = 2,
    dropout: float = 0.0,
    activation: type[nn.Module] = nn.ReLU,
) -> nn.Sequential:
    """``depth`` hidden layers of width ``hidden`` (ReLU by default), optional dropout after each."""
    if depth < 0 or hidden <= 0 or in_dim <= 0 or out_dim <= 0:
        raise ValueError(f"invalid MLP shape: in={in_dim} out={out_dim} hidden={hidden} depth={depth}")
    layers: list[nn.Module] = []
    width = in_dim
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), activation()]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        width = hidden
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)

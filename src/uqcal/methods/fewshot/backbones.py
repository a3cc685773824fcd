"""Conv4 feature extractors (Vinyals et al. 2016) as in DKT / MD-BFSC: Conv4S 28x28, Conv4 84x84."""

from __future__ import annotations

import torch
from torch import nn

BACKBONES = ("auto", "conv4s", "conv4")


def conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


class Conv4(nn.Module):
    """Four conv-BN-ReLU-maxpool blocks of `width` channels, flattened.

    conv4s (28x28 grayscale, Omniglot/EMNIST): 28 -> 14 -> 7 -> 3 -> 1, i.e. `width` features.
    conv4 (84x84, CUB / mini-ImageNet): 84 -> 42 -> 21 -> 10 -> 5, i.e. 25 * `width` features.
    """

    def __init__(self, in_channels: int = 1, width: int = 64):
        super().__init__()
        blocks = [conv_block(in_channels, width)] + [conv_block(width, width) for _ in range(3)]
        # channels-last memory format: the same computation, ~1.7x faster forward + backward on the CPU
        # (oneDNN convolutions and aten's vectorised max-pool; benchmarks/fewshot_speed.py)
        self.body = nn.Sequential(*blocks).to(memory_format=torch.channels_last)

    def forward(self, images):
        if images.dim() == 3:  # (n, H, W) grayscale
            images = images.unsqueeze(1)
        return self.body(images.contiguous(memory_format=torch.channels_last)).flatten(1)


def build_backbone(name: str, image_size: int, width: int = 64, in_channels: int = 1) -> nn.Module:
    """`auto` picks Conv4S for images <= 32 px and Conv4 otherwise (the paper's pairing)."""
    if name not in BACKBONES:
        raise ValueError(f"backbone must be one of {BACKBONES}, got {name!r}")
    if name == "auto":
        name = "conv4s" if image_size <= 32 else "conv4"
    if name == "conv4s" and image_size > 32:
        raise ValueError(f"conv4s expects 28x28 inputs, got {image_size}x{image_size}")
    return Conv4(in_channels=in_channels, width=width)

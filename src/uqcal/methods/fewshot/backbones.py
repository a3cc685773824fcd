"""Conv4 feature extractors (Vinyals et al. 2016) as in DKT / MD-BFSC: Conv4S 28x28, Conv4 84x84."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

BACKBONES = ("auto", "conv4s", "conv4")


def conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


# ------------------------------------------------------------------------------ 2x2 max pooling
# Bit-identical to nn.MaxPool2d(2) (values, argmax indices and gradients), only cheaper on CPU, where
# aten's NCHW max-pool kernel is the slowest op of Conv4 (about a third of a forward + backward):
# - with autograd, the forward runs aten's channels-last kernel (vectorised over channels; same window scan,
#   same first-maximum rule, so the same indices) and the backward is aten's own NCHW backward on those
#   indices, exactly what autograd would call for nn.MaxPool2d;
# - without autograd, no indices are needed and the max of the four strided views is the same value.
_POOL = ([2, 2], [2, 2], [0, 0], [1, 1], False)  # kernel, stride, padding, dilation, ceil_mode


class _MaxPool2x2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out, indices = torch.ops.aten.max_pool2d_with_indices(
            x.contiguous(memory_format=torch.channels_last), *_POOL
        )
        ctx.save_for_backward(x, indices.contiguous())
        return out.contiguous()

    @staticmethod
    def backward(ctx, grad):
        x, indices = ctx.saved_tensors
        return torch.ops.aten.max_pool2d_with_indices_backward(grad.contiguous(), x, *_POOL, indices)


def max_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """F.max_pool2d(x, 2) for a (N, C, H, W) tensor (floor mode: an odd last row/column is dropped)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _MaxPool2x2.apply(x)
    h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
    top = torch.maximum(x[..., 0:h:2, 0:w:2], x[..., 0:h:2, 1:w:2])
    return torch.maximum(top, torch.maximum(x[..., 1:h:2, 0:w:2], x[..., 1:h:2, 1:w:2]))


class Conv4(nn.Module):
    """Four conv-BN-ReLU-maxpool blocks of `width` channels, flattened.

    conv4s (28x28 grayscale, Omniglot/EMNIST): 28 -> 14 -> 7 -> 3 -> 1, i.e. `width` features.
    conv4 (84x84, CUB / mini-ImageNet): 84 -> 42 -> 21 -> 10 -> 5, i.e. 25 * `width` features.
    """

    def __init__(self, in_channels: int = 1, width: int = 64):
        super().__init__()
        blocks = [conv_block(in_channels, width)] + [conv_block(width, width) for _ in range(3)]
        self.body = nn.Sequential(*blocks)

    def forward(self, images):
        if images.dim() == 3:  # (n, H, W) grayscale
            images = images.unsqueeze(1)
        h = images
        for conv, norm, _relu, _pool in self.body:
            # relu(maxpool(x)) == maxpool(relu(x)) exactly (relu is monotone; the zeroed gradients of
            # non-positive maxima are zero either way), on a tensor four times smaller
            h = F.relu(max_pool_2x2(norm(conv(h))), inplace=True)
        return h.flatten(1)


def build_backbone(name: str, image_size: int, width: int = 64, in_channels: int = 1) -> nn.Module:
    """`auto` picks Conv4S for images <= 32 px and Conv4 otherwise (the paper's pairing)."""
    if name not in BACKBONES:
        raise ValueError(f"backbone must be one of {BACKBONES}, got {name!r}")
    if name == "auto":
        name = "conv4s" if image_size <= 32 else "conv4"
    if name == "conv4s" and image_size > 32:
        raise ValueError(f"conv4s expects 28x28 inputs, got {image_size}x{image_size}")
    return Conv4(in_channels=in_channels, width=width)

"""The one device helper: every method moves tensors through ``resolve_device``."""

from __future__ import annotations

import torch

VALID_DEVICES = ("auto", "cpu", "cuda")


def resolve_device(spec: str = "auto") -> torch.device:
    if spec not in VALID_DEVICES and not spec.startswith("cuda:"):
        raise ValueError(f"device must be one of {VALID_DEVICES} (or cuda:N), got {spec!r}")
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {spec!r} requested but CUDA is not available")
    return torch.device(spec)


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return platform.processor() or platform.machine()

"""The one device helper: every method moves tensors through ``resolve_device``."""

from __future__ import annotations

import os

import torch

VALID_DEVICES = ("auto", "cpu", "cuda")


def resolve_device(spec: str = "auto") -> torch.device:
    if spec not in VALID_DEVICES and not spec.startswith("cuda:"):
        raise ValueError(f"device must be one of {VALID_DEVICES} (or cuda:N), got {spec!r}")
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {spec!r} requested but CUDA is not available")
    device = torch.device(spec)
    if device.type == "cuda":
        deterministic_cuda()
    return device


def deterministic_cuda() -> None:
    """Every run is deterministic given its seed on CUDA too: cuDNN's autotuner and its non-deterministic
    convolution backward pick different kernels (and summation orders) from run to run, so they are switched
    off; cuBLAS needs a fixed workspace for reproducible matmuls (set before its first call). Ops without a
    deterministic CUDA kernel warn instead of failing (``warn_only``)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.set_deterministic_debug_mode("warn")  # use_deterministic_algorithms(True, warn_only=True)


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return platform.processor() or platform.machine()

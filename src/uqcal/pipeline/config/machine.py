"""What a config asks of the machine it is validated on: a CUDA ``device`` needs CUDA here.

Checked by ``uqcal validate-config`` (which ``make`` runs first) and by the Snakefile when its jobs run on this
machine (a local executor); a cluster run checks it in each job, on the node that has the GPU.
"""

from __future__ import annotations


def device_problem(device: str) -> str | None:
    """Why ``device`` cannot run on this machine; None when it can (``auto`` and ``cpu`` always can)."""
    if not str(device).startswith("cuda"):
        return None
    import torch  # only for a CUDA device: validation does not pay torch's import otherwise

    if not torch.cuda.is_available():
        return (f"device: {device!r}, but this machine has no CUDA device (torch.cuda.is_available() is False); "
                "use `device: auto` (CUDA when present, else the CPU) or `device: cpu`, or run it where the GPU is")
    index = int(device.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        return (f"device: {device!r}, but this machine has {torch.cuda.device_count()} CUDA device(s) "
                f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    return None

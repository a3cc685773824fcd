"""PSD-safe linear algebra with counted jitter escalation (never silent)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class JitterCounter:
    """Counts every jitter escalation so runs can report them as a metric.

    Parameters
    ----------
    escalations : int, optional
        Escalations counted so far.
    max_jitter : float, optional
        The largest jitter added so far.
    """

    escalations: int = 0
    max_jitter: float = 0.0


def psd_safe_cholesky(
    matrix: torch.Tensor,
    jitter: float = 1e-6,
    max_tries: int = 6,
    counter: JitterCounter | None = None,
) -> torch.Tensor:
    """Batched Cholesky; on failure add jitter * mean(diag) * 10^t to the diagonal, t = 0..max_tries-1.

    Every retry increments ``counter.escalations``. Raises after ``max_tries`` failed escalations.

    Parameters
    ----------
    matrix : torch.Tensor
        Symmetric positive (semi-)definite matrices, shape (..., n, n).
    jitter : float, optional
        Initial jitter, relative to the mean of the diagonal.
    max_tries : int, optional
        How many escalations of the jitter (x10 each) before giving up.
    counter : JitterCounter or None, optional
        Counts the escalations (``JitterCounter``); None counts nothing.

    Returns
    -------
    torch.Tensor
        Lower Cholesky factors, shape (..., n, n).
    """
    factor, info = torch.linalg.cholesky_ex(matrix)
    if not torch.any(info):
        return factor
    diag_scale = matrix.diagonal(dim1=-2, dim2=-1).abs().mean(-1, keepdim=True).clamp_min(1e-12)
    eye = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    for attempt in range(max_tries):
        level = jitter * (10.0**attempt)
        if counter is not None:
            counter.escalations += 1
            counter.max_jitter = max(counter.max_jitter, level)
        jittered = matrix + (level * diag_scale).unsqueeze(-1) * eye
        factor, info = torch.linalg.cholesky_ex(jittered)
        if not torch.any(info):
            return factor
    raise torch.linalg.LinAlgError(
        f"matrix not positive definite even with jitter {level:.1e} x mean diagonal after {max_tries} tries"
    )

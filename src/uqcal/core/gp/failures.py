"""The shared failed-fit convention (never silent): count, warn naming the run, report ``fit_failures``.

A fit has failed when its optimiser did not deliver a usable state: a non-finite loss, a Cholesky failure
after jitter escalation, an L-BFGS abnormal termination, botorch's ``ModelFittingError``. The method keeps
a valid state (the last finite one, or the initial hyperparameters) rather than a broken one, and::

    failures = FitFailures.for_run(ctx)
    ...
    if not failures.check_loss(loss, f"epoch {epoch}"):
        break                                    # or restore the last finite state
    ...
    stats.update(failures.stats())               # {"fit_failures": n} in train_stats.json (0 when none)

Every failure logs a WARNING naming the run (family/dataset/setting/method/seed) and what failed; the
report marks each table cell whose runs have ``fit_failures > 0`` (uqcal.pipeline.report.tables).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


class FitFailures:
    """Counts a run's failed fits, logging a warning that names the run for each.

    Parameters
    ----------
    log : logging.Logger or None, optional
        Where the warnings go (default: the ``uqcal.fit`` logger).
    run : str, optional
        The run's name in the warnings (family/dataset/setting/method/seed).
    """

    def __init__(self, log: logging.Logger | None = None, run: str = ""):
        self.log = log or logging.getLogger("uqcal.fit")
        self.run = run
        self.count = 0

    @classmethod
    def for_run(cls, ctx: Any) -> FitFailures:
        """For a ``uqcal.methods.api.RunContext`` (or None: library use, logged without a run name).

        Parameters
        ----------
        ctx : Any
            A ``uqcal.methods.api.RunContext``, or None (library use: no run name).

        Returns
        -------
        FitFailures
            A counter whose warnings name the run.
        """
        if ctx is None:
            return cls()
        parts = [getattr(ctx, key, None) for key in ("family", "dataset", "setting", "method")]
        seed = getattr(ctx, "seed", None)
        run = "/".join(map(str, parts)) + f"/seed{seed}" if None not in parts and seed is not None else ""
        return cls(getattr(ctx, "log", None), run)

    def record(self, what: str) -> None:
        """Count one failed fit and log a warning naming the run and ``what`` failed.

        Parameters
        ----------
        what : str
            What failed, in words ('Cholesky after jitter', 'non-finite loss at epoch 3').
        """
        self.count += 1
        self.log.warning("fit failure in %s: %s (fit_failures=%d)", self.run or "this fit", what, self.count)

    def check_loss(self, loss: float | torch.Tensor, what: str = "loss") -> bool:
        """True if ``loss`` (a number or a one-element tensor) is finite; otherwise record a failure.

        Parameters
        ----------
        loss : float | torch.Tensor
            The loss: a number or a one-element tensor.
        what : str, optional
            What the loss is, for the warning.

        Returns
        -------
        bool
            True if the loss is finite; False after recording a failure.
        """
        value = float(loss.detach()) if hasattr(loss, "detach") else float(loss)
        if math.isfinite(value):
            return True
        self.record(f"non-finite {what} ({value})")
        return False

    def stats(self) -> dict[str, int]:
        """The count as train_stats.json holds it.

        Returns
        -------
        dict of str to int
            ``{'fit_failures': count}`` (0 when none failed).
        """
        return {"fit_failures": self.count}

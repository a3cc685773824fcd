"""Calibrated acquisition functions for minimisation (Deshpande & Kuleshov Sec. 4.2), as botorch
``AnalyticAcquisitionFunction`` s so that ``optimize_acqf`` can maximise them.

The GP forecast at x is N(mu, sigma^2) (botorch's ``model.posterior(X)``); the recalibrated forecast is
y = mu + sigma Z with P(Z <= z) = R(Phi(z)) (``pit_recalibrator.py``). The paper leaves how it reaches EI/PI/UCB
unstated beyond "we calibrate by mapping the standard deviation sigma to sigma_new" (Sec. 5); ``mode``
makes the rule explicit. With best value b:

- ``matched`` (default): the acquisition's own kind decides. UCB is quantile-based (Sec. 4.2: UCB "naturally
  generalizes to a quantile F_x^-1(alpha)"), so it takes the recalibrated quantile:
  -LCB = -(mu + sigma Phi^-1(R^-1(alpha))), alpha = Phi(-sqrt(beta)). EI and PI are expectations
  (Sec. 4.2, Proposition 1), so they take the Gaussian with the recalibrated forecast's mean and standard
  deviation (moment matching, shift included): mu' = mu + sigma m_R, sigma' = sigma s_R, then
  u = (b - mu') / sigma', EI = sigma' (u Phi(u) + phi(u)), PI = Phi(u).
- ``sigma`` (ablation, the previous rule): sigma' = s sigma with s = R.sigma_scale() (least-squares slope;
  mean unchanged), then the Gaussian EI / PI / -LCB = -(mu - sqrt(beta) sigma').
- ``quantile`` (option): the recalibrated CDF everywhere: PI = R(Phi(u)) with u = (b - mu) / sigma;
  EI = E[max(b - Y, 0)] = sigma G(u), G(u) = int_{-inf}^{u} R(Phi(z)) dz (tabulated, trapezoid rule, linear
  beyond the table since R(1) = 1); -LCB as in ``matched``.

With R = identity every mode reduces to botorch's ExpectedImprovement / ProbabilityOfImprovement /
UpperConfidenceBound with ``maximize=False`` (tested). ``forecast`` gives the (mean, sigma) shift/scale the
acquisition acts on, for the one-step-ahead calibration record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from botorch.acquisition.analytic import AnalyticAcquisitionFunction
from botorch.utils.transforms import t_batch_mode_transform
from scipy.stats import norm

from uqcal.methods.bo.pit_recalibrator import RecalibrationMap, torch_interp

if TYPE_CHECKING:
    from botorch.models.model import Model
    from numpy.typing import ArrayLike

ACQUISITIONS = ("ei", "pi", "ucb")
CALIBRATED_ACQ_MODES = ("matched", "sigma", "quantile")
Z_TABLE = np.linspace(-10.0, 10.0, 8001)


class CalibratedAcquisition(AnalyticAcquisitionFunction):
    """EI, PI or -LCB of the recalibrated GP forecast, for minimisation (the rules of the module's docstring).

    Parameters
    ----------
    model : botorch.models.model.Model
        The GP surrogate (one output).
    kind : {"ei", "pi", "ucb"}
        The acquisition.
    best_f : float
        The best (smallest) value observed so far, b.
    recal : RecalibrationMap or None, default None
        R, the recalibration of the GP's standardised forecast; None: the identity.
    beta : float, default 4.0
        UCB's exploration weight: the bound is mu - sqrt(beta) sigma (alpha = Phi(-sqrt(beta))).
    mode : {"matched", "sigma", "quantile"}, default "matched"
        How R reaches the acquisition.
    """

    def __init__(self, model: Model, kind: str, best_f: float, recal: RecalibrationMap | None = None,
                 beta: float = 4.0, mode: str = "matched"):
        super().__init__(model=model)
        if kind not in ACQUISITIONS:
            raise ValueError(f"acquisition {kind!r} not in {ACQUISITIONS}")
        if mode not in CALIBRATED_ACQ_MODES:
            raise ValueError(f"calibrated_acq {mode!r} not in {CALIBRATED_ACQ_MODES}")
        self.kind, self.mode = kind, mode
        self.best_f = float(best_f)
        self.beta = float(beta)
        self.recal = recal or RecalibrationMap.identity_map()
        # Gaussian the EI/PI/LCB formulas act on, as (shift, scale) of the GP's standardised forecast
        self.shift, self.scale = 0.0, 1.0
        if mode == "sigma":
            self.scale = self.recal.sigma_scale()
        elif mode == "matched" and kind != "ucb":
            self.shift, self.scale = self.recal.moments()
        self.quantile_lcb = kind == "ucb" and mode in ("matched", "quantile")
        if self.quantile_lcb:
            alpha = norm.cdf(-np.sqrt(self.beta))
            self._z_lcb = float(self.recal.quantile(alpha))
        if mode == "quantile" and kind == "ei":
            integrand = self.recal(norm.cdf(Z_TABLE))
            steps = 0.5 * (integrand[1:] + integrand[:-1]) * np.diff(Z_TABLE)
            # Kept on the CPU; ``_g`` moves them to the input's device and dtype.
            self._g_table = torch.as_tensor(np.concatenate([[0.0], np.cumsum(steps)]), device="cpu")
            self._z_table = torch.as_tensor(Z_TABLE, device="cpu")

    def _g(self, u: torch.Tensor) -> torch.Tensor:
        z, g = self._z_table.to(u), self._g_table.to(u)
        inside = torch_interp(u, z, g)
        beyond = g[-1] + (u - z[-1])  # R(Phi(z)) = 1 past the table
        return torch.where(u > z[-1], beyond, inside)

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """The acquisition at each candidate.

        Parameters
        ----------
        X : torch.Tensor of shape (b, 1, d)
            b candidate points (q = 1; a (b, d) input gets its q dimension from ``t_batch_mode_transform``).

        Returns
        -------
        torch.Tensor of shape (b,)
            The acquisition value of each candidate (larger is better).
        """
        posterior = self.model.posterior(X)
        mean = posterior.mean.squeeze(-2).squeeze(-1)  # b x 1 x 1 -> b (q = 1, one output)
        sigma = posterior.variance.clamp_min(1e-12).sqrt().view(mean.shape)
        if self.quantile_lcb:
            return -(mean + sigma * self._z_lcb)
        if self.mode == "quantile":
            u = (self.best_f - mean) / sigma
            if self.kind == "ei":
                return sigma * self._g(u)
            return self.recal.torch_call(torch.special.ndtr(u))
        mean, sigma = mean + self.shift * sigma, sigma * self.scale
        u = (self.best_f - mean) / sigma
        if self.kind == "ei":
            return sigma * (u * torch.special.ndtr(u) + torch.exp(-0.5 * u**2) / np.sqrt(2 * np.pi))
        if self.kind == "pi":
            return torch.special.ndtr(u)
        return -(mean - np.sqrt(self.beta) * sigma)

    def acts_on_recalibrated_cdf(self) -> bool:
        """Whether the acquisition uses R's CDF itself rather than a moment-matched or rescaled Gaussian.

        Returns
        -------
        bool
            True for the quantile LCB and the ``quantile`` mode; False where a Gaussian (shift, scale) stands in.
        """
        return self.quantile_lcb or self.mode == "quantile"

    def recalibrated_pit(self, z: float) -> float:
        """PIT of an observation under the forecast this acquisition acts on; z = (y - mu) / sigma of the GP.

        Parameters
        ----------
        z : float
            (y - mu) / sigma of the observation under the GP.

        Returns
        -------
        float
            The PIT value in [0, 1].
        """
        if self.acts_on_recalibrated_cdf():
            return float(self.recal(norm.cdf(z)))
        return float(norm.cdf((z - self.shift) / self.scale))

    def standardised_quantile(self, p: ArrayLike) -> np.ndarray:
        """p-quantile of the forecast this acquisition acts on, in units of the GP's (mu, sigma).

        Parameters
        ----------
        p : array_like
            Levels in (0, 1).

        Returns
        -------
        numpy.ndarray
            The quantiles z_p, of ``p``'s shape: the forecast's p-quantile is mu + sigma z_p.
        """
        if self.acts_on_recalibrated_cdf():
            return self.recal.quantile(p)
        return self.shift + self.scale * norm.ppf(p)

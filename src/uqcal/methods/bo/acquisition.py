"""Calibrated acquisition functions for minimisation (Deshpande & Kuleshov Sec. 4.2), as botorch
``AnalyticAcquisitionFunction`` s so that ``optimize_acqf`` can maximise them.

For a Gaussian posterior N(mu, sigma^2) at x, best value b and u = (b - mu) / sigma:

- ``sigma`` mode (default, the paper's implementation): sigma -> s * sigma with s = R.sigma_scale(), then
  EI = sigma (u Phi(u) + phi(u)),  PI = Phi(u),  -LCB = -(mu - sqrt(beta) sigma).
- ``quantile`` mode: the calibrated CDF R(Phi((y - mu) / sigma)) used directly,
  PI = R(Phi(u));  EI = E[max(b - Y, 0)] = int_{-inf}^{b} R(Phi((t - mu) / sigma)) dt = sigma G(u),
  G(u) = int_{-inf}^{u} R(Phi(z)) dz (tabulated, trapezoid rule, linear beyond the table since R(1) = 1);
  -LCB = -(mu + sigma Phi^-1(R^-1(alpha))), alpha = Phi(-sqrt(beta)) (the calibrated alpha-quantile).

With R = identity both modes reduce to botorch's ExpectedImprovement / ProbabilityOfImprovement /
UpperConfidenceBound with ``maximize=False`` (tested).

The posterior mean and sigma come from botorch's ``model.posterior(X)`` (variance clamped at 1e-12 as in
botorch's analytic acquisitions).
"""

from __future__ import annotations

import numpy as np
import torch
from botorch.acquisition.analytic import AnalyticAcquisitionFunction
from botorch.utils.transforms import t_batch_mode_transform
from scipy.stats import norm

from uqcal.methods.bo.recalibration import RecalibrationMap, torch_interp

ACQUISITIONS = ("ei", "pi", "ucb")
CALIBRATED_ACQ_MODES = ("sigma", "quantile")
Z_TABLE = np.linspace(-10.0, 10.0, 8001)


class CalibratedAcquisition(AnalyticAcquisitionFunction):
    def __init__(self, model, kind: str, best_f: float, recal: RecalibrationMap | None = None,
                 beta: float = 4.0, mode: str = "sigma"):
        super().__init__(model=model)
        if kind not in ACQUISITIONS:
            raise ValueError(f"acquisition {kind!r} not in {ACQUISITIONS}")
        if mode not in CALIBRATED_ACQ_MODES:
            raise ValueError(f"calibrated_acq {mode!r} not in {CALIBRATED_ACQ_MODES}")
        self.kind, self.mode = kind, mode
        self.best_f = float(best_f)
        self.beta = float(beta)
        self.recal = recal or RecalibrationMap.identity_map()
        self.scale = self.recal.sigma_scale() if mode == "sigma" else 1.0
        if mode == "quantile":
            integrand = self.recal(norm.cdf(Z_TABLE))
            steps = 0.5 * (integrand[1:] + integrand[:-1]) * np.diff(Z_TABLE)
            self._g_table = torch.as_tensor(np.concatenate([[0.0], np.cumsum(steps)]))
            self._z_table = torch.as_tensor(Z_TABLE)
            alpha = norm.cdf(-np.sqrt(self.beta))
            self._z_lcb = float(norm.ppf(np.clip(self.recal.inverse(alpha), 1e-12, 1 - 1e-12)))

    def _g(self, u: torch.Tensor) -> torch.Tensor:
        z, g = self._z_table.to(u), self._g_table.to(u)
        inside = torch_interp(u, z, g)
        beyond = g[-1] + (u - z[-1])  # R(Phi(z)) = 1 past the table
        return torch.where(u > z[-1], beyond, inside)

    @t_batch_mode_transform(expected_q=1)
    def forward(self, X: torch.Tensor) -> torch.Tensor:
        posterior = self.model.posterior(X)
        mean = posterior.mean.squeeze(-2).squeeze(-1)  # b x 1 x 1 -> b (q = 1, one output)
        sigma = posterior.variance.clamp_min(1e-12).sqrt().view(mean.shape)
        if self.mode == "sigma":
            sigma = sigma * self.scale
            u = (self.best_f - mean) / sigma
            if self.kind == "ei":
                return sigma * (u * torch.special.ndtr(u) + torch.exp(-0.5 * u**2) / np.sqrt(2 * np.pi))
            if self.kind == "pi":
                return torch.special.ndtr(u)
            return -(mean - np.sqrt(self.beta) * sigma)
        u = (self.best_f - mean) / sigma
        if self.kind == "ei":
            return sigma * self._g(u)
        if self.kind == "pi":
            return self.recal.torch_call(torch.special.ndtr(u))
        return -(mean + sigma * self._z_lcb)

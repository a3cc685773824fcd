"""Recalibration of a fewshot model's predictive probabilities on validation episodes (every method).

A prediction is S samples of query logits f_s (S = 1 for deterministic methods) and p̄ = mean_s softmax(f_s).
Two recalibrations, both fitted on the validation episodes' queries pooled, never on test episodes:

- ``authors``: the MD-BFSC authors' calibrate.py (keanson/MD-BSFC, ``ECELoss.calibrate_cdkt``). Two
  temperatures: T_lik divides every logit sample, T_ece divides log p̄, i.e.
      p ∝ p̄_{T_lik}^{1/T_ece},  p̄_{T_lik} = mean_s softmax(f_s / T_lik),
  both from their grid {0.05, 0.055, ..., 0.345} ∪ {1.0, 1.005, ..., 1.995}, the pair with the lowest
  validation ECE (15 bins); the pair for MCE is chosen separately by the lowest validation MCE. A single
  temperature on each sample cannot calibrate an averaged softmax (T -> 0 only sharpens the vote), hence two.
- ``nll``: one temperature on log p̄ (p ∝ p̄^{1/T}), fitted by validation NLL (bounded scalar minimisation over
  log T): metric-agnostic, Guo et al.'s temperature scaling applied to the model's predictive.

ECE/MCE are the pooled 15-bin errors of ``uqcal.metrics.classification`` (bins (lo, hi], confidence = max p).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize_scalar

N_BINS = 15
# calibrate.py: torch.cat((torch.arange(0.05, 0.35, 0.005), torch.arange(1, 2, 0.005))); integer steps avoid
# floating-point drift at the ends
AUTHORS_GRID = np.concatenate([np.arange(10, 70), np.arange(200, 400)]) * 0.005
NLL_BOUNDS = (0.01, 100.0)


def tempered_mean_probs(samples: torch.Tensor, t_lik: float) -> torch.Tensor:
    """p̄ = mean_s softmax(f_s / T_lik) of (S, M, C) logit samples: (M, C)."""
    # softmax over a middle dimension: ~10x faster on the CPU than over a last dimension of 5 classes
    return torch.softmax(samples.transpose(-1, -2) / t_lik, dim=-2).mean(0).T


def sharpen(pbar: torch.Tensor, t_ece: float) -> torch.Tensor:
    """p ∝ p̄^{1/T}: the softmax of log p̄ / T, (M, C)."""
    return torch.softmax(pbar.clamp_min(torch.finfo(pbar.dtype).tiny).log() / t_ece, dim=-1)


def sharpened_confidence(pbar: torch.Tensor, t_ece: torch.Tensor) -> torch.Tensor:
    """max_c of p ∝ p̄^{1/T} for every T of `t_ece` at once: (len(T), M). The top class has
    log-ratio 0 to itself, so the confidence is 1 / sum_c exp((log p̄_c - log p̄_max) / T)."""
    log_p = pbar.clamp_min(torch.finfo(pbar.dtype).tiny).log()
    ratio = log_p - log_p.max(-1, keepdim=True).values  # (M, C), <= 0
    return 1.0 / torch.exp(ratio.unsqueeze(0) / t_ece.view(-1, 1, 1)).sum(-1)


def calibration_errors(confidence: torch.Tensor, correct: torch.Tensor, n_bins: int = N_BINS):
    """ECE and MCE of each row of `confidence` (K, M) against `correct` (M,): tensors of length K.

    Same bins as ``uqcal.metrics.classification.reliability_bins``: bin m holds (m/n, (m+1)/n], 0 in bin 0.
    """
    confidence = torch.atleast_2d(confidence)
    k, m = confidence.shape
    index = (torch.ceil(confidence * n_bins).long() - 1).clamp(0, n_bins - 1)
    zeros = torch.zeros(k, n_bins, dtype=confidence.dtype, device=confidence.device)
    count = zeros.scatter_add(1, index, torch.ones_like(confidence))
    gap = zeros.scatter_add(1, index, correct.to(confidence.dtype).expand(k, m) - confidence).abs()
    mce = torch.where(count > 0, gap / count.clamp_min(1), torch.zeros_like(gap)).amax(1)
    return gap.sum(1) / m, mce  # ECE = sum_m |sum correct - sum confidence| / M


@dataclass
class Pair:
    t_lik: float
    t_ece: float
    val_error: float


def fit_authors(samples: list[torch.Tensor], labels: list[torch.Tensor], grid: np.ndarray = AUTHORS_GRID):
    """calibrate.py's grid search: (T_lik, T_ece) with the lowest pooled validation ECE, and separately MCE.

    Returns {"ece": Pair, "mce": Pair}. Ties go to the first pair in (T_lik, T_ece) grid order, as
    ``list.index(min(...))`` does in calibrate.py.
    """
    y = torch.cat([lab.reshape(-1) for lab in labels])
    t_ece = torch.as_tensor(grid, dtype=samples[0].dtype, device=samples[0].device)
    best = {"ece": Pair(math.nan, math.nan, math.inf), "mce": Pair(math.nan, math.nan, math.inf)}
    # all episodes' queries side by side: (S, C, M) when the episodes have the same number of samples
    pooled = torch.cat([s.transpose(-1, -2) for s in samples], dim=-1).contiguous()
    for t_lik in grid:
        pbar = torch.softmax(pooled / float(t_lik), dim=-2).mean(0).T
        correct = pbar.argmax(1) == y  # the argmax of p̄^{1/T} is the argmax of p̄
        ece, mce = calibration_errors(sharpened_confidence(pbar, t_ece), correct)
        for name, errors in (("ece", ece), ("mce", mce)):
            j = int(torch.argmin(errors))
            if float(errors[j]) < best[name].val_error:
                best[name] = Pair(float(t_lik), float(grid[j]), float(errors[j]))
    return best


def fit_nll_temperature(samples: list[torch.Tensor], labels: list[torch.Tensor], bounds=NLL_BOUNDS):
    """One T on log p̄ minimising the validation NLL of p ∝ p̄^{1/T}: (T, NLL at T = 1, NLL at T)."""
    pbar = torch.cat([tempered_mean_probs(s.double(), 1.0) for s in samples]).cpu().numpy()
    y = torch.cat([lab.reshape(-1) for lab in labels]).cpu().numpy()
    log_p = np.log(np.clip(pbar, 1e-300, None))

    def nll(log_t: float) -> float:
        scaled = log_p / math.exp(log_t)
        log_norm = np.logaddexp.reduce(scaled, axis=1)
        return float(np.mean(log_norm - scaled[np.arange(len(y)), y]))

    result = minimize_scalar(nll, bounds=(math.log(bounds[0]), math.log(bounds[1])), method="bounded",
                             options={"xatol": 1e-6})
    return math.exp(result.x), nll(0.0), float(result.fun)


def on_bound(value: float, lower: float, upper: float, rtol: float = 1e-3) -> bool:
    return value <= lower * (1 + rtol) or value >= upper * (1 - rtol)


@dataclass
class Recalibration:
    """The fitted temperatures of both recalibrations and where they sit in their search ranges."""

    authors_ece: Pair
    authors_mce: Pair
    nll_t: float
    nll_val_before: float
    nll_val_after: float

    @classmethod
    def fit(cls, samples: list[torch.Tensor], labels: list[torch.Tensor]) -> Recalibration:
        authors = fit_authors(samples, labels)
        t, before, after = fit_nll_temperature(samples, labels)
        return cls(authors["ece"], authors["mce"], t, before, after)

    def probabilities(self, samples: torch.Tensor) -> dict[str, np.ndarray]:
        """Recalibrated (M, C) probabilities of one episode: prefix -> array (ts: ECE pair, tsm: MCE pair)."""
        out = {}
        for prefix, pair in (("ts", self.authors_ece), ("tsm", self.authors_mce)):
            out[prefix] = sharpen(tempered_mean_probs(samples.double(), pair.t_lik), pair.t_ece).cpu().numpy()
        out["nllts"] = sharpen(tempered_mean_probs(samples.double(), 1.0), self.nll_t).cpu().numpy()
        return out

    def warnings(self) -> list[str]:
        """Temperatures at an end of their search range: the optimum may lie outside it."""
        lo, hi = float(AUTHORS_GRID[0]), float(AUTHORS_GRID[-1])
        out = []
        for name, pair in (("ECE", self.authors_ece), ("MCE", self.authors_mce)):
            for which, t in (("T_lik", pair.t_lik), ("T_ece", pair.t_ece)):
                if on_bound(t, lo, hi):
                    out.append(f"authors' recalibration ({name}): {which} = {t:g} is on the grid bound [{lo:g}, {hi:g}]")
        if on_bound(self.nll_t, *NLL_BOUNDS):
            out.append(f"NLL temperature T = {self.nll_t:g} is on its bound {list(NLL_BOUNDS)}")
        return out

    def stats(self) -> dict:
        lo, hi = float(AUTHORS_GRID[0]), float(AUTHORS_GRID[-1])
        out = {}
        for name, pair in (("ece", self.authors_ece), ("mce", self.authors_mce)):
            out[f"ts_{name}_t_lik"] = pair.t_lik
            out[f"ts_{name}_t_ece"] = pair.t_ece
            out[f"ts_{name}_log_t_lik"] = math.log(pair.t_lik)
            out[f"ts_{name}_log_t_ece"] = math.log(pair.t_ece)
            out[f"ts_{name}_val"] = pair.val_error
        out.update({
            "ts_grid_bounds": [lo, hi],
            "nllts_t": self.nll_t,
            "nllts_log_t": math.log(self.nll_t),
            "nllts_bounds": list(NLL_BOUNDS),
            "nllts_val_nll_before": self.nll_val_before,
            "nllts_val_nll_after": self.nll_val_after,
            "recalibration_on_bound": len(self.warnings()),
        })
        return out

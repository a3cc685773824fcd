"""Timing of the quantile regulariser: spacing entropy forward+backward vs the plain NLL, per minibatch size.

Run: PYTHONPATH=src python benchmarks/qr_regularizer.py   (prints a table; single thread)
"""

from __future__ import annotations

import time

import torch

from uqcal.methods.qr.entropy import QuantileRegularizer, gaussian_nll, gaussian_pit


def time_call(fn, repeats: int = 20) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    torch.set_num_threads(1)
    print(f"{'n':>6} {'nll ms':>9} {'+QR hard ms':>12} {'+QR neuralsort ms':>18}")
    for n in (128, 512, 2048):
        y = torch.randn(n)
        raw = torch.randn(n, 2, requires_grad=True)

        def step(regulariser=None, raw=raw, y=y):
            mean, std = raw[:, 0], torch.nn.functional.softplus(raw[:, 1]) + 0.1
            loss = gaussian_nll(y, mean, std)
            if regulariser is not None:
                loss = loss + regulariser.penalty(gaussian_pit(y, mean, std))
            loss.backward()

        hard = QuantileRegularizer(1.0, sort="hard")
        soft = QuantileRegularizer(1.0, sort="neuralsort")
        print(f"{n:>6} {time_call(step):>9.3f} {time_call(lambda r=hard: step(r)):>12.3f} "
              f"{time_call(lambda r=soft: step(r), repeats=5):>18.3f}")


if __name__ == "__main__":
    main()

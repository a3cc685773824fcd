"""This machine's single-thread speed on a fixed workload, to put default-run timings from different days
side by side.

The default run's jobs took a third more CPU on some days than on others on the same 2-core VM, with the
same code and config (docs/ARCHITECTURE.md, "Default-run budget", runs 8-10). Run this before a timed
default run, on the idle machine, and record its seconds with the run's: a run's minutes are comparable
only after dividing by this figure's ratio.

The workload is what the default's jobs do, on one thread: a small MLP trained by Adam on CPU tensors
(rio/qr/fewshot-like), and an exact GP's marginal likelihood with its gradient (metareg/bo/rio-like).
Fixed seeds and sizes; prints the median of ``--repeats`` runs of each part and their sum.

Run: python benchmarks/machine_speed.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def mlp_part() -> float:
    torch.manual_seed(0)
    x, y = torch.randn(2048, 16), torch.randn(2048, 1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 1))
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    started = time.process_time()
    for step in range(300):
        batch = slice((step * 256) % 2048, (step * 256) % 2048 + 256)
        optimiser.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
        loss.backward()
        optimiser.step()
    return time.process_time() - started


def gp_part() -> float:
    torch.manual_seed(0)
    x = torch.randn(400, 8, dtype=torch.float64)
    y = torch.sin(x.sum(-1))
    log_lengthscale = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    started = time.process_time()
    for _ in range(20):
        distances = torch.cdist(x, x) / log_lengthscale.exp()
        covariance = torch.exp(-0.5 * distances**2) + 0.1 * torch.eye(len(x), dtype=torch.float64)
        chol = torch.linalg.cholesky(covariance)
        alpha = torch.cholesky_solve(y[:, None], chol)
        nll = 0.5 * (y[:, None] * alpha).sum() + chol.diagonal().log().sum()
        nll.backward()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    parts = {"mlp (300 Adam steps)": mlp_part, "exact GP (20 NLL + gradient, n = 400)": gp_part}
    medians = {}
    for name, part in parts.items():
        part()  # warm-up: allocator, kernels
        medians[name] = statistics.median(part() for _ in range(args.repeats))
    print(f"torch {torch.__version__}, 1 thread, median of {args.repeats}")
    print(f"{'part':>40} | CPU s")
    for name, seconds in medians.items():
        print(f"{name:>40} | {seconds:.3f}")
    print(f"{'sum':>40} | {sum(medians.values()):.3f}")


if __name__ == "__main__":
    main()

"""Speed of the meta-calibrated deep-kernel GP (Iwata & Kumagai): prints a table.

1. Meta-training episodes/s at 32 tasks per batch: the batched implementation (one batched Cholesky per
   step) against a per-task Python loop over the same mathematics (same model, same loss; checked equal).
2. The AHM-shaped workload of Table 6: 219 synthetic meta-training tasks, 1000 epochs, 32 tasks per batch
   (one epoch = one pass over the tasks = 6 steps), N_S = 20, N_Q = 30, one input feature.
   The paper reports 588.7 s on a Xeon Gold 6130. ``--epochs`` < 1000 measures fewer and extrapolates.
3. Inference time per task (Table 7 reports 0.083 s): adaptation, calibration, quantiles and CRPS.

Run: PYTHONPATH=src python benchmarks/metareg_speed.py [--epochs 1000] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import torch

from uqcal.methods.metareg.episodes import EpisodeData, meta_train
from uqcal.methods.metareg.metacal import MetaCal
from uqcal.methods.metareg.synthetic import episode_split, sine_tasks


def _steps_per_second(method, model, data, batched: bool, steps: int, generator) -> tuple[float, float]:
    """(steps per wall second, steps per CPU second of this process)."""
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)  # what meta_train uses
    index = torch.arange(32)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        episodes = data.sample(index, data.n_support, data.n_query, generator)
        optimiser.zero_grad()
        if batched:
            loss = method.loss(model, episodes)
        else:  # the same mathematics, one task at a time
            loss = sum(method.loss(model, episodes[b : b + 1]) for b in range(len(episodes))) / len(episodes)
        loss.backward()
        optimiser.step()
    return steps / (time.perf_counter() - start), steps / (time.process_time() - cpu_start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=1000, help="AHM-workload epochs to run (paper: 1000)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (target: 2 cores)")
    parser.add_argument("--steps", type=int, default=30, help="steps per batched-vs-loop measurement")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    X, y, task = sine_tasks(365, 120, n_features=1, seed=0)  # AHM: 365 regions, 60/20/20 -> 219 train
    split = episode_split(task, n_support=20, n_query=30, seed=0)
    data = EpisodeData(X, y, task, split)
    method = MetaCal({"epochs": args.epochs, "eval_every": args.epochs, "patience": 1})
    model = method.build(data).to(torch.float64)
    generator = torch.Generator().manual_seed(0)

    # Same mathematics: the batched loss equals the mean of the per-task losses.
    check = data.sample(torch.arange(32), 20, 30, torch.Generator().manual_seed(1))
    batched_loss = method.loss(model, check).item()
    looped_loss = (sum(method.loss(model, check[b : b + 1]) for b in range(32)) / 32).item()
    assert abs(batched_loss - looped_loss) < 1e-10, (batched_loss, looped_loss)

    _steps_per_second(method, model, data, True, 5, generator)  # warm-up
    batched = _steps_per_second(method, model, data, True, args.steps, generator)
    looped = _steps_per_second(method, model, data, False, max(3, args.steps // 5), generator)

    model = method.build(data).to(torch.float64)
    cpu_start = time.process_time()
    stats = meta_train(model, method.loss, data, method.params, None, generator)
    train_cpu = time.process_time() - cpu_start
    workload, workload_cpu = (t * 1000 / args.epochs for t in (stats["train_seconds"], train_cpu))

    start, cpu_start = time.perf_counter(), time.process_time()
    method._predict_episodes(model, data.test)
    infer = (time.perf_counter() - start) / len(data.test)
    infer_cpu = (time.process_time() - cpu_start) / len(data.test)

    # Wall clock, and this process's CPU time (the honest figure on a shared, oversubscribed machine).
    rows = [
        (
            "meta-training episodes/s, batched (32 tasks/step)",
            f"{32 * batched[0]:,.0f}",
            f"{32 * batched[1]:,.0f}",
            "",
        ),
        ("meta-training episodes/s, per-task loop", f"{32 * looped[0]:,.0f}", f"{32 * looped[1]:,.0f}", ""),
        (
            "speed-up batched / loop",
            f"{batched[0] / looped[0]:.1f}x",
            f"{batched[1] / looped[1]:.1f}x",
            ">= 10x",
        ),
        (
            f"AHM workload: {len(data.train_tasks)} tasks x {args.epochs} epochs measured, s",
            f"{stats['train_seconds']:.1f}",
            f"{train_cpu:.1f}",
            "",
        ),
        (
            "AHM workload: 1000 epochs (extrapolated if fewer run), s",
            f"{workload:.1f}",
            f"{workload_cpu:.1f}",
            "<= 60 s (paper 588.7)",
        ),
        ("inference per meta-test task, s", f"{infer:.4f}", f"{infer_cpu:.4f}", "paper 0.083"),
    ]
    width = max(len(r[0]) for r in rows)
    print(
        f"threads={args.threads}  torch={torch.__version__}  dtype=float64  loss check |batched-loop|="
        f"{abs(batched_loss - looped_loss):.1e}"
    )
    print(f"{'measure':<{width}}  {'wall':>10}  {'cpu':>10}  target")
    for name, value, cpu, target in rows:
        print(f"{name:<{width}}  {value:>10}  {cpu:>10}  {target}")


if __name__ == "__main__":
    main()

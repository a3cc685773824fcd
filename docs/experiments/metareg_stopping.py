"""How noisy is metareg's meta-validation criterion, and which stopping rule does it support? Prints tables.

Measured on the default config's data and task splits (run `snakemake --cores 2 results/metareg/summary.csv`
or at least its `split` jobs first); the meta-test tasks are never touched. For each method, dataset, N_S
and split, meta-training runs without stopping to ``--steps`` Adam steps; every ``--every`` steps the
training loss (``episode_losses``) is evaluated on 2K fresh episodes per meta-validation task (drawn from the
validation tasks' own rows with a fixed seed, disjoint from nothing the test uses). The first K episodes per
task feed the stopping rules; the other K give the reference curve R(t), an estimate of the expected
validation loss with the episode-sampling noise averaged out, that judges them.

Tables:
1. noise of the criterion: at each check, the standard deviation over disjoint episode sets of the
   criterion averaged over the validation tasks with k episodes per task (k = 1 is what the split gave
   before), next to the signal: how far R falls from step 100 to its minimum.
2. every rule in a grid (episodes per task k, EMA smoothing a, patience P and minimum steps M, in Adam
   steps): mean regret R(chosen step) - min R over seeds and episode sets, and the mean stopping step
   (the CPU it costs). The rule is applied alike to every method measured.

Run: PYTHONPATH=src python docs/experiments/metareg_stopping.py [--methods metacal mdkl] [--save curves.npz]
     PYTHONPATH=src python docs/experiments/metareg_stopping.py --load curves.npz   (analysis only)
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
import torch

from uqcal.core.io import read_json
from uqcal.data import load_table
from uqcal.methods.api import get_entry, resolve_params
from uqcal.methods.metareg.episodes import EarlyStopping, EpisodeData, Episodes, meta_train
from uqcal.pipeline.config.load import load_config


def validation_pool(data: EpisodeData, task, val_tasks, per_task: int, seed: int) -> Episodes:
    """``per_task`` random disjoint support/query episodes of every meta-validation task, task-major."""
    rng = np.random.default_rng(seed)
    task = np.asarray(task).astype(str)
    support, query = [], []
    for t in val_tasks:
        rows = np.flatnonzero(task == str(t))
        for _ in range(per_task):
            chosen = rng.permutation(rows)[: data.n_support + data.n_query]
            support.append(chosen[: data.n_support])
            query.append(chosen[data.n_support :])
    support, query = np.array(support), np.array(query)
    as_tensor = data._tensor
    return Episodes(as_tensor(data.X[support]), as_tensor(data.y[support]), as_tensor(data.X[query]),
                    as_tensor(data.y[query]))


def record(config: dict, method: str, dataset: str, setting: str, seed: int, steps: int, every: int,
           per_task: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(check steps (C,), per-episode validation losses (C, tasks, 2 * per_task), CPU seconds)."""
    family = config["families"]["metareg"]
    method_config = dict(family["methods"].get(method, {}))
    params = resolve_params("metareg", method, method_config)
    # No stopping: the cap is --steps Adam steps (default datasets: one step per epoch), checks every --every.
    params.update(epochs=steps, eval_every=every, patience=10**9, min_steps=0, val_smoothing=0.0)
    instance = get_entry("metareg", method).load_class()(params)
    table = load_table(dataset, spec=config["datasets"][dataset])
    split = read_json(Path("data/splits/metareg") / dataset / setting / f"seed{seed}.json")
    data = EpisodeData(table.X, table.y, table.task, split)
    pool = validation_pool(data, table.task, split["tasks"]["val"], 2 * per_task, seed=1000 + seed)
    n_val = len(split["tasks"]["val"])
    checks, losses = [], []

    def monitor(step, model):
        with torch.no_grad():
            values = instance.episode_losses(model, pool).detach().cpu().numpy()
        checks.append(step)
        losses.append(values.reshape(n_val, 2 * per_task))

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    cpu = time.process_time()
    model = instance.build(data).to(device=data.device, dtype=data.dtype)
    meta_train(model, instance.loss, data, params, None, generator, monitor=monitor)
    return np.array(checks), np.array(losses), time.process_time() - cpu


def simulate(steps: np.ndarray, criterion: np.ndarray, eval_every: int, patience: int, min_steps: int,
             smoothing: float) -> tuple[int, int]:
    """EarlyStopping (the code meta_train runs) on a recorded criterion: (chosen step index, stop step)."""
    stopper = EarlyStopping(eval_every, patience, min_steps, smoothing)
    chosen, stop = 0, int(steps[-1])
    for i, (step, value) in enumerate(zip(steps, criterion, strict=True)):
        if not stopper.due(int(step)):
            continue
        best_before = stopper.best_step
        done = stopper.update(int(step), float(value), {})
        if stopper.best_step != best_before or i == 0:
            chosen = i
        if done:
            stop = int(step)
            break
    return chosen, stop


def _criterion_sets(losses: np.ndarray, k: int) -> list[np.ndarray]:
    """The rule-half criterion with k episodes per task, one curve per disjoint episode set."""
    per_task = losses.shape[-1] // 2
    return [losses[:, :, r * k : (r + 1) * k].mean((1, 2)) for r in range(per_task // k)]


def evaluate_rule(curves: dict, rule: tuple) -> tuple[dict, dict]:
    """Regret R(chosen) - min R (min over the whole recorded curve) and stop step, per group."""
    k, smoothing, every, patience, min_steps, cap = rule
    regrets, stops = {}, {}
    for key, (steps, losses) in curves.items():
        per_task = losses.shape[-1] // 2
        reference = losses[:, :, per_task:].mean((1, 2))
        keep = steps <= cap
        for criterion in _criterion_sets(losses, k):
            chosen, stop = simulate(steps[keep], criterion[keep], every, patience, min_steps, smoothing)
            regrets.setdefault(key[:3], []).append(reference[chosen] - reference.min())
            stops.setdefault(key[:3], []).append(stop)
    return regrets, stops


def analyse(curves: dict, rule: tuple) -> None:
    per_task = next(iter(curves.values()))[1].shape[-1] // 2
    ks = [k for k in (1, 2, 5, 10, 20) if k <= per_task]
    groups = sorted({key[:3] for key in curves})
    print("\n## 1. Noise of the validation criterion (std over disjoint episode sets, mean over checks >= 100)")
    print("| method | data / N_S | k=" + " | k=".join(map(str, ks)) + " | R(100) - min R | argmin R (steps) |")
    print("|---|---|" + "---|" * (len(ks) + 2))
    for method, dataset, setting in groups:
        runs = [v for key, v in curves.items() if key[:3] == (method, dataset, setting)]
        sds, signal, argmins = {k: [] for k in ks}, [], []
        for steps, losses in runs:
            late = steps >= 100
            reference = losses[:, :, per_task:].mean((1, 2))
            signal.append(reference[np.searchsorted(steps, 100)] - reference.min())
            argmins.append(steps[reference.argmin()])
            for k in ks:
                sets = np.stack(_criterion_sets(losses, k), -1)
                if sets.shape[-1] > 1:
                    sds[k].append(sets[late].std(-1, ddof=1).mean())
        cells = " | ".join(f"{np.mean(sds[k]):.4f}" if sds[k] else "-" for k in ks)
        print(f"| {method} | {dataset} / {setting} | {cells} | {np.mean(signal):.4f} | "
              f"{np.median(argmins):.0f} ({np.min(argmins):.0f}-{np.max(argmins):.0f}) |")

    grid = list(itertools.product(ks, (0.0, 0.5), (5, 10, 20), (100, 200, 300, 400), (0, 300), (500, 1000)))
    scored = []
    for candidate in grid:
        regrets, stops = evaluate_rule(curves, candidate)
        per_group = [np.mean(regrets[g]) for g in groups]
        scored.append((np.mean(per_group), np.max(per_group), np.mean([np.mean(stops[g]) for g in groups]),
                       candidate))
    print("\n## 2. Stopping rules: mean regret R(chosen) - min R over the groups (min over all recorded steps),")
    print("worst group, and mean stopping step (the CPU it costs); the best 8 rules per cap and cost band, and")
    print("the previous rule (k=1, a=0, every 5, P=50 = 10 checks, M=0, cap 1000).")
    print("| k | a | every | P | M | cap | mean regret | worst group | mean stop step |")
    print("|---|---|---|---|---|---|---|---|---|")
    previous = (1, 0.0, 5, 50, 0, 1000)
    regrets, stops = evaluate_rule(curves, previous)
    old = (np.mean([np.mean(regrets[g]) for g in groups]), np.max([np.mean(regrets[g]) for g in groups]),
           np.mean([np.mean(stops[g]) for g in groups]), previous)
    for cap in (500, 1000):
        ranked = sorted(item for item in scored if item[3][5] == cap)
        for mean, worst, stop, (k, a, every, patience, min_steps, c) in [*ranked[:8], *([old] if cap == 1000 else [])]:
            print(f"| {k} | {a} | {every} | {patience} | {min_steps} | {c} | {mean:.4f} | {worst:.4f} | {stop:.0f} |")

    regrets, stops = evaluate_rule(curves, rule)
    print(f"\n## 3. The chosen rule k={rule[0]}, a={rule[1]}, every {rule[2]}, P={rule[3]}, M={rule[4]}, "
          f"cap {rule[5]} against the previous one, per group")
    print("| method | data / N_S | regret (chosen) | stop step (chosen) | regret (previous) | stop step (previous) |")
    print("|---|---|---|---|---|---|")
    old_regrets, old_stops = evaluate_rule(curves, previous)
    for group in groups:
        print(f"| {group[0]} | {group[1]} / {group[2]} | {np.mean(regrets[group]):.4f} | {np.mean(stops[group]):.0f} "
              f"| {np.mean(old_regrets[group]):.4f} | {np.mean(old_stops[group]):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--methods", nargs="+", default=["metacal", "mdkl"])
    parser.add_argument("--datasets", nargs="+", default=["ozone", "exam"])
    parser.add_argument("--settings", nargs="+", default=["ns10", "ns20"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000, help="Adam steps without stopping")
    parser.add_argument("--every", type=int, default=5, help="steps between validation checks")
    parser.add_argument("--per-task", type=int, default=10, help="K: episodes per validation task per half")
    parser.add_argument("--save", help="write the recorded curves to this .npz")
    parser.add_argument("--load", help="analyse curves recorded earlier instead of training")
    parser.add_argument("--rule", nargs=6, type=float, default=[10, 0.0, 10, 300, 0, 1000],
                        metavar=("K", "A", "EVERY", "P", "M", "CAP"), help="the rule shown in table 3")
    args = parser.parse_args()
    torch.set_num_threads(1)
    curves = {}
    if args.load:
        stored = np.load(args.load)
        for name in stored.files:
            if name.endswith("|steps"):
                key = tuple(name[: -len("|steps")].split("|"))
                curves[(key[0], key[1], key[2], int(key[3]))] = (stored[name], stored["|".join(key) + "|losses"])
    else:
        config = load_config(args.config)
        cpu = {}
        for method, dataset, setting, seed in itertools.product(
            args.methods, args.datasets, args.settings, range(args.seeds)
        ):
            steps, losses, seconds = record(config, method, dataset, setting, seed, args.steps, args.every,
                                            args.per_task)
            curves[(method, dataset, setting, seed)] = (steps, losses)
            cpu.setdefault(method, []).append(seconds)
            print(f"recorded {method} {dataset} {setting} seed {seed}: {seconds:.1f} s CPU", flush=True)
        if args.save:
            np.savez_compressed(args.save, **{
                f"{m}|{d}|{s}|{k}|{part}": value
                for (m, d, s, k), (steps, losses) in curves.items()
                for part, value in (("steps", steps), ("losses", losses))
            })
    k, a, every, patience, min_steps, cap = args.rule
    analyse(curves, (int(k), a, int(every), int(patience), int(min_steps), int(cap)))


if __name__ == "__main__":
    main()

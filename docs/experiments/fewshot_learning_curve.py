"""Learning curves of fewshot methods: validation accuracy and ECE against meta-training episodes.

Runs the library's own training (``EpisodicMethod.train``: validation every ``--val-every`` episodes on the
split's first ``--n-val`` validation episodes, best-validation checkpoint) for each method on one dataset /
setting / seed of the default config's split, with the default config's parameters except the episode
count, and prints the validation curve, where it plateaus and the test metrics of the kept checkpoint.

Plateau: the first check whose validation accuracy is within one standard error (over the validation
episodes, of the best check) of the best check's accuracy; later checks do not beat it significantly.

Needs the dataset and split of the default config (``snakemake --cores 2 data/splits/fewshot/glyphs/5w5s/seed0.json``).
Run: PYTHONPATH=src python docs/experiments/fewshot_learning_curve.py --methods md,protonet --episodes 3000
"""

from __future__ import annotations

import argparse
import logging
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from uqcal.core.io import read_json
from uqcal.methods.api import RunContext, get_entry
from uqcal.pipeline.config.load import load_config
from uqcal.pipeline.config.payloads import run_job
from uqcal.pipeline.config.runs import Run


def run_method(config: dict, args, method: str, out: Path) -> dict:
    job = run_job(config, Run("fewshot", args.dataset, args.setting, method, args.seed))
    params = {**job["params"], "train_episodes": args.episodes, "val_every": args.val_every,
              "n_val_check": args.n_val, "n_convergence_episodes": 0}
    params = {k: v for k, v in params.items() if k in get_entry("fewshot", method).load_class().defaults}
    run_dir = out / method
    ctx = RunContext(
        family="fewshot", dataset=args.dataset, setting=args.setting, method=method, seed=args.seed,
        config=job, dataset_spec=job["dataset_spec"], setting_params=job["setting_params"],
        family_params=job["family_params"], params=params, run_dir=run_dir,
        split_path=Path("data/splits/fewshot") / args.dataset / args.setting / f"seed{args.seed}.json",
        raw_path=Path("data/raw") / f"{args.dataset}.parquet", depends_dir=None,
        device=torch.device("cpu"), log=logging.getLogger(f"curve.{method}"),
    )
    method_obj = get_entry("fewshot", method).load_class()(params)
    start = time.process_time()
    method_obj.train(ctx)
    cpu = time.process_time() - start
    metrics = method_obj.evaluate(ctx)
    return {"stats": read_json(run_dir / "train_stats.json"), "metrics": metrics, "cpu": cpu}


def plateau(curve: np.ndarray, n_val: int) -> tuple[int, float]:
    """First check within one standard error of the best check's accuracy (binomial-ish s.e. over
    the validation episodes' mean accuracy, from the spread of accuracies across checks is not used)."""
    accs = curve[:, 1]
    best = accs.max()
    se = math.sqrt(best * (1 - best) / (n_val * 75)) if 0 < best < 1 else 0.0
    first = int(np.argmax(accs >= best - se))
    return int(curve[first, 0]), se


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--dataset", default="glyphs")
    parser.add_argument("--setting", default="5w5s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default="md,protonet")
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--val-every", type=int, default=100)
    parser.add_argument("--n-val", type=int, default=30, help="validation episodes per check")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = load_config(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            result = run_method(config, args, method, Path(tmp))
            acc, ece = (np.asarray(result["stats"][k], dtype=float) for k in ("val_acc_curve", "val_ece_curve"))
            curve = np.column_stack([acc, ece[:, 1]])
            at, se = plateau(curve, args.n_val)
            m = result["metrics"]
            print(f"\n{method} on {args.dataset} {args.setting} seed {args.seed}: {args.episodes} episodes, "
                  f"{result['cpu']:.0f} CPU s (training {result['stats']['train_seconds']:.0f} s wall)")
            print("| episodes | val acc | val ECE (raw) |")
            print("|---|---|---|")
            for episode, acc, ece in curve:
                print(f"| {int(episode)} | {acc:.4f} | {ece:.4f} |")
            print(f"plateau (first check within 1 s.e. = {se:.4f} of the best {curve[:, 1].max():.4f}): {at} episodes;"
                  f" kept checkpoint: {result['stats']['best_val_episode']}")
            print(f"test ({result['stats']['n_test_episodes']} episodes) with the kept checkpoint: "
                  f"acc {m['acc']:.4f}, ECE raw {m['ece']:.4f}, ECE recalibrated (authors) "
                  f"{m.get('ece_ts', float('nan')):.4f}, (one T by NLL) {m.get('ece_nllts', float('nan')):.4f}",
                  flush=True)


if __name__ == "__main__":
    main()

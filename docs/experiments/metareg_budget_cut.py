"""Does the default run's CPU budget make a metareg baseline look worse than it is? Prints a table.

The default config cuts some meta-learners short of the stopping rule every other method gets (the MAML
baselines stop at 30 Adam steps, the pooled nets at 10 epochs). This trains the named methods on the default
run's own task splits twice, once as the default config has them and once with the rule alone (``epochs``
= the paper's 1000, the same early stopping as metacal), and prints their test metrics beside metacal's
from the default run's results (same splits, same meta-test episodes), with a paired t-test over splits.

Run after the default run (`snakemake --cores 2 results/metareg/summary.csv`):
    PYTHONPATH=src python docs/experiments/metareg_budget_cut.py [--methods mng mbd] [--datasets exam]

Other variants (any method, any parameters; the default-config run is skipped with --no-cut):
    ... --methods metacal --set patience=1000 --no-cut --per-seed   (metacal without the patience stop)
With --per-seed, each split's values of the variant and of the reference (``--reference``, read from the
default run's results) are printed, and the paired difference variant - reference.
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
from uqcal.methods.api import get_entry, get_family, resolve_params
from uqcal.methods.metareg.tasks import predictions_frame, split_arrays
from uqcal.metrics import stats as S
from uqcal.pipeline.config.load import load_config

METRICS = ("te", "mse", "ece", "ece_pooled")


def run(config: dict, method: str, dataset: str, setting: str, seed: int, overrides: dict) -> tuple[dict, dict]:
    params = resolve_params("metareg", method, {**config["families"]["metareg"]["methods"][method], **overrides})
    instance = get_entry("metareg", method).load_class()(params, random_state=seed)
    table = load_table(dataset, spec=config["datasets"][dataset])
    split = read_json(Path("data/splits/metareg") / dataset / setting / f"seed{seed}.json")
    arrays = split_arrays(table.X, table.y, table.task, split)
    cpu = time.process_time()
    # The estimator protocol, as the pipeline's train step uses it (fit, then the batched predict).
    instance.fit(arrays["tasks"], arrays["validation"], n_support=arrays["n_support"], n_query=arrays["n_query"])
    predictions = instance.predict_tasks(arrays["test"])
    frame = predictions_frame(arrays["test_tasks"], [e[3] for e in arrays["test"]], predictions,
                              instance.data_.y_mean, instance.data_.y_std)
    train_stats = {**instance.fit_stats_, "cpu_seconds": time.process_time() - cpu}
    return get_family("metareg").evaluate(frame), train_stats


def _parse(item: str) -> tuple[str, object]:
    key, _, value = item.partition("=")
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False}.get(value.lower(), value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--methods", nargs="+", default=["mng", "mbd", "msqr"])
    parser.add_argument("--datasets", nargs="+", default=["ozone", "exam"])
    parser.add_argument("--settings", nargs="+", default=["ns10", "ns20"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=1000, help="the cap with the rule alone")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="more parameters of the variant run (numbers parsed as such)")
    parser.add_argument("--no-cut", action="store_true", help="skip the run as the default config has it")
    parser.add_argument("--reference", default="metacal", help="method read from the default run's results")
    parser.add_argument("--per-seed", action="store_true", help="print every split's values")
    args = parser.parse_args()
    overrides = {"epochs": args.epochs, **dict(_parse(item) for item in args.set)}
    torch.set_num_threads(1)
    config = load_config(args.config)
    print(f"| method | data / N_S | metric | {args.reference} (default run) | as in the default config | with the "
          f"rule, {overrides} | p ({args.reference} vs rule, paired t) | steps (default / rule) | CPU s per split (rule) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for method, dataset, setting in itertools.product(args.methods, args.datasets, args.settings):
        cut, full, steps, cpu = {m: [] for m in METRICS}, {m: [] for m in METRICS}, ([], []), []
        ours = {m: [] for m in METRICS}
        for seed in range(args.seeds):
            if args.no_cut:
                metrics, stats_cut = {m: np.nan for m in METRICS}, {"steps_run": np.nan}
            else:
                metrics, stats_cut = run(config, method, dataset, setting, seed, {})
            for m in METRICS:
                cut[m].append(metrics[m])
            metrics, stats_full = run(config, method, dataset, setting, seed, overrides)
            for m in METRICS:
                full[m].append(metrics[m])
            steps[0].append(stats_cut["steps_run"])
            steps[1].append(stats_full["steps_run"])
            cpu.append(stats_full["cpu_seconds"])
            reference = read_json(Path("results/metareg") / dataset / setting / args.reference / f"seed{seed}"
                                  / "metrics.json")["metrics"]
            for m in METRICS:
                ours[m].append(reference[m])
            if args.per_seed:
                print(f"  {method} {dataset}/{setting} seed {seed}: "
                      + " ".join(f"{m} {metrics[m]:.4f} ({args.reference} {reference[m]:.4f})" for m in METRICS)
                      + f" steps {stats_full['steps_run']} best {stats_full['best_step']}", flush=True)
        for m in METRICS:
            p = S.paired_ttest(ours[m], full[m])[1]
            diff = np.asarray(full[m]) - np.asarray(ours[m])
            print(f"| {method} | {dataset} / {setting} | {m} | {np.mean(ours[m]):.3f} | {np.mean(cut[m]):.3f} | "
                  f"{np.mean(full[m]):.3f} (diff {diff.mean():+.4f}) | {p:.3f} | "
                  f"{np.mean(steps[0]):.0f} / {np.mean(steps[1]):.0f} | "
                  f"{np.mean(cpu):.1f} |", flush=True)


if __name__ == "__main__":
    main()

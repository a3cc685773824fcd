"""What `numerics: portable` costs each family's training, against `native` (issue 48).

In a finished smoke run (`make smoke`, or a copy of one), trains one job per family again under each mode,
alternating, and prints each job's CPU seconds (its process's user + system time, as `benchmarks/run_cost.py` sums them
from the records). Results go to a scratch folder; the run's own results stay.
    python benchmarks/numerics_cost.py /path/to/smoke/run [--repeats 2] [--family fewshot ...]
A smoke job is mostly the process's start-up (2-3 CPU s of imports); ``--scale`` multiplies the method's
training budget (epochs, episodes, iterations) to weigh the training itself.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

METHODS = {"metareg": "metacal", "rio": "nn", "qr": "dvi_qr", "fewshot": "protonet", "bo": "calibrated"}
BUDGET_KEYS = ("epochs", "max_epochs", "train_episodes", "max_iter", "budget")


def write_configs(root: Path, scale: int) -> dict[str, str]:
    smoke = yaml.safe_load((root / "config/smoke.yaml").read_text())
    if scale != 1:
        for family, method in METHODS.items():
            params = smoke["families"][family]["methods"][method]
            for key in BUDGET_KEYS:
                if key in params:
                    params[key] = params[key] * scale
    configs = {}
    for mode in ("native", "portable"):
        path = f"config/.numerics-cost-{mode}.yaml"
        (root / path).write_text(yaml.safe_dump({**smoke, "numerics": mode}, sort_keys=False))
        configs[mode] = path
    return configs


def train_cpu_seconds(root: Path, config: str, family: str, results: Path) -> float:
    from uqcal.pipeline.config.load import load_config
    from uqcal.pipeline.config.runs import iter_batches

    batch = next(b for b in iter_batches(load_config(root / config), [family]) if b.method == METHODS[family])
    uqcal = Path(sys.executable).with_name("uqcal")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [str(uqcal), "--results-dir", str(results), "train", "--config", config, "--family", family,
               "--dataset", batch.dataset, "--setting", batch.setting, "--method", batch.method]
    proc = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{family} under {config} failed:\n{proc.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a checkout holding a finished smoke run")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--scale", type=int, default=1, help="multiply each method's training budget")
    parser.add_argument("--family", action="append", choices=list(METHODS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"  # a copy: each job rewrites its record
        shutil.copytree(args.run, root, symlinks=True, ignore=shutil.ignore_patterns(".dvc", ".snakemake", "reports"))
        configs = write_configs(root, args.scale)
        print(f"{'family':>8} {'method':>10} | native CPU s | portable CPU s | portable / native")
        for family in args.family or list(METHODS):
            cost = {mode: [] for mode in configs}
            for rep in range(args.repeats):
                for mode, config in configs.items():
                    cost[mode].append(train_cpu_seconds(root, config, family, Path(tmp) / f"results-{mode}-{rep}"))
            native, portable = min(cost["native"]), min(cost["portable"])
            print(f"{family:>8} {METHODS[family]:>10} | {native:12.1f} | {portable:14.1f} | {portable / native:.2f}"
                  f"   (all: {cost})", flush=True)


if __name__ == "__main__":
    main()

"""Issue 53, rio family: a job's seeds batched (ResidualIOGP.train_batch) against the same seeds trained one by
one, and the per-seed path against itself under the project's other numerics mode (the scale of a pure
floating-point-order change, which the batch's tolerance is measured against).

Run a job into a scratch results tree that holds the job's inputs (data/, .uqcal/specs/, the `nn` runs):

    PYTHONPATH=src .venv/bin/python benchmarks/rio_batch_tolerance.py run --workdir /tmp/x \\
        --job concrete/holdout/rio --path batched             # or per-seed, with --numerics native|portable

and compare every seed's metrics.json and predictions with a reference tree (a run of main):

    PYTHONPATH=src .venv/bin/python benchmarks/rio_batch_tolerance.py compare --reference /tmp/final \\
        --workdir /tmp/x --job concrete/holdout/rio

`run` prints the job's CPU seconds (this process: resource.getrusage); run one job at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from pathlib import Path


def run(workdir: Path, job: str, path: str, numerics: str) -> None:
    from uqcal.core.numerics import pinned_env

    # The pins `uqcal` sets before numpy and torch load (the spec's mode, unless another is asked for).
    os.environ.update(pinned_env(numerics))
    os.environ["UQCAL_NUMERICS"] = numerics
    from uqcal.methods.rio.rio import ResidualIOGP

    if path == "per-seed":
        del ResidualIOGP.train_batch  # the train step then calls train(ctx) seed by seed, as at main
    from uqcal.cli import main

    os.chdir(workdir)
    spec = Path(".uqcal/specs/train/rio") / f"{job}.json"
    if numerics != "portable":  # the spec's mode wins in `uqcal train --spec`: give it this run's
        data = json.loads(spec.read_text())
        data["params"]["numerics"] = numerics
        spec = spec.with_name(f"{spec.stem}.{numerics}.json")
        spec.write_text(json.dumps(data))
    status = main(["train", "--spec", str(spec)])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{job} {path} {numerics}: {usage.ru_utime + usage.ru_stime:.1f} CPU s")
    sys.exit(status)


def compare(reference: Path, workdir: Path, job: str) -> dict:
    import numpy as np
    import pandas as pd

    ref_dir, new_dir = reference / "results/rio" / job, workdir / "results/rio" / job
    metrics: dict[str, float] = {}
    absolute: dict[str, float] = {}
    predictions: dict[str, float] = {}
    for seed_dir in sorted(new_dir.glob("seed*")):
        a = json.loads((ref_dir / seed_dir.name / "metrics.json").read_text())["metrics"]
        b = json.loads((seed_dir / "metrics.json").read_text())["metrics"]
        if a.keys() != b.keys():
            raise SystemExit(f"{seed_dir}: metrics differ in keys: {sorted(a.keys() ^ b.keys())}")
        for key, value in a.items():
            rel = abs(b[key] - value) / max(abs(value), 1e-12)
            metrics[key] = max(metrics.get(key, 0.0), rel)
            absolute[key] = max(absolute.get(key, 0.0), abs(b[key] - value))
        pa = pd.read_parquet(ref_dir / seed_dir.name / "predictions.parquet")
        pb = pd.read_parquet(seed_dir / "predictions.parquet")
        if list(pa.columns) != list(pb.columns):
            raise SystemExit(f"{seed_dir}: prediction columns differ")
        scale = float(pa["std"].mean())
        for column in pa.columns:
            diff = float(np.max(np.abs(pa[column].to_numpy() - pb[column].to_numpy())))
            predictions[column] = max(predictions.get(column, 0.0), diff / scale)
        sa = json.loads((ref_dir / seed_dir.name / "train_stats.json").read_text())
        sb = json.loads((seed_dir / "train_stats.json").read_text())
        if sa.keys() != sb.keys():
            raise SystemExit(f"{seed_dir}: train_stats differ in keys: {sorted(sa.keys() ^ sb.keys())}")
    out = {"metrics_max_rel_diff": metrics, "metrics_max_abs_diff": absolute,
           "predictions_max_abs_diff_over_mean_std": predictions}
    print(json.dumps({job: out}, indent=1, sort_keys=True))
    return out


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--workdir", type=Path, required=True)
    one.add_argument("--job", required=True, help="<dataset>/<setting>/<method>, e.g. concrete/holdout/rio")
    one.add_argument("--path", choices=("batched", "per-seed"), default="batched")
    one.add_argument("--numerics", choices=("portable", "native"), default="portable")
    other = sub.add_parser("compare")
    other.add_argument("--reference", type=Path, required=True)
    other.add_argument("--workdir", type=Path, required=True)
    other.add_argument("--job", required=True)
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    if args.command == "run":
        run(args.workdir.resolve(), args.job, args.path, args.numerics)
    else:
        compare(args.reference, args.workdir, args.job)

"""Issue 53, rio family: a job's seeds batched (ResidualIOGP.train_batch; the network's RioNetwork.train_batch)
against the same seeds trained one by one, and the per-seed path against itself under the project's other
numerics mode (the scale of a pure floating-point-order change, which the batch's tolerance is measured against).

Run a job into a scratch results tree that holds the job's inputs (data/, .uqcal/specs/, the `nn` runs):

    PYTHONPATH=src .venv/bin/python benchmarks/rio_batch_tolerance.py run --workdir /tmp/x \\
        --job concrete/holdout/rio --path batched             # or per-seed, with --numerics native|portable

and compare every seed's metrics.json and predictions with a reference tree (a run of main); ``--check
lbfgs|adam`` fails where the tolerance ResidualIOGP.train_batch states for that optimiser breaks, ``--check nn``
where the network's (RioNetwork.train_batch: every metric and prediction within relative 1e-5) does:

    PYTHONPATH=src .venv/bin/python benchmarks/rio_batch_tolerance.py compare --reference /tmp/final \\
        --workdir /tmp/x --job concrete/holdout/rio --check lbfgs

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
    from uqcal.methods.rio.network import RioNetwork
    from uqcal.methods.rio.rio import ResidualIOGP

    if path == "per-seed":  # the train step then calls train(ctx) seed by seed, as at main
        del (RioNetwork if job.endswith("/nn") else ResidualIOGP).train_batch
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


# The tolerances ResidualIOGP.train_batch states (per seed against the per-seed run): metric -> ("rel" | "abs",
# bound); predictions: |difference| / the mean predictive std. Metrics not named (timings) are not bounded.
CONTINUOUS = ("rmse", "mse", "te", "crps", "nlpd", "nll", "sharpness", "noise_var")
TOLERANCES = {
    "lbfgs": {**dict.fromkeys(CONTINUOUS, ("rel", 0.05)), "gp_final_loss": ("rel", 0.01),
              **dict.fromkeys(("cov68", "cov90", "cov95", "improvement_ratio"), ("abs", 0.06)),
              "ece": ("abs", 0.01), "cal_score": ("abs", 0.01), "ce": ("abs", 0.3),
              "gp_iterations": ("rel", 0.5), "gp_function_evals": ("rel", 0.5), "mean": ("pred", 0.5),
              "std": ("pred", 0.5)},
    "adam": {**dict.fromkeys((*CONTINUOUS, "gp_final_loss"), ("rel", 0.01)),
             **dict.fromkeys(("cov68", "cov90", "cov95", "improvement_ratio", "ece", "cal_score"), ("abs", 0.01)),
             "ce": ("abs", 0.15), "mean": ("pred", 0.1), "std": ("pred", 0.1)},
}
# The network (RioNetwork.train_batch): every metric and prediction column within relative 1e-5 (float32).
NETWORK_RTOL = 1e-5
# Exact in both paths: the data, the network (trained by `nn`), the counts of a fit that cannot differ.
EXACT = ("row", "y", "nn_mean", "nn_rmse", "fit_failures")


def check(found: dict, optimizer: str) -> list[str]:
    """The stated tolerances ``found`` (compare's output) breaks."""
    if optimizer == "nn":
        relative = {**found["metrics_max_rel_diff"], **found["predictions_max_rel_diff"]}
        return [f"{name}: {value:.3g} > {NETWORK_RTOL} (rel)" for name, value in sorted(relative.items())
                if value > NETWORK_RTOL]
    broken = []
    kinds = {"rel": "metrics_max_rel_diff", "abs": "metrics_max_abs_diff",
             "pred": "predictions_max_abs_diff_over_mean_std"}  # fmt: skip
    for name, (kind, bound) in TOLERANCES[optimizer].items():
        value = found[kinds[kind]].get(name, 0.0)
        if value > bound:
            broken.append(f"{name}: {value:.3g} > {bound} ({kind})")
    for name in EXACT:
        for table in ("metrics_max_abs_diff", "predictions_max_abs_diff_over_mean_std"):
            if found[table].get(name, 0.0) > 0:
                broken.append(f"{name}: differs ({table})")
    return broken


def compare(reference: Path, workdir: Path, job: str) -> dict:
    import numpy as np
    import pandas as pd

    ref_dir, new_dir = reference / "results/rio" / job, workdir / "results/rio" / job
    metrics: dict[str, float] = {}
    absolute: dict[str, float] = {}
    predictions: dict[str, float] = {}
    predictions_rel: dict[str, float] = {}
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
            rel = np.abs(pa[column].to_numpy() - pb[column].to_numpy()) / np.maximum(np.abs(pa[column].to_numpy()),
                                                                                     1e-12)
            predictions_rel[column] = max(predictions_rel.get(column, 0.0), float(np.max(rel)))
        sa = json.loads((ref_dir / seed_dir.name / "train_stats.json").read_text())
        sb = json.loads((seed_dir / "train_stats.json").read_text())
        if sa.keys() != sb.keys():
            raise SystemExit(f"{seed_dir}: train_stats differ in keys: {sorted(sa.keys() ^ sb.keys())}")
    out = {"metrics_max_rel_diff": metrics, "metrics_max_abs_diff": absolute,
           "predictions_max_abs_diff_over_mean_std": predictions, "predictions_max_rel_diff": predictions_rel}
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
    other.add_argument("--check", choices=[*sorted(TOLERANCES), "nn"],
                       help="exit 1 where the stated tolerance breaks")
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    if args.command == "run":
        run(args.workdir.resolve(), args.job, args.path, args.numerics)
    else:
        broken = check(compare(args.reference, args.workdir, args.job), args.check) if args.check else []
        for line in broken:
            print("BROKEN", line)
        sys.exit(1 if broken else 0)

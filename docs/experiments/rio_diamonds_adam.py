"""Diamonds (43k training rows): does minibatch Adam train SVGP and RIO to a plateau? ELBO and test metrics by epoch.

    python docs/experiments/rio_diamonds_adam.py --seeds 0 1 --epochs 40 --lr 0.05 --batch-size 1024

Needs the default run's `nn` networks and splits for diamonds (results/rio/diamonds/holdout/nn/seed<k>/,
data/splits/rio/diamonds/holdout/seed<k>.json). For each seed and method (svgp = Y+I, rio = R+IO with the
authors' raw y_hat, rio_ys = R+IO with standardised y_hat) it fits the SVGP with Adam on standardised
targets and prints, per epoch, the training negative ELBO per row (summed minibatch losses of the epoch /
n) and the test RMSE and NLPD; then the CPU seconds per epoch. A curve has flattened when the last epochs
change the ELBO and the test metrics by less than their seed-to-seed spread.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from uqcal.data import load_table
from uqcal.methods.rio.network import load_network, network_predict
from uqcal.methods.rio.rio import combined_inputs
from uqcal.methods.rio.svgp import fit_svgp
from uqcal.metrics import gaussian_nlpd
from uqcal.pipeline.config.load import load_config

METHODS = {"svgp": ("y", "i", False), "rio": ("residual", "io", False), "rio_ys": ("residual", "io", True)}


def fit_curve(method, x_tr, x_te, y_tr, y_te, yhat_tr, yhat_te, seed, args) -> dict:
    """One Adam fit on standardised targets; test RMSE / NLPD after every epoch (prediction CPU excluded)."""
    target, kernel_inputs, standardise_yhat = METHODS[method]
    mu, sd = (yhat_tr.mean(), yhat_tr.std()) if standardise_yhat else (0.0, 1.0)
    z_tr, z_te = combined_inputs(x_tr, (yhat_tr - mu) / sd), combined_inputs(x_te, (yhat_te - mu) / sd)
    rows, marks = [], [time.process_time()]

    def on_epoch(epoch, predict):
        marks.append(time.process_time())
        mean, var = predict(z_te)
        mean = yhat_te + mean if target == "residual" else mean
        rmse = float(np.sqrt(np.mean((y_te - mean) ** 2)))
        rows.append({"epoch": epoch + 1, "rmse": rmse, "nlpd": gaussian_nlpd(y_te, mean, np.sqrt(var))})
        marks.append(time.process_time())

    fit = fit_svgp(
        z_tr, y_tr - yhat_tr if target == "residual" else y_tr, kernel_inputs=kernel_inputs, optimizer="adam",
        epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, scale_targets=True, centre_targets=True,
        seed=seed, epoch_callback=on_epoch,
    )  # fmt: skip
    train_cpu = sum(marks[i + 1] - marks[i] for i in range(0, len(marks) - 1, 2))
    for row, loss in zip(rows, fit.loss_trace, strict=True):
        row["neg_elbo_per_row"] = loss / len(y_tr)
    return {"seed": seed, "method": method, "cpu_per_epoch": train_cpu / max(1, len(rows)), "failure": fit.failure,
            "rows": rows}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--results-dir", default="results")
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--out", help="write the curves as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    config = load_config(args.config)
    table = load_table("diamonds", config, raw_path=Path(args.data_dir, "raw", "diamonds.parquet"))
    x_all, y_all = np.asarray(table.X, float), np.asarray(table.y, float)
    curves = []
    for seed in args.seeds:
        split = json.loads(Path(args.data_dir, "splits", "rio", "diamonds", "holdout", f"seed{seed}.json").read_text())
        x_std = np.where(np.asarray(split["x_std"]) > 0, split["x_std"], 1.0)
        xs = (x_all - np.asarray(split["x_mean"])) / x_std
        train, test = np.asarray(split["train"]), np.asarray(split["test"])
        net, _ = load_network(Path(args.results_dir, "rio", "diamonds", "holdout", "nn", f"seed{seed}"))
        yhat_tr, yhat_te = network_predict(net, xs[train]), network_predict(net, xs[test])
        for method in args.methods:
            curve = fit_curve(method, xs[train], xs[test], y_all[train], y_all[test], yhat_tr, yhat_te, seed, args)
            curve["nn_rmse"] = float(np.sqrt(np.mean((y_all[test] - yhat_te) ** 2)))
            curves.append(curve)
            note = f"; FAILED: {curve['failure']}" if curve["failure"] else ""
            print(f"\nseed {seed}  {method}  (NN test RMSE {curve['nn_rmse']:.1f};"
                  f" {curve['cpu_per_epoch']:.2f} CPU s per epoch{note})")  # fmt: skip
            print(f"{'epoch':>5} {'-ELBO/n':>10} {'RMSE':>9} {'NLPD':>8}")
            for row in curve["rows"]:
                print(f"{row['epoch']:>5} {row['neg_elbo_per_row']:>10.4f} {row['rmse']:>9.1f} {row['nlpd']:>8.4f}")
    print("\nsummary: epoch, then mean over seeds of test RMSE / NLPD per method")
    marks = sorted({e for e in (1, 2, 5, 10, 15, 20, 30, 40, args.epochs) if e <= args.epochs})
    print(f"{'epoch':>5} " + " ".join(f"{m + ' RMSE':>12} {m + ' NLPD':>12}" for m in args.methods))
    for epoch in marks:
        cells = []
        for method in args.methods:
            got = [c["rows"][epoch - 1] for c in curves if c["method"] == method and len(c["rows"]) >= epoch]
            cells.append(f"{np.mean([r['rmse'] for r in got]):>12.1f} {np.mean([r['nlpd'] for r in got]):>12.4f}")
        print(f"{epoch:>5} " + " ".join(cells))
    nn = np.mean([c["nn_rmse"] for c in curves if c["method"] == args.methods[0]])
    print(f"NN test RMSE (mean over seeds): {nn:.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps(curves, indent=1))


if __name__ == "__main__":
    main()

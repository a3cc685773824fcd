"""CPU of the rio family's fast paths against the stock code they replace, in one process, same seeds.

    PYTHONPATH=src python benchmarks/rio_fastpath_speed.py --dataset concrete --seeds 0 1

Needs data/raw/<dataset>.parquet and data/splits/rio/<dataset>/holdout/seed<k>.json (`uqcal materialise`,
`uqcal split`). For each seed it trains the `nn` network with the fused step and with autograd +
torch.optim.RMSprop, then fits RIO's SVGP with this package's kernels/ELBO and with stock gpytorch ones, and
prints process CPU seconds and whether the results are bit-identical (they must be). Imports and the first
torch.optim construction (which imports torch._dynamo) happen before the clock starts.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import time
from argparse import Namespace
from unittest import mock

import gpytorch
import numpy as np
import torch

from uqcal.cli import _run_context
from uqcal.config import Run, load_config, run_job
from uqcal.methods.rio import svgp
from uqcal.methods.rio.common import apply_per_dataset, load_holdout
from uqcal.methods.rio.network import network_predict, train_network
from uqcal.methods.rio.rio import fit_and_predict


def _stock_gpytorch():
    """Patch this package's kernels/ELBO/snapshot back to gpytorch's classes and deepcopy (the reference)."""
    return mock.patch.multiple(
        svgp, RBFKernel=gpytorch.kernels.RBFKernel, ScaleKernel=gpytorch.kernels.ScaleKernel,
        AdditiveKernel=gpytorch.kernels.AdditiveKernel, VariationalELBO=gpytorch.mlls.VariationalELBO,
        _snapshot=lambda module: copy.deepcopy(module.state_dict()),
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--dataset", default="concrete")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--max-iter", type=int, default=200, help="L-BFGS iterations of the GP fit")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)  # pay the torch._dynamo import up front
    config = load_config(args.config)
    totals: dict[str, float] = {}
    for seed in args.seeds:
        ctx, method = _run_context(run_job(config, Run("rio", args.dataset, "holdout", "nn", seed)),
                                   Namespace(results_dir="results", data_dir="data"))  # fmt: skip
        p = apply_per_dataset(ctx.params, args.dataset, method.defaults)
        data = load_holdout(ctx)
        kw = dict(hidden=int(p["hidden"]), depth=int(p["depth"]), lr=float(p["lr"]), max_epochs=int(p["max_epochs"]),
                  patience=int(p["patience"]), val_fraction=float(p["val_fraction"]),
                  batch_size=int(p["batch_size"]), seed=1000 + seed)  # fmt: skip
        nets = {}
        for fused in (True, False):
            start = time.process_time()
            nets[fused], info = train_network(data.x_train, data.y_train, fused=fused, **kw)
            key = "nn fused" if fused else "nn autograd+RMSprop"
            totals[key] = totals.get(key, 0.0) + time.process_time() - start
        same_nn = all(torch.equal(a, b) for a, b in zip(nets[True].state_dict().values(),
                                                        nets[False].state_dict().values(), strict=True))  # fmt: skip
        yhat_train, yhat_test = network_predict(nets[True], data.x_train), network_predict(nets[True], data.x_test)
        fits = {}
        for stock in (False, True):
            start = time.process_time()
            with _stock_gpytorch() if stock else contextlib.nullcontext():
                _, mean, var = fit_and_predict(data.x_train, data.y_train, yhat_train, data.x_test, yhat_test,
                                               max_iter=args.max_iter, seed=2000 + seed)  # fmt: skip
            key = "svgp stock gpytorch" if stock else "svgp rio kernels/ELBO"
            totals[key] = totals.get(key, 0.0) + time.process_time() - start
            fits[stock] = (mean, var)
        same_gp = all(np.array_equal(a, b) for a, b in zip(fits[False], fits[True], strict=True))
        print(f"seed {seed}: nn epochs {info['epochs']}, nn bit-identical {same_nn}, GP bit-identical {same_gp}")
    for key, seconds in totals.items():
        print(f"{key:>24}: {seconds:7.2f} s CPU")


if __name__ == "__main__":
    main()

"""CPU of the qr family's training shortcuts against the reference code path, in one process, same seeds.

    PYTHONPATH=src python benchmarks/qr_fastpath_speed.py --dataset concrete --methods dvi de de_qr --seeds 0 1

Needs data/raw/<dataset>.parquet and data/splits/qr/<dataset>/cv5/seed<k>.json (`uqcal materialise`,
`uqcal split`). Trains every member of each method on the fold's training rows with
``train_member(..., reference=False)`` (ForeachAdam, no PIT at lam = 0, one clean backward for FGSM) and with
``reference=True`` (torch.optim.Adam and the original passes), from the same initial weights, and prints
process CPU seconds and whether the trained weights are bit-identical (they must be). Imports and the first
torch.optim construction (which imports torch._dynamo) happen before the clock starts.
"""

from __future__ import annotations

import argparse
import time
from argparse import Namespace

import numpy as np
import torch

from uqcal.calibration_entropy import QuantileRegularizer
from uqcal.cli import _run_context
from uqcal.config import Run, load_config, run_job
from uqcal.methods.qr.gaussian_nets import HeteroscedasticMLP, Standardiser, train_member


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--dataset", default="concrete")
    ap.add_argument("--methods", nargs="+", default=["dvi", "dvi_qr", "de", "de_qr"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)  # pay the torch._dynamo import up front
    config = load_config(args.config)
    for method in args.methods:
        cpu = {False: 0.0, True: 0.0}
        identical = True
        for seed in args.seeds:
            ctx, _ = _run_context(run_job(config, Run("qr", args.dataset, "cv5", method, seed)),
                                  Namespace(results_dir="results", data_dir="data"))  # fmt: skip
            p, table, split = ctx.params, ctx.load_data(), ctx.load_split()
            X_all, y_all = np.asarray(table.X, float), np.asarray(table.y, float)
            rows = np.asarray(split["train"], int)
            scale = Standardiser.from_split(split, X_all.shape[1])
            X = torch.as_tensor(scale.x(X_all[rows]), dtype=torch.float32)
            y = torch.as_tensor(scale.y(y_all[rows]), dtype=torch.float32)
            eps = p["fgsm_eps_fraction"] * (X.max(0).values - X.min(0).values) if p["adversarial"] != "none" else None
            weights = {}
            for reference in (False, True):
                torch.manual_seed(seed)
                generator = torch.Generator().manual_seed(seed)
                regularizer = QuantileRegularizer(p["lam"], p["k"], p["k_multiplier"], p["sort"], p["tau"],
                                                  p["spacing_eps"])  # fmt: skip
                start = time.process_time()
                nets = []
                for _ in range(int(p["n_members"])):
                    net = HeteroscedasticMLP(X.shape[1], int(p["hidden"]), int(p["depth"]), float(p["dropout"]),
                                             float(p["min_std"]))  # fmt: skip
                    train_member(net, X, y, p, regularizer, generator, eps, reference=reference)
                    nets.append(net)
                cpu[reference] += time.process_time() - start
                weights[reference] = torch.cat([q.detach().reshape(-1) for net in nets for q in net.parameters()])
            identical &= torch.equal(weights[False], weights[True])
        print(f"{method:>8}: shortcuts {cpu[False]:6.2f} s, reference {cpu[True]:6.2f} s CPU "
              f"({1 - cpu[False] / cpu[True]:+.0%} saved), bit-identical {identical}")  # fmt: skip


if __name__ == "__main__":
    main()

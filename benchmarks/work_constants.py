"""The unit costs behind RIO's and qr's ``Family.work`` (``uqcal.methods.rio.work``, ``uqcal.methods.qr.work``):
CPU seconds (one torch thread) of their training steps at a few sizes, fitted as ``overhead + size x per-unit``.

- RioNetwork (RMSprop, 2 x 64 units): steps of batches 32 and 256 on 8 and 90 features -> NN_STEP, NN_WEIGHT_ROW;
- the RIO SVGP (I/O kernel, 50 inducing points): L-BFGS-B ELBO evaluations on 1,000 and 20,000 rows -> GP_EVAL,
  GP_ROW; minibatch Adam steps of 1,024 rows -> GP_STEP;
- a qr member (2 x 128 units, batch 512 and 64): Adam steps without the regulariser, with the NeuralSort entropy,
  and with the paper's real FGSM -> QR_STEP, QR_WEIGHT_ROW, QR_SORT_STEP, QR_SORT_PAIR, FGSM_FACTOR.

Synthetic inputs (the work of a dense step does not depend on the values). Prints each measurement and the fitted
constants beside the ones in the work modules. Run on a quiet machine:
    PYTHONPATH=src python benchmarks/work_constants.py
"""

from __future__ import annotations

import time

import numpy as np
import torch


def cpu_seconds(run) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of seconds against size."""
    x, y = (np.array(v, dtype=float) for v in zip(*points, strict=True))
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def network() -> tuple[float, float]:
    from uqcal.methods.rio.network import train_network
    from uqcal.methods.rio.work import network_seconds

    rng = np.random.default_rng(0)
    points = []
    for features, batch, n in ((8, 32, 8_000), (8, 256, 64_000), (90, 32, 8_000), (90, 256, 64_000)):
        x = rng.normal(size=(n, features))
        y = x[:, 0] + 0.1 * rng.normal(size=n)
        epochs = 4
        params = {"hidden": 64, "depth": 2, "batch_size": batch, "val_fraction": 0.2, "max_epochs": epochs}
        seconds = cpu_seconds(lambda x=x, y=y, batch=batch, epochs=epochs: train_network(
            x, y, max_epochs=epochs, patience=10**6, batch_size=batch, seed=0))
        n_fit = n - round(0.2 * n)
        steps = epochs * -(-n_fit // batch)
        weights = (features + 1) * 64 + 65 * 64 + 65
        points.append((batch * weights, seconds / steps))
        print(f"RioNetwork d={features:3d} batch {batch:3d}: {seconds / steps * 1e3:.3f} ms a step "
              f"(model: {network_seconds(n, features, params) / steps * 1e3:.3f})")
    return fit_line(points)


def svgp() -> tuple[float, float, float]:
    from uqcal.methods.rio.rio import combined_inputs
    from uqcal.methods.rio.svgp import fit_svgp

    rng = np.random.default_rng(0)
    points, m, features = [], 50, 8
    for n in (1_000, 5_000, 20_000):
        x = rng.normal(size=(n, features))
        yhat = np.sin(x[:, 0])
        y = yhat + 0.3 * np.tanh(x[:, 1]) + 0.1 * rng.normal(size=n)
        found = {}

        def run(x=x, y=y, yhat=yhat, found=found):
            found["fit"] = fit_svgp(combined_inputs(x, yhat), y - yhat, kernel_inputs="io", max_iter=40, seed=0)

        seconds = cpu_seconds(run)
        evals = found["fit"].function_evals
        points.append((n * (m * m + m * (features + 1)), seconds / evals))
        print(f"SVGP L-BFGS-B n={n:6d}: {seconds / evals * 1e3:.2f} ms an ELBO evaluation ({evals} evaluations)")
    intercept, slope = fit_line(points)
    n, batch = 20_480, 1_024
    x = rng.normal(size=(n, features))
    yhat = np.sin(x[:, 0])
    y = yhat + 0.1 * rng.normal(size=n)
    seconds = cpu_seconds(lambda: fit_svgp(combined_inputs(x, yhat), y - yhat, kernel_inputs="io",
                                           optimizer="adam", epochs=2, batch_size=batch, seed=0))
    step = seconds / (2 * n // batch) - batch * (m * m + m * (features + 1)) * slope
    print(f"SVGP Adam batch {batch}: {seconds / (2 * n // batch) * 1e3:.2f} ms a step")
    return intercept, slope, step


def qr_member() -> dict[str, float]:
    from uqcal.methods.qr.entropy import QuantileRegularizer
    from uqcal.methods.qr.gaussian_nets import GaussianNetMethod, HeteroscedasticMLP, batch_spacing_k, train_member

    rng = np.random.default_rng(0)
    features, found = 8, {}
    for batch in (64, 512):
        n = 16 * batch
        X = torch.as_tensor(rng.normal(size=(n, features)), dtype=torch.float32)
        y = torch.as_tensor(np.sin(X[:, 0].numpy()) + 0.3 * rng.normal(size=n), dtype=torch.float32)
        for label, lam, adversarial in (("plain", 0.0, "none"), ("neuralsort", 5.0, "none"), ("fgsm", 0.0, "fgsm")):
            p = {**GaussianNetMethod.defaults, "lam": lam, "adversarial": adversarial, "epochs": 4,
                 "batch_size": batch}
            regularizer = QuantileRegularizer(lam, batch_spacing_k(p, n), p["k_multiplier"], p["sort"], p["tau"],
                                              p["spacing_eps"])
            eps = torch.full((features,), 0.01) if adversarial == "fgsm" else None
            torch.manual_seed(0)
            net = HeteroscedasticMLP(features, p["hidden"], p["depth"], 0.0, p["min_std"])
            seconds = cpu_seconds(lambda net=net, X=X, y=y, p=p, r=regularizer, eps=eps: train_member(
                net, X, y, p, r, torch.Generator().manual_seed(0), eps))
            found[(label, batch)] = seconds / (4 * 16)
            print(f"qr member batch {batch:3d} {label:<10}: {found[(label, batch)] * 1e3:.3f} ms a step")
    weights = (features + 1) * 128 + 129 * 128 + 2 * 129
    intercept, slope = fit_line([(b * weights, found[("plain", b)]) for b in (64, 512)])
    sort_step, sort_pair = fit_line([(b * b, found[("neuralsort", b)] - found[("plain", b)]) for b in (64, 512)])
    fgsm = found[("fgsm", 512)] / found[("plain", 512)]  # the paper's batch size
    return {"QR_STEP": intercept, "QR_WEIGHT_ROW": slope, "QR_SORT_STEP": sort_step, "QR_SORT_PAIR": sort_pair,
            "FGSM_FACTOR": fgsm}


def main() -> None:
    from uqcal.methods.qr import work as qr_work
    from uqcal.methods.rio import work as rio_work

    torch.set_num_threads(1)
    nn_step, nn_weight_row = network()
    gp_eval, gp_row, gp_step = svgp()
    qr = qr_member()
    fitted = {"NN_STEP": nn_step, "NN_WEIGHT_ROW": nn_weight_row, "GP_EVAL": gp_eval, "GP_ROW": gp_row,
              "GP_STEP": gp_step}
    print(f"\n{'constant':<15}{'fitted':>12}{'in the module':>15}")
    for name, value in fitted.items():
        print(f"{name:<15}{value:>12.3g}{getattr(rio_work, name):>15.3g}")
    for name, value in qr.items():
        print(f"{name:<15}{value:>12.3g}{getattr(qr_work, name):>15.3g}")


if __name__ == "__main__":
    main()

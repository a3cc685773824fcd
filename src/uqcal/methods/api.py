"""The method plug-in API: ``MethodEntry`` tables, the ``Method`` base class and ``RunContext``.

See docs/ARCHITECTURE.md for the contract.
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAMILIES = ("metareg", "rio", "qr", "fewshot", "bo", "arena")


@dataclass(frozen=True)
class MethodEntry:
    """A method as the registry knows it: a lazily imported class plus fixed parameter overrides."""

    target: str
    overrides: dict[str, Any] = field(default_factory=dict)
    depends_on: str | None = None

    def load_class(self) -> type[Method]:
        module_name, _, class_name = self.target.partition(":")
        module = importlib.import_module(module_name)
        return getattr(module, class_name)


def method_table(family: str) -> dict[str, MethodEntry]:
    if family not in FAMILIES:
        raise KeyError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    module = importlib.import_module(f"uqcal.methods.{family}")
    return module.METHODS


def get_entry(family: str, method: str) -> MethodEntry:
    table = method_table(family)
    if method not in table:
        raise KeyError(
            f"families.{family}.methods.{method}: unknown method; known: {', '.join(sorted(table))}"
        )
    return table[method]


# Keys of a method's config entry that choose which of its runs exist, not how it trains: never parameters.
METHOD_SELECTORS = ("datasets", "settings", "seeds")


def resolve_params(family: str, method: str, config_params: dict[str, Any] | None) -> dict[str, Any]:
    """defaults <- config <- overrides; unknown config keys are an error naming the key."""
    entry = get_entry(family, method)
    cls = entry.load_class()
    params = dict(cls.defaults)
    for key, value in (config_params or {}).items():
        if key in METHOD_SELECTORS:
            continue
        if key not in cls.defaults:
            raise KeyError(
                f"families.{family}.methods.{method}.{key}: unknown parameter; "
                f"accepted: {', '.join(sorted(cls.defaults)) or '(none)'}"
            )
        if key in entry.overrides and value != entry.overrides[key]:
            # A registered variant is defined by its fixed values; a config value would be silently lost.
            raise ValueError(
                f"families.{family}.methods.{method}.{key}: {value!r} conflicts with the value "
                f"{entry.overrides[key]!r} that defines method {method!r}; drop the key or use another variant"
            )
        params[key] = value
    params.update(entry.overrides)
    return params


class ProgressLogger:
    """tqdm on a terminal, periodic log lines otherwise (Snakemake logs are files)."""

    def __init__(self, log: logging.Logger):
        self.log = log

    def __call__(self, iterable: Iterable, total: int | None = None, desc: str = "") -> Iterator:
        if sys.stderr.isatty():
            from tqdm import tqdm

            yield from tqdm(iterable, total=total, desc=desc)
            return
        total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        every = max(1, math.ceil(total / 20)) if total else 100
        for i, item in enumerate(iterable):
            if i % every == 0 or (total and i == total - 1):
                self.log.info("%s %d/%s", desc, i + 1, total if total else "?")
            yield item


@dataclass
class RunContext:
    family: str
    dataset: str
    setting: str
    method: str
    seed: int
    config: dict
    dataset_spec: dict
    setting_params: dict
    family_params: dict
    params: dict
    run_dir: Path
    split_path: Path
    raw_path: Path
    depends_dir: Path | None
    device: Any
    log: logging.Logger
    resume_dir: Path | None = None

    def load_data(self):
        from uqcal.data import load_table

        return load_table(self.dataset, spec=self.dataset_spec, raw_path=self.raw_path)

    def load_split(self) -> dict:
        from uqcal.core.io import read_json

        return read_json(self.split_path)

    def rng(self, offset: int = 0):
        import numpy as np

        return np.random.default_rng([self.seed, offset, _stable_hash(self.method)])

    def torch_generator(self, offset: int = 0):
        import torch

        g = torch.Generator(device="cpu")
        g.manual_seed(int(self.rng(offset).integers(0, 2**62)))
        return g

    def seed_everything(self, offset: int = 0) -> None:
        import random

        import numpy as np
        import torch

        s = int(self.rng(offset).integers(0, 2**31 - 1))
        random.seed(s)
        np.random.seed(s)
        torch.manual_seed(s)

    def progress(self, iterable: Iterable, total: int | None = None, desc: str = "") -> Iterator:
        return ProgressLogger(self.log)(iterable, total=total, desc=desc or self.method)

    def save_outputs(self, predictions, model: Any, stats: dict | None = None) -> None:
        from uqcal.core.device import describe_device
        from uqcal.core.io import torch_save, write_json, write_parquet

        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Where the run trained (strings, so they stay out of metrics.json; the report's provenance shows them).
        stats = {"device": str(self.device), "device_name": describe_device(self.device), **(stats or {})}
        # Order matters for resumability: predictions last would be fine too, all three are atomic.
        torch_save(self.run_dir / "model.pt", model)
        write_json(self.run_dir / "train_stats.json", stats)
        write_parquet(self.run_dir / "predictions.parquet", predictions)

    @property
    def checkpoint_path(self) -> Path | None:
        """Where long training checkpoints to resume after a crash (None: no checkpointing; see uqcal.core.resume)."""
        return self.resume_dir / "checkpoint.pt" if self.resume_dir is not None else None

    def checkpoint(self):
        from uqcal.core.resume import TrainingCheckpoint

        return TrainingCheckpoint(self.checkpoint_path, self.log)


def is_timing_key(key: str) -> bool:
    """Wall-clock measurements (``train_seconds``, ``recal_seconds`` ...) vary between identical runs.

    They stay in train_stats.json and reach summary.csv through the aggregator, but never enter
    metrics.json, which is byte-identical across runs of the same config and seeds.
    """
    return "second" in key


def _stable_hash(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode())


class Method:
    """Base class of every method. Subclasses set ``defaults`` and implement ``train``."""

    defaults: dict[str, Any] = {}
    # True for a method that never touches ``ctx.device``: its train jobs never request a GPU, whatever the
    # family's resources say (uqcal.pipeline.jobs.resources; a per-method GPU request for it is a config error).
    cpu_only: bool = False

    def __init__(self, params: dict[str, Any] | None = None):
        self.params = dict(self.defaults)
        self.params.update(params or {})

    def train(self, ctx: RunContext) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def evaluate(self, ctx: RunContext) -> dict[str, float]:
        import pandas as pd

        from uqcal.core.io import read_json
        from uqcal.metrics.evaluation import evaluate_predictions

        predictions = pd.read_parquet(ctx.run_dir / "predictions.parquet")
        metrics = evaluate_predictions(ctx.family, predictions, ctx)
        stats_path = ctx.run_dir / "train_stats.json"
        if stats_path.exists():
            for key, value in read_json(stats_path).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and not is_timing_key(key):
                    metrics.setdefault(key, float(value))
        return metrics

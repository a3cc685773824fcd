"""The method plug-in API: ``MethodEntry`` tables, the ``Method`` base class and ``RunContext``.

See docs/ARCHITECTURE.md for the contract. ``Method`` (a scikit-learn ``BaseEstimator``) lives in
``uqcal.methods.estimator`` and is imported from here when used: importing scikit-learn's base costs every pipeline
step that only reads the method tables about a second.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
import math
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uqcal.core.lazy import lazy_getattr, load_target
from uqcal.core.predictive import NotFittedError  # noqa: F401 (re-exported: what every estimator raises)


@dataclass(frozen=True)
class MethodEntry:
    """A method as the registry knows it: a lazily imported class plus fixed parameter overrides."""

    target: str
    overrides: dict[str, Any] = field(default_factory=dict)
    depends_on: str | None = None

    def load_class(self) -> type:
        return load_target(self.target)


@dataclass(frozen=True)
class Family:
    """One paper's reproduction as the pipeline sees it: the ``FAMILY`` of a package (docs/ARCHITECTURE.md).

    ``task`` is the dataset kind its datasets must have. ``splitter`` (a ``uqcal.data.splits.Splitter``) and
    ``evaluator`` (``(predictions, ctx) -> metrics``) are ``"module:name"`` strings, imported when used, so that
    importing a family stays light. ``setting_keys``: JSON-schema properties of the ``split:`` / setting keys its
    methods read beyond the splitter's. The package folder holds ``report.yaml`` (its report page: tables,
    figures, claims) and, where the paper publishes numbers, ``paper_numbers.yaml``."""

    title: str
    task: str
    methods: dict[str, MethodEntry]
    splitter: str
    evaluator: str
    setting_keys: dict[str, Any] = field(default_factory=dict)
    # "module:name" of ``(train job payload) -> float``: the work of one seed in seconds of a stated reference
    # machine, from the payload's parameters (episodes, iterations, image size, ...). Cost estimates scale a
    # measured job's seconds by the ratio of two jobs' work (uqcal.pipeline.progress.estimate); it may return None
    # for a job whose work it cannot tell. "": per seed.
    work: str = ""
    # The fewest rows a dataset may have for this family, and why (checked when the split is made; 0: none).
    min_rows: int = 0
    min_rows_reason: str = ""
    name: str = ""  # set by the registry: the key under ``families:``
    package: str = ""  # set by the registry: the module that defines it

    def load_splitter(self) -> Any:
        return load_target(self.splitter)

    def evaluate(self, predictions, ctx: RunContext | None = None) -> dict[str, float]:
        return load_target(self.evaluator)(predictions, ctx)

    def work_per_seed(self, job: dict) -> float | None:
        """One seed's work of a train job (its payload) by ``work``; None where the family states none, or its
        ``work`` cannot tell for this job (e.g. a dataset of unknown size)."""
        work = load_target(self.work)(job) if self.work else None
        return None if work is None else float(work)

    def training_size(self, job: dict) -> tuple[int, int] | None:
        """(rows, features) one seed of train job ``job`` (a payload) trains on, from its dataset's size
        (``uqcal.data.datasets.table_shape``) and this family's splitter (``Splitter.train_rows``), for a
        ``work`` function; None where either is unknown."""
        from uqcal.data.datasets import table_shape

        shape = table_shape(job["dataset"], job["dataset_spec"])
        train_rows = getattr(self.load_splitter(), "train_rows", None)
        if shape is None or train_rows is None:
            return None
        return train_rows(shape[0], job["dataset_spec"], job["setting_params"]), shape[1]

    def folder(self) -> Path:
        """The package's folder (its report spec and the paper's numbers live there)."""
        return Path(importlib.import_module(self.package).__file__).parent

    @property
    def report_spec_path(self) -> Path:
        return self.folder() / "report.yaml"

    @property
    def paper_numbers_path(self) -> Path:
        return self.folder() / "paper_numbers.yaml"


BUILTIN_PACKAGE = "uqcal.methods"
# name -> package of a family that lives outside uqcal.methods (``families.<name>.package`` in a config).
_PLUGIN_PACKAGES: dict[str, str] = {}
# Folders put on the import path for plug-in families (the repository's root, or ``families.<name>.path``).
_PLUGIN_PATHS: list[Path] = []


def builtin_families() -> list[str]:
    """The families shipped with uqcal: every package under uqcal.methods that defines ``FAMILY``."""
    import pkgutil

    root = importlib.import_module(BUILTIN_PACKAGE)
    names = [info.name for info in pkgutil.iter_modules(root.__path__) if info.ispkg]
    return sorted(n for n in names if isinstance(getattr(importlib.import_module(f"{BUILTIN_PACKAGE}.{n}"),
                                                         "FAMILY", None), Family))


def plugin_families() -> dict[str, str]:
    """{name: package} of the plug-in families registered in this process (`register_family`)."""
    return dict(_PLUGIN_PACKAGES)


def plugin_paths() -> list[Path]:
    """The folders `register_family` put on the import path for plug-in families, in order."""
    return list(_PLUGIN_PATHS)


def register_family(name: str, package: str, path: str | Path | None = None) -> None:
    """Make family ``name`` the ``FAMILY`` of ``package`` in this process.

    ``package`` is imported from ``path`` (a folder; default: the working directory, the repository's root for
    every pipeline job), which goes first on the import path, so that a plug-in in a folder of the repository
    needs no ``PYTHONPATH`` and no install."""
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ValueError(f"families.{name}: a family name must be a Python identifier")
    folder = Path(path if path is not None else ".").resolve()
    if folder not in _PLUGIN_PATHS:
        _PLUGIN_PATHS.append(folder)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
        importlib.invalidate_caches()
    importlib.import_module(package)  # a package that does not import is not registered (ImportError)
    _PLUGIN_PACKAGES[name] = package
    get_family.cache_clear()


def register_job_family(job: dict) -> None:
    """A step's job names its family's package when it is not one of uqcal's own (``family_package``), and the
    folder it is imported from when the config declares one (``family_path``, from the repository's root)."""
    if job.get("family_package"):
        register_family(job["family"], job["family_package"], job.get("family_path"))


@functools.cache
def get_family(name: str) -> Family:
    """The family registered as ``name``: a plug-in package, or ``uqcal.methods.<name>``."""
    package = _PLUGIN_PACKAGES.get(name, f"{BUILTIN_PACKAGE}.{name}")
    try:
        module = importlib.import_module(package)
    except ModuleNotFoundError as exc:
        if package in _PLUGIN_PACKAGES.values() or not (exc.name or "").startswith(package):
            raise
        raise KeyError(f"unknown family {name!r}; known: {', '.join(builtin_families())} "
                       "(or name a plug-in package: families.<name>.package)") from None
    family = getattr(module, "FAMILY", None)
    if not isinstance(family, Family):
        raise KeyError(f"family {name!r}: module {package} defines no FAMILY (a uqcal.methods.api.Family)")
    return dataclasses.replace(family, name=name, package=package)


def method_table(family: str) -> dict[str, MethodEntry]:
    return get_family(family).methods


def get_entry(family: str, method: str) -> MethodEntry:
    table = method_table(family)
    if method not in table:
        raise KeyError(
            f"families.{family}.methods.{method}: unknown method; known: {', '.join(sorted(table))}"
        )
    return table[method]


# What a reference predictor's train job asks for (Method.job_resources): one CPU, no GPU, little memory and time.
REFERENCE_RESOURCES = {"mem_mb": 4000, "runtime": 60, "cpus": 1, "gpu": 0}

# Keys of a method's config entry that choose which of its runs exist, not how it trains: never parameters.
METHOD_SELECTORS = ("datasets", "settings", "seeds")


class ParameterError(ValueError):
    """A method parameter of the wrong type or out of range; the message names method, key, value and rule."""


@dataclass(frozen=True)
class Bound:
    """A numeric parameter's range: ``low`` < value (``low`` <= value when ``closed_low``), the same for
    ``high``; None leaves a side open. ``optional``: None is accepted (the method then chooses)."""

    low: float | None = None
    high: float | None = None
    closed_low: bool = True
    closed_high: bool = True
    optional: bool = False
    words: tuple[str, ...] = ()  # strings accepted besides numbers in the range (e.g. mix: "learned" or 0..1)

    def describe(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>=' if self.closed_low else '>'} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<=' if self.closed_high else '<'} {self.high:g}")
        return " and ".join(parts)

    def holds(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (value == self.low and not self.closed_low)):
            return False
        return not (self.high is not None and (value > self.high or (value == self.high and not self.closed_high)))


POSITIVE = Bound(low=0, closed_low=False)
NON_NEGATIVE = Bound(low=0)
UNIT_INTERVAL_OPEN_TOP = Bound(low=0, high=1, closed_high=False)
UNIT_INTERVAL_OPEN = Bound(low=0, high=1, closed_low=False, closed_high=False)

# Declared bounds by parameter name, for every method that has the parameter; a method's class can add or
# override entries in its own ``bounds``. A numeric parameter not named here gets its range from its default:
# a positive default -> positive values (epochs, steps, sizes, learning rates, scales), zero -> >= 0, negative
# -> any number (e.g. a log-density floor).
PARAM_BOUNDS: dict[str, Bound] = {
    "dropout": UNIT_INTERVAL_OPEN_TOP,
    "calibration_fraction": UNIT_INTERVAL_OPEN_TOP,
    "val_fraction": UNIT_INTERVAL_OPEN,
    "val_smoothing": UNIT_INTERVAL_OPEN_TOP,
    "fgsm_eps_fraction": POSITIVE,
    # counts for which 0 switches something off
    "n_convergence_episodes": NON_NEGATIVE,  # fewshot md: no inner-loop convergence curves
    "val_every": NON_NEGATIVE,  # fewshot: no validation, keep the last model
    "snapshot_grid": NON_NEGATIVE,  # bo: no interval snapshots
    "mix": Bound(low=0, high=1, words=("learned",)),  # metacal's Eq. (9) alpha: learned, or fixed in [0, 1]
    "k": Bound(low=1, optional=True),
    "max_train_tasks": Bound(low=1, optional=True),
}


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def param_problem(defaults: dict[str, Any], key: str, value: Any, bounds: dict[str, Bound] | None = None) -> str | None:
    """Why ``value`` is not acceptable for parameter ``key`` (None when it is): its type is its default's
    (an integer parameter takes integers only, not ``5.5`` or ``'5'``; a float parameter takes numbers; a
    flag takes true/false), and a numeric value must lie in the parameter's range (``PARAM_BOUNDS``, else
    derived from the default's sign)."""
    default = defaults[key]
    bound = {**PARAM_BOUNDS, **(bounds or {})}.get(key)
    if bound is not None and bound.words:
        if isinstance(value, str):
            return None if value in bound.words else (f"expected one of {list(bound.words)} or a number "
                                                      f"{bound.describe()}, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not bound.holds(value):
            return f"expected one of {list(bound.words)} or a number {bound.describe()}, got {value!r}"
        return None
    if value is None and (default is None or (bound is not None and bound.optional)):
        return None
    if default is None and bound is None:
        return None  # an open parameter (None = the method decides): any value
    if isinstance(default, bool):
        return None if isinstance(value, bool) else f"expected true or false, got {value!r} ({_type_name(value)})"
    if isinstance(default, int) or (default is None and bound is not None):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected an integer, got {value!r} ({_type_name(value)})"
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected a number, got {value!r} ({_type_name(value)})"
        if not math.isfinite(value) and not (bound is None and default < 0):
            return f"expected a finite number, got {value!r}"
    elif isinstance(default, str):
        return None if isinstance(value, str) else f"expected a string, got {value!r} ({_type_name(value)})"
    elif isinstance(default, dict):
        return None if isinstance(value, dict) else f"expected a mapping, got {value!r} ({_type_name(value)})"
    elif isinstance(default, (list, tuple)):
        return None if isinstance(value, (list, tuple)) else f"expected a list, got {value!r} ({_type_name(value)})"
    else:
        return None
    if bound is None:
        bound = POSITIVE if default > 0 else NON_NEGATIVE if default == 0 else None
    if bound is not None and not bound.holds(value):
        kind = "an integer" if isinstance(default, int) or default is None else "a number"
        return f"expected {kind} {bound.describe()}, got {value!r}"
    return None


def check_params(cls: type, params: dict[str, Any], where: str) -> None:
    """Raise ParameterError for the first parameter of ``params`` that is not one ``cls`` accepts (unknown
    keys are the caller's concern), naming ``where`` (the method) and the key; a ``per_dataset`` table's
    entries are checked the same way, and so is each value of a ``{dataset or setting: value}`` mapping
    for a method that takes them (``run_mappings``)."""
    for key, value in params.items():
        if key not in cls.defaults:
            continue
        if cls.run_mappings and isinstance(value, dict) and not isinstance(cls.defaults[key], dict):
            for run, item in value.items():
                problem = param_problem(cls.defaults, key, item, cls.bounds)
                if problem:
                    raise ParameterError(f"{where}.{key}.{run}: {problem}")
            continue
        if key == "per_dataset" and isinstance(value, dict):
            for dataset, override in value.items():
                for name, item in (override if isinstance(override, dict) else {}).items():
                    if name in cls.defaults and name != "per_dataset":
                        problem = param_problem(cls.defaults, name, item, cls.bounds)
                        if problem:
                            raise ParameterError(f"{where}.per_dataset.{dataset}.{name}: {problem}")
            continue
        problem = param_problem(cls.defaults, key, value, cls.bounds)
        if problem:
            raise ParameterError(f"{where}.{key}: {problem}")


def resolve_params(family: str, method: str, config_params: dict[str, Any] | None) -> dict[str, Any]:
    """defaults <- config <- overrides; unknown config keys are an error naming the key."""
    entry = get_entry(family, method)
    cls = entry.load_class()
    params = dict(cls.defaults)
    for key, value in (config_params or {}).items():
        if key in METHOD_SELECTORS:
            continue
        if key not in cls.defaults:
            unknown_params(cls, {key: value}, f"families.{family}.methods.{method}")
        if key in entry.overrides and value != entry.overrides[key]:
            # A registered variant is defined by its fixed values; a config value would be silently lost.
            raise ValueError(
                f"families.{family}.methods.{method}.{key}: {value!r} conflicts with the value "
                f"{entry.overrides[key]!r} that defines method {method!r}; drop the key or use another variant"
            )
        params[key] = value
    params.update(entry.overrides)
    check_params(cls, params, f"families.{family}.methods.{method}")
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


def unknown_params(cls: type, params: dict[str, Any], where: str) -> None:
    """Raise ParameterError for a key of ``params`` that ``cls`` does not take, naming it, the closest accepted
    key and every accepted key (a typo never trains silently with the default)."""
    import difflib

    for key in params:
        if key not in cls.defaults:
            close = difflib.get_close_matches(str(key), list(cls.defaults), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ParameterError(f"{where}.{key}: unknown parameter{hint}; accepted: "
                                 f"{', '.join(sorted(cls.defaults)) or '(none)'}")


@dataclass
class Runtime:
    """Where and with which random streams an estimator runs: its seed, its device, its name (salts the
    streams, so two methods of one seed draw differently) and its log. A pipeline run's is its RunContext's."""

    seed: int = 0
    device: Any = "cpu"
    name: str = ""
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("uqcal"))

    def rng(self, offset: int = 0):
        import numpy as np

        return np.random.default_rng([self.seed, offset, _stable_hash(self.name)])

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
        return ProgressLogger(self.log)(iterable, total=total, desc=desc or self.name)


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
    # The predictions frame this run's training saved (save_outputs), as predictions.parquet holds it: the
    # train step evaluates it in memory instead of reading the file back.
    saved_predictions: Any = field(default=None, init=False, repr=False, compare=False)

    def load_data(self):
        from uqcal.data.datasets import load_table

        return load_table(self.dataset, spec=self.dataset_spec, raw_path=self.raw_path)

    def load_split(self) -> dict:
        from uqcal.core.io import read_json

        return read_json(self.split_path)

    @property
    def runtime(self) -> Runtime:
        """This run's seed, device, method name and log as an estimator's Runtime (the same random streams)."""
        return Runtime(seed=self.seed, device=self.device, name=self.method, log=self.log)

    def rng(self, offset: int = 0):
        return self.runtime.rng(offset)

    def torch_generator(self, offset: int = 0):
        return self.runtime.torch_generator(offset)

    def seed_everything(self, offset: int = 0) -> None:
        self.runtime.seed_everything(offset)

    def progress(self, iterable: Iterable, total: int | None = None, desc: str = "") -> Iterator:
        return self.runtime.progress(iterable, total=total, desc=desc)

    def save_outputs(self, predictions, model: Any, stats: dict | None = None) -> None:
        from uqcal.core.device import describe_device
        from uqcal.core.io import torch_save, write_json, write_parquet
        from uqcal.core.numerics import describe

        self.run_dir.mkdir(parents=True, exist_ok=True)
        # Where the run trained (strings, so they stay out of metrics.json; the report's provenance shows them).
        stats = {"device": str(self.device), "device_name": describe_device(self.device), **describe(),
                 **(stats or {})}
        # Order matters for resumability: predictions last would be fine too, all three are atomic.
        torch_save(self.run_dir / "model.pt", model)
        write_json(self.run_dir / "train_stats.json", stats)
        write_parquet(self.run_dir / "predictions.parquet", predictions)
        self.saved_predictions = predictions.reset_index(drop=True)  # the file keeps no index (write_parquet)

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


def load_predictions(ctx: RunContext, predictions=None):
    """``predictions`` when given (the frame a run's training has just saved), else the run's predictions.parquet."""
    if predictions is not None:
        return predictions
    import pandas as pd

    return pd.read_parquet(ctx.run_dir / "predictions.parquet")


# ``Method`` is public here (plug-ins subclass ``uqcal.methods.api.Method``) but imported when used.
__getattr__, __dir__ = lazy_getattr(__name__, {"Method": "uqcal.methods.estimator:Method"})

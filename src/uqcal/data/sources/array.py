"""An ``.npy`` / ``.npz`` array as a dataset: a local file, or sample data that matplotlib ships.

Spec::

    type: array
    path: data/external/grid.npz         # relative to the repository root
    sample_data: jacksboro_fault_dem.npz # or: a file of matplotlib's sample data (offline, versioned)
    key: elevation                       # the array inside an .npz (needed when it holds several)
    layout: grid                         # 2-D arrays: grid (one row per cell: row, col, value; the default)
                                         #   or table (rows x columns, named by `columns:` or c0, c1, ...)
    value_name: elevation                # grid / 1-D: the value column (default: the key, else "value")
    stride: 2                            # grid: every 2nd row and column (or [rows, cols]); default 1
    columns: [a, b]                      # table: column names
    allow_outside_repo: false            # true: `path` may lie outside the repository (refused otherwise)

Arrays are read with ``numpy.load(allow_pickle=False)``: an object array (pickled Python objects) is
refused, so a shared file cannot run code. A grid becomes a long table that the ``grid_regions`` reshape
step cuts into spatial-region tasks (uqcal.data.grid).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.data.errors import DataSourceError, check_local_path, check_source_keys
from uqcal.data.sources.url import sha256_of

SPEC_KEYS = {"type", "path", "sample_data", "key", "layout", "value_name", "stride", "columns", "allow_outside_repo"}


def _sample_data_path(name: str, dataset: str) -> Path:
    import matplotlib
    from matplotlib import cbook

    root = Path(cbook._get_data_path("sample_data")).resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        shipped = sorted(p.name for p in root.iterdir() if p.suffix in (".npy", ".npz"))
        raise DataSourceError(f"dataset {dataset!r}: matplotlib {matplotlib.__version__} ships no sample data "
                              f"{name!r}; arrays it ships: {shipped}")
    return path


def _read(path: Path, key: str | None, dataset: str) -> tuple[np.ndarray, str | None]:
    try:
        loaded = np.load(path, allow_pickle=False)
    except ValueError as error:  # object arrays need pickle: refused
        raise DataSourceError(f"dataset {dataset!r}: {path} holds pickled objects, which are not read "
                              f"(numpy allow_pickle=False): {error}") from None
    except OSError as error:
        raise DataSourceError(f"dataset {dataset!r}: {path} is not a .npy/.npz file: {error}") from None
    if isinstance(loaded, np.ndarray):
        if key is not None:
            raise DataSourceError(f"dataset {dataset!r}: {path} is a single .npy array; drop `key:`")
        return loaded, None
    with loaded:
        names = list(loaded.files)
        if key is None:
            grids = [n for n in names if loaded[n].ndim >= 1]
            if len(grids) != 1:
                raise DataSourceError(f"dataset {dataset!r}: {path.name} holds arrays {names}; name one with `key:`")
            key = grids[0]
        if key not in names:
            raise DataSourceError(f"dataset {dataset!r}: {path.name} has no array {key!r}; it holds {names}")
        try:
            return loaded[key], key
        except ValueError as error:
            raise DataSourceError(f"dataset {dataset!r}: array {key!r} of {path} holds pickled objects, which "
                                  f"are not read (numpy allow_pickle=False): {error}") from None


def _stride(value, dataset: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value) if isinstance(value, list) else None
    if pair is None or len(pair) != 2 or not all(isinstance(s, int) and s >= 1 for s in pair):
        raise DataSourceError(f"dataset {dataset!r}: array source stride must be an integer >= 1 or [rows, cols], "
                              f"got {value!r}")
    return pair


def load(spec: dict, *, name: str, cache_dir: Path, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    check_source_keys(spec, SPEC_KEYS, "array", name=name)
    if bool(spec.get("path")) == bool(spec.get("sample_data")):
        raise DataSourceError(f"dataset {name!r}: array source needs exactly one of `path:` (a local .npy/.npz) "
                              "or `sample_data:` (a file matplotlib ships)")
    if spec.get("path"):
        path = check_local_path(spec, "array", name=name)
        if not path.is_file():
            raise DataSourceError(f"dataset {name!r}: file {spec['path']} not found (paths are relative to the "
                                  f"repository root, here {Path.cwd()})")
        provenance = {"source": "array", "path": str(spec["path"])}
    else:
        import matplotlib

        path = _sample_data_path(spec["sample_data"], name)
        provenance = {"source": "array", "sample_data": spec["sample_data"], "matplotlib": matplotlib.__version__}
    array, key = _read(path, spec.get("key"), name)
    if not np.issubdtype(array.dtype, np.number) and array.dtype != bool:
        raise DataSourceError(f"dataset {name!r}: array {key or path.name} has dtype {array.dtype}; numbers only")
    layout = spec.get("layout", "grid")
    if layout not in ("grid", "table"):
        raise DataSourceError(f"dataset {name!r}: array source layout must be grid or table, got {layout!r}")
    value_name = spec.get("value_name") or key or "value"
    if array.ndim == 1:
        frame = pd.DataFrame({value_name: array})
    elif array.ndim == 2 and layout == "table":
        columns = spec.get("columns") or [f"c{i}" for i in range(array.shape[1])]
        if len(columns) != array.shape[1]:
            raise DataSourceError(f"dataset {name!r}: columns names {len(columns)} columns, the array has "
                                  f"{array.shape[1]}")
        frame = pd.DataFrame(array, columns=[str(c) for c in columns])
    elif array.ndim == 2:
        step_r, step_c = _stride(spec.get("stride", 1), name)
        rows, cols = np.arange(0, array.shape[0], step_r), np.arange(0, array.shape[1], step_c)
        grid_r, grid_c = np.meshgrid(rows, cols, indexing="ij")
        frame = pd.DataFrame({"row": grid_r.ravel(), "col": grid_c.ravel(),
                              value_name: array[np.ix_(rows, cols)].ravel()})
    else:
        raise DataSourceError(f"dataset {name!r}: array {key or path.name} has shape {array.shape}; the array "
                              "source reads 1-D and 2-D arrays")
    provenance.update({"key": key, "shape": list(array.shape), "dtype": str(array.dtype), "layout": layout,
                       "sha256": sha256_of(path), "bytes": path.stat().st_size})
    return frame, provenance

"""The ``grid_regions`` reshape step: cut a 2-D grid into k x k spatial regions, one task per region.

Input: a long frame with one row per grid cell, integer grid coordinates in ``row`` and ``col`` (as the
``array`` source writes a 2-D array) and the cell's value. Output: the same rows with a task column
(``task_name``, default ``region``: ``i * k_cols + j`` for the region in band i of the rows and band j of
the columns) and the features ``x`` (column coordinate) and ``y`` (row coordinate). Bands split the
sorted distinct rows / columns into k near-equal contiguous blocks (``numpy.array_split``), so a region is
a rectangle of cells, as the spatial climate regions of Iwata & Kumagai's AHM / MAT data.

Options::

    grid_regions: {k: 4}                     # or k: [k_rows, k_cols]
    grid_regions: {k: 4, row: row, col: col, task_name: region, coordinates: absolute}

``coordinates: relative`` measures x, y from each region's own corner instead of the grid's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from uqcal.data.errors import DataSourceError

OPTIONS = {"k", "row", "col", "task_name", "coordinates"}


def _k(value) -> tuple[int, int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                           for v in value):
        return (value[0], value[1])
    return None


def grid_regions_problems(key: str, options) -> list[str]:
    if not isinstance(options, dict):
        return [f"{key}: must be a mapping such as {{k: 4}}, got {options!r}"]
    problems = []
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        problems.append(f"{key}: unknown option(s) {unknown}; known: {sorted(OPTIONS)}")
    k = _k(options.get("k"))
    if k is None or min(k) < 1 or k[0] * k[1] < 2:
        problems.append(f"{key}.k: must be an integer >= 2 or [rows, cols] with at least two regions, "
                        f"got {options.get('k')!r}")
    if options.get("coordinates", "absolute") not in ("absolute", "relative"):
        problems.append(f"{key}.coordinates: must be absolute or relative, got {options['coordinates']!r}")
    return problems


def grid_regions(frame: pd.DataFrame, name: str, k, row: str = "row", col: str = "col",
                 task_name: str = "region", coordinates: str = "absolute") -> pd.DataFrame:
    problems = grid_regions_problems(f"datasets.{name}.reshape.grid_regions", {"k": k, "coordinates": coordinates})
    if problems:
        raise DataSourceError("; ".join(problems))
    k_rows, k_cols = _k(k)
    missing = [c for c in (row, col) if c not in frame.columns]
    if missing:
        raise DataSourceError(f"datasets.{name}.reshape.grid_regions: columns {missing} are not in the data "
                              f"(columns: {list(frame.columns)[:20]}); name the grid coordinates with row: / col:")
    rows, cols = np.sort(frame[row].unique()), np.sort(frame[col].unique())
    if len(rows) < k_rows or len(cols) < k_cols:
        raise DataSourceError(f"datasets.{name}.reshape.grid_regions.k: a {len(rows)} x {len(cols)} grid cannot be "
                              f"cut into {k_rows} x {k_cols} regions")
    row_band = {v: i for i, band in enumerate(np.array_split(rows, k_rows)) for v in band}
    col_band = {v: j for j, band in enumerate(np.array_split(cols, k_cols)) for v in band}
    i = frame[row].map(row_band).to_numpy()
    j = frame[col].map(col_band).to_numpy()
    out = frame.copy()
    out[task_name] = (i * k_cols + j).astype(np.int64)
    x, y = frame[col].to_numpy(dtype=float), frame[row].to_numpy(dtype=float)
    if coordinates == "relative":
        x = x - out.groupby(task_name)[col].transform("min").to_numpy(dtype=float)
        y = y - out.groupby(task_name)[row].transform("min").to_numpy(dtype=float)
    out["x"], out["y"] = x, y
    return out

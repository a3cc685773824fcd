"""The `array` source (.npy / .npz, local or matplotlib's sample data) and the `grid_regions` reshape."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib import cbook

from uqcal.data import load_table, materialise
from uqcal.data.errors import DataSourceError
from uqcal.methods.api import get_family


def elevation() -> np.ndarray:
    with np.load(cbook.get_sample_data("jacksboro_fault_dem.npz", asfileobj=False)) as data:
        return data["elevation"]


def band_of(index: int, n: int, k: int) -> int:
    """Which of k contiguous bands of n positions index falls in: the first n % k bands have n // k + 1."""
    bounds, start = [], 0
    for b in range(k):
        start += n // k + (1 if b < n % k else 0)
        bounds.append(start)
    return next(b for b, end in enumerate(bounds) if index < end)


GRID_SPEC = {
    "kind": "multitask_regression",
    "source": {"type": "array", "sample_data": "jacksboro_fault_dem.npz", "key": "elevation", "stride": 8},
    "reshape": {"grid_regions": {"k": [2, 3]}},
    "target": "elevation",
    "features": ["x", "y"],
    "task": "region",
}


def test_matplotlib_elevation_grid_cut_into_region_tasks(tmp_path):
    parquet, record = materialise("dem", GRID_SPEC, tmp_path)
    table = load_table("dem", spec=GRID_SPEC, raw_path=parquet)
    grid = elevation()[::8, ::8]  # 43 x 51 cells
    assert len(table.frame) == grid.size
    assert record["source"] == "array" and record["shape"] == [344, 403] and len(record["sha256"]) == 64
    rows, cols = table.frame["row"].to_numpy() // 8, table.frame["col"].to_numpy() // 8
    np.testing.assert_array_equal(table.y, grid[rows, cols])
    np.testing.assert_array_equal(table.X, np.column_stack([table.frame["col"], table.frame["row"]]).astype(float))
    expected = [band_of(r, grid.shape[0], 2) * 3 + band_of(c, grid.shape[1], 3) for r, c in zip(rows, cols, strict=True)]
    np.testing.assert_array_equal(table.task, expected)
    assert sorted(np.unique(table.task)) == list(range(6))
    # Each region is a rectangle of cells.
    for _, block in table.frame.groupby("region"):
        assert len(block) == block["row"].nunique() * block["col"].nunique()
    split = get_family("metareg").load_splitter()(table, {"n_support": 10, "n_query": 30, "min_task_size": 40}, 0)
    assert sorted(len(v) for v in split["tasks"].values()) == [1, 1, 4]


def test_relative_coordinates_start_at_each_regions_corner(tmp_path):
    spec = {**GRID_SPEC, "reshape": {"grid_regions": {"k": 2, "coordinates": "relative"}}}
    parquet, _ = materialise("dem", spec, tmp_path)
    frame = load_table("dem", spec=spec, raw_path=parquet).frame
    corners = frame.groupby("region")[["x", "y"]].min()
    assert (corners.to_numpy() == 0).all()
    np.testing.assert_array_equal(frame["x"], frame["col"] - frame.groupby("region")["col"].transform("min"))
    np.testing.assert_array_equal(frame["y"], frame["row"] - frame.groupby("region")["row"].transform("min"))


def test_local_npz_npy_keys_and_tables(tmp_path):
    np.savez(tmp_path / "two.npz", a=np.arange(6.0).reshape(2, 3), b=np.ones(3))
    spec = {"kind": "single_task_regression", "target": "c2", "features": "auto",
            "source": {"type": "array", "path": str(tmp_path / "two.npz"), "allow_outside_repo": True}}
    with pytest.raises(DataSourceError, match=r"holds arrays \['a', 'b'\]; name one with `key:`"):
        materialise("t", spec, tmp_path)
    spec["source"].update(key="c")
    with pytest.raises(DataSourceError, match=r"has no array 'c'; it holds \['a', 'b'\]"):
        materialise("t", spec, tmp_path)
    spec["source"].update(key="a", layout="table")
    parquet, _ = materialise("t", spec, tmp_path)
    pd.testing.assert_frame_equal(pd.read_parquet(parquet), pd.DataFrame({"c0": [0.0, 3.0], "c1": [1.0, 4.0],
                                                                          "c2": [2.0, 5.0]}))
    np.save(tmp_path / "one.npy", np.arange(12.0).reshape(4, 3))
    spec = {**spec, "target": "v", "source": {"type": "array", "path": str(tmp_path / "one.npy"), "layout": "table",
                                              "columns": ["p", "q", "v"], "allow_outside_repo": True}}
    parquet, _ = materialise("t", spec, tmp_path)
    assert pd.read_parquet(parquet)["v"].tolist() == [2.0, 5.0, 8.0, 11.0]


def test_pickled_object_arrays_are_refused_unread(tmp_path):
    objects = np.empty(2, dtype=object)
    objects[:] = [{"a": 1}, {"b": 2}]
    np.save(tmp_path / "obj.npy", objects, allow_pickle=True)
    spec = {"kind": "single_task_regression", "target": "value", "features": "auto",
            "source": {"type": "array", "path": str(tmp_path / "obj.npy"), "allow_outside_repo": True}}
    with pytest.raises(DataSourceError, match="pickled objects, which are not read"):
        materialise("o", spec, tmp_path)


def test_array_source_errors_name_the_problem(tmp_path):
    base = {"kind": "multitask_regression", "target": "elevation", "features": ["x", "y"], "task": "region"}
    with pytest.raises(DataSourceError, match=r"ships no sample data 'nope.npz'; arrays it ships: .*jacksboro"):
        materialise("d", {**base, "source": {"type": "array", "sample_data": "nope.npz"}}, tmp_path)
    with pytest.raises(DataSourceError, match="exactly one of `path:`"):
        materialise("d", {**base, "source": {"type": "array"}}, tmp_path)
    with pytest.raises(DataSourceError, match=r"unknown key\(s\) \['strides'\]"):
        materialise("d", {**base, "source": {"type": "array", "sample_data": "jacksboro_fault_dem.npz",
                                             "strides": 2}}, tmp_path)
    spec = {**GRID_SPEC, "reshape": {"grid_regions": {"k": 60}}}
    with pytest.raises(DataSourceError, match=r"a 43 x 51 grid cannot be cut into 60 x 60 regions"):
        materialise("d", spec, tmp_path)

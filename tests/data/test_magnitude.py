"""Issue 49, item 5: features and targets are finite and representable, and standardisation is overflow-safe."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO
from uqcal.data.datasets import materialise
from uqcal.data.splits import _mean_std
from uqcal.data.validate import DataValidationError


def _spec(path) -> dict:
    return {"kind": "single_task_regression", "source": {"type": "csv", "path": str(path), "allow_outside_repo": True},
            "target": "y", "features": "auto"}


@pytest.mark.parametrize("column", ["x", "y"])
def test_a_value_beyond_the_magnitude_bound_is_refused_at_materialise(tmp_path, column):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=20), "y": rng.normal(size=20)})
    frame.loc[3, column] = 1e308
    frame.to_csv(tmp_path / "big.csv", index=False)
    with pytest.raises(DataValidationError) as raised:
        materialise("big", _spec(tmp_path / "big.csv"), tmp_path / "data")
    assert str(raised.value) == (
        f"dataset 'big': datasets.big: column {column!r} holds 1 value(s) beyond ±1e+15 (largest 1e+308), which "
        "float32 computation cannot use; rescale the column (another unit) or leave it out (`drop:` / `features:`)")
    assert not (tmp_path / "data/raw/big.parquet").exists()
    # at the bound it is accepted
    frame.loc[3, column] = 1e15
    frame.to_csv(tmp_path / "big.csv", index=False)
    materialise("big", _spec(tmp_path / "big.csv"), tmp_path / "data")


def test_the_bad_inputs_page_quotes_the_magnitude_message():
    page = (REPO / "docs/bad-inputs.md").read_text()
    assert ("``dataset 'big': datasets.big: column 'x' holds 1 value(s) beyond ±1e+15 (largest 1e+308), which float32 "
            "computation cannot use; rescale the column (another unit) or leave it out (`drop:` / `features:`)``") in page


def test_standardisation_does_not_overflow_near_the_largest_float():
    X = np.array([[1e308, 1.0], [-1e308, 2.0], [5e307, 3.0]])
    mean, std = _mean_std(X)
    # by hand, on the column divided by 1e308: values 1, -1, 0.5
    scaled = np.array([1.0, -1.0, 0.5])
    assert mean[0] == pytest.approx(scaled.mean() * 1e308, rel=1e-12)
    assert std[0] == pytest.approx(np.sqrt(((scaled - scaled.mean()) ** 2).mean()) * 1e308, rel=1e-12)
    assert np.isfinite(std).all() and std[0] > 0  # the plain computation gives inf, and the column would be zeroed
    # an ordinary column: exactly numpy's own result (the fallback is not taken)
    assert (mean[1], std[1]) == (X[:, 1].mean(), X[:, 1].std())

"""reshape lags: wide weekly sales -> (product, week) rows with the previous weeks as features."""

import numpy as np
import pandas as pd
import pytest

from uqcal.data.errors import DataSourceError
from uqcal.data.lags import lagged_long


def test_lagged_long_matches_hand_computed_rows():
    wide = pd.DataFrame({"Product_Code": ["P1", "P2"], "W0": [1, 10], "W1": [2, 20], "W2": [3, 30],
                         "W3": [4, 40], "MIN": [1, 10], "Normalized 0": [0.0, 0.0]})
    long = lagged_long(wide, id="Product_Code", columns=r"^W(?P<week>\d+)$", n_lags=2,
                       value_name="sales", task_name="week")
    expected = pd.DataFrame({
        "Product_Code": ["P1", "P2", "P1", "P2"], "week": [2, 2, 3, 3],
        "lag1": [2.0, 20.0, 3.0, 30.0], "lag2": [1.0, 10.0, 2.0, 20.0], "sales": [3.0, 30.0, 4.0, 40.0],
    })
    pd.testing.assert_frame_equal(long, expected, check_dtype=False)


def test_sales_shape_matches_the_paper():
    # 811 products x 52 weeks with 5 lags -> 47 tasks (weeks 5..51) of 811 instances (Iwata & Kumagai).
    rng = np.random.default_rng(0)
    wide = pd.DataFrame(rng.integers(0, 50, (811, 52)), columns=[f"W{i}" for i in range(52)])
    wide.insert(0, "Product_Code", [f"P{i}" for i in range(811)])
    long = lagged_long(wide, id="Product_Code", columns=r"^W(?P<week>\d+)$", n_lags=5, value_name="sales",
                       task_name="week")
    assert long["week"].nunique() == 47 and (long.groupby("week").size() == 811).all()
    row = long[(long.week == 9) & (long.Product_Code == "P3")].iloc[0]
    assert row.sales == wide.loc[3, "W9"] and row.lag5 == wide.loc[3, "W4"]


def test_gaps_are_an_error():
    wide = pd.DataFrame({"id": [1], "W0": [1], "W2": [2], "W3": [3]})
    with pytest.raises(DataSourceError, match="consecutive"):
        lagged_long(wide, id="id", columns=r"^W(\d+)$", n_lags=1)

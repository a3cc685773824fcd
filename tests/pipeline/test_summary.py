"""summary.csv follows the artifact contract and matches a hand computation."""

from __future__ import annotations

import pandas as pd
import pytest

from uqcal.core.io import write_json
from uqcal.pipeline.summary import SUMMARY_COLUMNS, aggregate_family


def test_aggregate_mean_std_n(tmp_path):
    fam = {"datasets": ["d"], "seeds": 3, "settings": {"s": {}}, "methods": {"m": {}}}
    for seed, value in enumerate([1.0, 2.0, 6.0]):
        write_json(tmp_path / "rio/d/s/m" / f"seed{seed}" / "metrics.json",
                   {"metrics": {"rmse": value, "nlpd": -value}})
    summary = aggregate_family("rio", fam, tmp_path, tmp_path / "rio/summary.csv")
    on_disk = pd.read_csv(tmp_path / "rio/summary.csv")
    assert list(on_disk.columns) == SUMMARY_COLUMNS
    row = summary.set_index("metric").loc["rmse"]
    assert row["mean"] == pytest.approx(3.0) and row["n"] == 3
    # sample std of (1, 2, 6): sqrt(((-2)^2 + (-1)^2 + 3^2) / 2) = sqrt(7)
    assert row["std"] == pytest.approx(7 ** 0.5)


def test_aggregate_refuses_missing_runs(tmp_path):
    fam = {"datasets": ["d"], "seeds": 2, "settings": {"s": {}}, "methods": {"m": {}}}
    write_json(tmp_path / "rio/d/s/m/seed0/metrics.json", {"metrics": {"rmse": 1.0}})
    with pytest.raises(FileNotFoundError, match="seed1"):
        aggregate_family("rio", fam, tmp_path, tmp_path / "rio/summary.csv")

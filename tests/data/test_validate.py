"""Validation at the data boundary (issue 19): each problem a user's own dataset can have is reported once,
with the dataset and the config key, before any training -- or the run completes."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, tool_env
from uqcal.data import load_table, materialise
from uqcal.data.errors import DataSourceError
from uqcal.data.validate import DataValidationError, partition_sizes
from uqcal.methods.api import get_family
from uqcal.pipeline.config.load import prepare_config
from uqcal.pipeline.config.payloads import batch_job, dataset_job, split_batch_job
from uqcal.pipeline.config.source import ConfigError, check_raw_config


def spec_for(path, **extra) -> dict:
    # tmp_path lies outside the repository: the entry opts in (uqcal.data.errors.outside_repo_problem)
    return {"kind": "single_task_regression", "source": {"type": "csv", "path": str(path), "allow_outside_repo": True},
            "target": "y", "features": "auto", **extra}


def write_csv(tmp_path, frame: pd.DataFrame, name: str = "table.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def with_gaps(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=30), "b": rng.normal(size=30), "y": rng.normal(size=30),
                          "unused": np.nan})
    frame.loc[[2, 5], "a"] = np.nan
    frame.loc[[5, 9], "y"] = np.nan
    frame.loc[11, "b"] = np.inf
    return write_csv(tmp_path, frame), frame


# ------------------------------------------------------------------------------------ missing values
def test_missing_values_fail_by_default_naming_dataset_columns_and_policy(tmp_path, with_gaps):
    path, _ = with_gaps
    spec = spec_for(path, drop=["unused"])
    with pytest.raises(DataValidationError) as raised:
        materialise("gappy", spec, tmp_path / "data")
    message = str(raised.value)
    # rows 2, 5, 9, 11 (row 5 twice): four rows; per column a: 2, y: 2, b: 1 (an infinity)
    assert "dataset 'gappy'" in message and "datasets.gappy: 4 of 30 rows" in message
    assert "{'a': 2, 'b': 1, 'y': 2}" in message and "missing: drop" in message
    assert not (tmp_path / "data" / "raw" / "gappy.parquet").exists()


def test_missing_drop_drops_and_counts_the_rows(tmp_path, with_gaps):
    path, frame = with_gaps
    parquet, record = materialise("gappy", spec_for(path, drop=["unused"], missing="drop"), tmp_path / "data")
    expected = frame.drop(columns="unused").replace([np.inf], np.nan).dropna().reset_index(drop=True)
    stored = pd.read_parquet(parquet)
    pd.testing.assert_frame_equal(stored, expected)
    assert record["rows"] == 26 and record["rows_dropped_missing"] == 4 and record["missing"] == "drop"
    assert record["missing_by_column"] == {"a": 2, "b": 1, "y": 2}
    on_disk = json.loads((tmp_path / "data" / "raw" / "gappy.json").read_text())
    assert on_disk["rows_dropped_missing"] == 4
    # The split then has finite training statistics (issue 19: it stored y_mean: NaN).
    split = get_family("rio").load_splitter()(load_table("gappy", spec=spec_for(path), raw_path=parquet), {}, 0)
    assert np.isfinite(split["y_mean"]) and np.isfinite(split["x_mean"]).all()


def test_a_column_the_dataset_does_not_use_may_have_gaps(tmp_path, with_gaps):
    path, _ = with_gaps
    spec = spec_for(path, features=["a", "b"], missing="drop")
    _, record = materialise("gappy", spec, tmp_path / "data")
    assert record["missing_by_column"] == {"a": 2, "b": 1, "y": 2}  # 'unused' (all NaN) is not counted


# ------------------------------------------------------------------------------------ targets
def test_text_target_names_the_key_and_a_value(tmp_path):
    frame = pd.DataFrame({"mpg": [18.0, 15.0, 18.0], "name": ["chevrolet chevelle malibu", "buick skylark 320",
                                                               "plymouth satellite"]})
    spec = spec_for(write_csv(tmp_path, frame), target="name")
    with pytest.raises(DataValidationError, match=r"datasets\.cars\.target: column 'name' holds text "
                                                  r"\(e\.g\. 'chevrolet chevelle malibu'"):
        materialise("cars", spec, tmp_path / "data")


def test_question_marks_in_a_numeric_target_get_the_na_values_hint(tmp_path):
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": ["1.5", "?", "2.5", "3.0"]})
    path = write_csv(tmp_path, frame)
    with pytest.raises(DataValidationError, match=r"e\.g\. '\?'.*na_values"):
        materialise("q", spec_for(path), tmp_path / "data")
    # The hint works: '?' read as missing, the row dropped and counted.
    spec = spec_for(path, missing="drop")
    spec["source"]["read"] = {"na_values": ["?"]}
    _, record = materialise("q", spec, tmp_path / "data")
    assert record["rows"] == 3 and record["rows_dropped_missing"] == 1


def test_constant_target_and_constant_tasks(tmp_path):
    frame = pd.DataFrame({"x": range(6), "y": 2.0})
    with pytest.raises(DataValidationError, match=r"datasets\.flat\.target: column 'y' is constant"):
        materialise("flat", spec_for(write_csv(tmp_path, frame)), tmp_path / "data")
    # A constant task is refused by the split that keeps it (after min_task_size), not at materialise.
    tasks = pd.DataFrame({"t": list("aabbcc"), "x": range(6), "y": [1.0, 2.0, 5.0, 5.0, 3.0, 4.0]})
    spec = {**spec_for(write_csv(tmp_path, tasks, "tasks.csv"), features=["x"], task="t"),
            "kind": "multitask_regression"}
    parquet, _ = materialise("multi", spec, tmp_path / "data")
    table = load_table("multi", spec=spec, raw_path=parquet)
    with pytest.raises(DataValidationError, match=r"datasets\.multi\.task \('t'\): 1 of the 3 tasks that "
                                                  r"split\.min_task_size = 2 keeps \(of 3\) have a constant target "
                                                  r"\('b'\)"):
        get_family("metareg").load_splitter()(table, {"n_support": 1, "n_query": 1, "min_task_size": 2}, 0)


def test_constant_tasks_that_min_task_size_drops_do_not_refuse_the_dataset(tmp_path, caplog):
    # issue 42, item 12: the constant task "small" (3 rows) and the one-row task "one" are below min_task_size.
    rng = np.random.default_rng(4)
    rows = [(t, rng.normal(), rng.normal()) for t in "abc" for _ in range(20)]
    rows += [("small", 0.0, 7.0)] * 3 + [("one", 0.0, 1.0)]
    frame = pd.DataFrame(rows, columns=["t", "x", "y"])
    spec = {**spec_for(write_csv(tmp_path, frame, "tasks.csv"), features=["x"], task="t"),
            "kind": "multitask_regression"}
    with caplog.at_level("WARNING", logger="uqcal.data.validate"):
        parquet, _ = materialise("multi", spec, tmp_path / "data")
    warned = caplog.text
    assert "datasets.multi.task: 1 of 5 tasks have one row ('one')" in warned, warned
    assert "datasets.multi.task: 1 of 5 tasks have a constant target ('small')" in warned, warned
    assert "'one'" not in warned.split("constant target")[1]  # the one-row task is not called constant
    table = load_table("multi", spec=spec, raw_path=parquet)
    split = get_family("metareg").load_splitter()(table, {"n_support": 5, "n_query": 10, "min_task_size": 15}, 0)
    assert sorted(split["dropped_tasks"]) == ["one", "small"]


# ------------------------------------------------------------------------------------ features
def test_high_cardinality_text_feature_fails_with_hint_and_opt_in(tmp_path):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"name": [f"car {i}" for i in range(40)], "cyl": rng.choice(["four", "six"], 40),
                          "w": rng.normal(size=40), "y": rng.normal(size=40)})
    path = write_csv(tmp_path, frame)
    with pytest.raises(DataValidationError) as raised:
        materialise("cars", spec_for(path), tmp_path / "data")
    message = str(raised.value)
    assert "text column 'name' has 40 distinct values in 40 rows" in message
    assert "drop: [name]" in message and "max_categories: 40" in message and "'cyl'" not in message
    # Opting in encodes it: 40 + 2 one-hot columns + w.
    parquet, _ = materialise("cars", spec_for(path, max_categories=40), tmp_path / "data")
    assert load_table("cars", spec=spec_for(path), raw_path=parquet).X.shape == (40, 43)
    parquet, _ = materialise("cars", spec_for(path, drop=["name"]), tmp_path / "data")
    assert load_table("cars", spec=spec_for(path, drop=["name"]), raw_path=parquet).X.shape == (40, 3)


def test_every_problem_is_reported_at_once_and_absent_columns_are_listed(tmp_path, with_gaps):
    path, _ = with_gaps
    frame = pd.read_csv(path).assign(label=[f"l{i}" for i in range(30)])
    path = write_csv(tmp_path, frame, "both.csv")
    with pytest.raises(DataValidationError) as raised:
        materialise("both", spec_for(path, drop=["unused"]), tmp_path / "data")
    message = str(raised.value)
    assert message.startswith("dataset 'both': 2 problems:") and "missing: drop" in message and "'label'" in message
    with pytest.raises(DataValidationError) as raised:
        materialise("both", spec_for(path, features=["a", "c", "d"]), tmp_path / "data")
    assert "datasets.both.features: columns ['c', 'd'] are not in the data; available columns: " \
           "['a', 'b', 'y', 'unused', 'label']" in str(raised.value)


# ------------------------------------------------------------------------------------ splits
def test_partition_sizes_keep_every_part_non_empty():
    assert partition_sizes(3, [0.6, 0.2, 0.2]) == [1, 1, 1]  # rounding alone: 2 / 1 / 0
    assert partition_sizes(10, [0.6, 0.2, 0.2]) == [6, 2, 2]  # unchanged where no part is empty
    assert partition_sizes(2, [0.6, 0.2, 0.2]) == [1, 0, 1]
    for n in range(3, 60):
        for fractions in ([0.6, 0.2, 0.2], [0.8, 0.1, 0.1], [0.34, 0.33, 0.33]):
            sizes = partition_sizes(n, fractions)
            assert sum(sizes) == n and min(sizes) >= 1
            rounded = [round(fractions[0] * n), round(fractions[1] * n)]
            if min(rounded + [n - sum(rounded)]) >= 1:
                assert sizes[:2] == rounded


def multitask_table(tmp_path, sizes: dict[str, int]):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame([(t, rng.normal(), rng.normal()) for t, n in sizes.items() for _ in range(n)],
                         columns=["t", "x", "y"])
    spec = {"kind": "multitask_regression", "source": {"type": "csv", "path": str(write_csv(tmp_path, frame)),
                                                     "allow_outside_repo": True},
            "target": "y", "features": ["x"], "task": "t"}
    parquet, _ = materialise("few", spec, tmp_path / "data")
    return load_table("few", spec=spec, raw_path=parquet)


def test_three_eligible_tasks_split_one_each(tmp_path):
    table = multitask_table(tmp_path, {"a": 20, "b": 20, "c": 20, "small": 5})
    split = get_family("metareg").load_splitter()(table, {"n_support": 5, "n_query": 10, "min_task_size": 15}, 0)
    assert sorted(len(v) for v in split["tasks"].values()) == [1, 1, 1]
    assert split["dropped_tasks"] == ["small"] and len(split["test_episodes"]) == 1


def test_too_few_tasks_is_one_clear_error(tmp_path):
    table = multitask_table(tmp_path, {"a": 20, "b": 20, "c": 12})
    with pytest.raises(DataValidationError) as raised:
        get_family("metareg").load_splitter()(table, {"n_support": 5, "n_query": 10, "min_task_size": 15}, 0)
    message = str(raised.value)
    assert "dataset 'few': 2 eligible tasks" in message and "train 1 / val 0 / test 1" in message
    assert "split.min_task_size = 15" in message and "[20, 20, 12]" in message


def test_fewshot_too_few_classes_names_the_parts(tmp_path):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"label": np.repeat([f"c{i}" for i in range(6)], 30)})
    for i in range(4):
        frame[f"px{i}"] = rng.integers(0, 255, len(frame))
    spec = {"kind": "fewshot_classification", "source": {"type": "csv", "path": str(write_csv(tmp_path, frame)),
                                                     "allow_outside_repo": True},
            "target": "label", "image_shape": [2, 2]}
    parquet, _ = materialise("tiny", spec, tmp_path / "data")
    table = load_table("tiny", spec=spec, raw_path=parquet)
    with pytest.raises(DataValidationError, match=r"6 of 6 classes .* \[0\.6, 0\.2, 0\.2\] they give train 4 / "
                                                  r"val 1 / test 1 classes; every part needs at least n_way = 2"):
        get_family("fewshot").load_splitter()(table, {"n_way": 2, "k_shot": 1, "n_query_test": 5, "n_query_train": 5}, 0)


# ------------------------------------------------------------------------------------ config alone
@pytest.fixture(scope="module")
def smoke_raw() -> dict:
    return check_raw_config(REPO / "config/smoke.yaml")  # composed: base.yaml's keys in


def test_config_problems_are_all_reported_before_any_job(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["metareg"]["split"]["min_task_size"] = 35  # < N_S + N_Q = 10 + 30
    cfg["families"]["metareg"]["split"]["task_fractions"] = [0.8, 0.2, 0.0]
    cfg["families"]["rio"]["methods"]["nn"]["per_dataset"] = {"diamnds": {"max_epochs": 3},
                                                              "concrete": {"max_epoch": 3}}
    cfg["datasets"]["mine"] = {"kind": "single_task_regression", "source": {"type": "csv", "path": "x.csv"},
                               "target": "y", "features": ["a", "y"], "paper_dataset": "CSS"}
    cfg["families"]["rio"]["datasets"].append("mine")
    with pytest.raises(ConfigError) as raised:
        prepare_config(cfg, REPO)
    message = str(raised.value)
    assert message.startswith("6 problems:")
    for expected in (
        "families.metareg.settings.ns10 (with split).min_task_size: 35 < n_support + n_query = 10 + 30 = 40",
        "families.metareg.settings.ns10 (with split).task_fractions: must be three positive fractions",
        "families.rio.methods.nn.per_dataset.diamnds: 'diamnds' is not in families.rio.datasets",
        "families.rio.methods.nn.per_dataset.concrete: unknown parameter(s) ['max_epoch']",
        "datasets.mine.features: lists the target column 'y'",
        "datasets.mine.paper_dataset: 'CSS' is not a dataset of the rio paper",
    ):
        assert expected in message, expected


@pytest.mark.parametrize("entry, key", [
    ({"missing": "dorp"}, "datasets.concrete.missing"),
    ({"reshape": {"grid_region": {"k": 2}}}, "datasets.concrete.reshape"),
    ({"max_categories": 0}, "datasets.concrete.max_categories"),
    ({"paper_dataset": {"rioo": "CCS"}}, "datasets.concrete.paper_dataset"),
    ({"source": {"type": "csv", "pth": "x.csv"}}, "datasets.concrete.source: unknown key(s) ['pth'] for a csv"),
    ({"source": {"type": "array", "key": "z"}}, "datasets.concrete.source: an array source needs exactly one of"),
])
def test_schema_names_bad_dataset_keys(smoke_raw, entry, key):
    cfg = copy.deepcopy(smoke_raw)
    registry = yaml.safe_load((REPO / "config/datasets.yaml").read_text())
    cfg["datasets"]["concrete"] = {**registry["concrete"], **entry}
    with pytest.raises(ConfigError, match=re.escape(key)):
        prepare_config(cfg, REPO)


def test_validate_config_command_exits_2_with_the_message(tmp_path, smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["metareg"]["split"]["min_task_size"] = 20
    cfg["dataset_registry"] = [str(REPO / p) for p in cfg["dataset_registry"]]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([sys.executable, "-m", "uqcal.cli", "validate-config", "--config", str(path)], cwd=REPO,
                          env=tool_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "min_task_size: 20 < n_support + n_query" in proc.stderr


# ------------------------------------------------------------------------------------ job slices
def test_per_dataset_entries_and_labels_stay_out_of_other_jobs(smoke_raw):
    cfg = copy.deepcopy(smoke_raw)
    cfg["families"]["rio"]["datasets"] = ["concrete", "boston"]
    before = prepare_config(cfg, REPO)
    cfg["families"]["rio"]["methods"]["nn"]["per_dataset"] = {"boston": {"max_epochs": 3}}
    cfg["datasets"]["concrete"] = {**before["datasets"]["concrete"], "stands_in_for": "an edited label",
                                   "note": "another"}
    after = prepare_config(cfg, REPO)
    # concrete's jobs are unchanged (no rerun); boston's nn job sees exactly its own entry
    assert batch_job(before, "rio", "concrete", "holdout", "nn") == batch_job(after, "rio", "concrete", "holdout", "nn")
    assert dataset_job(before, "concrete") == dataset_job(after, "concrete")
    assert split_batch_job(before, "rio", "concrete", "holdout") == split_batch_job(after, "rio", "concrete", "holdout")
    job = batch_job(after, "rio", "boston", "holdout", "nn")
    assert job["params"]["per_dataset"] == {"boston": {"max_epochs": 3}}
    assert batch_job(before, "rio", "boston", "holdout", "nn") != job
    # a real parameter of the dataset entry still reaches every job of that dataset
    cfg["datasets"]["concrete"]["max_rows"] = 500
    edited = prepare_config(cfg, REPO)
    assert dataset_job(edited, "concrete") != dataset_job(after, "concrete")
    assert batch_job(edited, "rio", "concrete", "holdout", "nn") != batch_job(after, "rio", "concrete", "holdout", "nn")


def test_data_source_error_is_the_base(tmp_path):
    assert issubclass(DataValidationError, DataSourceError)


# ------------------------------------------------------------------------------------ issue 42, item 12
def test_duplicate_column_names_are_an_error_naming_the_column(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("x1,x2,x1,y\n1,2,3,4\n5,6,7,9\n2,2,2,2\n")
    with pytest.raises(DataSourceError) as raised:
        materialise("dup", spec_for(path), tmp_path / "data")
    message = str(raised.value)
    assert message.startswith(f"dataset 'dup': {path}: the header") and "repeats column name(s) 'x1' (2 times)" in message
    assert "'x1.1'" in message
    # Control: pandas alone renames the copy silently.
    assert list(pd.read_csv(path).columns) == ["x1", "x2", "x1.1", "y"]


def test_a_ragged_row_is_named_by_its_line(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("a,b,y\n1,2,3\n4,5\n6,7,8\n9,1,2\n")
    with pytest.raises(DataSourceError, match=r"dataset 'ragged': .*ragged\.csv: 1 row\(s\) have fewer fields than the "
                                              r"3 of the header \(line 1\): line 3 has 2"):
        materialise("ragged", spec_for(path), tmp_path / "data")
    spaced = tmp_path / "ragged.data"  # whitespace-separated, no header: against the longest row
    spaced.write_text("1 2 3\n4 5 6\n\n7 8\n")
    with pytest.raises(DataSourceError, match=r"line 4 has 2"):
        materialise("spaced", {**spec_for(spaced), "source": {"type": "csv", "path": str(spaced), "format": "whitespace",
                                                              "read": {"header": None}, "allow_outside_repo": True},
                               "target": "2"}, tmp_path / "data")


def test_a_source_path_outside_the_repository_needs_an_explicit_opt_in(tmp_path, smoke_raw, monkeypatch):
    outside = tmp_path / "outside.csv"
    outside.write_text("root:x:0:0\nuser:x:1000:1000\nother:x:1001:1001\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    source = {"type": "csv", "path": str(outside), "read": {"sep": ":", "header": None}}
    spec = {"kind": "single_task_regression", "source": source, "target": "2", "features": ["3"]}
    with pytest.raises(DataSourceError, match=r"dataset 'passwd': csv source path .*outside\.csv' resolves to .*, "
                                              r"outside the repository .*allow_outside_repo: true"):
        materialise("passwd", spec, "data")
    assert not (repo / "data" / "raw").exists()
    # A link inside the repository that points outside is outside too.
    (repo / "link.csv").symlink_to(outside)
    with pytest.raises(DataSourceError, match="outside the repository"):
        materialise("passwd", {**spec, "source": {**source, "path": "link.csv"}}, "data")
    # Early: validate-config reports it before any job.
    cfg = copy.deepcopy(smoke_raw)
    cfg["datasets"]["passwd"] = spec
    cfg["families"]["rio"]["datasets"].append("passwd")
    with pytest.raises(ConfigError, match=r"datasets\.passwd\.source\.path: dataset 'passwd': csv source path"):
        prepare_config(cfg, REPO)
    # The explicit opt-in reads it.
    _, record = materialise("passwd", {**spec, "source": {**source, "allow_outside_repo": True}}, "data")
    assert record["rows"] == 3


def test_a_declared_shape_is_checked_when_the_dataset_is_materialised(tmp_path):
    from sklearn.datasets import load_diabetes

    spec = {"kind": "single_task_regression", "source": {"type": "sklearn", "loader": "load_diabetes"},
            "target": "target", "features": "auto"}
    rows, features = load_diabetes(return_X_y=True)[0].shape
    materialise("diabetes", {**spec, "shape": [rows, features]}, tmp_path)
    with pytest.raises(DataSourceError, match=rf"datasets\.diabetes\.shape: declared \[{rows}, 9\].*{rows} rows "
                                              rf"and {features} features"):
        materialise("diabetes", {**spec, "shape": [rows, 9]}, tmp_path)


@pytest.mark.parametrize("bad", [[442], [442, 0], [442, 2.5], "442 x 10"])
def test_a_shape_is_two_positive_whole_numbers(smoke_raw, bad):
    cfg = copy.deepcopy(smoke_raw)
    registry = yaml.safe_load((REPO / "config" / "datasets.yaml").read_text())
    cfg.setdefault("datasets", {})["concrete"] = {**registry["concrete"], "shape": bad}
    with pytest.raises(ConfigError, match=r"datasets\.concrete\.shape"):
        prepare_config(cfg, REPO)

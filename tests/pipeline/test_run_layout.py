"""RunLayout (uqcal.pipeline.layout) is the one place that spells the paths of results/ and data/: each path as
docs/ARCHITECTURE.md ("Data flow") writes it, under moved roots too, and read back from disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from uqcal.pipeline import plan as J
from uqcal.pipeline.config.runs import Batch, Run
from uqcal.pipeline.layout import RunLayout


def test_every_path_as_the_artifact_contract_writes_it():
    layout = RunLayout()
    assert layout.summary("rio").as_posix() == "results/rio/summary.csv"
    assert layout.method_dir("rio", "concrete", "holdout", "nn").as_posix() == "results/rio/concrete/holdout/nn"
    assert layout.run_dir("rio", "concrete", "holdout", "nn", 3).as_posix() == "results/rio/concrete/holdout/nn/seed3"
    assert layout.split_dir("qr", "boston", "cv5").as_posix() == "data/splits/qr/boston/cv5"
    assert layout.split_path("qr", "boston", "cv5", 14).as_posix() == "data/splits/qr/boston/cv5/seed14.json"
    assert [p.as_posix() for p in layout.raw_files("ozone")] == ["data/raw/ozone.parquet", "data/raw/ozone.json"]
    assert (RunLayout.MODEL, RunLayout.PREDICTIONS, RunLayout.TRAIN_STATS, RunLayout.METRICS) == (
        "model.pt", "predictions.parquet", "train_stats.json", "metrics.json")


def test_moved_roots_move_everything_under_them(tmp_path):
    layout = RunLayout(tmp_path / "res", tmp_path / "dat")
    assert layout.run_dir("bo", "forrester", "basin", "random", 0) == tmp_path / "res/bo/forrester/basin/random/seed0"
    assert layout.summary("bo") == tmp_path / "res/bo/summary.csv"
    assert layout.split_path("bo", "forrester", "basin", 1) == tmp_path / "dat/splits/bo/forrester/basin/seed1.json"
    assert layout.raw_files("forrester")[0] == tmp_path / "dat/raw/forrester.parquet"


def test_the_run_folders_on_disk_are_found_and_read_back(tmp_path):
    layout = RunLayout(tmp_path)
    made = [("concrete", "holdout", "nn", 10), ("concrete", "holdout", "nn", 2), ("boston", "holdout", "rio", 0)]
    for dataset, setting, method, seed in made:
        layout.run_dir("rio", dataset, setting, method, seed).mkdir(parents=True)
    (layout.method_dir("rio", "concrete", "holdout", "nn") / "seedling").mkdir()  # not a run folder
    (layout.run_dir("rio", "concrete", "holdout", "nn", 2) / RunLayout.TRAIN_STATS).write_text("{}")
    found = layout.run_dirs("rio")
    # sorted by path, as the report has always read them (seed10 before seed2)
    assert [RunLayout.run_key(p) for p in found] == [made[2], made[0], made[1]]
    assert [RunLayout.seed_of(p) for p in layout.seed_dirs("rio", "concrete", "holdout", "nn")] == [10, 2]  # by name
    assert layout.seed_files("rio", "concrete", "holdout", "nn", RunLayout.TRAIN_STATS) == [
        layout.run_dir("rio", "concrete", "holdout", "nn", 2) / RunLayout.TRAIN_STATS]
    assert RunLayout(tmp_path / "none").run_dirs("rio") == []
    assert RunLayout.seed_of("seedling") is None
    with pytest.raises(ValueError, match="not a run folder"):
        RunLayout.run_key(tmp_path / "rio/concrete/holdout/nn/seedling")


def test_runs_batches_and_jobs_name_the_same_paths():
    run = Run("qr", "concrete", "cv5", "dvi", 4)
    assert run.run_dir == RunLayout().run_dir("qr", "concrete", "cv5", "dvi", 4).as_posix()
    assert run.split_path == "data/splits/qr/concrete/cv5/seed4.json"
    batch = Batch("qr", "concrete", "cv5", "dvi", (0, 1))
    assert (batch.method_dir, batch.split_dir) == ("results/qr/concrete/cv5/dvi", "data/splits/qr/concrete/cv5")
    assert all(Path(r.run_dir).parent.as_posix() == batch.method_dir for r in batch.runs)
    assert J.outputs(J.Job("train", ("qr", "concrete", "cv5", "dvi"))) == [batch.method_dir]
    assert J.outputs(J.Job("split", ("qr", "concrete", "cv5"))) == [batch.split_dir]
    assert J.outputs(J.Job("materialise", ("concrete",))) == ["data/raw/concrete.parquet", "data/raw/concrete.json"]
    assert J.outputs(J.Job("aggregate", ("qr",))) == ["results/qr/summary.csv", "results/qr/runs.parquet"]

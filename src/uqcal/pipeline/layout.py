"""Where a run's files lie: the one place that spells the folders and file names of results/ and data/.

    data/raw/<dataset>.parquet, data/raw/<dataset>.json            materialise (uqcal.data.raw_paths)
    data/splits/<family>/<dataset>/<setting>/seed<k>.json          split: one job per setting, every seed
    results/<family>/<dataset>/<setting>/<method>/seed<k>/         train: one job per method, every seed
        model.pt, predictions.parquet, train_stats.json, metrics.json
    results/<family>/summary.csv                                   aggregate

The roots move (``--results-dir``, ``--data-dir``, the report's planned view); what lies under them does not.
The Snakefile's output patterns are the same paths with wildcards for names (workflow/rules/common.smk).
The methods layer writes the files of its run folder (``RunContext.run_dir``, which this layout gives it) and
cannot import the pipeline: their names are spelled there too (uqcal.methods.api, uqcal.core.resume).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_SEED_DIR = re.compile(r"^seed(\d+)$")


@dataclass(frozen=True)
class RunLayout:
    """The paths of a pipeline's artifacts under its results and data roots."""

    results: Path | str = "results"
    data: Path | str = "data"

    MODEL = "model.pt"
    PREDICTIONS = "predictions.parquet"
    TRAIN_STATS = "train_stats.json"
    METRICS = "metrics.json"
    SUMMARY = "summary.csv"
    RUNS = "runs.parquet"

    # ---------------------------------------------------------------------------------------- results/
    def family_dir(self, family: str) -> Path:
        return Path(self.results) / family

    def summary(self, family: str) -> Path:
        """results/<family>/summary.csv (``uqcal aggregate``)."""
        return self.family_dir(family) / self.SUMMARY

    def runs(self, family: str) -> Path:
        """results/<family>/runs.parquet: every run's value of every metric (``uqcal aggregate``)."""
        return self.family_dir(family) / self.RUNS

    def setting_dir(self, family: str, dataset: str, setting: str) -> Path:
        """results/<family>/<dataset>/<setting>: one folder per method inside."""
        return self.family_dir(family) / dataset / str(setting)

    def method_dir(self, family: str, dataset: str, setting: str, method: str) -> Path:
        """results/<family>/<dataset>/<setting>/<method>: one train job's output, every seed's folder inside."""
        return self.setting_dir(family, dataset, setting) / method

    def run_dir(self, family: str, dataset: str, setting: str, method: str, seed: int | str) -> Path:
        """results/<family>/<dataset>/<setting>/<method>/seed<k>: one run."""
        return self.method_dir(family, dataset, setting, method) / self.seed_dir_name(seed)

    @staticmethod
    def seed_dir_name(seed: int | str) -> str:
        """A run folder's name, ``seed<k>`` (the order of these names is the report's seed order)."""
        return f"seed{seed}"

    def run_dirs(self, family: str) -> list[Path]:
        """Every run folder of a family on disk (``<dataset>/<setting>/<method>/seed<k>``), sorted."""
        root = self.family_dir(family)
        if not root.is_dir():
            return []
        return sorted(p for p in root.glob("*/*/*/seed*") if p.is_dir() and _SEED_DIR.match(p.name))

    def seed_dirs(self, family: str, dataset: str, setting: str, method: str) -> list[Path]:
        """The ``seed<k>`` folders of one method on disk, sorted by name."""
        root = self.method_dir(family, dataset, setting, method)
        return sorted(p for p in root.glob("seed*") if _SEED_DIR.match(p.name))

    def seed_files(self, family: str, dataset: str, setting: str, method: str, name: str) -> list[Path]:
        """The file ``name`` (train_stats.json, ...) of every seed folder of one method that holds it."""
        paths = (run_dir / name for run_dir in self.seed_dirs(family, dataset, setting, method))
        return [path for path in paths if path.is_file()]

    @staticmethod
    def seed_of(run_dir: Path | str) -> int | None:
        """k of a ``seed<k>`` folder; None for another name."""
        match = _SEED_DIR.match(Path(run_dir).name)
        return int(match.group(1)) if match else None

    @classmethod
    def run_key(cls, run_dir: Path | str) -> tuple[str, str, str, int]:
        """(dataset, setting, method, seed) of a run folder, read from its path."""
        run_dir = Path(run_dir)
        dataset, setting, method = run_dir.parts[-4:-1]
        seed = cls.seed_of(run_dir)
        if seed is None:
            raise ValueError(f"{run_dir}: not a run folder (seed<k>)")
        return dataset, setting, method, seed

    # ---------------------------------------------------------------------------------------- data/
    def raw_files(self, dataset: str) -> tuple[Path, Path]:
        """data/raw/<dataset>.parquet and its provenance record data/raw/<dataset>.json."""
        from uqcal.data import raw_paths

        return raw_paths(dataset, self.data)

    def split_dir(self, family: str, dataset: str, setting: str) -> Path:
        """data/splits/<family>/<dataset>/<setting>: one split job's output, every seed's file inside."""
        return Path(self.data) / "splits" / family / dataset / str(setting)

    def split_path(self, family: str, dataset: str, setting: str, seed: int | str) -> Path:
        return self.split_dir(family, dataset, setting) / f"seed{seed}.json"


__all__ = ["RunLayout"]

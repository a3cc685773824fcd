"""What the report reads of ``results/``.

Every number comes from what ``uqcal aggregate`` wrote: ``results/<family>/runs.parquet`` (one row per run and
metric, the per-seed values the claims' paired tests and the tables' significance marks need) and
``results/<family>/summary.csv`` (their means over seeds), restricted to the runs the config plans.

What is not a metric is read from the planned runs' own folders (:class:`RunFiles`): ``predictions.parquet``
and ``snapshots.parquet`` (figures, episode-paired claims, DVC plots), ``model.pt`` (calibration maps) and
``train_stats.json`` (logged curves, the device a run trained on, failed fits, train time).
"""

from __future__ import annotations

import functools
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.metrics import ece_floor
from uqcal.pipeline.layout import RunLayout
from uqcal.pipeline.summary import (
    RUN_COLUMNS,
    SUMMARY_COLUMNS,
    SUMMARY_FLOAT_FORMAT,
    summarise,
)

__all__ = ["RUN_COLUMNS", "SUMMARY_COLUMNS", "RunFiles", "load_tables", "with_ece_floors"]
Plan = dict[tuple[str, str, str], list[int]]  # (dataset, setting, method) -> seeds


def _read_summary(source) -> pd.DataFrame:
    frame = pd.read_csv(source, dtype={"dataset": str, "setting": str, "method": str, "metric": str})
    missing = [c for c in SUMMARY_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{source}: missing columns {missing}; expected {SUMMARY_COLUMNS}")
    return frame[SUMMARY_COLUMNS]


def load_tables(results_dir: Path, family: str, plan: Plan | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, runs) of a family: ``runs.parquet`` restricted to the ``plan``'s runs (all of it without one),
    and ``summary.csv`` where the runs table holds exactly those runs; where it holds others too (another
    config's aggregate: other seeds, datasets or methods), the summary of the planned runs, as ``uqcal
    aggregate`` writes it. Both empty when the family has no runs table."""
    layout = RunLayout(results_dir)
    if not layout.runs(family).exists():
        return pd.DataFrame(columns=SUMMARY_COLUMNS), pd.DataFrame(columns=RUN_COLUMNS)
    written = pd.read_parquet(layout.runs(family))
    missing = [c for c in RUN_COLUMNS if c not in written.columns]
    if missing:
        raise ValueError(f"{layout.runs(family)}: missing columns {missing}; expected {RUN_COLUMNS}")
    written = written[RUN_COLUMNS].astype({"setting": str})
    if plan is None:
        runs = written
    else:
        planned = {(d, str(s), m, int(seed)) for (d, s, m), seeds in plan.items() for seed in seeds}
        keys = zip(written["dataset"], written["setting"], written["method"], written["seed"], strict=True)
        runs = written[[key in planned for key in keys]].reset_index(drop=True)
    if len(runs) == len(written) and layout.summary(family).exists():
        return _read_summary(layout.summary(family)), runs
    if runs.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS), runs
    text = summarise(runs).to_csv(index=False, float_format=SUMMARY_FLOAT_FORMAT)
    return _read_summary(io.StringIO(text)), runs


@dataclass(frozen=True)
class RunFiles:
    """The folders of a family's planned runs, for what the report reads there beside the aggregate's tables.

    Only planned runs (``plan``) whose folder exists are seen: runs that other configs left in ``results/``
    never reach a figure, claim or provenance table. Seeds are listed in folder-name order (seed0, seed1,
    seed10, ...), runs by dataset, setting, method and seed folder.
    """

    results_dir: Path
    family: str
    plan: Plan

    @classmethod
    def on_disk(cls, results_dir: Path, family: str) -> RunFiles:
        """Every ``<dataset>/<setting>/<method>/seed<k>`` folder of the family as it is on disk."""
        plan: Plan = {}
        for path in RunLayout(results_dir).run_dirs(family):
            dataset, setting, method, seed = RunLayout.run_key(path)
            plan.setdefault((dataset, setting, method), []).append(seed)
        return cls(Path(results_dir), family, plan)

    def run_dir(self, dataset: str, setting: str, method: str, seed: int) -> Path:
        return RunLayout(self.results_dir).run_dir(self.family, dataset, setting, method, seed)

    @functools.cached_property
    def _present(self) -> dict[tuple[str, str, str], list[int]]:
        """(dataset, setting, method) -> planned seeds with a folder, in the order described above."""
        present = {}
        for (dataset, setting, method), seeds in sorted((tuple(map(str, key)), seeds) for key, seeds in self.plan.items()):
            found = sorted((s for s in set(seeds) if self.run_dir(dataset, setting, method, s).is_dir()),
                           key=lambda s: RunLayout.seed_dir_name(s))
            if found:
                present[(dataset, setting, method)] = found
        return present

    def runs(self) -> list[tuple[str, str, str, int]]:
        """(dataset, setting, method, seed) of every planned run with a folder."""
        return [(*key, seed) for key, seeds in self._present.items() for seed in seeds]

    def seeds(self, dataset: str, setting: str, method: str) -> list[int]:
        return list(self._present.get((dataset, str(setting), method), []))

    def settings(self) -> list[tuple[str, str]]:
        """(dataset, setting) pairs with runs, sorted."""
        return sorted({(dataset, setting) for dataset, setting, _ in self._present})

    def methods(self, dataset: str, setting: str) -> list[str]:
        """Methods with runs on (dataset, setting), sorted."""
        return sorted(m for d, s, m in self._present if (d, s) == (dataset, str(setting)))

    def files(self, dataset: str, setting: str, method: str, filename: str) -> list[tuple[int, Path]]:
        """(seed, path) of each run's ``filename`` that exists."""
        paths = [(seed, self.run_dir(dataset, setting, method, seed) / filename)
                 for seed in self.seeds(dataset, setting, method)]
        return [(seed, path) for seed, path in paths if path.exists()]

    def train_stats(self, dataset: str, setting: str, method: str, seed: int) -> dict:
        """A planned run's ``train_stats.json`` as a dict; {} when the run is not planned, or its file is missing,
        not JSON or not an object (the report then shows what it cannot read as not recorded rather than
        failing)."""
        if seed not in self.seeds(dataset, setting, method):
            return {}
        path = self.run_dir(dataset, setting, method, seed) / RunLayout.TRAIN_STATS
        if not path.exists():
            return {}
        try:
            stats = json.loads(path.read_text())
        except json.JSONDecodeError:
            return {}
        return stats if isinstance(stats, dict) else {}

    def logged(self, dataset: str, setting: str, method: str, key: str) -> list[tuple[int, object]]:
        """(seed, value) of what each run's train_stats.json logs under ``key`` (absent or empty: left out)."""
        found = []
        for seed, path in self.files(dataset, setting, method, RunLayout.TRAIN_STATS):
            value = json.loads(path.read_text()).get(key)
            if value:
                found.append((seed, value))
        return found

    def stats_curves(self, dataset: str, setting: str, method: str, key: str, truncate: bool = True) -> dict:
        """Curves stored in ``train_stats.json`` under ``key`` as {name: [[y0, y1, ...], ...]} for every seed:
        returns {name: 2-D array (curves x steps)}, curves of unequal length truncated to the shortest; with
        ``truncate`` False, {name: [list per curve]} as logged (the i-th curves of two names belong together)."""
        collected: dict[str, list] = {}
        for _, logged in self.logged(dataset, setting, method, key):
            for name, curves in logged.items():
                curves = [curves] if curves and not isinstance(curves[0], list) else curves
                collected.setdefault(name, []).extend(curves)
        if not truncate:
            return collected
        out = {}
        for name, curves in collected.items():
            length = min(len(c) for c in curves) if curves else 0
            if length:
                out[name] = np.asarray([c[:length] for c in curves], float)
        return out

    def load_predictions(self, dataset: str, setting: str, method: str,
                         filename: str = RunLayout.PREDICTIONS) -> pd.DataFrame | None:
        """All seeds' rows of one per-run file, with a ``seed`` column; None when no run has the file."""
        frames = []
        for seed, path in self.files(dataset, setting, method, filename):
            frame = pd.read_parquet(path) if filename.endswith(".parquet") else pd.read_csv(path)
            frame["seed"] = seed
            frames.append(frame)
        return pd.concat(frames, ignore_index=True) if frames else None


FLOOR_METHOD = "floor"


@functools.cache
def _floor(n: int) -> float:
    return ece_floor(n)[0]  # ~0.6 s a size; the rows share a few sizes


def with_ece_floors(summary: pd.DataFrame, floors: dict | None) -> pd.DataFrame:
    """Add the pseudo-method ``floor``: the expected ECE of a perfectly calibrated predictive per row.

    ``floors`` maps an ECE metric to the count metric giving its number of points (episodic regression:
    ``{ece: n_query, ece_pooled: n_query_pooled}``); the floor is :func:`uqcal.metrics.ece_floor` at that
    count (rounded mean over the row's runs), so an ECE table shows it as one more column.
    """
    if not floors or summary.empty:
        return summary
    rows = []
    for metric, count_metric in floors.items():
        counts = summary[(summary["metric"] == count_metric) & (summary["method"] != FLOOR_METHOD)]
        for (dataset, setting), group in counts.groupby(["dataset", "setting"], sort=False):
            n = int(round(float(group["mean"].median())))
            rows.append({"dataset": dataset, "setting": setting, "method": FLOOR_METHOD, "metric": metric,
                         "mean": _floor(n), "std": np.nan, "n": np.nan})
    if not rows:
        return summary
    return pd.concat([summary, pd.DataFrame(rows, columns=SUMMARY_COLUMNS)], ignore_index=True)

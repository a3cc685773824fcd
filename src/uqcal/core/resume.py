"""Resume after a crash: finished seeds of an interrupted batch and mid-training checkpoints.

A train job runs every seed of one method (``uqcal.pipeline.config.runs.Batch``). Snakemake deletes the declared outputs
of a job that did not finish before it reruns it, so finished seeds would be lost with them. Each finished
seed is therefore also hard-linked (no extra disk) into ``results/.resume/<run>/<digest>/``; a rerun of the
same job restores it from there instead of training again. Long training loops checkpoint into the same
folder (``TrainingCheckpoint``), so an interrupted seed resumes from its last checkpoint, not from zero.

``<digest>`` hashes the seed's resolved job (config slice, parameters, dataset spec): a checkpoint is never
resumed under a different configuration. Everything in the folder is written atomically, and the folder
is removed once the whole batch has finished, so it holds nothing after a clean run.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from uqcal.core.io import atomic_path, load_torch, torch_save

RUN_OUTPUTS = ("model.pt", "predictions.parquet", "train_stats.json", "metrics.json")
RESUME_DIR = ".resume"
COMPLETE = "COMPLETE"


def _link_or_copy(source: Path, target: Path) -> None:
    """Place ``source`` at ``target`` atomically, sharing the bytes where the file system allows."""
    with atomic_path(target) as tmp:
        tmp.unlink()
        try:
            os.link(source, tmp)
        except OSError:  # cross-device or no hard links: copy instead
            shutil.copy2(source, tmp)


class ResumeStore:
    """The resume folder of one run (one seed of one method) under one job digest."""

    def __init__(self, results_dir: Path, run_dir: Path, digest: str):
        relative = run_dir.resolve().relative_to(results_dir.resolve())
        self.base = results_dir / RESUME_DIR / relative
        self.path = self.base / digest

    def prepare(self) -> None:
        """Create this digest's folder and drop any left by other configurations of the same run.

        A SIGKILL between an atomic write's temp file and its rename leaves that temp file behind (no handler
        runs); it is never read, and is removed here. The job lock (``uqcal.pipeline.locks``) guarantees that
        no other process is writing into this folder while a job prepares it.
        """
        if self.base.is_dir():
            for other in self.base.iterdir():
                if other != self.path:
                    shutil.rmtree(other, ignore_errors=True)
        self.path.mkdir(parents=True, exist_ok=True)
        for stale in self.path.glob(".*.tmp"):
            stale.unlink(missing_ok=True)

    @property
    def checkpoint_path(self) -> Path:
        return self.path / "checkpoint.pt"

    def is_complete(self) -> bool:
        return (self.path / COMPLETE).exists() and all((self.path / name).exists() for name in RUN_OUTPUTS)

    def restore(self, run_dir: Path) -> bool:
        """Put a finished seed's outputs back into ``run_dir``; False if there is nothing finished to restore."""
        if not self.is_complete():
            return False
        for name in RUN_OUTPUTS:
            _link_or_copy(self.path / name, run_dir / name)
        return True

    def keep(self, run_dir: Path) -> None:
        """Record a finished seed: its outputs first, the COMPLETE marker last."""
        self.path.mkdir(parents=True, exist_ok=True)
        for name in RUN_OUTPUTS:
            _link_or_copy(run_dir / name, self.path / name)
        (self.path / COMPLETE).touch()
        self.checkpoint_path.unlink(missing_ok=True)

    def clear(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)
        # Remove now-empty parents up to and including results/.resume, so a finished run leaves nothing
        # behind. Jobs finish concurrently: a parent another job still uses is not empty, and one another job
        # removed first is gone; both end the climb.
        parent = self.base.parent
        while parent.name != RESUME_DIR and _remove_if_empty(parent):
            parent = parent.parent
        if parent.name == RESUME_DIR:
            _remove_if_empty(parent)


def _remove_if_empty(folder: Path) -> bool:
    try:
        folder.rmdir()
    except OSError:  # not empty, or already removed
        return False
    return True


class TrainingCheckpoint:
    """Save and load a training loop's full state (model, optimiser, RNGs, counters) atomically.

    ``path`` None disables checkpointing (library use without a run folder). The loop decides what goes in
    the state; restoring it must make the rest of the run identical to an uninterrupted one.
    """

    def __init__(self, path: Path | None, log: logging.Logger | None = None):
        self.path = path
        self.log = log or logging.getLogger("uqcal.checkpoint")

    def load(self) -> dict[str, Any] | None:
        if self.path is None or not self.path.exists():
            return None
        state = load_torch(self.path, map_location="cpu")  # tensors and plain containers only
        self.log.info("resuming from checkpoint %s (epoch %s)", self.path, state.get("epoch"))
        return state

    def save(self, state: dict[str, Any]) -> None:
        if self.path is not None:
            torch_save(self.path, state)

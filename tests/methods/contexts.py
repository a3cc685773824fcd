"""A RunContext whose data table and split are held in memory, for method tests that run ``train(ctx)`` and
``train_batch(ctxs)`` without a data directory (the pipeline's contexts read them from disk)."""

from __future__ import annotations

from dataclasses import dataclass

from uqcal.methods.api import RunContext


@dataclass
class InMemoryContext(RunContext):
    data: object = None  # what ``load_data`` returns: an object with ``X`` and ``y`` arrays
    split: dict | None = None  # what ``load_split`` returns: ``train`` and ``test`` row lists (and any extras)

    def load_data(self):
        return self.data

    def load_split(self):
        return self.split

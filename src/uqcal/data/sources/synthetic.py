"""`synthetic` source: the analytic optimisation objectives of `uqcal.data.objectives`.

The objective itself is code; what is materialised in ``data/raw/<name>.parquet`` is a small frame that
describes it (one row per dimension: name, kind, lower, upper, optimum value, a minimiser) so that every
dataset of the registry has a raw artifact with provenance.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from uqcal.data.objectives import Objective, describe, get_objective, make_synthetic


def make_objective(spec: dict, *, cache_dir=None) -> Objective:
    """The objective of a ``{type: synthetic, objective, dim?}`` entry (``uqcal.data.objectives.get_objective``)."""
    if "objective" not in spec:
        raise ValueError(f"synthetic source needs 'objective': {spec!r}")
    unknown = set(spec) - {"type", "objective", "dim"}
    if unknown:
        raise ValueError(f"synthetic source: unknown key(s) {sorted(unknown)}")
    return make_synthetic(spec["objective"], spec.get("dim"))


def load(spec: dict, *, name: str, cache_dir: Path, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    import botorch

    objective = get_objective(spec)
    frame = describe(objective)
    provenance = {
        "source": "synthetic",
        "name": name,
        "objective": objective.name,
        "dim": objective.dim,
        "optimum_value": objective.optimum_value,
        "minimisers": objective.minimisers,
        "botorch_version": botorch.__version__,
        "rows": int(len(frame)),
        "columns": list(frame.columns),
    }
    return frame, provenance

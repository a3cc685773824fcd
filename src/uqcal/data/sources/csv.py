"""A local data file as a dataset: add a dataset by config alone.

Spec::

    type: csv
    path: data/external/my_table.csv   # relative to the repository root (the working directory)
    format: null                       # null -> from the suffix (.parquet, .arff, .xlsx; else csv)
    read: {sep: ","}                   # keyword arguments for the pandas reader
    member: null                       # file inside a zip/tar archive
    allow_outside_repo: false          # true: the path may lie outside the repository (its rows then go into
                                       # data/raw/ and the DVC remote); refused otherwise
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from uqcal.data import readers
from uqcal.data.errors import DataSourceError, check_local_path, check_source_keys
from uqcal.data.sources.url import sha256_of

SPEC_KEYS = {"type", "path", "format", "read", "member", "allow_outside_repo"}
SUFFIX_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".arff": "arff", ".xlsx": "excel", ".xls": "excel",
                  ".tsv": "csv", ".data": "whitespace"}


def load(spec: dict, *, name: str, cache_dir: Path, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    check_source_keys(spec, SPEC_KEYS, "csv", name=name, required=("path",))
    path = check_local_path(spec, "csv", name=name)
    if not path.is_file():
        raise DataSourceError(f"dataset {name!r}: file {spec['path']} not found (paths are relative to "
                              f"the repository root, here {Path.cwd()})")
    suffixes = [s for s in path.suffixes if s != ".gz"]
    fmt = spec.get("format") or SUFFIX_FORMATS.get(suffixes[-1] if suffixes else "", "csv")
    read = dict(spec.get("read") or {})
    if fmt == "csv" and path.suffix == ".tsv" and "sep" not in read:
        read["sep"] = "\t"
    try:
        frame = readers.read_table(path, format=fmt, member=spec.get("member"), read=read)
    except DataSourceError as error:
        raise DataSourceError(f"dataset {name!r}: {error}") from None
    provenance = {"source": "csv", "path": str(spec["path"]), "format": fmt, "sha256": sha256_of(path),
                  "bytes": path.stat().st_size}
    return frame, provenance

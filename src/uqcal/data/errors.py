"""User-facing data errors."""


class DataSourceError(RuntimeError):
    """A dataset could not be obtained; the message says which, from where, and how to fix it."""


def check_source_keys(spec: dict, allowed, source: str, *, name: str | None = None, required=()) -> None:
    """Reject unknown and missing keys of a dataset's ``source:`` entry (``type`` is always allowed), naming
    the dataset, the source and the key."""
    where = f"dataset {name!r}: {source} source" if name else f"{source} source"
    allowed = set(allowed) - {"type"}
    unknown = set(spec) - allowed - {"type"}
    if unknown:
        raise DataSourceError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    for key in required:
        if not spec.get(key):
            raise DataSourceError(f"{where} needs `{key}:`")

"""User-facing data errors."""

from pathlib import Path


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


# A source key that lets a local source read a file outside the repository (the working directory).
OUTSIDE_REPO_KEY = "allow_outside_repo"


def outside_repo_problem(spec: dict, source: str, *, name: str, root: Path | None = None) -> str | None:
    """Why a local source's ``path`` may not be read: it resolves (links followed) outside the repository
    ``root`` (default: the working directory, where the workflow runs), and the entry does not opt in with
    ``allow_outside_repo: true``. A file outside would be copied into data/raw/ and pushed to the DVC remote
    without anyone having chosen to share it."""
    raw = spec.get("path")
    if not raw or spec.get(OUTSIDE_REPO_KEY) is True:
        return None
    root = (root or Path.cwd()).resolve()
    resolved = (root / Path(raw).expanduser()).resolve()
    if resolved.is_relative_to(root):
        return None
    return (f"dataset {name!r}: {source} source path {raw!r} resolves to {resolved}, outside the repository "
            f"({root}); its rows would be copied into data/raw/ and pushed to the DVC remote. Copy the file into "
            f"the repository (e.g. data/external/), or set `{OUTSIDE_REPO_KEY}: true` in the dataset's source to "
            "read it from there on purpose")


def check_local_path(spec: dict, source: str, *, name: str) -> Path:
    """The path of a local source's file (relative to the working directory), refused when outside it."""
    problem = outside_repo_problem(spec, source, name=name)
    if problem:
        raise DataSourceError(problem)
    return Path(spec["path"]).expanduser()

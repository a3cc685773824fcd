"""Atomic artifact writes (a temp file in the target directory, then os.replace) and safe torch loading."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; artifacts get the usual permissions
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: str | os.PathLike, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


def write_parquet(path: str | os.PathLike, frame) -> None:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def torch_save(path: str | os.PathLike, obj: Any) -> None:
    """``torch.save`` atomically, the same bytes for the same content: given a file name, torch names the
    archive's inner folder after it (here the random temporary name); given an open file, "archive"."""
    import torch

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        torch.save(obj, fh)


class UnsafeArtifactError(pickle.UnpicklingError):
    """A torch file holds something other than tensors, numpy arrays and plain containers."""


def _numpy_safe_globals() -> list:
    """What unpickling a numpy array or scalar needs, and nothing that runs code: the array rebuilder,
    ndarray, dtype and its concrete classes (object arrays left out: their items would be arbitrary), and
    ``bytes`` (an empty array's buffer is pickled as a ``bytes()`` call)."""
    import numpy as np
    try:
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct, scalar

    dtype_classes = [cls for cls in vars(np.dtypes).values()
                     if isinstance(cls, type) and issubclass(cls, np.dtype) and cls is not np.dtypes.ObjectDType]
    return [_reconstruct, scalar, np.ndarray, np.dtype, bytes, *dtype_classes]


def load_torch(path: str | os.PathLike, map_location: Any = "cpu") -> Any:
    """``torch.load`` with ``weights_only=True``: tensors, state dicts, numpy arrays, numbers, strings and
    containers load; anything else (a pickled class, a ``__reduce__`` payload) is refused with an error
    naming the file and the object, before any of it runs.

    model.pt and checkpoints are the files others share (``dvc pull``, a results archive), so every uqcal
    reader goes through here; uqcal itself saves only those plain types.
    """
    import torch

    try:
        with torch.serialization.safe_globals(_numpy_safe_globals()):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"GLOBAL ([\w.]+)", str(error))
        what = f"a `{found.group(1)}` object" if found else "an object that is not a tensor or a plain container"
        raise UnsafeArtifactError(
            f"refusing to load {path}: it holds {what}. uqcal loads only tensors, numpy arrays, numbers, "
            "strings and containers of them (torch.load weights_only=True), and writes nothing else; a file "
            "that needs more was not written by uqcal and may run code when unpickled. Delete it and rerun "
            "the job that makes it, or pull it again from a remote you trust."
        ) from None

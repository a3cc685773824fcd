"""Download a dataset file once, verify it, and read it.

Spec (the dataset's ``source:`` mapping)::

    type: url
    url: https://archive.ics.uci.edu/ml/machine-learning-databases/00243/yacht_hydrodynamics.data
    filename: yacht_hydrodynamics.data   # name in the download cache (default: last URL segment)
    sha256: null                         # expected checksum; null -> trust-on-first-use via the lock file
    format: whitespace                   # see uqcal.data.readers (csv, whitespace, excel, zip-csv, ...)
    read: {header: null}                 # keyword arguments for the pandas reader
    member: null                         # file inside a zip/tar archive
    options: {}                          # options of image readers (omniglot, idx)
    retries: 3                           # extra attempts after transient failures (5xx, 429, network)
    backoff: 1.0                         # seconds; attempt k waits backoff * 2**(k-1)
    timeout: 60                          # seconds per network operation

The file is streamed into a temporary file beside its final place, hashed while it streams, checked,
and only then renamed into place (``os.replace``), so the cache never holds a partial or unverified
file.  The first download that parses records ``{url, sha256, bytes}`` in ``config/datasets.lock.json`` (a
corrupt one is removed and records nothing, so the right file placed afterwards is accepted);
later downloads (and files already in the cache) must match the spec's ``sha256`` or, when the spec has
none, the lock's.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from uqcal.core import io as uio
from uqcal.data import readers
from uqcal.data.errors import DataSourceError, check_source_keys

log = logging.getLogger(__name__)

DEFAULT_LOCK_PATH = Path("config/datasets.lock.json")
CHUNK_BYTES = 1 << 20
USER_AGENT = "uqcal-data/0.1 (+https://github.com; research pipeline)"
SPEC_KEYS = {"type", "url", "filename", "sha256", "format", "reader", "read", "member", "labels_member",
             "options", "retries", "backoff", "timeout"}


class _Transient(Exception):
    """A failure worth retrying (HTTP 5xx/429, connection reset, time-out)."""


class _Permanent(Exception):
    """A failure that another attempt will not fix (HTTP 4xx, checksum mismatch)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(directory: Path):
    """Serialise read-modify-write of the lock file between parallel materialise jobs (POSIX flock)."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock, writes are still atomic
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_lock(lock_path: Path) -> dict:
    if not lock_path.exists():
        return {}
    try:
        return uio.read_json(lock_path)
    except ValueError as error:
        raise DataSourceError(f"{lock_path} is not valid JSON ({error}); fix or delete it") from error


def record_lock(lock_path: Path, name: str, entry: dict) -> None:
    with _locked(lock_path.parent):
        lock = read_lock(lock_path)
        if lock.get(name) != entry:
            lock[name] = entry
            uio.write_json(lock_path, lock)


def _download_once(url: str, target: Path, timeout: float) -> tuple[str, int]:
    """Stream ``url`` into a temp file beside ``target``; return (sha256, bytes) of the temp file's content.

    The temp file is renamed onto ``target`` by the caller's ``atomic_path``; here it only gets written.
    """
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    digest, size = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, open(target, "wb") as out:
            expected = response.headers.get("Content-Length")
            for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
        if expected is not None and int(expected) != size:
            raise _Transient(f"connection closed after {size} of {expected} bytes")
    except urllib.error.HTTPError as error:
        message = f"HTTP {error.code} {error.reason}"
        if error.code >= 500 or error.code in (408, 429):
            raise _Transient(message) from error
        raise _Permanent(message) from error
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as error:
        reason = getattr(error, "reason", error)
        raise _Transient(f"network error: {reason}") from error
    return digest.hexdigest(), size


def fetch(url: str, path: Path, *, sha256: str | None, retries: int = 3, backoff: float = 1.0,
          timeout: float = 60.0) -> tuple[str, int, int]:
    """Download ``url`` to ``path`` (atomically, verified); return (sha256, bytes, attempts).

    Raises ``_Permanent`` / ``_Transient`` (after the last retry); the caller turns them into a message.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    attempt = 0
    while True:
        attempt += 1
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            digest, size = _download_once(url, tmp, timeout)
            if sha256 is not None and digest != sha256.lower():
                raise _Permanent(f"checksum mismatch: expected sha256 {sha256}, downloaded {digest} "
                                 f"({size} bytes)")
            os.replace(tmp, path)
            return digest, size, attempt
        except _Transient as error:
            if attempt > retries:
                raise
            wait = backoff * 2 ** (attempt - 1)
            log.warning("download of %s failed (%s); retry %d/%d in %.2g s", url, error, attempt, retries,
                        wait)
            time.sleep(wait)
        finally:
            if tmp.exists():
                tmp.unlink()


def _manual_instructions(name: str, url: str, path: Path, sha256: str | None) -> str:
    check = f" with sha256 {sha256}" if sha256 else ""
    return (
        f"Download it by hand from {url} and place it at {path}{check}, "
        f"or fetch it from the DVC remote with `dvc pull {path}`; then run `uqcal materialise` again."
    )


def _validate(spec: dict, name: str) -> dict:
    check_source_keys(spec, SPEC_KEYS, "url", name=name, required=("url",))
    params = {"filename": None, "sha256": None, "format": "csv", "read": {}, "member": None,
              "labels_member": None, "options": {}, "retries": 3, "backoff": 1.0, "timeout": 60, **spec}
    if params.get("reader"):
        params["format"] = params["reader"]
    if not params["filename"]:
        params["filename"] = params["url"].rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    if "/" in params["filename"] or params["filename"] in ("", ".", ".."):
        raise DataSourceError(f"dataset {name!r}: url source: filename {params['filename']!r} must be a "
                              "plain file name")
    if not isinstance(params["retries"], int) or params["retries"] < 0:
        raise DataSourceError(f"dataset {name!r}: url source: retries must be an integer >= 0")
    readers.normalise_format(params["format"])
    return params


def _check_content(path: Path, format: str) -> None:
    """What every download must pass, whoever reads it later (a table, an archive, an image set): not empty and
    not an HTML page (a server's error, login or redirect page served with status 200), which a csv or
    whitespace reader would otherwise take as a table of one text column."""
    with open(path, "rb") as fh:
        head = fh.read(1024)
    if not head:
        raise DataSourceError("the file is empty")
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if "html" not in format and start.startswith((b"<!doctype html", b"<html", b"<head", b"<?xml")) \
            and b"<html" in head.lower():
        raise DataSourceError("the file is an HTML page (a server's error or login page?), not the data")


def obtain(spec: dict, *, name: str, cache_dir: Path, lock_path: Path | None = None,
           check: Callable[[Path], object] | None = None) -> tuple[Path, dict]:
    """Make sure the verified file is in the cache; return its path and the provenance record.

    ``check(path)`` (e.g. parsing the file) runs before the file's hash is recorded in the lock: a file that
    fails it is never recorded, so a corrupt first download does not pin its own hash; a file downloaded by
    this call that fails it is removed, and the error (DataSourceError) says what happened.
    """
    params = _validate(spec, name)
    lock_path = Path(lock_path) if lock_path is not None else DEFAULT_LOCK_PATH
    url, path = params["url"], Path(cache_dir) / params["filename"]
    locked = read_lock(lock_path).get(name, {})
    expected = params["sha256"] or (locked.get("sha256") if locked.get("url") == url else None)
    expected = expected.lower() if expected else None

    downloaded = False
    cached_ok = False
    if path.exists():
        digest, size = sha256_of(path), path.stat().st_size
        cached_ok = expected is None or digest == expected
        if not cached_ok:
            log.warning("%s: cached %s has sha256 %s, expected %s; downloading it again", name, path,
                        digest, expected)
    if not cached_ok:
        try:
            digest, size, attempts = fetch(url, path, sha256=expected, retries=params["retries"],
                                           backoff=params["backoff"], timeout=params["timeout"])
        except (_Permanent, _Transient) as error:
            offline = isinstance(error, _Transient) and "network error" in str(error)
            what = "could not reach the server (offline?)" if offline else "download failed"
            raise DataSourceError(
                f"dataset {name!r}: {what}: {error} [{url}]. "
                + _manual_instructions(name, url, path, expected)
            ) from None
        downloaded = True
        log.info("%s: downloaded %s (%d bytes, %d attempt(s))", name, url, size, attempts)
    # Every download is read before its hash is recorded: at least as not an error page (_check_content).
    try:
        _check_content(path, params["format"])
        if check is not None:
            check(path)
    except Exception as error:  # any reader's failure (BadZipFile, ParserError, ...): one message
        reason = f"{type(error).__name__}: {error}" if not isinstance(error, DataSourceError) else str(error)
        if expected is None:
            if downloaded:
                path.unlink(missing_ok=True)
            origin = (f"the file downloaded from {url} ({size} bytes, sha256 {digest}) was removed"
                      if downloaded else f"{path} (sha256 {digest}) was kept; delete or replace it")
            raise DataSourceError(
                f"dataset {name!r}: cannot read the {'download' if downloaded else 'cached file'} as "
                f"{params['format']}: {reason}. It is corrupt or not the file this entry describes: {origin}, "
                f"and no checksum was recorded in {lock_path}. "
                + _manual_instructions(name, url, path, None)
            ) from None
        raise DataSourceError(f"dataset {name!r}: {path} has the expected sha256 {digest} but cannot be read "
                              f"as {params['format']}: {reason}; check the entry's format, member and read "
                              "options") from None
    record_lock(lock_path, name, {"url": url, "sha256": digest, "bytes": size})
    provenance = {"source": "url", "url": url, "file": str(path), "sha256": digest, "bytes": size,
                  "downloaded": downloaded, "sha256_pinned_in": "spec" if params["sha256"] else
                  ("lock" if expected else "first download"), "format": params["format"],
                  "member": params["member"]}
    return path, provenance


def load(spec: dict, *, name: str, cache_dir: Path, seed: int = 0,
         lock_path: Path | None = None) -> tuple[pd.DataFrame, dict]:
    params = _validate(spec, name)
    options = dict(params["options"])
    if params["labels_member"]:
        options["labels_member"] = params["labels_member"]
    read: dict[str, pd.DataFrame] = {}

    def parse(path: Path) -> None:  # before the file's hash is recorded (obtain)
        read["frame"] = readers.read_table(path, format=params["format"], member=params["member"],
                                           read=params["read"], **options)

    _path, provenance = obtain(spec, name=name, cache_dir=Path(cache_dir), lock_path=lock_path, check=parse)
    return read["frame"], provenance

"""File-format readers for downloaded or local data files.

``read_table(path, format=..., member=..., read={...})`` turns one file into a DataFrame:

- ``csv``: ``pandas.read_csv`` with any keyword arguments in ``read``;
- ``whitespace``: whitespace-separated text (``sep=r"\\s+"``), otherwise like ``csv``;
- ``excel``: ``pandas.read_excel``, only when ``openpyxl`` (xlsx) or ``xlrd`` (xls) is importable;
- ``parquet``, ``arff`` (``scipy.io.arff``, e.g. OpenML downloads);
- ``omniglot``: a zip of ``<alphabet>/<character>/<drawing>.png`` folders (Lake et al.'s
  ``images_background.zip``), resized to ``image_size`` square and stored as ``px*`` uint8 columns;
- ``image_folders``: a zip/tar of ``.../<class>/<image>`` files (``member`` is a glob such as
  ``CUB_200_2011/images/*/*.jpg``), resized to ``image_size`` square, grey (``mode: L``) or ``RGB``;
- ``idx``: EMNIST/MNIST IDX image + label files (``member`` names the images, ``labels_member`` the labels).

Archives are recognised by their content, not their name: a zip, tar or gzip file is opened and
``member`` (a path inside the archive, or a glob such as ``*/train.csv``) is read.  A format may also be
written ``zip-csv``, ``tar-whitespace``, ``gzip-csv``: the prefix is only documentation.
"""

from __future__ import annotations

import fnmatch
import gzip
import importlib.util
import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from uqcal.data.errors import DataSourceError

TABLE_FORMATS = ("csv", "whitespace", "excel", "parquet", "arff")
IMAGE_FORMATS = ("omniglot", "idx", "image_folders")
ARCHIVE_PREFIXES = ("zip", "tar", "gzip", "gz", "tgz")


def normalise_format(fmt: str) -> str:
    """``zip-csv`` -> ``csv``; unknown formats fail with the list of known ones."""
    base = fmt.split("-", 1)[1] if fmt.split("-", 1)[0] in ARCHIVE_PREFIXES and "-" in fmt else fmt
    if base not in TABLE_FORMATS + IMAGE_FORMATS:
        raise DataSourceError(f"unknown data format {fmt!r}; known: {list(TABLE_FORMATS + IMAGE_FORMATS)}"
                              " (optionally prefixed zip-/tar-/gzip-)")
    return base


def archive_kind(path: Path) -> str | None:
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic.startswith(b"PK\x03\x04") or magic.startswith(b"PK\x05\x06"):
        return "zip"
    if magic.startswith(b"\x1f\x8b"):
        # A .tar.gz is a tar; a bare .gz is one compressed file.
        try:
            with tarfile.open(path, "r:gz") as archive:
                archive.next()
            return "tar"
        except tarfile.TarError:
            return "gzip"
    if tarfile.is_tarfile(path):
        return "tar"
    return None


def _match(names: list[str], member: str, path: Path) -> str:
    if member in names:
        return member
    hits = [n for n in names if fnmatch.fnmatch(n, member) or n.rsplit("/", 1)[-1] == member]
    if len(hits) != 1:
        shown = names[:20]
        raise DataSourceError(
            f"{path}: archive member {member!r} matches {len(hits)} entries {hits[:5]}; "
            f"members include {shown}{' ...' if len(names) > 20 else ''}"
        )
    return hits[0]


def read_member_bytes(path: Path, member: str | None, fmt: str | None = None) -> tuple[bytes, str]:
    """The bytes of the file to parse, and the name it had (for the excel engine and messages)."""
    kind = archive_kind(path)
    if kind is None or (kind == "zip" and member is None and fmt == "excel"):  # an .xlsx is itself a zip
        return path.read_bytes(), path.name
    if kind == "gzip":
        with gzip.open(path, "rb") as handle:
            return handle.read(), path.name.removesuffix(".gz")
    if member is None:
        raise DataSourceError(f"{path} is a {kind} archive: set `member:` to the file inside it to read")
    if kind == "zip":
        with zipfile.ZipFile(path) as archive:
            name = _match([n for n in archive.namelist() if not n.endswith("/")], member, path)
            data = archive.read(name)
    else:
        with tarfile.open(path) as archive:
            names = [m.name for m in archive.getmembers() if m.isfile()]
            name = _match(names, member, path)
            data = archive.extractfile(name).read()
    if name.endswith(".gz"):  # e.g. EMNIST's gzip.zip holds .gz files
        data, name = gzip.decompress(data), name.removesuffix(".gz")
    return data, name


def _excel_engine(name: str) -> str:
    needed = "xlrd" if name.lower().endswith(".xls") else "openpyxl"
    if importlib.util.find_spec(needed) is None:
        raise DataSourceError(
            f"reading {name} needs the optional package {needed!r}: `pip install {needed}`, "
            "or convert the sheet to CSV yourself and point the dataset at it with a csv source"
        )
    return needed


def read_table(path: str | Path, *, format: str = "csv", member: str | None = None,
               read: dict | None = None, **options) -> pd.DataFrame:
    """Read one data file (or one member of an archive) into a DataFrame."""
    path = Path(path)
    fmt = normalise_format(format)
    read = dict(read or {})
    if fmt == "omniglot":
        return read_omniglot(path, **options)
    if fmt == "idx":
        return read_idx(path, member=member, **options)
    if fmt == "image_folders":
        return read_image_folders(path, member=member, **options)
    if options:
        raise DataSourceError(f"{path}: options {sorted(options)} only apply to image formats")
    data, name = read_member_bytes(path, member, fmt)
    buffer = io.BytesIO(data)
    try:
        if fmt in ("csv", "whitespace"):
            _check_ragged(data, name, path, fmt, read)
            frame = pd.read_csv(buffer, **({"sep": r"\s+"} if fmt == "whitespace" else {}), **read)
            return _check_duplicate_columns(frame, name, path)
        if fmt == "excel":
            return _check_duplicate_columns(pd.read_excel(buffer, engine=_excel_engine(name), **read), name, path)
        if fmt == "parquet":
            return pd.read_parquet(buffer, **read)
        if fmt == "arff":
            from scipy.io import arff

            records, _meta = arff.loadarff(io.StringIO(data.decode("utf-8", errors="replace")))
            frame = pd.DataFrame(records)
            for column in frame.columns:  # nominal attributes come back as bytes
                if frame[column].dtype == object:
                    frame[column] = frame[column].str.decode("utf-8")
            return frame
    except DataSourceError:
        raise
    except (ValueError, TypeError, UnicodeDecodeError, pd.errors.ParserError) as error:
        raise DataSourceError(f"could not read {name} from {path} as {fmt} with {read}: {error}") from error
    raise AssertionError(fmt)  # normalise_format admits nothing else


def _where(name: str, path: Path) -> str:
    """The file a message is about: the path, or the archive member and its archive."""
    return str(path) if name == path.name else f"{name} in {path}"


def _check_duplicate_columns(frame: pd.DataFrame, name: str, path: Path) -> pd.DataFrame:
    """pandas renames a repeated header name (``x1``, ``x1.1``, ``x1.2``); such copies would become features
    under invented names, so they are an error naming the column."""
    columns = [str(c) for c in frame.columns]
    present = set(columns)
    repeated: dict[str, int] = {}
    for column in columns:
        base, dot, number = column.rpartition(".")
        if dot and number.isdigit() and base in present and all(f"{base}.{k}" in present for k in range(1, int(number))):
            repeated[base] = max(repeated.get(base, 1), int(number) + 1)
    if repeated:
        listed = ", ".join(f"{c!r} ({n} times)" for c, n in repeated.items())
        raise DataSourceError(
            f"{_where(name, path)}: the header repeats column name(s) {listed}; pandas would rename the copies "
            f"({', '.join(repr(f'{c}.1') for c in repeated)}, ...) and use them as features under invented names. "
            "Give every column its own name in the file, or name them with `read: {names: [...], header: 0}`"
        )
    return frame


# read_csv options under which a row's fields can be counted line by line (no comments, quotes or skipped rows).
_COUNTABLE_READ = {"header", "sep", "na_values", "dtype", "skipinitialspace", "decimal", "thousands"}


def _check_ragged(data: bytes, name: str, path: Path, fmt: str, read: dict) -> None:
    """A row with fewer fields than the header would be padded with missing values by pandas; name its line."""
    sep = read.get("sep", "," if fmt == "csv" else None)
    if not set(read) <= _COUNTABLE_READ or read.get("header", 0) not in (0, "infer", None) or fmt == "csv" and (
            not isinstance(sep, str) or len(sep) != 1):
        return
    text = data.decode("utf-8", errors="replace")
    if fmt == "csv":
        import csv

        lines = ((reader.line_num, row) for reader in [csv.reader(io.StringIO(text), delimiter=sep)] for row in reader)
        counted = [(number, len(row)) for number, row in lines if row]
    else:
        counted = [(number, len(line.split())) for number, line in enumerate(text.splitlines(), start=1)
                   if line.strip()]
    if len(counted) < 2:
        return
    expected = counted[0][1] if read.get("header", 0) is not None else max(n for _, n in counted)
    short = [(number, n) for number, n in counted[1:] if n < expected]
    if short:
        shown = ", ".join(f"line {number} has {n}" for number, n in short[:5]) + (" ..." if len(short) > 5 else "")
        raise DataSourceError(
            f"{_where(name, path)}: {len(short)} row(s) have fewer fields than the {expected} of "
            f"{'the header (line ' + str(counted[0][0]) + ')' if read.get('header', 0) is not None else 'the longest row'}"
            f": {shown}. pandas would fill the missing fields with missing values; fix those lines in the file "
            "(an empty field between separators is a missing value)"
        )


def _to_square_uint8(image, size: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(image.convert("L").resize((size, size), Image.Resampling.BOX), dtype=np.uint8)


def read_omniglot(path: Path, *, image_size: int = 28, **unused) -> pd.DataFrame:
    """Omniglot zip -> label ``alphabet/characterNN``, script = alphabet, drawer id, ink = 255.

    The PNGs are 105x105 black strokes on white; they are inverted so ink is bright, like the glyphs set.
    """
    if unused:
        raise DataSourceError(f"omniglot reader: unknown option(s) {sorted(unused)}")
    from PIL import Image

    rows, pixels = [], []
    with zipfile.ZipFile(path) as archive:
        names = sorted(n for n in archive.namelist() if n.lower().endswith(".png"))
        if not names:
            raise DataSourceError(f"{path}: no PNG files; expected <alphabet>/<character>/<drawing>.png")
        for name in names:
            parts = name.split("/")
            if len(parts) < 3:
                raise DataSourceError(f"{path}: {name} is not <alphabet>/<character>/<drawing>.png")
            alphabet, character, drawing = parts[-3], parts[-2], parts[-1]
            with Image.open(io.BytesIO(archive.read(name))) as image:
                pixels.append(255 - _to_square_uint8(image, image_size).reshape(-1))
            drawer = drawing.rsplit(".", 1)[0].rsplit("_", 1)[-1]
            rows.append((f"{alphabet}/{character}", alphabet, drawer))
    meta = pd.DataFrame(rows, columns=["label", "script", "drawer"])
    px = pd.DataFrame(np.stack(pixels), columns=[f"px{i}" for i in range(image_size * image_size)])
    return pd.concat([meta, px], axis=1)


def _parse_idx(data: bytes) -> np.ndarray:
    # IDX: two zero bytes, a type code (0x08 = uint8), the number of dimensions, big-endian int32 sizes.
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] != 0x08:
        raise DataSourceError("not an uint8 IDX file")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if array.size != int(np.prod(shape)):
        raise DataSourceError(f"IDX size mismatch: header says {shape}, file holds {array.size} values")
    return array.reshape(shape)


def read_idx(path: Path, *, member: str | None, labels_member: str | None = None, image_size: int = 28,
             transpose: bool = True, mapping: dict | None = None) -> pd.DataFrame:
    """EMNIST (or MNIST) images + labels.  EMNIST stores images transposed; ``transpose`` undoes it."""
    if member is None or labels_member is None:
        raise DataSourceError(f"{path}: the idx format needs `member:` (images) and `labels_member:`")
    images = _parse_idx(read_member_bytes(path, member)[0])
    labels = _parse_idx(read_member_bytes(path, labels_member)[0])
    if images.shape[0] != labels.shape[0]:
        raise DataSourceError(f"{path}: {images.shape[0]} images but {labels.shape[0]} labels")
    if transpose:
        images = images.transpose(0, 2, 1)
    if images.shape[1:] != (image_size, image_size):
        from PIL import Image

        images = np.stack([_to_square_uint8(Image.fromarray(im), image_size) for im in images])
    names = [str((mapping or {}).get(int(k), int(k))) for k in labels]
    meta = pd.DataFrame({"label": names})
    px = pd.DataFrame(images.reshape(len(images), -1), columns=[f"px{i}" for i in range(image_size**2)])
    return pd.concat([meta, px], axis=1)


def _archive_entries(path: Path, pattern: str):
    """Yield (name, bytes) of the archive's files matching the glob ``pattern``, in name order."""
    kind = archive_kind(path)
    if kind == "zip":
        with zipfile.ZipFile(path) as archive:
            for name in sorted(n for n in archive.namelist() if fnmatch.fnmatch(n, pattern)):
                yield name, archive.read(name)
    elif kind == "tar":
        with tarfile.open(path) as archive:  # one sequential pass: fast on a .tgz
            members = [m for m in archive if m.isfile() and fnmatch.fnmatch(m.name, pattern)]
            for member in sorted(members, key=lambda m: m.name):
                yield member.name, archive.extractfile(member).read()
    else:
        raise DataSourceError(f"{path}: image_folders needs a zip or tar archive")


def read_image_folders(path: Path, *, member: str | None, image_size: int = 84, mode: str = "RGB",
                       label_level: int = -2) -> pd.DataFrame:
    """Label = the folder ``label_level`` steps up the path; pixels stored row-major as (H, W[, C])."""
    from PIL import Image

    if mode not in ("L", "RGB"):
        raise DataSourceError(f"image_folders: mode must be 'L' or 'RGB', got {mode!r}")
    pattern = member or "*"
    labels, pixels = [], []
    for name, data in _archive_entries(path, pattern):
        with Image.open(io.BytesIO(data)) as image:
            resized = image.convert(mode).resize((image_size, image_size), Image.Resampling.BILINEAR)
            pixels.append(np.asarray(resized, dtype=np.uint8).reshape(-1))
        labels.append(name.split("/")[label_level])
    if not labels:
        raise DataSourceError(f"{path}: no files match {pattern!r}")
    meta = pd.DataFrame({"label": labels})
    px = pd.DataFrame(np.stack(pixels), columns=[f"px{i}" for i in range(pixels[0].size)])
    return pd.concat([meta, px], axis=1)

"""The url source against a local HTTP server, the file readers, and the local csv source."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import socket
import tarfile
import threading
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from uqcal.data import readers
from uqcal.data.errors import DataSourceError
from uqcal.data.sources import csv as csv_source
from uqcal.data.sources import url as url_source

FIXTURES = Path(__file__).parents[1] / "fixtures"
YACHT = (FIXTURES / "yacht_mini.data").read_bytes()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Server:
    """Serves in-memory files; /flaky/<n>/<name> answers 503 n times first; /truncated/<name> lies."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: Counter = Counter()
        self.failures_left: dict[str, int] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                server.requests[self.path] += 1
                parts = self.path.strip("/").split("/")
                if parts[0] == "flaky":
                    left = server.failures_left.setdefault(self.path, int(parts[1]))
                    if left > 0:
                        server.failures_left[self.path] = left - 1
                        self.send_error(503, "try later")
                        return
                    parts = ["files", *parts[2:]]
                if parts[0] == "truncated":
                    body = server.files[parts[1]]
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body) * 2))
                    self.end_headers()
                    self.wfile.write(body)
                    self.close_connection = True
                    return
                body = server.files.get(parts[-1])
                if parts[0] != "files" or body is None:
                    self.send_error(404, "no such file")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def server():
    srv = Server()
    srv.files["yacht.data"] = YACHT
    yield srv
    srv.close()


@pytest.fixture
def dirs(tmp_path):
    return tmp_path / "downloads", tmp_path / "config" / "datasets.lock.json"


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def yacht_spec(url: str, **extra) -> dict:
    return {"type": "url", "url": url, "filename": "yacht.data", "format": "whitespace",
            "read": {"header": None}, "backoff": 0.01, "timeout": 5, **extra}


def test_download_reads_and_records_checksum(server, dirs):
    cache, lock = dirs
    frame, prov = url_source.load(yacht_spec(f"{server.base}/files/yacht.data"), name="yacht",
                                  cache_dir=cache, lock_path=lock)
    assert frame.shape == (6, 7)
    assert frame.iloc[3, 0] == -5.0 and frame.iloc[5, 6] == 1.82
    assert (cache / "yacht.data").read_bytes() == YACHT
    assert leftovers(cache) == ["yacht.data"]
    assert json.loads(lock.read_text()) == {
        "yacht": {"url": f"{server.base}/files/yacht.data", "sha256": sha(YACHT), "bytes": len(YACHT)}
    }
    assert prov["sha256"] == sha(YACHT) and prov["downloaded"] is True


def test_cached_file_is_not_downloaded_again(server, dirs):
    cache, lock = dirs
    spec = yacht_spec(f"{server.base}/files/yacht.data", sha256=sha(YACHT))
    url_source.load(spec, name="yacht", cache_dir=cache, lock_path=lock)
    _, prov = url_source.load(spec, name="yacht", cache_dir=cache, lock_path=lock)
    assert server.requests["/files/yacht.data"] == 1
    assert prov["downloaded"] is False
    # A file placed by hand (no server involved) is used as is and its checksum recorded.
    manual = {**yacht_spec(f"{server.base}/files/never.data"), "filename": "yacht.data"}
    url_source.load(manual, name="manual", cache_dir=cache, lock_path=lock)
    assert server.requests["/files/never.data"] == 0
    assert json.loads(lock.read_text())["manual"]["sha256"] == sha(YACHT)


def test_lock_checksum_is_enforced_when_spec_has_none(server, dirs):
    cache, lock = dirs
    spec = yacht_spec(f"{server.base}/files/yacht.data")
    url_source.load(spec, name="yacht", cache_dir=cache, lock_path=lock)
    # The server's file changes and the cached copy is corrupted: the lock still pins the first bytes.
    server.files["yacht.data"] = YACHT + b"1 2 3 4 5 6 7\n"
    (cache / "yacht.data").write_bytes(b"corrupt")
    with pytest.raises(DataSourceError, match="checksum mismatch") as raised:
        url_source.load(spec, name="yacht", cache_dir=cache, lock_path=lock)
    assert sha(YACHT) in str(raised.value)
    assert leftovers(cache) == ["yacht.data"]  # no temp file; the bad cached copy is not made worse
    assert json.loads(lock.read_text())["yacht"]["sha256"] == sha(YACHT)


def test_404_names_dataset_url_and_manual_path_without_retrying(server, dirs):
    cache, lock = dirs
    url = f"{server.base}/files/absent.data"
    with pytest.raises(DataSourceError) as raised:
        url_source.load(yacht_spec(url), name="yacht", cache_dir=cache, lock_path=lock)
    message = str(raised.value)
    assert "'yacht'" in message and url in message and "404" in message
    assert str(cache / "yacht.data") in message and "dvc pull" in message
    assert server.requests["/files/absent.data"] == 1  # a 404 is not retried
    assert leftovers(cache) == [] and not lock.exists()


def test_wrong_checksum_leaves_no_file(server, dirs):
    cache, lock = dirs
    spec = yacht_spec(f"{server.base}/files/yacht.data", sha256="0" * 64)
    with pytest.raises(DataSourceError, match="checksum mismatch") as raised:
        url_source.load(spec, name="yacht", cache_dir=cache, lock_path=lock)
    assert "0" * 64 in str(raised.value) and str(cache / "yacht.data") in str(raised.value)
    assert leftovers(cache) == [] and not lock.exists()


def test_transient_503_is_retried_with_backoff(server, dirs):
    cache, lock = dirs
    frame, _ = url_source.load(yacht_spec(f"{server.base}/flaky/2/yacht.data"), name="yacht",
                               cache_dir=cache, lock_path=lock)
    assert server.requests["/flaky/2/yacht.data"] == 3 and len(frame) == 6
    # More failures than retries: a clear error, still no partial file.
    with pytest.raises(DataSourceError, match="503"):
        url_source.load(yacht_spec(f"{server.base}/flaky/5/yacht.data", retries=2), name="other",
                        cache_dir=cache / "b", lock_path=lock)
    assert server.requests["/flaky/5/yacht.data"] == 3
    assert leftovers(cache / "b") == []


def test_truncated_body_is_retried_and_never_left_behind(server, dirs):
    cache, lock = dirs
    with pytest.raises(DataSourceError, match="closed after"):
        url_source.load(yacht_spec(f"{server.base}/truncated/yacht.data", retries=1), name="yacht",
                        cache_dir=cache, lock_path=lock)
    assert server.requests["/truncated/yacht.data"] == 2
    assert leftovers(cache) == []


def test_connection_refused_is_an_offline_message(dirs):
    cache, lock = dirs
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/yacht.data"
    with pytest.raises(DataSourceError, match="offline") as raised:
        url_source.load(yacht_spec(url, retries=1), name="yacht", cache_dir=cache, lock_path=lock)
    assert url in str(raised.value) and str(cache / "yacht.data") in str(raised.value)
    assert leftovers(cache) == []


def test_zip_member_download(server, dirs):
    cache, lock = dirs
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("winequality/winequality-red.csv", (FIXTURES / "wine_mini.csv").read_bytes())
        archive.writestr("winequality/readme.txt", "not data")
    server.files["wine.zip"] = buffer.getvalue()
    spec = {"type": "url", "url": f"{server.base}/files/wine.zip", "format": "zip-csv",
            "member": "winequality-red.csv", "read": {"sep": ";"}}
    frame, prov = url_source.load(spec, name="wine", cache_dir=cache, lock_path=lock)
    assert list(frame.columns) == ["fixed acidity", "volatile acidity", "alcohol", "quality"]
    assert frame["quality"].tolist() == [5, 5, 6, 7]
    assert prov["member"] == "winequality-red.csv" and (cache / "wine.zip").exists()


def test_unknown_spec_key_and_format():
    with pytest.raises(DataSourceError, match="unknown key"):
        url_source.load({"type": "url", "url": "http://x/y", "shasum": "1"}, name="d", cache_dir=Path("."))
    with pytest.raises(DataSourceError, match="unknown data format"):
        url_source.load({"type": "url", "url": "http://x/y", "format": "xml"}, name="d", cache_dir=Path("."))


# ---- readers -------------------------------------------------------------------------------------


def test_readers_archives_match_plain_file(tmp_path):
    plain = readers.read_table(FIXTURES / "wine_mini.csv", format="csv", read={"sep": ";"})
    raw = (FIXTURES / "wine_mini.csv").read_bytes()
    (tmp_path / "w.csv.gz").write_bytes(gzip.compress(raw))
    with tarfile.open(tmp_path / "w.tar.gz", "w:gz") as archive:
        info = tarfile.TarInfo("data/wine.csv")
        info.size = len(raw)
        archive.addfile(info, io.BytesIO(raw))
    with tarfile.open(tmp_path / "w.tar", "w") as archive:
        archive.add(FIXTURES / "wine_mini.csv", arcname="wine.csv")
    pd.testing.assert_frame_equal(readers.read_table(tmp_path / "w.csv.gz", format="gzip-csv",
                                                     read={"sep": ";"}), plain)
    pd.testing.assert_frame_equal(readers.read_table(tmp_path / "w.tar.gz", format="tar-csv", member="*.csv",
                                                     read={"sep": ";"}), plain)
    pd.testing.assert_frame_equal(readers.read_table(tmp_path / "w.tar", member="wine.csv",
                                                     read={"sep": ";"}), plain)
    with pytest.raises(DataSourceError, match="member"):
        readers.read_table(tmp_path / "w.tar", member="missing.csv")
    with pytest.raises(DataSourceError, match="set `member:`"):
        readers.read_table(tmp_path / "w.tar")


def test_whitespace_and_arff_readers():
    frame = readers.read_table(FIXTURES / "yacht_mini.data", format="whitespace",
                               read={"header": None, "names": list("abcdefg")})
    reference = np.loadtxt(FIXTURES / "yacht_mini.data")
    np.testing.assert_array_equal(frame.to_numpy(), reference)
    arff = readers.read_table(FIXTURES / "kin_mini.arff", format="arff")
    assert list(arff.columns) == ["theta1", "theta2", "y", "arm"]
    assert arff["y"].tolist() == [0.53, 0.71, 0.22] and arff["arm"].tolist() == ["left", "right", "left"]


def test_excel_without_engine_says_what_to_install(tmp_path):
    import importlib.util

    if importlib.util.find_spec("openpyxl") is not None:
        pytest.skip("openpyxl is installed; the missing-engine message cannot be shown")
    (tmp_path / "book.xlsx").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip, like any xlsx
    with pytest.raises(DataSourceError, match="pip install openpyxl"):
        readers.read_table(tmp_path / "book.xlsx", format="excel")


def test_omniglot_reader(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    drawings = {}
    with zipfile.ZipFile(tmp_path / "images_background.zip", "w") as archive:
        for alphabet in ("Greek", "Korean"):
            for character in ("character01", "character02"):
                for drawer in ("01", "02", "03"):
                    strokes = np.full((105, 105), 255, dtype=np.uint8)  # white paper
                    r, c = rng.integers(10, 80, 2)
                    strokes[r : r + 15, c : c + 15] = 0  # one black 15x15 blot
                    name = f"images_background/{alphabet}/{character}/0{character[-2:]}1_{drawer}.png"
                    buf = io.BytesIO()
                    Image.fromarray(strokes).convert("1").save(buf, format="PNG")
                    archive.writestr(name, buf.getvalue())
                    drawings[(alphabet, character, drawer)] = (r, c)
    frame = readers.read_table(tmp_path / "images_background.zip", format="omniglot")
    assert len(frame) == 12 and frame["label"].nunique() == 4
    assert set(frame["script"]) == {"Greek", "Korean"} and set(frame["drawer"]) == {"01", "02", "03"}
    images = frame[[f"px{i}" for i in range(784)]].to_numpy().reshape(-1, 28, 28)
    for row, image in zip(frame.itertuples(), images, strict=True):
        alphabet, character = row.label.split("/")
        r, c = drawings[(alphabet, character, row.drawer)]
        # The blot covers 15/105 = 4 output pixels; its centre maps to (r + 7) * 28 / 105.
        centre = np.array(np.unravel_index(image.argmax(), image.shape))
        assert np.abs(centre - (np.array([r, c]) + 7) * 28 / 105).max() <= 2.5
        assert image.max() == 255 and (image > 0).sum() <= 36


def test_idx_reader_in_zip_of_gz(tmp_path):
    images = np.arange(3 * 28 * 28, dtype=np.uint64).reshape(3, 28, 28) % 256
    images = images.astype(np.uint8)
    labels = np.array([4, 0, 9], dtype=np.uint8)
    header_images = b"\x00\x00\x08\x03" + b"".join(n.to_bytes(4, "big") for n in (3, 28, 28))
    header_labels = b"\x00\x00\x08\x01" + (3).to_bytes(4, "big")
    with zipfile.ZipFile(tmp_path / "gzip.zip", "w") as archive:
        archive.writestr("gzip/x-images-idx3-ubyte.gz", gzip.compress(header_images + images.tobytes()))
        archive.writestr("gzip/x-labels-idx1-ubyte.gz", gzip.compress(header_labels + labels.tobytes()))
    frame = readers.read_table(tmp_path / "gzip.zip", format="idx", member="x-images-idx3-ubyte.gz",
                               labels_member="x-labels-idx1-ubyte.gz", mapping={4: "E"})
    assert frame["label"].tolist() == ["E", "0", "9"]
    got = frame[[f"px{i}" for i in range(784)]].to_numpy().reshape(3, 28, 28)
    np.testing.assert_array_equal(got, images.transpose(0, 2, 1))  # EMNIST is stored transposed


def test_image_folders_reader_from_tgz(tmp_path):
    from PIL import Image

    colours = {"001.Albatross": (200, 10, 10), "002.Auklet": (10, 10, 200)}
    with tarfile.open(tmp_path / "birds.tgz", "w:gz") as archive:
        for label, colour in colours.items():
            for k in range(2):
                buf = io.BytesIO()
                Image.new("RGB", (50 + 10 * k, 40), colour).save(buf, format="JPEG", quality=95)
                info = tarfile.TarInfo(f"CUB_200_2011/images/{label}/img_{k}.jpg")
                info.size = buf.getbuffer().nbytes
                buf.seek(0)
                archive.addfile(info, buf)
        info = tarfile.TarInfo("CUB_200_2011/README")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"hi"))
    frame = readers.read_table(tmp_path / "birds.tgz", format="image_folders",
                               member="CUB_200_2011/images/*/*.jpg", image_size=8, mode="RGB")
    assert frame["label"].tolist() == ["001.Albatross"] * 2 + ["002.Auklet"] * 2
    images = frame[[f"px{i}" for i in range(8 * 8 * 3)]].to_numpy().reshape(4, 8, 8, 3).astype(int)
    for image, label in zip(images, frame["label"], strict=True):
        assert np.abs(image - np.array(colours[label])).max() <= 12  # JPEG rounding only


# ---- local csv source ----------------------------------------------------------------------------


def test_csv_source_reads_relative_paths_and_parquet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "wine.csv").write_bytes((FIXTURES / "wine_mini.csv").read_bytes())
    frame, prov = csv_source.load({"type": "csv", "path": "data/wine.csv", "read": {"sep": ";"}},
                                  name="wine", cache_dir=tmp_path / "downloads")
    assert frame.shape == (4, 4) and prov["sha256"] == sha((FIXTURES / "wine_mini.csv").read_bytes())
    frame.to_parquet(tmp_path / "data" / "wine.parquet")
    again, _ = csv_source.load({"type": "csv", "path": "data/wine.parquet"}, name="w", cache_dir=tmp_path)
    pd.testing.assert_frame_equal(again, frame)
    with pytest.raises(DataSourceError, match="data/absent.csv"):
        csv_source.load({"type": "csv", "path": "data/absent.csv"}, name="w", cache_dir=tmp_path)


# ---- the paper registry entries, end to end through uqcal.data.materialise -----------------------


def _zip(member: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(member, data)
        archive.writestr("README.txt", "other member")
    return buffer.getvalue()


def _omniglot_zip() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for alphabet in ("Greek", "Latin"):
            for drawer in ("01", "02"):
                png = io.BytesIO()
                Image.new("L", (105, 105), 255).save(png, format="PNG")
                name = f"images_background/{alphabet}/character01/0001_{drawer}.png"
                archive.writestr(name, png.getvalue())
    return buffer.getvalue()


# Synthetic files in each real file's layout (values are made up), and the rows/columns they must give.
PAPER_LAYOUTS = {
    "yacht": (lambda: YACHT, 6),
    "wine_red": (lambda: (FIXTURES / "wine_mini.csv").read_bytes(), 4),
    "fish_toxicity": (lambda: b"3.26;0.829;1.676;0;1;1.453;3.77\n2.189;0.58;0.863;0;0;1.348;3.115\n", 2),
    "kin8nm": (lambda: b"theta1,theta2,theta3,theta4,theta5,theta6,theta7,theta8,y\n"
               b"-0.01,0.4,0.2,-0.5,0.1,0.3,-0.2,0.9,0.56\n0.02,0.1,0.3,-0.4,0.2,0.1,-0.1,0.8,0.61\n", 2),
    "superconductivity": (lambda: _zip("train.csv", b"number_of_elements,mean_atomic_mass,critical_temp\n"
                                                    b"4,88.9,29.0\n5,92.7,26.0\n"), 2),
    "ct_slices": (lambda: _zip("slice_localization_data.csv",
                               b"patientId,value0,value1,reference\n0,0.0,0.1,21.8\n1,0.2,0.0,35.4\n"), 2),
    "year_msd": (lambda: _zip("YearPredictionMSD.txt", b"2001,49.9,21.5\n1999,48.7,18.4\n"), 2),
    "omniglot_background": (_omniglot_zip, 4),
}


@pytest.mark.parametrize("name", sorted(PAPER_LAYOUTS))
def test_paper_registry_entry_materialises(name, server, tmp_path, monkeypatch):
    import yaml

    from uqcal.data import load_table, materialise

    registry = yaml.safe_load((Path(__file__).parents[2] / "config" / "datasets.paper.yaml").read_text())
    spec = json.loads(json.dumps(registry[name], default=str))  # a private deep copy
    spec["reshape"] = registry[name].get("reshape")  # keep int keys (year_msd renames column 0)
    real_url = spec["source"]["url"]
    assert real_url.startswith("https://")
    make, rows = PAPER_LAYOUTS[name]
    data = make()
    server.files[spec["source"]["filename"]] = data
    spec["source"]["url"] = f"{server.base}/files/{spec['source']['filename']}"
    # A published checksum is pinned as 64 hex digits (or null: trust on first use); the fixture is not the
    # real file, so it is pinned with its own.
    pinned = spec["source"]["sha256"]
    assert pinned is None or (len(pinned) == 64 and int(pinned, 16) >= 0)
    spec["source"]["sha256"] = hashlib.sha256(data).hexdigest() if pinned else None
    # A declared shape is the real file's (rows, features). The fixture has fewer rows, and the real columns only
    # where the entry lists its features: there materialise checks the declared count against them.
    if "shape" in spec:
        spec["shape"] = [rows, spec["shape"][1]] if isinstance(spec.get("features"), list) else None
    monkeypatch.chdir(tmp_path)  # data/ and config/datasets.lock.json land here
    parquet, record = materialise(name, spec, data_dir="data")
    assert record["rows"] == rows and record["source"] == "url"
    assert (tmp_path / "data" / "downloads" / spec["source"]["filename"]).exists()
    assert name in json.loads((tmp_path / "config" / "datasets.lock.json").read_text())
    table = load_table(name, raw_path=parquet, spec=spec)
    if spec["kind"] == "fewshot_classification":
        assert table.images.shape == (rows, 28, 28) and len(set(table.y)) == 2
    else:
        assert table.X.shape[0] == rows and np.isfinite(table.X).all() and np.isfinite(table.y).all()
        assert spec["target"] not in table.feature_names and table.X.shape[1] >= 2


def test_source_key_checks_name_dataset_source_and_key():
    from uqcal.data.errors import check_source_keys

    check_source_keys({"type": "csv", "path": "a.csv"}, {"path", "format"}, "csv", name="mine", required=("path",))
    with pytest.raises(DataSourceError, match=r"dataset 'mine': csv source: unknown key\(s\) \['pth'\]"):
        check_source_keys({"type": "csv", "pth": "a.csv"}, {"path"}, "csv", name="mine")
    with pytest.raises(DataSourceError, match=r"dataset 'mine': url source needs `url:`"):
        check_source_keys({"type": "url", "url": ""}, {"url"}, "url", name="mine", required=("url",))
    with pytest.raises(DataSourceError, match=r"^hpo source: unknown key\(s\) \['modle'\]; allowed: \['data', 'model'\]"):
        check_source_keys({"type": "hpo", "modle": "lda"}, {"model", "data"}, "hpo")


def test_a_corrupt_unpinned_download_is_one_clear_error_and_records_nothing(server, dirs):
    # issue 42, item 11: a zip that is not one (a truncated or HTML error page served as 200).
    cache, lock = dirs
    good = io.BytesIO()
    with zipfile.ZipFile(good, "w") as archive:
        archive.writestr("yacht.data", YACHT)
    server.files["yacht.zip"] = b"PK\x03\x04" + b"\x00" * 40  # zip magic, broken body
    spec = {**yacht_spec(f"{server.base}/files/yacht.zip"), "filename": "yacht.zip", "format": "zip-whitespace",
            "member": "yacht.data"}
    with pytest.raises(DataSourceError) as raised:
        url_source.load(spec, name="yacht", cache_dir=cache, lock_path=lock)
    message = str(raised.value)
    assert message.startswith("dataset 'yacht': cannot read the download as zip-whitespace: BadZipFile"), message
    assert "no checksum was recorded" in message and str(cache / "yacht.zip") in message
    assert not lock.exists() and leftovers(cache) == []  # nothing recorded, the corrupt file removed
    # The right file, placed by hand afterwards, is accepted and only then recorded.
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "yacht.zip").write_bytes(good.getvalue())
    frame, prov = url_source.load(spec, name="yacht", cache_dir=cache, lock_path=lock)
    assert frame.shape == (6, 7) and prov["downloaded"] is False
    assert json.loads(lock.read_text())["yacht"]["sha256"] == sha(good.getvalue())


ERROR_PAGE = b"<!DOCTYPE html>\n<html><head><title>503</title></head><body>Service unavailable</body></html>\n"


@pytest.mark.parametrize("reader", ["url source (csv)", "obtain without a reader (hpo_paper's downloads)"])
def test_an_html_error_page_served_as_the_data_records_nothing_and_the_right_file_is_then_accepted(
        server, dirs, reader):
    # issue 49, item 5: a csv reader takes an HTML page as a table of one text column; before, its hash was
    # recorded and the right file refused afterwards.
    cache, lock = dirs
    server.files["yacht.data"] = ERROR_PAGE
    spec = yacht_spec(f"{server.base}/files/yacht.data")
    spec = {**spec, "format": "csv", "read": {}} if reader.startswith("url") else spec

    def get():
        if reader.startswith("url"):
            return url_source.load(spec, name="yacht", cache_dir=cache, lock_path=lock)
        return url_source.obtain(spec, name="yacht", cache_dir=cache, lock_path=lock)

    with pytest.raises(DataSourceError) as raised:
        get()
    message = str(raised.value)
    assert message.startswith(f"dataset 'yacht': cannot read the download as {spec['format']}: the file is an HTML "
                              "page (a server's error or login page?), not the data."), message
    assert "no checksum was recorded" in message
    assert not lock.exists() and leftovers(cache) == []
    server.files["yacht.data"] = YACHT  # the right file, downloaded (or placed) afterwards: accepted, recorded
    get()
    assert json.loads(lock.read_text())["yacht"]["sha256"] == sha(YACHT)

"""The paper's own hpo objectives (Deshpande & Kuleshov Sec. 5.3): online LDA on 20 Newsgroups and a CNN
on CIFAR-10 / SVHN, with tiny fixture files in each real file's layout served from 127.0.0.1."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import socket
import tarfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.data.test_download import Server
from uqcal.data.errors import DataSourceError
from uqcal.data.objectives import get_objective
from uqcal.data.sources import hpo, hpo_paper

REPO = Path(__file__).resolve().parents[2]
REAL_URLS = {
    "lda_20news": {"archive": "https://ndownloader.figshare.com/files/5975967"},
    "cnn_cifar10": {"archive": "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"},
    "cnn_svhn": {"train": "http://ufldl.stanford.edu/housenumbers/train_32x32.mat",
                 "test": "http://ufldl.stanford.edu/housenumbers/test_32x32.mat"},
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tar_gz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# ------------------------------------------------------------------------------- fixture files
GROUP_WORDS = {"alt.atheism": "god belief atheism religion argument",
               "rec.autos": "car engine wheel brake dealer",
               "sci.space": "orbit shuttle launch nasa moon"}


def newsgroups_fixture() -> tuple[bytes, dict[str, list[tuple[str, str, str]]]]:
    """A 20news-bydate-style archive and, per half, the (path, group, body) it holds."""
    rng = np.random.default_rng(1)
    files, docs = {}, {"train": [], "test": []}
    for half, per_group in (("train", 4), ("test", 2)):
        for group, words in GROUP_WORDS.items():
            vocab = words.split() + ["common", "thing", "the", "and"]
            for k in range(per_group):
                body = " ".join(rng.choice(vocab, size=30)) + " caf\xe9"
                path = f"20news-bydate-{half}/{group}/{5000 + k}"
                header = f"From: someone{k}@example.org\nSubject: header words only\n"
                files[path] = (header + "\n" + body + "\n").encode("latin-1")
                docs[half].append((path, group, body + "\n"))
    files["20news-bydate-train/README"] = b"not a document"  # too shallow: skipped
    return _tar_gz(files), docs


def images(rng, n) -> np.ndarray:
    """n random 32x32 RGB images, height x width x channel (the usual image layout)."""
    return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)


def cifar_fixture(per_batch=2, n_test=4) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CIFAR-10 binary archive: each record is the label byte, then the 1024 red, green and blue values."""
    rng = np.random.default_rng(2)
    train_imgs, test_imgs = images(rng, 5 * per_batch), images(rng, n_test)
    train_labels = rng.integers(0, 10, size=5 * per_batch)
    test_labels = rng.integers(0, 10, size=n_test)

    def batch(imgs, labels):
        return b"".join(bytes([int(label)]) + b"".join(im[:, :, c].tobytes() for c in range(3))
                        for im, label in zip(imgs, labels, strict=True))

    files = {"cifar-10-batches-bin/batches.meta.txt": b"airplane\n" * 10,
             "cifar-10-batches-bin/readme.html": b"<html></html>"}
    for b in range(5):
        sl = slice(b * per_batch, (b + 1) * per_batch)
        files[f"cifar-10-batches-bin/data_batch_{b + 1}.bin"] = batch(train_imgs[sl], train_labels[sl])
    files["cifar-10-batches-bin/test_batch.bin"] = batch(test_imgs, test_labels)
    return _tar_gz(files), train_imgs, train_labels, test_imgs, test_labels


def svhn_mat(rng, labels) -> tuple[bytes, np.ndarray]:
    """An SVHN ``*_32x32.mat``: X is 32 x 32 x 3 x N, y is N x 1 with 10 for the digit 0."""
    from scipy.io import savemat

    imgs = images(rng, len(labels))
    buffer = io.BytesIO()
    savemat(buffer, {"X": np.stack(list(imgs), axis=3), "y": np.asarray(labels, dtype=np.uint8)[:, None]})
    return buffer.getvalue(), imgs


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.close()


def registry_entry(name: str) -> dict:
    registry = yaml.safe_load((REPO / "config" / "datasets.paper.yaml").read_text())
    return json.loads(json.dumps(registry[name]))  # a private deep copy


def served(name: str, server: Server, files: dict[str, bytes], **options) -> dict:
    """The registry entry ``name`` with its downloads pointed at the local server serving ``files``."""
    spec = registry_entry(name)
    for role, entry in spec["source"]["download"].items():
        server.files[entry["filename"]] = files[role]
        # The fixture is not the real file: pin its own checksum in place of the published one.
        entry.update(url=f"{server.base}/files/{entry['filename']}", sha256=sha(files[role]), backoff=0.01,
                     timeout=5)
    spec["source"]["options"].update(options)
    return spec


# ------------------------------------------------------------------------------------- readers
def test_read_20news_halves_groups_and_strips_headers(tmp_path):
    data, docs = newsgroups_fixture()
    path = tmp_path / "20news-bydate.tar.gz"
    path.write_bytes(data)
    corpus = hpo_paper.read_20news(path)
    for half, n in (("train", 12), ("test", 6)):
        texts, groups = corpus[half]
        expected = sorted(docs[half])
        assert len(texts) == n
        assert texts == [body for _, _, body in expected]
        assert groups.tolist() == [group for _, group, _ in expected]
        assert not any("From:" in t or "header" in t for t in texts)
        assert all(t.rstrip().endswith("café") for t in texts)  # latin-1 byte 0xe9


def test_read_cifar10_layout_and_labels(tmp_path):
    data, train_imgs, train_labels, test_imgs, test_labels = cifar_fixture()
    path = tmp_path / "cifar.tar.gz"
    path.write_bytes(data)
    X_train, y_train, X_test, y_test = hpo_paper.read_cifar10(path)
    assert X_train.shape == (10, 3, 32, 32) and X_test.shape == (4, 3, 32, 32) and X_train.dtype == np.uint8
    np.testing.assert_array_equal(X_train.transpose(0, 2, 3, 1), train_imgs)  # batch 1..5 in order
    np.testing.assert_array_equal(X_test.transpose(0, 2, 3, 1), test_imgs)
    assert y_train.tolist() == train_labels.tolist() and y_test.tolist() == test_labels.tolist()
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(_tar_gz({"cifar-10-batches-bin/readme.html": b"<html></html>"}))
    with pytest.raises(DataSourceError, match="data_batch_2.bin"):
        hpo_paper.read_cifar10(broken)
    ragged = tmp_path / "ragged.tar.gz"
    ragged.write_bytes(_tar_gz({f"b/data_batch_{i}.bin": b"\x00" * 3000 for i in range(1, 6)}))
    with pytest.raises(DataSourceError, match="not a whole number of 3073-byte"):
        hpo_paper.read_cifar10(ragged)


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_read_cifar10_never_unpickles_the_python_version(tmp_path):
    # The python version's batches are pickles; one carrying a payload must not run, and the error says
    # which file to use instead.
    marker = tmp_path / "ran"
    batch = pickle.dumps({b"data": _Payload(marker), b"labels": [0]}, protocol=2)
    files = {f"cifar-10-batches-py/data_batch_{i}": batch for i in range(1, 6)}
    files["cifar-10-batches-py/test_batch"] = batch
    path = tmp_path / "cifar-10-python.tar.gz"
    path.write_bytes(_tar_gz(files))
    with pytest.raises(DataSourceError, match="python version.*cifar-10-binary.tar.gz"):
        hpo_paper.read_cifar10(path)
    assert not marker.exists()
    pickle.loads(batch)  # negative control: unpickling it does run the payload
    assert marker.exists()


def test_read_svhn_layout_and_label_ten_is_zero(tmp_path):
    data, imgs = svhn_mat(np.random.default_rng(3), [10, 3, 1, 10, 9])
    path = tmp_path / "svhn.mat"
    path.write_bytes(data)
    X, y = hpo_paper.read_svhn(path)
    assert X.shape == (5, 3, 32, 32) and X.dtype == np.uint8
    np.testing.assert_array_equal(X.transpose(0, 2, 3, 1), imgs)
    assert y.tolist() == [0, 3, 1, 0, 9]


# ------------------------------------------------------------------------- spaces and registry
def test_search_spaces_are_the_paper_tables():
    # (name, low, high, log scale, discrete, step) transcribed from Tables 1 and 2 of the appendix.
    table1 = [("batch_size", 32, 512, False, True, 32), ("learning_rate", 1e-7, 0.1, True, False, None),
              ("lr_decay", 1e-7, 1e-3, True, False, None), ("l2", 1e-7, 1e-3, True, False, None),
              ("fc_units", 256, 512, False, True, 16), ("conv_filters", 128, 256, False, True, 16)]
    table2 = [("batch_size", 1, 128, True, True, None), ("learning_decay", 0.5, 1.0, False, True, 0.1),
              ("learning_offset", 1, 32, True, True, None)]
    for name, table in (("cnn_cifar10", table1), ("cnn_svhn", table1), ("lda_20news", table2)):
        objective = get_objective(registry_entry(name)["source"], cache_dir=None)
        got = [(d.name, d.low, d.high, d.is_log, d.is_discrete, d.step) for d in objective.dims]
        assert got == table, name
    cnn = get_objective(registry_entry("cnn_cifar10")["source"], cache_dir=None)
    grid = cnn.to_native(np.random.default_rng(0).uniform(size=(200, 6)))
    assert set(grid[:, 0]) <= set(range(32, 513, 32)) and set(grid[:, 4]) <= set(range(256, 513, 16))
    assert set(grid[:, 5]) <= set(range(128, 257, 16)) and grid[:, 1].min() >= 1e-7 and grid[:, 1].max() <= 0.1


def test_registry_entries_and_paper_protocol():
    from uqcal.pipeline.config.load import load_config

    config = load_config(REPO / "config" / "paper.yaml")
    bo = config["families"]["bo"]
    settings = [s for s in bo["settings"].values() if set(REAL_URLS) <= set(s.get("datasets", []))]
    assert len(settings) == 1
    assert settings[0]["acquisition"] == "ei" and settings[0]["n_init"] == 5
    assert 30 <= settings[0]["budget"] <= 50
    default = load_config(REPO / "config" / "config.yaml")  # the offline default run does not use them
    assert not set(REAL_URLS) & set(default["families"]["bo"]["datasets"])
    for name, urls in REAL_URLS.items():
        spec = config["datasets"][name]
        assert spec["kind"] == "optimisation_objective" and spec["paper_dataset"]
        assert {role: entry["url"] for role, entry in spec["source"]["download"].items()} == urls
        hpo._validate(spec["source"])


def test_spec_errors():
    good = registry_entry("cnn_cifar10")["source"]
    with pytest.raises(ValueError, match="supports data"):
        hpo._validate({**good, "data": "digits"})
    with pytest.raises(ValueError, match="needs `download:`"):
        hpo._validate({"type": "hpo", "model": "lda", "data": "20news"})
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['epoch'\]"):
        hpo._validate({**good, "options": {"epoch": 1}})
    with pytest.raises(ValueError, match=r"exactly the entries \['train', 'test'\], got \['train'\]"):
        hpo._validate({**registry_entry("cnn_svhn")["source"], "download": {"train": {"url": "http://x/a"}}})
    with pytest.raises(ValueError, match="embedded"):
        hpo._validate({"type": "hpo", "model": "gbm", "data": "digits", "options": {}})


def test_cache_key_covers_options_but_not_device():
    spec = registry_entry("cnn_cifar10")["source"]
    config = [[64, 1e-3, 1e-5, 1e-5, 256, 128]]

    def key(**options):
        objective = get_objective({**spec, "options": {**spec["options"], **options}}, cache_dir=None)
        return objective.function.key(dict(zip([d.name for d in objective.dims], config[0], strict=True)))

    assert key() == key(device="cpu") != key(epochs=2)
    # Embedded objectives keep their old keys (no options in the payload): existing caches stay valid.
    gbm = get_objective({"type": "hpo", "model": "gbm", "data": "digits"}, cache_dir=None).function
    payload = {"v": hpo.CACHE_VERSION, "model": "gbm", "data": "digits", "config": {"a": 1.0}}
    assert gbm.key({"a": 1.0}) == hashlib.sha1(json.dumps(payload).encode()).hexdigest()


# --------------------------------------------------------------------- downloads and objectives
def test_materialise_downloads_verifies_and_describes(server, tmp_path, monkeypatch):
    from uqcal.data import materialise

    rng = np.random.default_rng(4)
    files = {"train": svhn_mat(rng, [1, 2, 10])[0], "test": svhn_mat(rng, [10, 5])[0]}
    spec = served("cnn_svhn", server, files, epochs=1, device="cpu")
    monkeypatch.chdir(tmp_path)
    parquet, record = materialise("cnn_svhn", spec, data_dir="data")
    assert record["rows"] == 6 and record["source"] == "hpo"
    for role in ("train", "test"):
        filename = spec["source"]["download"][role]["filename"]
        assert (tmp_path / "data" / "downloads" / filename).read_bytes() == files[role]
        assert record["files"][role]["sha256"] == sha(files[role])
    lock = json.loads((tmp_path / "config" / "datasets.lock.json").read_text())
    assert lock["hpo-svhn-train"]["sha256"] == sha(files["train"])
    assert lock["hpo-svhn-test"]["sha256"] == sha(files["test"])
    import pandas as pd

    frame = pd.read_parquet(parquet)
    assert frame["name"].tolist() == ["batch_size", "learning_rate", "lr_decay", "l2", "fc_units", "conv_filters"]
    # The objective reads the verified files from data/downloads: no second download.
    objective = get_objective(spec["source"], cache_dir=tmp_path / "data" / "cache")
    value = objective([[32, 1e-2, 1e-5, 1e-5, 256, 128]])[0]
    assert value in (0.0, 0.5, 1.0) and objective.function.n_trained == 1
    assert sum(server.requests.values()) == 2


def test_lda_20news_objective_evaluates_caches_and_matches_sklearn(server, tmp_path, monkeypatch):
    from sklearn.decomposition import LatentDirichletAllocation
    from sklearn.feature_extraction.text import CountVectorizer

    data, docs = newsgroups_fixture()
    options = {"vocabulary": 10, "topics": 3, "max_iter": 2, "train_docs": 100, "test_docs": 100}
    spec = served("lda_20news", server, {"archive": data}, **options)
    monkeypatch.chdir(tmp_path)
    objective = get_objective(spec["source"], cache_dir=tmp_path / "data" / "cache")
    x = [[4, 0.7, 8]]
    value = objective(x)[0]
    assert objective.function.n_trained == 1
    assert (tmp_path / "data" / "downloads" / "20news-bydate.tar.gz").read_bytes() == data
    # Independent reference: sklearn on the fixture's own bodies (all documents: fewer than the caps).
    train = [body for _, _, body in sorted(docs["train"])]
    test = [body for _, _, body in sorted(docs["test"])]
    vectorizer = CountVectorizer(max_features=10, stop_words="english")
    X_train = vectorizer.fit_transform(train)
    assert len(vectorizer.vocabulary_) == 10 < len(CountVectorizer(stop_words="english").fit(train).vocabulary_)
    reference = LatentDirichletAllocation(n_components=3, learning_method="online", batch_size=4,
                                          learning_decay=0.7, learning_offset=8.0, max_iter=2,
                                          total_samples=12, random_state=0).fit(X_train)
    assert value == pytest.approx(reference.perplexity(vectorizer.transform(test)), rel=1e-9)
    # The same configuration again: a cache hit, no retraining; on disk for the next run too.
    assert objective(x)[0] == value and objective.function.n_trained == 1
    assert objective.function.n_cache_hits == 1
    fresh = get_objective(spec["source"], cache_dir=tmp_path / "data" / "cache")
    assert fresh(x)[0] == value and fresh.function.n_trained == 0
    assert objective([[4, 0.9, 8]])[0] != value and objective.function.n_trained == 2
    assert server.requests["/files/20news-bydate.tar.gz"] == 1
    memory_only = hpo.make_hpo_objective(spec["source"], cache_dir=None,
                                         download_dir=tmp_path / "data" / "downloads")
    assert memory_only(x)[0] == value and memory_only(x)[0] == value  # in-memory cache without a disk cache
    assert memory_only.function.n_trained == 1 and memory_only.function.n_cache_hits == 1


def test_cnn_cifar10_objective_one_tiny_epoch_cached_and_deterministic(server, tmp_path, monkeypatch):
    data, *_ = cifar_fixture()
    spec = served("cnn_cifar10", server, {"archive": data}, epochs=1, train_size=8, device="cpu")
    monkeypatch.chdir(tmp_path)
    objective = get_objective(spec["source"], cache_dir=tmp_path / "a" / "cache")
    x = [[32, 1e-2, 1e-5, 1e-5, 256, 128]]
    value = objective(x)[0]
    assert value in (0.0, 0.25, 0.5, 0.75, 1.0) and objective.function.n_trained == 1
    assert objective(x)[0] == value and objective.function.n_trained == 1 and objective.function.n_cache_hits == 1
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "a" / "cache" / "hpo" / "cnn-cifar10").glob("*.json")]
    assert record["value"] == value and record["options"]["epochs"] == 1
    # A separate cache (a retraining) gives the same value: the objective is deterministic.
    again = hpo.make_hpo_objective(spec["source"], cache_dir=tmp_path / "b" / "cache",
                                   download_dir=tmp_path / "a" / "downloads")
    assert again(x)[0] == value and again.function.n_trained == 1
    arrays = again.function._arrays
    assert arrays[0].shape == (8, 3, 32, 32) and arrays[2].shape == (4, 3, 32, 32)  # train_size subset


def test_cnn_diverged_configuration_scores_one():
    rng = np.random.default_rng(5)
    X = images(rng, 6).transpose(0, 3, 1, 2).copy()
    y = np.arange(6) % 10
    options = {**hpo_paper.DEFAULT_OPTIONS["cifar10"], "epochs": 2, "device": "cpu"}
    config = {"batch_size": 32, "learning_rate": 1e30, "lr_decay": 1e-7, "l2": 1e-7, "fc_units": 256,
              "conv_filters": 128}  # far outside the space: the loss overflows
    assert hpo_paper.cnn_test_error(config, (X, y, X, y), options) == 1.0


def test_404_names_dataset_and_url_and_leaves_no_file(server, tmp_path, monkeypatch):
    from uqcal.data import materialise

    spec = registry_entry("cnn_cifar10")
    url = f"{server.base}/files/absent.tar.gz"
    spec["source"]["download"]["archive"].update(url=url, backoff=0.01)
    monkeypatch.chdir(tmp_path)
    downloads = tmp_path / "data" / "downloads"
    with pytest.raises(DataSourceError) as raised:
        materialise("cnn_cifar10", spec, data_dir="data")
    message = str(raised.value)
    assert "'cnn_cifar10'" in message and url in message and "404" in message
    assert "data/downloads/cifar-10-binary.tar.gz" in message and "dvc pull" in message
    assert server.requests["/files/absent.tar.gz"] == 1
    assert list(downloads.iterdir()) == [] and not (tmp_path / "data" / "raw" / "cnn_cifar10.parquet").exists()
    # At BO time (file still missing): the same clear error, nothing trained or cached.
    objective = get_objective(spec["source"], cache_dir=tmp_path / "data" / "cache")
    with pytest.raises(DataSourceError, match="hpo objective cnn-cifar10") as raised:
        objective([[32, 1e-2, 1e-5, 1e-5, 256, 128]])
    assert url in str(raised.value) and list(downloads.iterdir()) == []
    assert objective.function.n_trained == 0 and not (tmp_path / "data" / "cache").exists()


def test_unreachable_server_is_the_offline_message(tmp_path, monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spec = registry_entry("lda_20news")["source"]
    url = f"http://127.0.0.1:{port}/20news-bydate.tar.gz"
    spec["download"]["archive"].update(url=url, retries=0)
    monkeypatch.chdir(tmp_path)
    objective = get_objective(spec, cache_dir=tmp_path / "data" / "cache")
    with pytest.raises(DataSourceError, match="offline") as raised:
        objective([[4, 0.7, 8]])
    message = str(raised.value)
    assert url in message and str(tmp_path / "data" / "downloads" / "20news-bydate.tar.gz") in message
